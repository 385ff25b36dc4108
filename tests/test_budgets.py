"""Latency budgets and the CI verdict (`budgets:`, `station check`, `station run --check`;
docs/ci.md): a twin campaign whose budgets are set against the twin's truth (its logged t_SW of
every event it made, twin-truth.parquet), never against what the station measured; the JUnit XML
read by junitparser, a parser that is not ours."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from station.config import ConfigError, parse_campaign
from station.config.budgets import parse_budget
from tests.conftest import REPO, run_station


def _us(ns: float) -> str:
    return f"{ns / 1000:.3f}us"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """The demo's twin, PCIe with inb only, 100 000 events: its percentiles' intervals (p50, p99)
    are given, its p99.999's has no upper end (one event beyond it). Measured first; then budgets
    set against the twin's log of what it made are written into the campaign file, and `station
    run --check` resumes it (budgets are not what a run measures: nothing is measured again)."""
    base = yaml.safe_load((REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text())
    base["matrix"] |= {"interfaces": ["pcie"], "variants": ["inb"], "samples": 100_000,
                       "pulses": 1000}
    work = tmp_path_factory.mktemp("budgets")
    out, config = work / "out", work / "campaign.yaml"
    config.write_text(yaml.safe_dump(base))
    res = run_station("run", str(config), "--out", str(out), timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    truth = _truth(out)
    budgets = {
        "met": f"p99 <= {_us(1.5 * np.percentile(truth, 99))}",
        "missed": f"p50 <= {_us(0.5 * np.percentile(truth, 50))}",
        # far above anything the twin made, yet undecided: one event lies beyond p99.999, so its
        # interval has no upper end (never rounded into a pass)
        "undecided": f"p99.999 <= {_us(100 * truth.max())}",
        "max met": f"max <= {_us(np.ceil(truth.max()))}",  # the measured events are the twin's
        "max missed": f"max < {_us(np.percentile(truth, 50))}",
    }
    base["budgets"] = list(budgets.values())
    config.write_text(yaml.safe_dump(base))
    res = run_station("run", str(config), "--out", str(out), "--check", timeout=400)
    return out, budgets, res


def _truth(out: Path) -> np.ndarray:
    (run,) = sorted((out / "runs").iterdir())
    return pd.read_parquet(run / "twin-truth.parquet", columns=["sw_ns"])["sw_ns"].to_numpy(float)


def test_run_check_says_each_budget_met_missed_or_undecided_against_the_truth(campaign):
    out, budgets, res = campaign
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]  # one missed: exit 1
    said = json.loads((out / "check.json").read_text())
    verdicts = {b["budget"]: b["verdict"] for b in said["budgets"]}
    assert verdicts == {budgets["met"]: "met", budgets["missed"]: "missed",
                        budgets["undecided"]: "undecided", budgets["max met"]: "met",
                        budgets["max missed"]: "missed"}
    assert said["verdict"] == "missed"
    undecided = next(b for b in said["budgets"] if b["budget"] == budgets["undecided"])
    (figure,) = undecided["figures"]
    assert figure["low"] is not None and figure["high"] is None  # no upper end: not a pass


def test_the_junit_xml_has_one_case_per_budget_with_its_status_and_figures(campaign):
    from junitparser import Failure, JUnitXml, Skipped

    out, budgets, _ = campaign
    xml = JUnitXml.fromfile(str(out / "check-junit.xml"))
    cases = {case.name: case for suite in xml for case in suite}
    assert set(cases) == set(budgets.values())
    for which, text in budgets.items():
        result = cases[text].result
        if which.endswith("met"):
            assert result == [], (which, result)
        elif which.endswith("missed"):
            (failure,) = result
            assert isinstance(failure, Failure) and failure.type == "missed"
            assert "missed" in failure.message and "µs" in failure.message
        else:
            (skipped,) = result
            assert isinstance(skipped, Skipped) and skipped.message.startswith("undecided")
            assert "[" in skipped.message and ", –]" in skipped.message  # the open interval
    assert "95 %" in cases[budgets["met"]].system_out


@pytest.mark.parametrize("which, status", [(("met", "max met"), 0), (("met", "undecided"), 3),
                                           (("undecided", "max missed"), 1)])
def test_station_check_exits_0_met_1_missed_3_undecided(campaign, which, status, tmp_path):
    out, budgets, _ = campaign
    args = [a for w in which for a in ("--budget", budgets[w])]
    res = run_station("check", str(out), *args, "--json", str(tmp_path / "c.json"))
    assert res.returncode == status, res.stdout + res.stderr
    assert [b["budget"] for b in json.loads((tmp_path / "c.json").read_text())["budgets"]] == \
        [budgets[w] for w in which]


def test_a_budget_for_runs_the_campaign_does_not_have_is_refused_where_it_stands(tmp_path):
    text = (REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text()
    text += "budgets:\n  - p99 <= 20us\n  - {budget: max <= 50us, load: seed-oi}\n"
    with pytest.raises(ConfigError) as info:
        parse_campaign(text, "c.yaml")
    line = text.splitlines().index("  - {budget: max <= 50us, load: seed-oi}") + 1
    assert f"c.yaml:{line}: budgets.1.load: 'seed-oi' is not one of this campaign's loads" in \
        str(info.value)
    with pytest.raises(ConfigError, match="a module run has no case"):
        parse_campaign(text.replace("load: seed-oi}", "case: inb}"), "c.yaml")
    bad = text.replace("seed-oi}", "seed-io}").replace("p99 <= 20us", "p99 <= 20 furlongs")
    with pytest.raises(ConfigError, match=r"budgets\.0"):
        parse_campaign(bad, "c.yaml")


def test_station_check_without_a_report_or_with_a_bad_budget_says_so(tmp_path, campaign):
    res = run_station("check", str(tmp_path), "--budget", "p99 <= 1ms")
    assert res.returncode == 2 and "no report.json" in res.stderr
    res = run_station("check", str(campaign[0]), "--budget", "p99 <= 1 parsec")
    assert res.returncode == 2 and "--budget 'p99 <= 1 parsec'" in res.stderr


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_a_garbage_budget_is_a_value_error_never_a_crash(text):
    try:
        b = parse_budget(text)
    except ValueError:
        return
    assert b.op in ("<=", "<") and b.limit > 0 and b.figure.name


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["p50", "p99", "p99.99", "p99.9999", "max", "mean", "miss(100us)",
                        "timerlat_irq_max"]),
       st.sampled_from(["<=", "<"]), st.floats(1e-3, 1e5), st.sampled_from(["", " for load=x",
                                                                          " for interface=pcie load=y"]))
def test_every_written_budget_parses_to_what_it_says(figure, op, amount, runs):
    limit = f"{amount:.6g}" if figure.startswith("miss") else f"{amount:.6g}us"
    if figure.startswith("miss") and not amount < 1:
        with pytest.raises(ValueError, match="probability"):
            parse_budget(f"{figure} {op} {limit}{runs}")
        return
    b = parse_budget(f"{figure} {op} {limit}{runs}")
    assert b.figure.name == figure and b.op == op
    assert b.limit == pytest.approx(amount if figure.startswith("miss") else amount * 1e-6, rel=1e-5)
    assert dict(b.runs) == dict(w.split("=") for w in runs.replace(" for ", "").split())


def _judged(section: str, run: dict, budget: str, report_extra: dict | None = None) -> list[tuple[str, str]]:
    """A report holding one run of a kind, judged: [(verdict, text)] of its figures."""
    from station.analysis.budgets import judge_budget

    report = {section: {"runs": [{"id": "r0", "status": "complete", "load": "none", "target": "t",
                                  "repetition": 0, **run}], **(report_extra or {})}}
    verdict = judge_budget(report, parse_budget(budget))
    return [(j.verdict, j.text) for j in verdict.judged]


def test_each_kinds_figures_come_from_its_part_of_the_report():
    """Figures with the kinds' report shapes (docs/report-schema.md): what each budget reads."""
    sliced = {"combined": {"max_ns": 250_000, "mean_ns": 20_000, "percentiles_ns": {"p99": 40_000, "p99.99": 90_000},
                           "percentile_ci95_ns": {"p99": [38_000, 45_000]},
                           "percentile_ci_withheld": "9 cycles beyond it: too few"},
              "timerlat": {"irq_max_us": 30, "thread_max_us": 55, "note": None}}
    assert _judged("cyclictest", sliced, "p99 <= 50us")[0][0] == "met"
    assert _judged("cyclictest", sliced, "p99 < 38us")[0][0] == "missed"
    assert _judged("cyclictest", sliced, "p99 <= 40us")[0][0] == "undecided"
    verdict, text = _judged("cyclictest", sliced, "p99.99 <= 1ms")[0]
    assert verdict == "undecided" and "too few" in text  # no interval: the report's reason
    # whole µs: a maximum said as 250 µs lies in [250, 251) µs
    assert _judged("cyclictest", sliced, "max <= 251us")[0][0] == "met"
    assert _judged("cyclictest", sliced, "max <= 250us")[0][0] == "undecided"
    assert _judged("cyclictest", sliced, "max < 250us")[0][0] == "missed"
    # cyclictest's own maxima, whatever the histogram's range; without them, overflows make the
    # histogram's maximum a lower bound
    threads = sliced | {"threads": [{"max_us": 240}, {"max_us": 260}]}
    assert _judged("cyclictest", threads, "max <= 255us")[0][0] == "missed"
    over = sliced | {"combined": sliced["combined"] | {"overflows": 3}}
    assert _judged("cyclictest", over, "max <= 1ms")[0][0] == "undecided"
    assert _judged("cyclictest", sliced, "timerlat_thread_max <= 50us")[0][0] == "missed"
    assert _judged("cyclictest", sliced, "timerlat_irq_max <= 50us")[0][0] == "met"
    view = {"deadline_view": [{"target": "t", "load": "none", "deadline_us": 100.0, "p_exceed": 2e-5,
                               "ci_low": 1e-5, "ci_high": 4e-5, "method": "extremal index 1.00"}]}
    assert _judged("cyclictest", sliced, "miss(100us) < 1e-4", view)[0][0] == "met"
    assert _judged("cyclictest", sliced, "miss(100us) < 1e-5", view)[0][0] == "missed"
    assert _judged("cyclictest", sliced, "miss(100us) < 3e-5", view)[0][0] == "undecided"
    assert _judged("cyclictest", sliced, "miss(50us) < 1e-4", view)[0][0] == "undecided"  # another D
    # the detector: its longest gap; none above its threshold: below the threshold
    seen = {"gaps": 3, "max_us": 81.0, "threshold_us": 20}
    assert _judged("interruptions", seen, "max <= 80us")[0][0] == "missed"
    assert _judged("interruptions", seen, "max <= 81us")[0][0] == "met"
    quiet = {"gaps": 0, "max_us": None, "threshold_us": 20}
    assert _judged("interruptions", quiet, "max <= 50us")[0][0] == "met"
    assert _judged("interruptions", quiet, "max <= 10us")[0][0] == "undecided"
    # a blind span (the detector writing) longer than the gaps seen may hide a longer one
    assert _judged("interruptions", seen | {"blind_span_max_us": 120.0}, "max <= 100us")[0][0] == "undecided"
    # its output never read: no figure, never "no gap"
    assert _judged("interruptions", {}, "max <= 1us")[0][0] == "undecided"
    # gpio: the mean's interval; a percentile has none
    delays = {"delay_us": {"mean": 6.5, "mean_ci": [6.4, 6.7], "p999": 17.3, "max": 21.9}}
    assert _judged("gpio", delays, "mean <= 7us")[0][0] == "met"
    assert _judged("gpio", delays, "mean <= 6.5us")[0][0] == "undecided"
    assert _judged("gpio", delays, "p99.9 <= 100us") == [
        ("undecided", "p99.9 = 17.300 µs: the report keeps no interval of a GPIO delay percentile")]
    assert _judged("gpio", delays, "max <= 20us")[0][0] == "missed"
    # stimuli without a response: their delays unknown, every budget undecided
    unanswered = delays | {"stimuli": 1000, "missed": 500}
    assert [v for v, _ in (_judged("gpio", unanswered, b)[0] for b in ("max <= 50us", "mean <= 7us"))] \
        == ["undecided", "undecided"]


def test_a_module_run_that_lost_records_cannot_meet_a_max_budget_and_pooled_misses_are_not_a_cells():
    run = {"interface": "pcie", "variant": "inb", "sw": {"max_ns": 9_000},
           "losses": {"sw_lost": 2, "sw_dropped_by_target": 0}}
    assert _judged_module(run, "max <= 1ms")[0][0] == "undecided"
    assert _judged_module(run, "max <= 5us")[0][0] == "missed"
    case = {"comparisons": {"worst_case": [{"interface": "pcie", "load": "none", "deadline": {
        "deadline_ns": 100_000, "p_exceed": 1e-7, "ci_low": 1e-8, "ci_high": 5e-7}}]}}
    assert _judged_module(run | {"losses": {}}, "miss(100us) < 1e-6", case)[0][0] == "met"
    verdict, text = _judged_module(run, "miss(100us) < 1e-6 for variant=inb", case)[0]
    assert verdict == "undecided" and "pools" in text


def _judged_module(run: dict, budget: str, extra: dict | None = None) -> list[tuple[str, str]]:
    from station.analysis.budgets import judge_budget

    report = {"runs": [{"id": "r0", "status": "complete", "load": "none", "target": None, **run}],
              **(extra or {})}
    return [(j.verdict, j.text) for j in judge_budget(report, parse_budget(budget)).judged]


def test_a_figure_that_is_not_a_number_leaves_a_budget_undecided():
    from station.analysis.budgets import Estimate, judge_estimate

    b = parse_budget("max <= 1ms")
    assert judge_estimate(b, Estimate("x", float("nan"), observed=True)).verdict == "undecided"
    assert judge_estimate(b, Estimate("x", 1e-5, float("nan"), float("inf"))).verdict == "undecided"
    assert judge_estimate(parse_budget("miss(1ms) < 1e-6"),
                          Estimate("x", 1e-7, float("nan"), 5e-7)).verdict == "met"


def test_the_junit_xml_stays_well_formed_whatever_the_text():
    import xml.dom.minidom

    from station.analysis.budgets import check
    from station.report.junit import junit_xml

    result = check({"runs": [{"id": "r\x1b0", "status": "complete", "load": "a\x00b",
                              "sw": {"max_ns": 5.0}}]},
                   [parse_budget("max <= 1ms for load=a\x1bb"), parse_budget("max <= 1ms")], "c\x07")
    xml.dom.minidom.parseString(junit_xml(result))


def test_planned_runs_the_report_lacks_leave_their_budgets_undecided():
    from station.analysis.budgets import check

    report = {"runs": [{"id": "pcie-inb-none-r0", "status": "complete", "interface": "pcie",
                        "variant": "inb", "load": "none", "sw": {"max_ns": 5_000}}]}
    planned = [{"id": "pcie-inb-none-r0", "target": None, "load": "none", "interface": "pcie", "variant": "inb"},
               {"id": "lpt-inb-none-r0", "target": None, "load": "none", "interface": "lpt", "variant": "inb"}]
    result = check(report, [parse_budget("max <= 1ms"), parse_budget("max <= 1ms for interface=pcie")], "c",
                   planned)
    assert [v.verdict for v in result.verdicts] == ["undecided", "met"] and result.exit_status == 3
    assert "never measured" in result.verdicts[0].message


def test_a_run_that_did_not_complete_or_no_run_at_all_leaves_a_budget_undecided():
    from station.analysis.budgets import judge_budget

    report = {"runs": [{"id": "a", "status": "complete", "interface": "lpt", "load": "x",
                        "sw": {"max_ns": 5_000}},
                       {"id": "b", "status": "failed", "interface": "lpt", "load": "x", "sw": None}]}
    v = judge_budget(report, parse_budget("max <= 1ms"))
    assert v.verdict == "undecided" and [j.verdict for j in v.judged] == ["undecided", "met"]
    assert judge_budget(report, parse_budget("max <= 1ms for interface=pcie")).verdict == "undecided"
    assert judge_budget(report, parse_budget("max <= 1us for interface=lpt")).verdict == "missed"
