"""The module runs' part of the report page: the comparisons across interfaces, the runs' tables,
and their figures grouped by what they show (the page's Figures section)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.report.export import stats_rows
from station.report.figures import RenderedFigure, build_figures
from station.report.page import Block, Figures, KindPage, Section
from station.report.tables import all_tables

#: figure kind (report/figures.py) → its group's heading, in page order
FIGURE_GROUPS = {
    "overview": "Software latency by interface",
    "tail": "Tails: exceedance probability",
    "scope": "Oscilloscope: inb vs no-inb (t_rw)",
    "run": "Per run: software vs oscilloscope",
}
COMPARISONS = ("worst_case", "t_rw", "cross_interface_outliers")
RUNS = ("runs", "capture", "scope_measurement", "pairing", "stats")


def module_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    tables = all_tables(report)
    sections: list[Section] = []
    compared: list[Block] = [tables[k] for k in COMPARISONS if k in tables]
    if compared:
        sections.append(Section("comparisons", "Comparisons", compared, nav="Comparisons"))
    runs: list[Block] = [tables[k] for k in RUNS if k in tables]
    if runs:
        sections.append(Section("runs", "Runs", runs, nav="Runs"))
    groups: list[Block] = [Figures(members, heading, f"figures-{kind}")
                           for kind, heading in FIGURE_GROUPS.items()
                           if (members := [f for f in figures if f.kind == kind])]
    if groups:
        sections.append(Section("figures", "Figures", groups, "figures", "Figures"))
    return sections


PAGE = KindPage(module_sections, build_figures, (("stats.csv", stats_rows),))
