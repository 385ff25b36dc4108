"""cyclictest's part of the report page: its maximum-latency table (the answer), then its latency
plots and the per-thread tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.common.formatting import percentile_keys
from station.kinds.cyclictest.figures import KIND, MAXIMA_KIND, build_cyclictest_figures
from station.kinds.cyclictest.tables import cyclictest_tables
from station.report.export import STATS_COLUMNS, percentile_columns, to_jsonable
from station.report.figures import RenderedFigure
from station.report.page import Block, Figures, KindPage, Section


def cyclictest_sections(report: Mapping[str, Any],
                        figures: Sequence[RenderedFigure]) -> list[Section]:
    ct = cyclictest_tables(report)
    if not ct:
        return []
    plots = [f for f in figures if f.kind == KIND]
    answer: list[Block] = [t for t in (ct.max_latency, ct.timerlat, ct.deadline, ct.targets) if t]
    # the maxima figure is shown under the findings; a report whose findings were left out keeps it
    # here
    maxima = [f for f in figures if f.kind == MAXIMA_KIND]
    if maxima:
        answer.append(Figures(maxima))
    sections = [Section("max-latency", "cyclictest: maximum latency", answer, "summary",
                        "Maximum latency",
                        "cyclictest's own numbers are whole µs as it reports them; cyclictest.csv "
                        "holds them.")]
    if plots:
        sections.append(Section("latency-plots", "Latency plots", [Figures(plots)],
                                nav="Latency plots"))
    if ct.threads:
        sections.append(Section("threads", "cyclictest runs, per thread", [*ct.threads],
                                nav="Threads"))
    return sections


#: Leading columns of cyclictest.csv: cyclictest's own per-thread summary (whole µs, as it
#: reports them), then the histogram statistics in ns like stats.csv.
CYCLICTEST_CSV_COLUMNS = ["run_id", "target", "load", "repetition", "status", "thread", "cpu",
                          "cycles", "min_us", "avg_us", "max_us", "overflows",
                          "count", "min_ns", "mean_ns", "std_ns", "max_ns"]


def cyclictest_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per cyclictest run per thread, then its pooled "all" row."""
    runs = (report.get("cyclictest") or {}).get("runs") or []
    pkeys = percentile_keys([t.get("stats") for r in runs for t in r.get("threads") or []]
                            + [r.get("combined") for r in runs])
    header = [*CYCLICTEST_CSV_COLUMNS, *(f"{k}_ns" for k in pkeys), "unreliable_percentiles",
              "beyond_range_percentiles"]
    rows = []
    for r in runs:
        run = {"run_id": r.get("id"), "target": r.get("target"), "load": r.get("load"),
               "repetition": r.get("repetition"), "status": r.get("status")}
        entries = [({"thread": t.get("thread"), "cpu": t.get("cpu"), "cycles": t.get("cycles"),
                     "min_us": t.get("min_us"), "avg_us": t.get("avg_us"),
                     "max_us": t.get("max_us"), "overflows": t.get("overflows")},
                    t.get("stats") or {}) for t in r.get("threads") or []]
        if r.get("combined"):
            entries.append(({"thread": "all", "overflows": r["combined"].get("overflows")},
                            r["combined"]))
        for own, stats in entries:
            row = {**run, **own, **{k: stats.get(k) for k in STATS_COLUMNS},
                   **percentile_columns(stats, pkeys)}
            rows.append({k: to_jsonable(row.get(k)) for k in header})
    return header, rows


#: Columns of timerlat.csv: one row per companion timerlat run per CPU, rtla's own figures (µs).
TIMERLAT_CSV_COLUMNS = ["run_id", "target", "load", "repetition", "status", "cpu", "irq_count",
                        "irq_over",
                        "irq_min_us", "irq_avg_us", "irq_max_us", "thread_count", "thread_over",
                        "thread_min_us",
                        "thread_avg_us", "thread_max_us", "note"]


def timerlat_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]] | None:
    """One row per CPU of each run's timerlat companion (a run where it did not run: one row, its
    note); None for a campaign without the companion."""
    if not (report.get("cyclictest") or {}).get("timerlat_table"):
        return None
    rows = []
    for r in (report.get("cyclictest") or {}).get("runs") or []:
        tl = r.get("timerlat")
        if tl is None:
            continue
        run = {"run_id": r.get("id"), "target": r.get("target"), "load": r.get("load"),
               "repetition": r.get("repetition"), "status": r.get("status"), "note": tl.get("note")}
        for c in tl.get("cpus") or [{}]:
            row = dict(run, cpu=c.get("cpu"))
            for kind in ("irq", "thread"):
                figures = c.get(kind) or {}
                row |= {f"{kind}_count": figures.get("count"), f"{kind}_over": figures.get("over"),
                        **{f"{kind}_{k}_us": figures.get(k) for k in ("min", "avg", "max")}}
            rows.append({k: to_jsonable(row.get(k)) for k in TIMERLAT_CSV_COLUMNS})
    return list(TIMERLAT_CSV_COLUMNS), rows


PAGE = KindPage(cyclictest_sections, build_cyclictest_figures,
                (("cyclictest.csv", cyclictest_rows), ("timerlat.csv", timerlat_rows)))
