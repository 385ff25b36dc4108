"""Pairing that knows when it cannot pair (issue 27), through whole twin campaigns:
- short records (about five pulses an acquisition, as a TDS 460A without Option 1M forces at
  50 µs/div): on each dialect's twin, nothing pairs and every paired t_rw interval is withheld with
  its reason; records just long enough to pair (about 25 pulses): every pair right by identity
  against the truth, and the paired t_rw holds the injected one;
- a scope watching something else (a simulated scope of its own beside the twin target): almost
  no pulse paired, a warning in the report and on the terminal, and an exit status that says so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from station.kinds.module.data import load_run
from station.kinds.module.pairing import pair_run
from station.twin.clock import DEFAULT_DRIFT_PPM, DEFAULT_SCOPE_TIMEBASE_PPM
from tests.conftest import run_station
from tests.pulse_truth import pairs_right, pulse_events

EXIT_UNMATCHED = 4
# the twin's clocks as these campaigns leave them: the scope sees the target's times scaled by this
SCOPE_PER_TARGET = (1 + DEFAULT_SCOPE_TIMEBASE_PPM * 1e-6) / (1 + DEFAULT_DRIFT_PPM * 1e-6)
SHORT = {  # dialect -> (time/div, record length): about five pulses at 100 µs
    "tektronix_tds": ("50us", 15_000),
    "tektronix_mso": ("50us", 12_500),
    "keysight_infiniivision": ("50us", 5_000),
}
ENOUGH = ("250us", 75_000)  # about 25 pulses: just long enough to pair, at the short records' sample interval


def _campaign(name: str, scope: str, samples: int = 30_000, pulses: int = 600) -> str:
    return f"""name: {name}
bench:
  target: {{kind: twin, family: rtai}}
  twin: {{seed: 31, ground_truth: true}}
  scope: {scope}
matrix:
  interfaces: [lpt]
  variants: [inb, no-inb]
  loads: [none]
  period: 100us
  samples: {samples}
  pulses: {pulses}
  max_duration: 2min
loads:
  none: []
"""


def _run(tmp_path: Path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    res = run_station("run", str(path), "--out", str(tmp_path / "out"), timeout=900)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    return res, report


def _pairs_by_identity(data, pairs, match_ns: float) -> np.ndarray:  # noqa: ANN001 - RunData
    """Whether each pair's record is the event behind its pulse, that event found from the twin's
    truth alone (tests/pulse_truth.py), not from a width that happens to agree."""
    t = data.truth.set_index("seq").sort_index()
    t = t.reindex(np.arange(int(t.index.max()) + 1)).reset_index(drop=True)  # row i is event i
    events = pulse_events(data.hw, t, int(data.period_ns), match_ns, SCOPE_PER_TARGET)
    return pairs_right(pairs, data.hw, events)


@pytest.mark.parametrize("dialect, length", [*((d, "short") for d in sorted(SHORT)), ("tektronix_tds", "enough")])
def test_short_records_pair_right_or_not_at_all(dialect, length, tmp_path):
    """Short records (about five pulses) on each dialect: no pair, every paired interval withheld
    with its reason. Records just long enough to pair (about 25 pulses): pairs made, each one right
    by identity (the event behind its pulse, from the truth), and the paired t_rw interval holds
    the injected t_rw."""
    per_div, points = SHORT[dialect] if length == "short" else ENOUGH
    scope = (f"{{kind: twin, dialect: {dialect}, channel: 1, volts_per_div: 1V, position_div: -3, "
             f"time_per_div: {per_div}, record_length: {points}, trigger_level: 1.5V, threshold: auto, "
             "bus: loopback}")
    res, report = _run(tmp_path, _campaign(f"short-{dialect}", scope))
    assert res.returncode == 0, res.stderr[-3000:]
    for run in report["runs"]:
        data = load_run(tmp_path / "out" / "runs" / run["id"])
        pairs = pair_run(data.sw, data.hw, data.arrivals, int(data.period_ns)).pairs
        assert run["pairing"]["pulses_paired"] == len(pairs)
        if length == "enough":  # the pairing branch is reached, and every pair is right
            assert len(pairs) >= 100, (run["id"], len(pairs))
            # two of the scope's sample intervals (10 divisions a record): where an edge may fall
            right = _pairs_by_identity(data, pairs, 2 * 10 * 250e3 / ENOUGH[1])
            assert right.all(), (run["id"], int((~right).sum()), len(pairs))
        else:
            assert len(pairs) == 0 and "no paired estimate" in run["pairing"]["note"], run["pairing"]
    for c in report["comparisons"]["t_rw"]:
        if length == "short":
            assert c.get("paired_estimate_ns") is None and c["paired_withheld"], c
            assert "pulses" in c["paired_withheld"]  # the reason: too few pulses an acquisition
        else:
            lo, hi = c["paired_ci95_ns"]
            se = (hi - lo) / 2 / 1.96
            # the injected t_rw within 3.29 SE (two-sided 99.9 %): fails by chance at most 0.1 % a run
            assert abs(c["paired_estimate_ns"] - c["truth_ns"]) <= 3.29 * se, c


def test_a_scope_watching_something_else_is_not_paired(tmp_path):
    source = PeriodicEdgeSource(period_s=100.037e-6, width_s=(6e-6, 14e-6), seed=27)  # plausible, unrelated
    with run_in_thread(SimScopeServer(source, seed=5, dialect="tektronix_tds")) as scope:
        resource = f"TCPIP::127.0.0.1::{scope.port}::SOCKET"
        spec = (f"{{kind: visa, resource: '{resource}', dialect: tektronix_tds, channel: 1, volts_per_div: 1V, "
                "position_div: -3, time_per_div: 1ms, record_length: 120000, trigger_level: 1.5V, "
                "threshold: auto}")
        res, report = _run(tmp_path, _campaign("unrelated", spec, samples=20_000, pulses=1500))
    assert res.returncode == EXIT_UNMATCHED, (res.returncode, res.stderr[-3000:])
    assert "could not be matched" in res.stderr
    for run in report["runs"]:
        p = run["pairing"]
        assert p["pulses"] >= 1000
        assert p["pulses_paired"] < 0.001 * p["pulses"], p
        assert p["unmatched"] is True
        assert any(f"Run {run['id']}: event pairing: the scope's pulses match none" in n for n in report["notes"])
    for c in report["comparisons"]["t_rw"]:
        assert c["paired_estimate_ns"] is None and "match none" in c["paired_withheld"]
