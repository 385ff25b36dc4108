"""The comparison's tables (`station compare`) as display-ready text, shared by compare_html.py
and compare_markdown.py; and its CSV rows (raw ns / µs, like the report's CSVs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.formatting import (
    MISSING,
    WEAK_PERCENTILE_NOTE,
    count_text,
    interface_label,
    is_number,
    plain_us,
    us,
    us_interval,
)
from station.kinds.cyclictest.tables import target_badges
from station.report.tables import Cell, Table

SOURCE_LABEL = {"sw": "t_SW", "hw": "t_HW (scope)"}
#: Columns of compare.csv: one row per campaign × interface × variant × load × source.
COMPARE_CSV_COLUMNS = ["campaign", "interface", "variant", "load", "source", "count", "min_ns", "mean_ns",
                       "mean_ci95_lo_ns", "mean_ci95_hi_ns", "std_ns", "p99_99_ns", "p99_99_ci95_lo_ns",
                       "p99_99_ci95_hi_ns", "max_ns", "t_rw_ns", "worst_case_1e9_ns", "p_holm", "significant"]


def _n(text: str, **kw: Any) -> Cell:
    return Cell(text, numeric=True, **kw)


def _interval(ci: Any) -> str:
    """'lo – hi' µs, an unbounded end shown as such (the sample is too small to bound it)."""
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return MISSING
    lo = us(ci[0]) if is_number(ci[0]) else "−∞"
    hi = us(ci[1]) if is_number(ci[1]) else "> max"
    return f"{lo} – {hi}"


def _test_for(module: Mapping[str, Any], row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((t for t in module.get("tests") or [] if t["campaign"] == row["campaign"]
                 and all(t[k] == row[k] for k in ("source", "interface", "variant", "load"))), None)


def module_tables(result: Mapping[str, Any]) -> list[Table]:
    """One table per interface × variant × load (a figure's worth): a row per campaign and source."""
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
        for r in sorted(rows, key=lambda r: (list(SOURCE_LABEL).index(r["source"]), labels.index(r["campaign"]))):
            test = _test_for(module, r)
            if test is None:
                verdict = Cell("baseline" if r["campaign"] == module["baseline"] else MISSING)
            else:
                p = f"= {test['p_holm']:.2g}" if test["p_holm"] > 0 else "< 1e-300"  # below double range
                verdict = Cell(f"{'yes' if test['significant'] else 'no'} (p {p}, "
                               f"P(>) = {test['prob_greater']:.3f})",
                               flags=("over-deadline",) if test["significant"] else ())
            body.append([
                Cell(r["campaign"]), Cell(SOURCE_LABEL.get(r["source"], r["source"])), _n(count_text(r["count"])),
                _n(us(r["min_ns"])), _n(us(r["mean_ns"])), _n(us_interval(r["mean_ci95_ns"])), _n(us(r["std_ns"])),
                _n(us(r["p99_99_ns"]), weak=not r["p99_99_reliable"]), _n(_interval(r["p99_99_ci95_ns"])),
                _n(us(r["max_ns"])),
                *([_n(us(r["t_rw_ns"])), _n(us(r["worst_case_1e9_ns"]))] if shown_here else
                  [Cell(f"in the {home[(interface, load)]} table", wrap=True)] * 2),
                verdict,
            ])
        # the method once, under the first table; the others point to it
        notes = [f"Intervals at 95 %: the mean's from Student's t, p99.99's from order statistics "
                 f"(distribution-free). Differs: {module['test']['name']}; {module['test']['correction']} "
                 f"({module['test']['count']} tests), α = {module['test']['alpha']}; p is Holm-adjusted. "
                 f"P(>): probability that a sample of the campaign exceeds one of the baseline. "
                 f"{module['test']['note']} t_rw and the worst case (once in 1e9 events) come from each "
                 f"campaign's report.json ({MISSING} where it has none); both are per interface and load "
                 "(t_rw: inb − no-inb; the worst case: t_SW of both variants pooled, as it is taken before "
                 "the inb check), so one variant's table gives them."] if not tables else [
                 "Intervals, test and sources as under the first table."]
        if any(not r["p99_99_reliable"] for r in rows):
            notes.append(WEAK_PERCENTILE_NOTE)
        tables.append(Table(
            f"compare-{interface}-{variant}-{load}",
            f"{interface_label(interface)}, {variant}, load {load} (µs)",
            ["Campaign", "Source", "Samples", "Min", "Mean", "Mean 95 % CI", "Std", "p99.99", "p99.99 95 % CI",
             "Max", "t_rw", "Worst case 1e-9", "Differs from baseline"],
            body, notes))
    return tables


def cyclictest_table(result: Mapping[str, Any]) -> Table | None:
    """Seed 004's maximum-latency table across campaigns: a row per load, a column per campaign
    (× target); whole µs as cyclictest reports them."""
    ct = result.get("cyclictest")
    if not ct:
        return None
    footnotes: list[str] = []
    rows = []
    for case, values, problems in zip(ct["cases"], ct["max_latency_us"], ct["problems"], strict=True):
        row = [Cell(case)]
        for column, value, problem in zip(ct["columns"], values, problems, strict=True):
            mark = ""
            if problem:
                footnotes.append(f"[{len(footnotes) + 1}] {column['label']} · {case}: {problem}")
                mark = f"[{len(footnotes)}]"
            row.append(_n(plain_us(value), mark=mark, flags=("problem",) if problem else (), title=problem))
        rows.append(row)
    headers = ["Load", *(c["label"] for c in ct["columns"])]
    kernels = [f"{c['label']}: {c.get('kernel_release') or 'kernel unknown'}"
               + "".join(f" [{text}]" for _, text in target_badges(c)) for c in ct["columns"]]
    notes = ["Largest latency cyclictest measured in each load × campaign over every thread of its complete "
             f"runs (µs). {MISSING}: no complete run measured that cell.", "Columns: " + "; ".join(kernels),
             *footnotes]
    return Table("compare-cyclictest-max", "cyclictest: maximum latency (µs), loads × campaigns", headers, rows,
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
        p = f"= {t['p_holm']:.2g}" if t["p_holm"] > 0 else "< 1e-300"
        rows.append([Cell(t["case"]), Cell(t["column"]), Cell(t["baseline"]),
                     _n(count_text(t["count"])), _n(count_text(t["baseline_count"])),
                     Cell(f"{'yes' if t['significant'] else 'no'} (p {p}, P(>) = {t['prob_greater']:.3f})",
                          flags=("over-deadline",) if t["significant"] else ())])
    return Table("compare-cyclictest-tests", "cyclictest: differs from baseline (whole distributions)",
                 ["Load", "Column", "Baseline", "Samples", "Baseline samples", "Differs from baseline"], rows,
                 [ct.get("note") or "", "P(>): probability that a sample of the column exceeds one of the baseline."])


def campaigns_table(result: Mapping[str, Any]) -> Table:
    rows = [[Cell(c["label"]), Cell(c.get("dir") or MISSING), Cell(str(c.get("description") or MISSING), wrap=True),
             _n(str(c.get("runs", MISSING))), Cell(str(c.get("station_version") or MISSING))]
            for c in result["campaigns"]]
    return Table("compare-campaigns", "Campaigns (the first is the baseline)",
                 ["Campaign", "Directory", "Description", "Runs", "Station"], rows)


def all_compare_tables(result: Mapping[str, Any]) -> list[Table]:
    ct, tests = cyclictest_table(result), cyclictest_tests_table(result)
    return [campaigns_table(result), *([ct] if ct else []), *([tests] if tests else []), *module_tables(result)]


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


def cyclictest_rows(result: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """compare-cyclictest.csv: the maximum-latency table as it is shown (load, then a column each)."""
    ct = result.get("cyclictest") or {}
    header = ["load", *(c["label"] for c in ct.get("columns") or [])]
    rows = [dict(zip(header, [case, *values], strict=True))
            for case, values in zip(ct.get("cases") or [], ct.get("max_latency_us") or [], strict=True)]
    return header, rows
