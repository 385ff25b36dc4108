"""Pairing that knows when it cannot pair (issue 27), through whole twin campaigns:
- short records (about five pulses an acquisition, as a TDS 460A without Option 1M forces at
  50 µs/div): on each dialect's twin, every pair reported is right against the truth, and every
  paired t_rw interval holds the injected t_rw or is withheld with its reason;
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
from tests.conftest import run_station

EXIT_UNMATCHED = 4
SHORT = {  # dialect -> (time/div, record length): about five pulses at 100 µs
    "tektronix_tds": ("50us", 15_000),
    "tektronix_mso": ("50us", 12_500),
    "keysight_infiniivision": ("50us", 5_000),
}


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


@pytest.mark.parametrize("dialect", sorted(SHORT))
def test_short_records_pair_right_or_not_at_all(dialect, tmp_path):
    per_div, points = SHORT[dialect]
    scope = (f"{{kind: twin, dialect: {dialect}, channel: 1, volts_per_div: 1V, position_div: -3, "
             f"time_per_div: {per_div}, record_length: {points}, trigger_level: 1.5V, threshold: auto, "
             "bus: loopback}")
    res, report = _run(tmp_path, _campaign(f"short-{dialect}", scope))
    assert res.returncode == 0, res.stderr[-3000:]
    for run in report["runs"]:
        data = load_run(tmp_path / "out" / "runs" / run["id"])
        pairs = pair_run(data.sw, data.hw, data.arrivals, int(data.manifest["period_ns"])).pairs
        assert run["pairing"]["pulses_paired"] == len(pairs)
        if len(pairs):  # each pulse's record: the twin's true width of that event is the pulse's
            truth = data.truth.set_index("seq").loc[pairs["seq"].to_numpy()]
            right = np.abs(truth["hw_ns"].to_numpy() - pairs["hw_ns"].to_numpy()) <= 200
            assert right.mean() >= 0.999, (run["id"], right.mean())
        else:
            assert "no paired estimate" in run["pairing"]["note"], run["pairing"]
    for c in report["comparisons"]["t_rw"]:
        if c.get("paired_estimate_ns") is None:
            assert c["paired_withheld"], c
            assert "pulses" in c["paired_withheld"]  # the reason: too few pulses an acquisition
        else:
            lo, hi = c["paired_ci95_ns"]
            assert lo <= c["truth_ns"] <= hi, c


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
