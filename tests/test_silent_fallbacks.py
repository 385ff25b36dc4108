"""Fallbacks that change a number must say so (issue 47.2). Each test makes the fallback happen on
purpose (the twin's injected set-up is the truth of when it must) and checks the report says it,
with its effect, where today it said nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

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


def _shift(mean: float) -> dict:
    return {"hw_minus_sw_mean_ns": mean, "se_ns": 5.0, "hw_minus_sw_median_ns": mean, "ci_withheld": None}


def test_t_rw_pairs_runs_of_one_target_and_keeps_every_alike_pair():
    """Two targets (or two imports under one load and repetition) each with an inb and a no-inb run:
    every pair gives its own t_rw from its own runs; before, the later run of a key silently
    replaced the earlier, and one target's inb run could meet another's no-inb run."""
    from types import SimpleNamespace

    from station.kinds.module.analysis import _t_rw

    def run(rid: str, target: str, variant: str, shift: float) -> SimpleNamespace:
        entry = {"id": rid, "target": target, "interface": "lpt", "load": "none", "repetition": 0,
                 "variant": variant, "shift": _shift(shift), "pairing": None, "truth": None}
        return SimpleNamespace(entry=entry, diffs=None)

    runs = [run("a-inb", "a", "inb", 2000.0), run("a-no", "a", "no-inb", 500.0),
            run("b-inb", "b", "inb", 3000.0), run("b-no", "b", "no-inb", 900.0)]
    got = {(e["inb_run"], e["no_inb_run"]): e["estimate_ns"] for e in _t_rw(runs)}
    assert got == {("a-inb", "a-no"): 1500.0, ("b-inb", "b-no"): 2100.0}
    twice = [run("i1", "", "inb", 2000.0), run("n1", "", "no-inb", 500.0),
             run("i2", "", "inb", 2100.0), run("n2", "", "no-inb", 550.0)]
    assert {(e["inb_run"], e["no_inb_run"]) for e in _t_rw(twice)} == {("i1", "n1"), ("i2", "n2")}


def test_compare_takes_every_repetitions_t_rw_not_the_first():
    from station.kinds.module.compare import t_rw_over_repetitions

    entries = [{"interface": "lpt", "load": "io", "repetition": k, "estimate_ns": v, "ci95_ns": [v - 9, v + 9]}
               for k, v in enumerate((1500.0, 1540.0, 1610.0))]
    got = t_rw_over_repetitions(entries, "lpt", "io")
    assert got["estimate_ns"] == np.mean([1500.0, 1540.0, 1610.0]) and got["repetitions"] == 3
    half = stats.t.ppf(0.975, 2) * np.std([1500.0, 1540.0, 1610.0], ddof=1) / np.sqrt(3)
    assert got["ci95_ns"] == pytest.approx([got["estimate_ns"] - half, got["estimate_ns"] + half])
    assert t_rw_over_repetitions(entries[:1], "lpt", "io") is entries[0]
    assert t_rw_over_repetitions(entries, "pcie", "io") is None


def test_an_untested_gpio_difference_is_not_called_when_a_runs_noise_is_unknown():
    """One run a side; one run's mean interval was withheld (its delays too dependent for their
    number): its noise is unknown, not 0, so no difference can be shown to exceed it (before, a
    withheld interval counted as an SE of 0 and any difference passed)."""
    from station.kinds.gpio import analysis as gpio

    def run(rid: str, mean: float, ci: list[float] | None) -> dict:
        return {"id": rid, "case": rid, "load": "idle", "target": None, "delay_us": {"mean": mean, "mean_ci": ci}}

    a = gpio._condition_entry(("", "a", "idle"), [run("a", 100.0, None)])
    b = gpio._condition_entry(("", "b", "idle"), [run("b", 101.0, [100.9, 101.1])])
    assert a["within_se_us"] is None
    assert not gpio._beyond_own_noise(a, b)
    known = gpio._condition_entry(("", "a", "idle"), [run("a", 100.0, [99.9, 100.1])])
    assert gpio._beyond_own_noise(known, b)  # both known: 1 µs is far beyond ~0.07 µs of noise


def test_a_shift_from_too_few_acquisitions_states_no_scope_standard_error():
    """Under 10 acquisitions the scope side's SE is the plain one (an acquisition's pulses taken as
    independent, which they are not): the interval is withheld, and so is the SE the findings'
    t_HW difference would build its interval on (before, it went on to them unflagged)."""
    from station.analysis.distribution import Distribution
    from station.kinds.module import correlation

    sw = Distribution.of(np.arange(1000.0))
    few = correlation.shift_of(sw, 2500.0, 3.0, 2500.0, acquisitions=5)
    assert few["ci95_ns"] is None and few["hw_se_ns"] is None and "5 scope acquisitions" in few["ci_withheld"]
    enough = correlation.shift_of(sw, 2500.0, 3.0, 2500.0, acquisitions=40)
    assert enough["hw_se_ns"] == 3.0 and enough["ci95_ns"] is not None


def test_a_gpio_runs_delay_torn_by_a_crash_is_not_read_as_a_number(tmp_path):
    """A run cut before its seal is read from delays.csv: a last line torn mid-number (a crash, a
    full disk) would read as a plausible delay (1.2e-0 s for 1.25e-05 s); it is left out."""
    from station.kinds.gpio.analysis import read_delays

    (tmp_path / "delays.csv").write_text("acquisition,stimulus_s,delay_s,armed_host_s\n"
                                         "0,1.0e-03,1.25e-05,1.0\n0,2.0e-03,1.2e-0")
    frame = read_delays(tmp_path)
    assert frame["delay_s"].tolist() == [1.25e-05]


def test_a_record_stream_the_decoder_refuses_fails_its_run_by_name_and_keeps_what_came(tmp_path, monkeypatch):
    """A record the module kind cannot decode (a corrupt stream, a module writing another format)
    fails the run with "record stream: <the decoder's words>", through the kind's own failure (the
    campaign's core knows no record format); what streamed before it is kept; the target is
    cleaned."""
    import asyncio
    import json

    from station.campaign.loop import run_campaign
    from station.common.progress import QuietProgress
    from station.config import parse_campaign
    from station.parsers import records

    calls = {"n": 0}
    real_feed = records.V1Decoder.feed

    def feed(self, data: bytes):  # noqa: ANN001, ANN202 - the decoder's own signature
        calls["n"] += 1
        if calls["n"] == 3:  # a few batches in: the stream turns bad
            raise records.RecordFormatError("record 42: magic 0xdeadbeef, expected 0x49525153")
        return real_feed(self, data)

    monkeypatch.setattr(records.V1Decoder, "feed", feed)
    campaign = parse_campaign("""name: bad-stream
bench: {target: {kind: twin}, scope: {kind: none}}
matrix: {interfaces: [lpt], variants: [inb], loads: [none], samples: 200000, max_duration: 1min}
loads: {none: []}
""", "bad-stream.yaml")
    result = asyncio.run(run_campaign(campaign, tmp_path / "out", QuietProgress()))
    [run_dir] = list((tmp_path / "out" / "runs").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed", manifest["status"]
    assert manifest["error"].startswith("record stream: record 42: magic 0xdeadbeef"), manifest["error"]
    assert (run_dir / "sw.raw").stat().st_size > 0  # what came before is kept
    assert result is not None
