"""The campaign's cyclictest options: refused with file:line when they make no sense,
quoted into one argument each, and meaning to the real cyclictest what the schema says
(each mapping is checked by running /usr/bin/cyclictest and reading what it did)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.config import ConfigError, parse_campaign
from station.kinds.cyclictest.on_target import arguments, command, sliced_command
from station.kinds.cyclictest.settings import CyclictestSettings
from station.parsers.cyclictest import histogram_option, parse_histogram, parse_json
from tests.conftest import missing

BASE = ("name: c\nbench:\n  target: {kind: local}\n  scope: {kind: none}\n"
        "matrix: {kind: cyclictest, loads: [none], duration: 2s}\n")


def refused(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_campaign(text, "c.yaml")
    return str(info.value)


@pytest.mark.parametrize("extra, line, field, words", [
    ("cyclictest: {smp: true, threads: 2}\n", 6, "cyclictest.smp", "-S sets threads"),
    ("cyclictest: {priority: 0}\n", 6, "cyclictest.priority", "needs a priority"),
    ("cyclictest: {policy: other, priority: 50}\n", 6, "cyclictest.priority", "no real-time priority"),
    ("cyclictest: {affinity: '0;reboot'}\n", 6, "cyclictest.affinity", "CPU list"),
    ("cyclictest: {histogram: 1500ns}\n", 6, "cyclictest.histogram", "whole microseconds"),
    ("cyclictest: {interval: 5us}\n", 6, "cyclictest.interval", "too small"),
    ("cyclictest: {breaktrace: 2}\n", 6, "cyclictest.breaktrace", "unit"),
    ("cyclictest: {timerlat_stop: 100us}\n", 6, "cyclictest.timerlat_stop", "set companion: timerlat"),
    ("cyclictest: {companion: osnoise}\n", 6, "cyclictest.companion", "'none' or 'timerlat'"),
    ("cyclictest: {slices: 2, breaktrace: 50us}\n", 6, "cyclictest.slices", "give slices or breaktrace"),
    ("cyclictest: {slices: 0}\n", 6, "cyclictest.slices", "greater than or equal to 1"),
    ("cyclictest: {slices: 3}\n", 6, "cyclictest.slices", "make duration a multiple of slices"),
])
def test_nonsense_options_are_refused_with_their_line(extra, line, field, words):
    message = refused(BASE + extra)
    assert message.startswith(f"c.yaml:{line}: {field}: "), message
    assert words in message


def test_module_keys_and_the_twin_do_not_fit_a_cyclictest_campaign():
    message = refused(BASE.replace("duration: 2s", "duration: 2s, period: 100us"))
    assert message.startswith("c.yaml:5: matrix.period: is a module-run key"), message
    message = refused(BASE.replace("kind: local", "kind: twin"))
    assert "c.yaml:3: bench.target.kind: a cyclictest run measures a real kernel" in message, message
    message = refused(BASE.replace("duration: 2s", "duration: 1500ms"))
    assert "matrix.duration: cyclictest -D takes whole seconds" in message, message
    module = "name: m\nmatrix: {samples: 10}\ncyclictest: {interval: 1ms}\n"
    assert refused(module).startswith("c.yaml:3: cyclictest: cyclictest options are for matrix.kind: cyclictest")


def test_several_targets_name_their_runs():
    campaign = parse_campaign(
        "name: c\nbench:\n  targets: {a: {kind: local}, b: {kind: vm, kernel: rt}}\n  scope: {kind: none}\n"
        "matrix: {kind: cyclictest, loads: [x, y], duration: 2s, repetitions: 2}\nloads: {x: [], y: []}\n")
    from station.config import expand_runs

    ids = [s.id for s in expand_runs(campaign)]
    assert ids == ["a-x-r0", "a-y-r0", "a-x-r1", "a-y-r1", "b-x-r0", "b-y-r0", "b-x-r1", "b-y-r1"]
    message = refused("name: c\nbench:\n  target: {kind: local}\n  targets: {a: {kind: local}}\n"
                      "matrix: {samples: 5}\n")
    assert "bench.targets: give either target:" in message
    assert "kernel: chooses the VM's kernel" in refused("name: c\nbench:\n  target: {kind: ssh, kernel: rt}\n"
                                                       "matrix: {samples: 5}\n")


settings_strategy = st.builds(
    CyclictestSettings,
    interval=st.integers(10, 1_000_000).map(lambda us: us / 1e6),
    policy=st.sampled_from(["fifo", "rr"]),
    priority=st.integers(1, 99),
    threads=st.one_of(st.just("per-cpu"), st.integers(1, 4096)),
    affinity=st.one_of(st.sampled_from(["all", "none"]),
                       st.lists(st.integers(0, 4095), min_size=1, max_size=8).map(lambda c: ",".join(map(str, c)))),
    histogram=st.integers(1, 100_000).map(lambda us: us / 1e6),
    breaktrace=st.one_of(st.none(), st.integers(1, 1_000_000).map(lambda us: us / 1e6)),
    cpu_dma_latency=st.one_of(st.just("off"), st.integers(0, 10_000_000)),
)


@settings(max_examples=200, deadline=None)
@given(s=settings_strategy, duration=st.one_of(st.none(), st.integers(1, 10**6)),
       loops=st.one_of(st.none(), st.integers(1, 10**9)))
def test_every_option_is_one_shell_word(s, duration, loops):
    args = arguments(s, duration_s=duration, loops=loops, json_path="/tmp/x y/'z'.json")
    assert shlex.split(command(s, duration_s=duration, loops=loops, json_path="/tmp/x y/'z'.json")) == \
        ["cyclictest", *args]
    assert all(a.startswith("-") for a in args)  # an option each; cyclictest takes no positional argument


@settings(max_examples=100, deadline=None)
@given(s=settings_strategy, slices=st.integers(1, 10_000), each=st.integers(1, 100))
def test_a_sliced_run_is_one_shell_command_of_its_own_cyclictest_invocations(s, slices, each):
    """sh -c with a loop: the loop's cyclictest line is the one the options make for one slice."""
    s = s.model_copy(update={"slices": slices, "breaktrace": None})
    argv = shlex.split(sliced_command(s, slices * each))
    assert argv[:2] == ["sh", "-c"] and len(argv) == 3
    one = command(s, duration_s=each, loops=None, json_path=None)
    assert f"while [ $i -lt {slices} ]" in argv[2] and f"; {one} || exit $?; done" in argv[2]


# ---- what the real cyclictest makes of them ----------------------------------------------------
def _run(tmp_path: Path, s: CyclictestSettings, **kw):
    if shutil.which("cyclictest") is None:
        missing("cyclictest is not installed (apt-get install rt-tests)")
    if os.geteuid() != 0:
        missing("cyclictest with SCHED_FIFO and mlockall needs root (CI runs as root)")
    json_path = tmp_path / "out.json"
    done = subprocess.run(["cyclictest", *arguments(s, json_path=str(json_path), **kw)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return parse_histogram(done.stdout), parse_json(json_path.read_text()), done.stdout


def test_threads_affinity_loops_and_histogram_reach_cyclictest(tmp_path):
    s = CyclictestSettings(threads=1, affinity="1" if os.cpu_count() > 1 else "0", histogram=50e-6,
                           interval=500e-6)
    text, js, _ = _run(tmp_path, s, duration_s=None, loops=300)
    assert js.num_threads == 1
    assert js.threads[0].cpu == (1 if os.cpu_count() > 1 else 0)
    assert js.threads[0].cycles == 300
    assert histogram_option(js.cmdline) == 50
    assert text.histogram_range in (None, 50)
    assert " -i500 " in f" {js.cmdline} "


def test_smp_runs_a_thread_per_cpu(tmp_path):
    _, js, _ = _run(tmp_path, CyclictestSettings(smp=True, histogram=100e-6), duration_s=None, loops=200)
    assert js.num_threads == os.cpu_count()
    assert sorted(t.cpu for t in js.threads) == list(range(os.cpu_count()))


def test_cpu_dma_latency_off_leaves_power_management_alone(tmp_path):
    _, _, out_default = _run(tmp_path, CyclictestSettings(threads=1, histogram=100e-6), duration_s=None, loops=50)
    _, _, out_off = _run(tmp_path, CyclictestSettings(threads=1, histogram=100e-6, cpu_dma_latency="off"),
                         duration_s=None, loops=50)
    if Path("/dev/cpu_dma_latency").exists():
        assert "/dev/cpu_dma_latency set to 0us" in out_default
    assert "cpu_dma_latency" not in out_off


def test_breaktrace_stops_the_run_at_the_first_latency_above_it(tmp_path):
    text, js, _ = _run(tmp_path, CyclictestSettings(threads=1, histogram=100e-6, breaktrace=1e-6),
                       duration_s=5, loops=None)
    assert text.break_thread is not None and text.break_value is not None and text.break_value > 1
    assert js.threads[0].cycles < 5 / 1e-3  # stopped long before -D's 5 s at 1 ms
