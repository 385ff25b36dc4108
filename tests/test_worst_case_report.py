"""The worst case in the report, end to end: a dump drawn from a distribution whose tail is known
analytically is imported (`station import`), reported with a deadline (`station report
--deadline`), and the report's tail estimate and deadline probability are held against that truth."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from station import records
from tests.conftest import run_station

SHIFT_NS, SCALE_NS = 6000.0, 400.0  # latency = 6 µs + an exponential tail of mean 0.4 µs
N = 400_000
DEADLINE_TAIL = 1e-5  # the deadline is the latency exceeded with this probability


def _true_quantile(p: float) -> float:
    return SHIFT_NS + SCALE_NS * math.log(1.0 / p)


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("worst")
    rng = np.random.default_rng(20)
    latency = np.round(SHIFT_NS + rng.exponential(SCALE_NS, N)).astype(np.int64)
    dump = tmp / "lpt-dump.bin"
    dump.write_bytes(records.encode_legacy(latency))
    out = tmp / "out"
    imported = run_station("import", str(dump), "--out", str(out), "--format", "legacy", "--interface", "lpt",
                           "--variant", "no-inb", "--load", "idle", "--period", "100us", "--no-report")
    assert imported.returncode == 0, imported.stderr
    deadline_us = _true_quantile(DEADLINE_TAIL) / 1000
    proc = run_station("report", str(out), "--deadline", f"{deadline_us:.3f}us")
    assert proc.returncode == 0, proc.stderr
    return out, json.loads((out / "report.json").read_text())


def test_the_tail_estimate_holds_the_true_quantile(reported):
    _, report = reported
    (entry,) = report["comparisons"]["worst_case"]
    assert entry["reliable"], entry["reasons"]
    q = entry["quantile_ns"]
    truth = _true_quantile(1e-9)
    assert q["exceedance"] == 1e-9 and q["ci_low"] <= truth <= q["ci_high"], (q, truth)
    assert entry["worst_case_1e9_ns"] == q["estimate"]
    # beyond anything observed: the maximum of 400 000 draws is near the 2.5e-6 quantile
    assert q["estimate"] > entry["observed_max_ns"]
    fit = entry["tail_fit"]
    assert fit["independence"]["passed"] and fit["gof"]["passed"]
    assert fit["threshold_diagnostics"], "the threshold choice must be shown"


def test_the_deadline_probability_holds_the_truth(reported):
    _, report = reported
    (entry,) = report["comparisons"]["worst_case"]
    d = entry["deadline"]
    assert d["deadline_ns"] == pytest.approx(_true_quantile(DEADLINE_TAIL), abs=1)
    assert d["ci_low"] <= DEADLINE_TAIL <= d["ci_high"], d


def test_the_report_says_it_in_words_and_in_its_table(reported):
    out, report = reported
    text = next(f["text"] for f in report["findings"] if f["kind"] == "worst_case")
    assert "exceeded with probability 1e-09 per event is LPT" in text and "one draw" in text
    assert "Probability of exceeding the" in text and "deadline" in text
    md = (out / "report.md").read_text()
    assert "Exceeded w.p. 1e-09/event (µs) [95 %]" in md and "per event [95 %]" in md


def test_a_deadline_without_a_unit_is_refused(reported):
    out, _ = reported
    proc = run_station("report", str(out), "--deadline", "125")
    assert proc.returncode == 2 and "--deadline" in proc.stderr and "unit" in proc.stderr


def test_the_campaign_files_deadline_is_used_when_none_is_given(reported, tmp_path):
    import shutil

    from station.analysis.campaign import analyse_campaign
    from station.config import parse_campaign

    out, _ = reported
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    text = "name: x\nmatrix: {interfaces: [lpt], samples: 1000}\nreport: {deadline: 9us}\n"
    config = parse_campaign(text).model_dump(mode="json")
    campaign = json.loads((copy / "campaign.json").read_text())
    (copy / "campaign.json").write_text(json.dumps({**campaign, "config": config}))
    report, _ = analyse_campaign(copy)
    (entry,) = report["comparisons"]["worst_case"]
    assert entry["deadline"]["deadline_ns"] == pytest.approx(9000)
    # 9 µs is 7.5 scales above the shift: P = exp(-7.5)
    assert entry["deadline"]["ci_low"] <= math.exp(-7.5) <= entry["deadline"]["ci_high"]


def test_an_unreliable_fit_lends_no_number_to_the_table() -> None:
    from station.report.tables import worst_case_table

    def entry(reliable: bool, ci_high: float | None) -> dict:
        return {"interface": "pcie", "load": "idle", "observed_max_ns": 9000.0, "p99_999_ns": 8000.0, "run": "r",
                "samples": 10**6, "reliable": reliable, "reasons": [] if reliable else ["clustered extremes"],
                "quantile_ns": {"exceedance": 1e-9, "estimate": 12000.0, "ci_low": 11000.0, "ci_high": 15000.0},
                "deadline": {"deadline_ns": 10000.0, "source": "fit", "p_exceed": 1e-7, "ci_low": 1e-8,
                             "ci_high": ci_high}}

    def cells(e: dict) -> list[str]:
        table = worst_case_table({"comparisons": {"worst_case": [e]}, "runs": []})
        return [c.text for c in table.rows[0]]

    assert cells(entry(True, 1e-6))[3:6] == ["12.000 [11.000, 15.000]", "reliable", "1e-07 [1e-08, 1e-06]"]
    assert cells(entry(True, None))[5] == "1e-07 [1e-08, ?]"  # a bound the fit could not give is not 0
    unreliable = cells(entry(False, 1e-6))
    assert unreliable[3] == "–" and unreliable[5] == "–" and "clustered extremes" in unreliable[4]
