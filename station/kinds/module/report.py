"""The module runs' part of the report page: the comparisons across interfaces, the runs' tables,
and their figures grouped by what they show (the page's Figures section)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.common.formatting import percentile_is_reliable, percentile_keys
from station.kinds.module.figures import build_figures
from station.kinds.module.tables import all_tables
from station.report.export import to_jsonable
from station.report.figures import RenderedFigure
from station.report.page import Block, Figures, KindPage, Section

#: figure kind (report/figures.py) → its group's heading, in page order
FIGURE_GROUPS = {
    "overview": "Software latency by interface",
    "tail": "Tails: exceedance probability",
    "scope": "Oscilloscope: inb vs no-inb (t_rw)",
    "time": "Latency over time: phases and drift",
    "run": "Per run: software vs oscilloscope",
    "stages": "Traced runs: where t_SW went",
}
COMPARISONS = ("worst_case", "t_rw", "cross_interface_outliers")
RUNS = ("runs", "capture", "scope_measurement", "pairing", "stats")
DECOMPOSITION = ("decomposition", "decomposition_overhead", "decomposition_largest",
                 "decomposition_credited")


def module_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    tables = all_tables(report)
    sections: list[Section] = []
    compared: list[Block] = [tables[k] for k in COMPARISONS if k in tables]
    if compared:
        sections.append(Section("comparisons", "Comparisons", compared, nav="Comparisons"))
    runs: list[Block] = [tables[k] for k in RUNS if k in tables]
    if runs:
        sections.append(Section("runs", "Runs", runs, nav="Runs"))
    traced: list[Block] = [tables[k] for k in DECOMPOSITION if k in tables]
    if traced:
        sections.append(Section("decomposition", "Where t_SW went (traced runs)", traced,
                                nav="Stages"))
    groups: list[Block] = [Figures(members, heading, f"figures-{kind}")
                           for kind, heading in FIGURE_GROUPS.items()
                           if (members := [f for f in figures if f.kind == kind])]
    if groups:
        sections.append(Section("figures", "Figures", groups, "figures", "Figures"))
    return sections


#: Leading columns of stats.csv; percentile columns (p50_ns …) and
#: ``unreliable_percentiles`` follow. Documented in docs/report-schema.md.
CSV_RUN_COLUMNS = ["run_id", "interface", "variant", "load", "repetition", "status", "source",
                   "count", "min_ns", "mean_ns", "std_ns", "max_ns"]


def stats_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per run per source (sw, hw) that has statistics."""
    runs = report.get("runs") or []
    pkeys = percentile_keys(r.get(src) for r in runs for src in ("sw", "hw"))
    header = [*CSV_RUN_COLUMNS, *(f"{k}_ns" for k in pkeys), "unreliable_percentiles"]
    rows = []
    for r in runs:
        for source in ("sw", "hw"):
            stats = r.get(source)
            if not stats:
                continue
            percentiles = stats.get("percentiles_ns") or {}
            row: dict[str, Any] = {
                "run_id": r.get("id"), "interface": r.get("interface"),
                "variant": r.get("variant"), "load": r.get("load"),
                "repetition": r.get("repetition"), "status": r.get("status"), "source": source,
                "count": stats.get("count"), "min_ns": stats.get("min_ns"),
                "mean_ns": stats.get("mean_ns"), "std_ns": stats.get("std_ns"),
                "max_ns": stats.get("max_ns"),
            }
            for k in pkeys:
                row[f"{k}_ns"] = percentiles.get(k)
            row["unreliable_percentiles"] = ";".join(
                k for k in pkeys
                if k in percentiles and not percentile_is_reliable(k, stats.get("count")))
            rows.append({k: to_jsonable(v) for k, v in row.items()})
    return header, rows


PAGE = KindPage(module_sections, build_figures, (("stats.csv", stats_rows),))
