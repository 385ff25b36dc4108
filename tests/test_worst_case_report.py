"""The worst case in the report, end to end: a dump drawn from a distribution whose tail is known
analytically is imported (`station import`), reported with a deadline (`station report
--deadline`), and the report's tail estimate and deadline probability are held against that truth."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from station.parsers import records
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
    # 1e-9 is 3.4 decades past 1/400 000: the fit passes its checks, but the report calls the figure
    # unsupported and lends it to no table (compare's worst case included)
    assert entry["fit_reliable"] and not entry["reliable"]
    (reason,) = entry["reasons"]
    # trusted only where 10 events are expected beyond: 1e10 events for 1e-9
    assert "3.4 decades beyond the 1 in 400,000" in reason and "10,000,000,000 events for 1e-09" in reason
    assert entry["worst_case_1e9_ns"] is None
    q = entry["quantile_ns"]
    truth = _true_quantile(1e-9)
    assert q["exceedance"] == 1e-9 and q["ci_low"] <= truth <= q["ci_high"], (q, truth)
    # beyond anything observed: the maximum of 400 000 draws is near the 2.5e-6 quantile
    assert q["estimate"] > entry["observed_max_ns"]
    fit = entry["tail_fit"]
    assert fit["independence"]["passed"] and fit["gof"]["passed"]
    assert fit["threshold_diagnostics"], "the threshold choice must be shown"


def test_the_distribution_free_bound_is_the_maximum_at_about_three_in_n(reported):
    _, report = reported
    (entry,) = report["comparisons"]["worst_case"]
    b = entry["bound"]
    assert b["bound_ns"] == entry["observed_max_ns"] and b["level"] == 0.95
    assert (1 - b["exceedance"]) ** N == pytest.approx(0.05)  # P(the maximum stays below x_p) = 1 - level
    # one seeded draw of a 95 % statement (the coverage over many is tests/test_worst_case_twin.py)
    assert _true_quantile(b["exceedance"]) <= b["bound_ns"]


def test_the_deadline_probability_holds_the_truth(reported):
    _, report = reported
    (entry,) = report["comparisons"]["worst_case"]
    d = entry["deadline"]
    assert d["deadline_ns"] == pytest.approx(_true_quantile(DEADLINE_TAIL), abs=1)
    assert d["ci_low"] <= DEADLINE_TAIL <= d["ci_high"], d


def test_the_report_says_it_in_words_and_in_its_table(reported):
    out, report = reported
    text = next(f["text"] for f in report["findings"] if f["kind"] == "worst_case")
    assert "LPT has no reliable tail estimate: 1e-09 per event is 3.4 decades beyond" in text
    assert "one draw" in text
    bound = f"at most 1 event in {1 / -math.expm1(math.log(0.05) / N):,.0f} exceeds"
    assert bound in text, text
    # the deadline is exceeded by 2 events of 400 000, short of the 10 a fit needs: the observed fraction
    assert "Probability of exceeding the" in text and "deadline" in text and "(observed fraction, 2 seen)" in text
    md = (out / "report.md").read_text()
    assert "Exceeded w.p. 1e-09/event (µs) [95 %]" in md and "per event [95 %]" in md
    assert "Distribution-free bound (µs, 95 %)" in md


def test_a_deadline_without_a_unit_is_refused(reported):
    out, _ = reported
    proc = run_station("report", str(out), "--deadline", "125")
    assert proc.returncode == 2 and "--deadline" in proc.stderr and "unit" in proc.stderr


def _reanalysed_with(out: Path, tmp_path: Path, report_settings: str) -> dict:
    """The imported campaign analysed again as if its campaign file had these `report:` settings."""
    import shutil

    from station.analysis.campaign import analyse_campaign
    from station.config import parse_campaign

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    text = f"name: x\nmatrix: {{interfaces: [lpt], samples: 1000}}\nreport: {report_settings}\n"
    config = parse_campaign(text).model_dump(mode="json")
    campaign = json.loads((copy / "campaign.json").read_text())
    (copy / "campaign.json").write_text(json.dumps({**campaign, "config": config}))
    report, _ = analyse_campaign(copy)
    (entry,) = report["comparisons"]["worst_case"]
    return entry


def test_the_campaign_files_deadline_is_used_when_none_is_given(reported, tmp_path):
    entry = _reanalysed_with(reported[0], tmp_path, "{deadline: 9us}")
    assert entry["deadline"]["deadline_ns"] == pytest.approx(9000)
    # 9 µs is 7.5 scales above the shift: P = exp(-7.5)
    assert entry["deadline"]["ci_low"] <= math.exp(-7.5) <= entry["deadline"]["ci_high"]


def test_an_exceedance_the_sample_supports_is_reported_as_reliable(reported, tmp_path):
    # 2.5e-5: 10 of the 400 000 events expected beyond it, where a fit is trusted; 1e-7 is not
    entry = _reanalysed_with(reported[0], tmp_path, "{exceedance: 2.5e-5}")
    assert entry["reliable"], entry["reasons"]
    q = entry["quantile_ns"]
    assert q["exceedance"] == 2.5e-5 and q["ci_low"] <= _true_quantile(2.5e-5) <= q["ci_high"], q
    assert not _reanalysed_with(reported[0], tmp_path / "b", "{exceedance: 1.0e-7}")["reliable"]
    assert entry["worst_case_1e9_ns"] is None  # compare's column is the 1e-9 one only


def test_an_unreliable_fit_lends_no_number_to_the_table() -> None:
    from station.kinds.module.tables import worst_case_table

    def entry(reliable: bool, ci_high: float | None) -> dict:
        return {"interface": "pcie", "load": "idle", "observed_max_ns": 9000.0, "p99_999_ns": 8000.0, "run": "r",
                "samples": 10**6, "reliable": reliable, "reasons": [] if reliable else ["clustered extremes"],
                "quantile_ns": {"exceedance": 1e-9, "estimate": 12000.0, "ci_low": 11000.0, "ci_high": 15000.0},
                "deadline": {"deadline_ns": 10000.0, "source": "empirical", "p_exceed": 1e-7, "ci_low": 1e-8,
                             "ci_high": ci_high}}

    def cells(e: dict) -> list[str]:
        table = worst_case_table({"comparisons": {"worst_case": [e]}, "runs": []})
        return [c.text for c in table.rows[0]]

    assert cells(entry(True, 1e-6))[3:6] == ["12.000 [11.000, 15.000]", "reliable", "1e-07 [1e-08, 1e-06]"]
    assert cells(entry(True, None))[5] == "1e-07 [1e-08, ?]"  # a missing bound is not shown as 0
    unreliable = cells(entry(False, 1e-6))
    # the quantile came from the fit: withheld; the deadline's observed fraction stands on its own
    assert unreliable[3] == "–" and unreliable[5] == "1e-07 [1e-08, 1e-06]" and "clustered extremes" in unreliable[4]
