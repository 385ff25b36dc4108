"""The module kind's comparison tables (a table per interface × variant × load: a row per campaign
and source) and compare.csv's rows (raw ns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.common.formatting import (
    MISSING,
    WEAK_PERCENTILE_NOTE,
    count_text,
    interface_label,
    us,
    us_interval,
)
from station.compare.tables import interval_text
from station.compare.tables import numeric as _n
from station.report.tables import Cell, Table

SOURCE_LABEL = {"sw": "t_SW", "hw": "t_HW (scope)"}
#: Columns of compare.csv: one row per campaign × interface × variant × load × source.
COMPARE_CSV_COLUMNS = ["campaign", "interface", "variant", "load", "source", "count", "min_ns",
                       "mean_ns",
                       "mean_ci95_lo_ns", "mean_ci95_hi_ns", "std_ns", "p99_99_ns",
                       "p99_99_ci95_lo_ns",
                       "p99_99_ci95_hi_ns", "max_ns", "t_rw_ns", "worst_case_1e9_ns", "p_holm",
                       "significant"]



def _test_for(module: Mapping[str, Any], row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((t for t in module.get("tests") or [] if t["campaign"] == row["campaign"]
                 and all(t[k] == row[k] for k in ("source", "interface", "variant", "load"))), None)


def module_tables(result: Mapping[str, Any]) -> list[Table]:
    """One table per interface × variant × load (a figure's worth): a row per campaign and
    source."""
    module = result.get("module")
    if not module:
        return []
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in module["rows"]:
        groups.setdefault((row["interface"], row["variant"], row["load"]), []).append(row)
    labels = [c["label"] for c in result["campaigns"]]
    # t_rw (inb − no-inb) and the worst case (t_SW of both variants pooled: taken before the inb
    # check) belong to an interface and load, not to a variant: one table shows them
    home = {}
    for interface, variant, load in groups:
        home.setdefault((interface, load), variant)
    tables = []
    for (interface, variant, load), rows in groups.items():
        shown_here = home[(interface, load)] == variant
        body = []
        for r in sorted(rows, key=lambda r: (list(SOURCE_LABEL).index(r["source"]),
                                             labels.index(r["campaign"]))):
            test = _test_for(module, r)
            if test is None:
                verdict = Cell("baseline" if r["campaign"] == module["baseline"] else MISSING)
            elif test.get("p_holm") is None:
                verdict = Cell(f"not tested: {test.get('runs_baseline', '?')} vs "
                               f"{test.get('runs', '?')} runs, run-to-run variation not "
                               "estimated", wrap=True)
            else:
                # below double range
                p = f"= {test['p_holm']:.2g}" if test["p_holm"] > 0 else "< 1e-300"
                verdict = Cell(f"{'yes' if test['significant'] else 'no'} (p {p}, "
                               f"{test['runs_baseline']} vs {test['runs']} runs, median "
                               f"{test['run_median_diff_ns'] / 1e3:+.3f} µs)",
                               flags=("over-deadline",) if test["significant"] else ())
            body.append([
                Cell(r["campaign"]), Cell(SOURCE_LABEL.get(r["source"], r["source"])),
                _n(count_text(r["count"])),
                _n(us(r["min_ns"])), _n(us(r["mean_ns"])), _n(us_interval(r["mean_ci95_ns"])),
                _n(us(r["std_ns"])),
                _n(us(r["p99_99_ns"]), weak=not r["p99_99_reliable"]),
                _n(interval_text(r["p99_99_ci95_ns"])),
                _n(us(r["max_ns"])),
                *([_n(us(r["t_rw_ns"])), _n(us(r["worst_case_1e9_ns"]))] if shown_here else
                  [Cell(f"in the {home[(interface, load)]} table", wrap=True)] * 2),
                verdict,
            ])
        # the method once, under the first table; the others point to it
        notes = ["Intervals at 95 %: the mean's from Student's t, p99.99's from order statistics "
                 f"(distribution-free). Differs: {module['test']['name']}; "
                 f"{module['test']['correction']} ({module['test']['count']} tests), α = "
                 f"{module['test']['alpha']}; p is Holm-adjusted, the median difference is of the "
                 f"runs' medians' means. {module['test']['note']} t_rw and the worst case (once in "
                 f"1e9 events) come from each campaign's report.json ({MISSING} where it has "
                 "none); both are per interface and load (t_rw: inb − no-inb; the worst case: "
                 "t_SW of both variants pooled, as it is taken before the inb check), so one "
                 "variant's table gives them."] if not tables else [
                 "Intervals, test and sources as under the first table."]
        if any(not r["p99_99_reliable"] for r in rows):
            notes.append(WEAK_PERCENTILE_NOTE)
        tables.append(Table(
            f"compare-{interface}-{variant}-{load}",
            f"{interface_label(interface)}, {variant}, load {load} (µs)",
            ["Campaign", "Source", "Samples", "Min", "Mean", "Mean 95 % CI", "Std", "p99.99",
             "p99.99 95 % CI",
             "Max", "t_rw", "Worst case 1e-9", "Differs from baseline"],
            body, notes))
    return tables


def compare_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """compare.csv's rows (COMPARE_CSV_COLUMNS)."""
    module = result.get("module") or {}
    out = []
    for r in module.get("rows") or []:
        test = _test_for(module, r) or {}
        mean_ci, p_ci = r["mean_ci95_ns"] or [None, None], r["p99_99_ci95_ns"] or [None, None]
        out.append({**{k: r.get(k) for k in COMPARE_CSV_COLUMNS if k in r},
                    "mean_ci95_lo_ns": mean_ci[0], "mean_ci95_hi_ns": mean_ci[1],
                    "p99_99_ci95_lo_ns": p_ci[0], "p99_99_ci95_hi_ns": p_ci[1],
                    "p_holm": test.get("p_holm"), "significant": test.get("significant")})
    return out
