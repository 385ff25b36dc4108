"""Campaigns that stop when their question is answered (issue 50, `matrix.until`): on twin
campaigns whose truth the test sets — an interface's latency raised far above the other's, or
two variants whose t_SW the twin draws from one law (the handler variant changes only t_HW:
station/twin/model.py) — the rule stops after the round that settles it and starts no further
run, runs to its cap and says so when the question cannot be settled, and a resumed campaign
judges its earlier rounds before measuring any; each run's unit is the percentile of the events
the twin logged it made."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from station.config import ConfigError, load_campaign
from station.twin.model import ModuleSession, load_preset
from tests.conftest import run_station, running_twin, station_cmd
from tests.fault_proxy import FaultyLink, relay_known_hosts

CAMPAIGN = """\
name: {name}
bench:
  target: {{kind: twin, family: rtai}}
  twin: {{seed: 5{overrides}}}
  scope: {{kind: none}}
matrix:
  interfaces: {interfaces}
  variants: {variants}
  loads: [none]
  repetitions: {cap}
  period: 100us
  samples: 3000
  max_duration: 1min
  until: {until}
"""
RAISED = "sw_mean: 9100"  # the preset's LPT mean 8100 ns + 1 µs: LPT ≈ 2.7 µs above PCIe


def campaign(tmp_path: Path, name: str, until: str, cap: int, interfaces: str = "[lpt, pcie]",
             variants: str = "[inb]", overrides: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(CAMPAIGN.format(name=name, until=until, cap=cap, interfaces=interfaces,
                                    variants=variants, overrides=overrides))
    return path


def measured(out: Path) -> list[str]:
    return sorted(p.parent.name for p in (out / "runs").glob("*/manifest.json"))


def model_of(interface: str, raised: bool):  # noqa: ANN201 - (Preset, InterfaceParams)
    """The twin's preset and the interface's parameters as the campaign sets them (RAISED)."""
    from dataclasses import replace

    preset = load_preset("seed-2015")
    params = preset.interfaces[interface]
    return preset, replace(params, sw_mean=9100) if raised else params


@functools.cache
def model_median_ns(interface: str, raised: bool) -> float:
    """The interface's t_SW median from the twin's own model (idle; each load's offset and the
    drift taken out, as logged), over 8 loads of 200 chunks."""
    preset, params = model_of(interface, raised)
    sessions = [ModuleSession(params, preset.calibration_samples, 100_000, True, 0, f"m-{k}")
                for k in range(8)]
    chunks = [s.chunk(i, False) for s in sessions for i in range(200)]
    return float(np.median(np.concatenate([c.sw - c.run_offset - c.drift for c in chunks])))


def test_an_injected_difference_stops_the_campaign_after_the_round_that_settles_it(tmp_path):
    path = campaign(tmp_path, "raised",
                    "{compare: interfaces, at: p50, t_opt: 10, confidence: 95%}", cap=12,
                    overrides=f", overrides: {{lpt: {{{RAISED}}}}}")
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    stopping = json.loads((out / "campaign.json").read_text())["stopping"]
    assert stopping["verdict"] == "answered"
    rounds = stopping["rounds"]
    assert 2 <= rounds < 12
    group = stopping["groups"]["lpt − pcie, inb, none"]
    assert group["state"] == "lpt above pcie (median paired difference > 0)"
    # the median run's difference the twin's model makes, inside the interval it stopped on
    truth = model_median_ns("lpt", True) - model_median_ns("pcie", False)
    lower, upper = group["interval_ns"]
    assert 0 < lower <= truth <= upper
    # no run of a later round was started
    assert measured(out) == sorted(f"{i}-inb-none-r{r}" for i in ("lpt", "pcie")
                                   for r in range(rounds))
    assert f"campaign stopped after round {rounds}" in res.stdout + res.stderr
    # the path: one interval per round, never widening
    path_ = group["path"]
    assert [p[0] for p in path_] == list(range(rounds))
    finite = [(lo, hi) for _, lo, hi in path_ if lo is not None and hi is not None]
    assert all(a[0] <= b[0] and b[1] <= a[1] for a, b in zip(finite, finite[1:], strict=False))
    # the report says it first: its finding, its table, its figure of the path
    report = json.loads((out / "report.json").read_text())
    assert report["findings"][0]["kind"] == "stopping"
    assert report["findings"][0]["headline"].startswith(f"Answered after {rounds} round(s)")
    assert report["stopping"]["groups"][0]["path"] == group["path"]
    page = (out / "report.md").read_text()
    assert "## Stop rule" in page and f"| lpt − pcie, inb, none | {rounds} |" in page
    svg = (out / "figures" / "stopping.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    # a resumed campaign judges what it has and measures nothing more
    again = run_station("run", str(path), "--out", str(out), timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "stop rule answered" in again.stdout + again.stderr
    assert len(measured(out)) == 2 * rounds
    # … but not under another rule than its rounds were judged under
    path.write_text(path.read_text().replace("at: p50", "at: p90"))
    changed = run_station("run", str(path), "--out", str(out), timeout=600)
    assert changed.returncode != 0
    assert "were judged under the stop rule" in changed.stderr
    assert len(measured(out)) == 2 * rounds


def test_a_pair_the_twin_draws_from_one_law_runs_to_its_cap_and_says_so(tmp_path):
    path = campaign(tmp_path, "equal", "{compare: variants, at: p50, t_opt: 10}", cap=6,
                    interfaces="[lpt]", variants="[inb, no-inb]")
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    stopping = json.loads((out / "campaign.json").read_text())["stopping"]
    assert stopping["verdict"] == "open" and stopping["rounds"] == 6
    assert stopping["groups"]["inb − no-inb, lpt, none"]["state"] == "open"
    assert len(measured(out)) == 12
    assert "stop rule not answered yet after 6 round(s)" in res.stdout + res.stderr


def test_a_budget_leaves_an_unsettled_question_open_and_a_resumed_session_goes_on(tmp_path):
    """Both variants one law (never settled) with room for 60 rounds and a budget of 6 s: the
    session starts no round its rounds so far say would end past the budget, says so, leaves the
    question open, and records where (campaign.json, the page); its run directories are exactly
    those whole rounds. The budget is not the question: a resumed session with another budget is
    not refused, goes on from there, and its own stop replaces the earlier one."""
    until = "{compare: variants, at: p50, t_opt: 10, time_budget: %s}"
    path = campaign(tmp_path, "budget", until % "6s", cap=60, interfaces="[lpt]",
                    variants="[inb, no-inb]")
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads((out / "campaign.json").read_text())
    spent = data["time_budget"][""]
    rounds = spent["rounds"]
    assert 1 <= rounds < 60 and spent["stopped_before_round"] == rounds + 1
    # the station's rule, on its own record: the next round's 2 runs at its mean per run overrun
    assert spent["budget_s"] == 6.0 and spent["runs"] == 2 * rounds
    assert spent["spent_s"] + 2 * spent["spent_s"] / spent["runs"] > 6.0
    assert measured(out) == sorted(f"lpt-{v}-none-r{r}" for v in ("inb", "no-inb")
                                   for r in range(rounds))
    assert data["stopping"]["verdict"] == "open" and data["stopping"]["rounds"] == rounds
    assert "time_budget" not in data["stopping"]["rule"]  # the question, as its rounds are judged
    assert (f"stopped before round {rounds + 1}: the stop rule's time budget (6 s) would be "
            "overrun by its 2 run(s)") in res.stdout + res.stderr
    page = (out / "report.md").read_text()
    assert f"6 s would have been overrun by round {rounds + 1}" in page

    path.write_text(path.read_text().replace("time_budget: 6s", "time_budget: 4s"))
    again = run_station("run", str(path), "--out", str(out), timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    later = json.loads((out / "campaign.json").read_text())
    more = later["time_budget"][""]["rounds"]
    assert later["time_budget"][""]["budget_s"] == 4.0
    assert later["time_budget"][""]["stopped_before_round"] == rounds + more + 1
    assert later["stopping"]["rounds"] == rounds + more and later["stopping"]["verdict"] == "open"
    assert len(measured(out)) == 2 * (rounds + more)


def test_a_resumed_session_that_measures_nothing_keeps_the_earlier_budget_stop(tmp_path):
    """The budget's stop is forgotten only once a resumed session has measured a run: a resumed
    session whose first run is cut off (the SSH link to a standalone twin cut while it streams, and
    kept cut: the target is lost) leaves campaign.json's record, so the question stays open for the
    reason the earlier session gave."""
    twin_process = running_twin(tmp_path / "twin")
    twin = next(twin_process)
    try:
        with FaultyLink(twin["ssh_port"]) as link:
            known_hosts = relay_known_hosts(twin["known_hosts"], link.port,
                                            tmp_path / "known_hosts_relay")
            path = tmp_path / "remote.yaml"
            path.write_text(
                "name: remote\nbench:\n"
                f"  target: {{kind: ssh, host: 127.0.0.1, port: {link.port}, user: root, "
                f"connect_timeout: 3s, reconnect_for: 2s, identity_file: '{twin['identity_file']}', "
                f"known_hosts: '{known_hosts}'}}\n"
                "  scope: {kind: none}\n"
                "matrix:\n  interfaces: [lpt]\n  variants: [inb, no-inb]\n  loads: [none]\n"
                "  repetitions: 60\n  period: 100us\n  samples: 20000\n  max_duration: 1min\n"
                "  until: {compare: variants, at: p50, t_opt: 10, time_budget: 8s}\n")
            out = tmp_path / "out"
            res = run_station("run", str(path), "--out", str(out), timeout=600)
            assert res.returncode == 0, res.stdout + res.stderr
            first = json.loads((out / "campaign.json").read_text())
            rounds = first["time_budget"][""]["rounds"]
            assert 1 <= rounds < 60 and first["time_budget"][""]["stopped_before_round"] == rounds + 1
            runs_before = measured(out)
            resumed = subprocess.Popen(station_cmd("run", str(path), "--out", str(out)),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 120
            # its first run streams (2 s of records a run): then the link goes, for good
            while not any(p.stat().st_size > 40 * 3000 for p in (out / "runs").glob("*/sw.raw")
                          if p.parent.name not in runs_before):
                assert resumed.poll() is None, resumed.communicate()
                assert time.monotonic() < deadline, "the resumed session measured nothing"
                time.sleep(0.05)
            link.cut()
            _, stderr = resumed.communicate(timeout=300)
    finally:
        next(twin_process, None)
    assert resumed.returncode != 0, stderr
    assert "lost the SSH session" in stderr
    later = json.loads((out / "campaign.json").read_text())
    new = [json.loads((out / "runs" / r / "manifest.json").read_text())["status"]
           for r in measured(out) if r not in runs_before]
    assert new == ["failed"]  # the resumed session's one run, cut off: nothing measured ...
    assert later["time_budget"] == first["time_budget"]  # ... so the reason is kept
    assert later["stopping"]["verdict"] == "open" and later["stopping"]["rounds"] == rounds


def test_a_margin_settles_a_pair_known_to_be_close(tmp_path):
    path = campaign(tmp_path, "close", "{compare: variants, at: p50, margin: 2us, t_opt: 10}",
                    cap=20, interfaces="[lpt]", variants="[inb, no-inb]")
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    stopping = json.loads((out / "campaign.json").read_text())["stopping"]
    assert stopping["verdict"] == "answered" and stopping["rounds"] < 20
    group = stopping["groups"]["inb − no-inb, lpt, none"]
    assert group["state"] == "within ±2us"
    assert -2000 <= group["interval_ns"][0] <= 0 <= group["interval_ns"][1] <= 2000  # truth: 0


@functools.cache
def model_run_percentile_ns(interface: str, raised: bool, level: float, runs: int = 400,
                            samples: int = 3000) -> float:
    """The median run's own `level` percentile of t_SW from the twin's model: `runs` module loads
    of `samples` idle events each (their load offset and drift in, as a run's records have them)."""
    preset, params = model_of(interface, raised)
    chunks = -(-samples // 1000)
    per_run = []
    for k in range(runs):
        session = ModuleSession(params, preset.calibration_samples, 100_000, True, 0, f"q-{k}",
                                drift_seed=5)
        sw = np.concatenate([session.chunk(i, False).sw for i in range(chunks)])[:samples]
        per_run.append(np.percentile(sw, 100 * level))
    return float(np.median(per_run))


def test_a_deadline_rule_says_which_condition_meets_it_and_which_misses(tmp_path):
    """A deadline set between the two interfaces' true p99 (the median run's, from the twin's
    model; LPT raised ~2.7 µs above PCIe): the rule stops once it knows PCIe meets it at a 1 %
    miss rate and LPT misses it more often, each interval holding its truth."""
    lpt, pcie = model_run_percentile_ns("lpt", True, 0.99), model_run_percentile_ns("pcie", False, 0.99)
    assert lpt - pcie > 1500  # the truth leaves room between them
    deadline_ns = round((lpt + pcie) / 2)
    path = campaign(tmp_path, "deadline", f"{{deadline: {deadline_ns}ns, miss_below: 0.01, t_opt: 10}}",
                    cap=12, overrides=f", overrides: {{lpt: {{{RAISED}}}}}")
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    stopping = json.loads((out / "campaign.json").read_text())["stopping"]
    assert stopping["verdict"] == "answered" and stopping["rounds"] < 12
    groups = stopping["groups"]
    assert groups["lpt inb none"]["state"].startswith("misses ")
    assert groups["pcie inb none"]["state"].startswith("meets ")
    for name, truth in (("lpt inb none", lpt), ("pcie inb none", pcie)):
        lower, upper = groups[name]["interval_ns"]
        assert (lower or -np.inf) <= truth <= (upper or np.inf), (name, truth, lower, upper)
    # each run's unit is its p99 (1 − miss_below), so no later round was started
    assert len(measured(out)) == 2 * stopping["rounds"]
    unit = json.loads((out / "runs" / measured(out)[0] / "manifest.json").read_text())["unit"]
    assert "0.99" in unit["latency_ns"]["percentiles"]
    page = (out / "report.md").read_text()
    assert "misses" in page and "meets" in page and "at most 0.01 of its events" in page


def test_an_exceedance_rule_stops_once_the_tail_has_an_upper_bound(tmp_path):
    """exceedance: 1e-3 asks for an upper bound on the latency the median run exceeds 0.1 % of the
    time: settled once the interval has an upper end, which then holds the model's truth."""
    path = campaign(tmp_path, "exceedance", "{exceedance: 1e-3, t_opt: 10}", cap=20,
                    interfaces="[pcie]")
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    stopping = json.loads((out / "campaign.json").read_text())["stopping"]
    assert stopping["verdict"] == "answered" and stopping["rounds"] < 20
    group = stopping["groups"]["pcie inb none"]
    lower, upper = group["interval_ns"]
    assert upper is not None and group["state"].startswith("exceeded with probability 0.001 at most")
    assert (lower or -np.inf) <= model_run_percentile_ns("pcie", False, 0.999) <= upper
    # the round before the last had no upper end yet: it stopped on the first that had one
    assert group["path"][-2][2] is None


def test_each_run_unit_is_the_percentile_of_the_events_the_twin_made(tmp_path):
    path = campaign(tmp_path, "units",
                    "{interval_width: 100us, at: p99.9, confidence: 0.5, t_opt: 2}", cap=4)
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    for run in measured(out):
        unit = json.loads((out / "runs" / run / "manifest.json").read_text())["unit"]["latency_ns"]
        truth = pd.read_parquet(out / "runs" / run / "twin-truth.parquet")
        kept = set(pd.read_parquet(out / "runs" / run / "sw.parquet")["seq"])
        events = truth[truth["seq"].isin(kept) & ~truth["stray"]]["sw_ns"].to_numpy()
        assert unit["count"] == len(events) and unit["source"] == "t_SW"
        for level in ("0.5", "0.99", "0.999"):
            assert unit["percentiles"][level] == pytest.approx(
                np.percentile(events, 100 * float(level)), abs=1e-6)


SEARCH = """\
name: search
bench:
  target: {kind: twin, family: rtai}
  twin: {seed: 5, load_effects: {heavy: {shift_ns: 3000}, light: {shift_ns: 0}}}
  scope: {kind: none}
matrix:
  interfaces: [lpt]
  variants: [inb]
  loads: [none, light, heavy]
  repetitions: 15
  period: 100us
  samples: 3000
  max_duration: 1min
  until: {worst: loads, at: p99, t_opt: 10}
loads:
  none: []
  light:
    - {name: cpu, command: "while :; do :; done"}
  heavy:
    - {name: io, command: "while :; do dd if=/dev/zero of=x bs=1M count=8; rm x; done"}
"""


def test_the_worst_load_is_found_and_the_others_stop_being_measured(tmp_path):
    """The twin shifts every loaded event of `heavy` by 3 µs (its load_effects, logged in
    campaign.json): the search names it the worst, and a load once dropped is never measured
    again."""
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH)
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads((out / "campaign.json").read_text())
    effects = data["twin"]["load_effects"]  # the injector's log
    loaded = [name for name, cmds in data["config"]["loads"].items() if cmds]
    truth = max(loaded, key=lambda name: effects.get(name, {}).get("shift_ns", 0.0))
    stopping = data["stopping"]
    assert stopping["verdict"] == "answered" and truth == "heavy"
    states = {name.split(" ")[0]: g["state"] for name, g in stopping["groups"].items()}
    assert states[truth] == "the worst"
    dropped_after = {}
    for load, state in states.items():
        if load != truth:
            m = re.fullmatch(r"not the worst \(dropped after round (\d+)\)", state)
            assert m, state
            dropped_after[load] = int(m.group(1))
    rounds = stopping["rounds"]
    assert rounds < 15
    runs = set(measured(out))
    for load, after in dropped_after.items():
        assert {f"lpt-inb-{load}-r{r}" for r in range(after)} <= runs
        assert not any(f"lpt-inb-{load}-r{r}" in runs for r in range(after, 15))
    assert {f"lpt-inb-heavy-r{r}" for r in range(rounds)} <= runs
    assert "not measured: load" in res.stdout + res.stderr or not any(
        after < rounds for after in dropped_after.values())
    # the loop judged round after round (each round fed once); judged afresh from the manifests,
    # the same answer
    from station.campaign.stopping import judge

    fresh = judge(load_campaign(path), out, set(measured(out))).as_dict()
    assert json.loads(json.dumps(fresh)) == stopping
    # the page says what the search's confidence is about, and what its intervals hold at: each
    # load's spends 5 %/3 a side (elimination.py), so alone 1 − 2·0.05/3, all three 1 − 2·0.05
    md = (out / "report.md").read_text()
    assert "confidence 95 % that the load named the worst is" in md
    assert "each load's interval holds alone at 96.67 %, all of them together at 90 %" in md


@pytest.mark.parametrize(("matrix", "words", "line"), [
    ("{interfaces: [lpt], until: {compare: interfaces, at: p99}}", "compares two interfaces", 4),
    ("{until: {compare: interfaces, at: p99}}", "no interval has both ends before round 9", 4),
    ("{repetitions: 5, until: {at: p99}}", "give one question", 4),
    ("{repetitions: 5, until: {interval_width: 1us, compare: variants, at: p99}}",
     "give one question", 4),
    ("{repetitions: 5, until: {compare: interfaces, at: p100}}", "not a percentile", 4),
    ("{repetitions: 5, until: {interval_width: 1us, at: p99, margin: 1us}}", "compare's", 4),
    ("{repetitions: 5, until: {worst: loads, at: p99}}", "searches two or more load sets", 4),
    ("{repetitions: 20, until: {deadline: 50us}}", "miss_below", 4),
    ("{repetitions: 20, until: {deadline: 50us, miss_below: 1e-3, at: p99}}", "set by the rule", 4),
    ("{repetitions: 20, until: {deadline: 50us, miss_below: 0.7}}", "outside", 4),
    ("{repetitions: 20, until: {exceedance: 1e-4}}", "at least 10000 events a run", 4),
    ("{repetitions: 20, until: {interval_width: 1us}}", "is needed: the percentile", 4),
    ("{repetitions: 20, until: {interval_width: 1us, at: p99, time_budget: 10ms}}", "at least 1 s", 4),
    ("{repetitions: 20, until: {interval_width: 1us, at: p99, time_budget: soon}}", "time_budget", 4),
])
def test_a_question_that_cannot_be_asked_is_refused_at_its_line(tmp_path, matrix, words, line):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench: {target: {kind: twin}, scope: {kind: none}}\n"
                    "# the matrix\n"
                    f"matrix: {{samples: 1000, {matrix[1:]}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert f"{path}:{line}" in str(err.value) and words in str(err.value)


def test_a_kind_without_units_refuses_a_stop_rule(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench: {target: {kind: local}}\n"
                    "matrix: {kind: interruptions, duration: 10s, repetitions: 9,\n"
                    "         until: {interval_width: 1us, at: p99}}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert f"{path}:4" in str(err.value) and "carry no unit" in str(err.value)


def test_a_cyclictest_campaign_compares_no_interfaces(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench: {target: {kind: local}}\n"
                    "matrix: {kind: cyclictest, duration: 10s, repetitions: 9, loads: [a, b],\n"
                    "         until: {compare: interfaces, at: p99}}\nloads: {a: [], b: []}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert "worst: loads" in str(err.value)


def test_a_load_effect_for_a_load_set_not_declared_is_refused_at_its_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench:\n  target: {kind: twin}\n"
                    "  twin: {load_effects: {hevy: {shift_ns: 100}}}\n"
                    "  scope: {kind: none}\nmatrix: {samples: 1000}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert f"{path}:4" in str(err.value) and "'hevy'" in str(err.value)
