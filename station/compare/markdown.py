"""compare.md: the comparison's tables and figure links, as report.md renders a report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.compare.part import ComparePart
from station.compare.tables import all_compare_tables
from station.report.figures import RenderedFigure
from station.report.markdown import _escape, _figure_list, render_table


def render_compare_markdown(result: Mapping[str, Any], figures: Sequence[RenderedFigure],
                            parts: Sequence[ComparePart], figure_dir: str = "figures") -> str:
    labels = [c["label"] for c in result.get("campaigns") or []]
    out = ["# IRQ latency comparison: " + " vs ".join(_escape(label) for label in labels), ""]
    if result.get("notes"):
        out += ["> **Warnings**", ">", *(f"> - {_escape(str(n))}" for n in result["notes"]), ""]
    for table in all_compare_tables(result, parts):
        out += [render_table(table, 2), ""]
    if figures:
        out += ["## Tails across campaigns", "", *_figure_list(figures, figure_dir)]
    return "\n".join(out).rstrip() + "\n"
