"""The cyclictest kind's comparison tables (seed 004's maximum-latency table across campaigns, the
tests of difference) and compare-cyclictest.csv's rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.common.formatting import (
    MISSING,
    count_text,
    plain_us,
)
from station.compare.tables import numeric as _n
from station.kinds.cyclictest.tables import target_badges
from station.report.tables import Cell, Table


def cyclictest_table(result: Mapping[str, Any]) -> Table | None:
    """Seed 004's maximum-latency table across campaigns: a row per load, a column per campaign
    (× target); whole µs as cyclictest reports them."""
    ct = result.get("cyclictest")
    if not ct:
        return None
    footnotes: list[str] = []
    rows = []
    for case, values, problems in zip(ct["cases"], ct["max_latency_us"], ct["problems"],
                                      strict=True):
        row = [Cell(case)]
        for column, value, problem in zip(ct["columns"], values, problems, strict=True):
            mark = ""
            if problem:
                footnotes.append(f"[{len(footnotes) + 1}] {column['label']} · {case}: {problem}")
                mark = f"[{len(footnotes)}]"
            row.append(_n(plain_us(value), mark=mark, flags=("problem",) if problem else (),
                          title=problem))
        rows.append(row)
    headers = ["Load", *(c["label"] for c in ct["columns"])]
    kernels = [f"{c['label']}: {c.get('kernel_release') or 'kernel unknown'}"
               + "".join(f" [{text}]" for _, text in target_badges(c)) for c in ct["columns"]]
    notes = ["Largest latency cyclictest measured in each load × campaign over every thread of "
             f"its complete runs (µs). {MISSING}: no complete run measured that "
             "cell.", "Columns: " + "; ".join(kernels),
             *footnotes]
    return Table("compare-cyclictest-max", "cyclictest: maximum latency (µs), loads × campaigns",
                 headers, rows,
                 notes, row_headers=True)


def cyclictest_tests_table(result: Mapping[str, Any]) -> Table | None:
    """Whether each column's latencies differ from its baseline's, per load (whole distributions,
    not maxima), with the caveat that a maximum is one draw."""
    ct = result.get("cyclictest") or {}
    tests = ct.get("tests") or []
    if not tests:
        return None
    rows = []
    for t in tests:
        if t.get("p_holm") is None:
            verdict = Cell(f"not tested: {t.get('runs_baseline', '?')} vs {t.get('runs', '?')} "
                           "runs, run-to-run variation not estimated", wrap=True)
        else:
            p = f"= {t['p_holm']:.2g}" if t["p_holm"] > 0 else "< 1e-300"
            verdict = Cell(f"{'yes' if t['significant'] else 'no'} (p {p}, {t['runs_baseline']} vs "
                           f"{t['runs']} runs, median {t['run_median_diff_us']:+.2f} µs, P(>) = "
                           f"{t['prob_greater']:.3f})",
                           flags=("over-deadline",) if t["significant"] else ())
        rows.append([Cell(t["case"]), Cell(t["column"]), Cell(t["baseline"]),
                     _n(count_text(t["count"])), _n(count_text(t["baseline_count"])), verdict])
    return Table("compare-cyclictest-tests",
                 "cyclictest: differs from baseline (whole distributions)",
                 ["Load", "Column", "Baseline", "Samples", "Baseline samples",
                  "Differs from baseline"], rows,
                 [ct.get("note") or "",
                  "P(>): probability that a sample of the column exceeds one of the "
                  "baseline (events pooled: a description, not the verdict)."])


def cyclictest_rows(result: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """compare-cyclictest.csv: the maximum-latency table as it is shown (load, then a column
    each)."""
    ct = result.get("cyclictest") or {}
    header = ["load", *(c["label"] for c in ct.get("columns") or [])]
    rows = [dict(zip(header, [case, *values], strict=True))
            for case, values in zip(ct.get("cases") or [], ct.get("max_latency_us") or [],
                                    strict=True)]
    return header, rows
