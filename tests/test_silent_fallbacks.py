"""Fallbacks that change a number must say so (issue 47.2). Each test makes the fallback happen on
purpose (the twin's injected set-up is the truth of when it must) and checks the report says it,
with its effect, where today it said nothing."""

from __future__ import annotations

import json

from tests.conftest import run_station

# a scope record of 0.8 ms (10 divisions of 80 µs) at a 20 µs period: ~40 pulses an acquisition,
# enough to pair, but writes spanning under the 1 ms the clock-ratio fit needs (clock_ratio.py)
SHORT_RECORDS = """name: ratio
bench:
  target: {kind: twin, family: rtai}
  twin: {seed: 5, ground_truth: true}
  scope: {kind: twin, channel: 1, volts_per_div: 1V, position_div: -3, time_per_div: 80us,
          record_length: 20000, trigger_level: 1.5V, threshold: auto, bus: loopback}
matrix:
  interfaces: [pcie]
  variants: [inb]
  loads: [none]
  period: 20us
  samples: 50000
  pulses: 3000
  max_duration: 2min
loads:
  none: []
"""


def test_pairs_whose_clock_ratio_could_not_be_fitted_are_counted_and_noted(tmp_path):
    (tmp_path / "c.yaml").write_text(SHORT_RECORDS)
    res = run_station("run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    [run] = report["runs"]
    pairing = run["pairing"]
    assert pairing["pulses_paired"] > 1000  # the records are long enough to pair
    # every acquisition spans under 1 ms of writes: no ratio was fitted, every pair took 1
    assert pairing["clock_ratio_unmeasured"] == {"pairs": pairing["pulses_paired"], "of": pairing["pulses_paired"],
                                                 "max_error_ns": None}
    assert pairing["scope_vs_target_ppm"] is None
    assert any(f"{pairing['pulses_paired']:,} of {pairing['pulses_paired']:,} paired pulses came from acquisitions "
               "whose scope/target clock ratio could not be fitted" in n for n in report["notes"]), report["notes"]
