"""`station bench check` on a GPIO bench (issue 49): the generator's output reaches the board's
input and the stimulus channel, the response reaches the other channel. On the twin as a board
played badly wired, each fault is found and named with its fix, against what the twin logged it
did; on the right bench, the stimuli and answers the check counts are the ones the twin's
generator made and its board answered in the scope's record; nothing is left running."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import numpy as np
import pytest

from station import api
from station.config import ConfigError, load_campaign
from tests.conftest import run_station
from tests.test_bench_check import LEVEL_STEP_V, blocked

SCOPE = ("dialect: tektronix_mso, channel: 1, volts_per_div: 1V, position_div: -3, "
         "time_per_div: 1ms, record_length: 100000, trigger_level: 1.65V, "
         "trigger_position_pct: 5")
GPIO = """matrix: {kind: gpio, samples: 100, max_duration: 1min}
gpio:
  lines: {chip: pinctrl-bcm2835, input: 17, output: 27}
  period: 500us
  jitter: 0.25
  width: 200us
  high: 3.3V
  response_channel: 2
  cases:
    kernel: {responder: kernel}
    chardev: {responder: chardev, priority: 50}
    sysfs: {responder: sysfs, mode: toggle}
    sysfs-again: {responder: sysfs, mode: toggle, governor: performance}
"""
BOARD = {"stimulus_channel": 1, "response_channel": 2, "generator_channel": 1}


def gpio_bench(tmp_path: Path, miswire: list[str] = ()) -> Path:
    path = tmp_path / "gpio.yaml"
    path.write_text("name: gpio-check\nbench:\n  target: {kind: twin}\n"
                    f"  twin: {{seed: 7, miswire: [{', '.join(miswire)}]}}\n"
                    f"  scope: {{kind: twin, {SCOPE}, bus: loopback}}\n"
                    "  generator: {kind: twin, channel: 1}\n" + GPIO)
    return path


def board_as_a_bench(tmp_path: Path, ends) -> Path:
    """A campaign reaching a board twin started on its own: an SSH target, VISA instruments."""
    path = tmp_path / "ssh.yaml"
    path.write_text(
        "name: gpio-check\nbench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {ends.ssh_port}, user: root, "
        f"identity_file: '{ends.identity_file}', known_hosts: '{ends.known_hosts}'}}\n"
        f"  scope: {{kind: visa, resource: '{ends.scope_resource}', {SCOPE}}}\n"
        f"  generator: {{kind: visa, resource: '{ends.generator_resource}', channel: 1}}\n"
        + GPIO)
    return path


@pytest.fixture
def board_twin(tmp_path):
    from station.twin.runner import Twin

    def start(*faults: str) -> tuple[Twin, Path]:
        from station.twin.miswire import Miswiring

        twin = Twin(state_dir=tmp_path / "twin", seed=7, board=BOARD,
                    miswiring=Miswiring(faults, channel=1, trigger_level_v=1.65),
                    scope_options={"bus": "loopback", "dialect": "tektronix_mso"})
        started.append(twin)
        return twin, board_as_a_bench(tmp_path, twin.start_in_thread())

    started: list = []
    yield start
    for twin in started:
        twin.stop_thread()


def test_the_right_gpio_bench_is_ready_and_counts_what_the_board_did(board_twin):
    """One acquisition per responder: its stimulus edges are the generator's rises inside the
    scope's record, its answers the board's, its median delay the board's within a sample."""
    twin, path = board_twin()
    result = asyncio.run(api.check_bench(load_campaign(path)))
    assert result.ready, result.text()
    steps = [f.step for f in result.findings]
    assert steps == ["target", "sudo", "kernel", "modules", "generator", "scope", "response",
                     "response", "response"]  # one per responder: sysfs-again is sysfs again
    responses = [f.evidence for f in result.findings if f.step == "response"]
    assert [r["case"] for r in responses] == ["kernel", "chardev", "sysfs"]
    acquisitions = twin.call(lambda: list(twin._scope.acquisitions))
    assert len(acquisitions) == 3  # the configured ones; a ready bench needs no first look
    for seen, acq in zip(responses, acquisitions, strict=True):
        first, end = acq.first_sample_ns, acq.first_sample_ns + acq.dt_ns * acq.record_length
        truth = twin.call(twin._response.truth, int(math.floor(first)), int(math.ceil(end)))
        rises = truth["rising"]
        # an answer the record holds (one after its end: the stimulus is censored or missed)
        held = rises & (truth["answer_ns"] < end)
        delays_ns = (truth["answer_ns"] - truth["edge_ns"])[held]
        assert seen["stimuli"] + seen["censored"] == rises.sum() > 10
        assert seen["answered"] == held.sum()
        assert abs(seen["median_delay_s"] - np.median(delays_ns) * 1e-9) <= 2 * acq.dt_ns * 1e-9
    assert result.seconds < 60
    # the generator is off and nothing of the station's runs on the board
    assert twin.call(lambda: twin._generator.model.channels[1].output) is False
    assert twin.call(lambda: sorted(twin.target.modules)) == []
    assert twin.call(lambda: [p.cmdline for p in twin.target.loads.values()
                              if not p.ended.is_set()]) == []


def test_a_stimulus_probe_on_another_channel_is_found_there(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["other_channel"]), "other_channel")
    assert finding.step == "channel"
    # the response is on CH2 too: the stimulus is told from it by which one leads
    assert finding.evidence["found_on"] == truth["probe_channel"] not in (1, 2)
    assert f"bench.scope.channel: {truth['probe_channel']}" in finding.fix


def test_a_response_probe_on_another_channel_is_found_there(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["response_other_channel"]),
                             "response_other_channel")
    assert finding.step == "response_channel"
    assert finding.evidence["found_on"] == truth["response_probe_channel"] not in (1, 2)
    assert f"gpio.response_channel: {truth['response_probe_channel']}" in finding.fix


def test_a_generator_that_misses_the_board_is_told_from_a_missing_probe(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["board_unplugged"]), "board_unplugged")
    assert truth == {"board_input_driven": False, "scope_sees_stimulus": True}
    assert finding.step == "response" and "nothing answers it on any channel" in finding.said
    assert "reaches the board's input (pinctrl-bcm2835 line 17" in finding.fix


def test_a_generator_output_reaching_nothing_shows_no_pulses_anywhere(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["unplugged"]), "unplugged")
    assert finding.step == "pulses" and all(f"ch{c}" in finding.evidence for c in (1, 2, 3, 4))


def test_a_x10_probe_is_measured_against_the_generators_amplitude(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["probe_x10"]), "probe_x10")
    assert finding.step == "probe"
    assert abs(finding.evidence["swing_v"] - truth["shown_v"]) <= LEVEL_STEP_V
    assert finding.evidence["generator_v"] == pytest.approx(truth["line_v"])


def test_a_trigger_above_the_stimulus_gets_a_level_inside_it(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["trigger_above_pulse"]),
                             "trigger_above_pulse")
    assert finding.step == "trigger"
    assert abs(finding.evidence["high_v"] - truth["line_high_v"]) <= LEVEL_STEP_V


def test_a_short_record_offers_no_segmented_capture_to_a_gpio_campaign(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["short_record"]), "short_record")
    assert finding.step == "record_span"
    assert finding.evidence["applied_time_per_div_s"] == pytest.approx(
        truth["slowest_time_per_div_s"])
    assert "segmented" not in finding.fix


def test_a_responder_module_for_another_kernel_is_refused_by_its_vermagic(tmp_path):
    finding, truth = blocked(gpio_bench(tmp_path, ["module_other_kernel"]),
                             "module_other_kernel")
    assert finding.step == "modules"
    assert finding.evidence["built_for"] == {"gpio_responder": truth["built_for"]}


def test_a_responder_that_refuses_its_lines_is_named_with_its_words(tmp_path):
    path = gpio_bench(tmp_path)
    path.write_text(path.read_text().replace("chip: pinctrl-bcm2835", "chip: pinctrl-rp1"))
    finding = asyncio.run(api.check_bench(load_campaign(path))).blocking
    assert finding is not None and finding.step == "responder"
    assert "case kernel" in finding.said and "pinctrl-rp1" in finding.said
    assert "gpioinfo" in finding.fix


def test_the_cli_exits_5_and_the_board_is_left_quiet(board_twin):
    twin, path = board_twin("board_unplugged")
    res = run_station("bench", "check", str(path), timeout=120)
    assert res.returncode == 5, res.stdout + res.stderr
    assert "NOT READY  response: case kernel" in res.stdout
    assert twin.call(lambda: [c for c in twin.target.command_log if "insmod" in c])
    assert twin.call(lambda: sorted(twin.target.modules)) == []
    assert twin.call(lambda: twin._generator.model.channels[1].output) is False


@pytest.mark.parametrize("fault", ["response_other_channel", "board_unplugged"])
def test_a_gpio_fault_on_a_module_campaign_is_refused_where_it_is_written(tmp_path, fault):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench:\n  target: {kind: twin}\n"
                    f"  twin: {{miswire: [{fault}]}}\n"
                    "matrix: {samples: 100}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert f"{path}:4" in str(err.value) and "gpio bench's fault" in str(err.value)
