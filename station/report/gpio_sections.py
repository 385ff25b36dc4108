"""The GPIO response's part of the report page: its findings (one sentence each) and tables, then
its plots. Both are its answer (band summary): a gpio campaign opens with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.report.export import gpio_rows
from station.report.figures import RenderedFigure
from station.report.gpio_figures import KIND, build_gpio_figures
from station.report.gpio_tables import gpio_tables
from station.report.page import Block, Figures, KindPage, Section, Sentence, Sentences


def gpio_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    gt = gpio_tables(report)
    if not gt:
        return []
    blocks: list[Block] = [Sentences([Sentence(f.text, f.kind) for f in gt.findings])] if gt.findings else []
    blocks += [t for t in (gt.runs, gt.outliers, gt.comparisons) if t]
    sections = [Section("gpio", "GPIO response", blocks, "summary", "GPIO response",
                        "GPIO response delays are in µs as their columns say; gpio.csv holds one row per run.")]
    plots = [f for f in figures if f.kind == KIND]
    if plots:
        sections.append(Section("gpio-plots", "GPIO response plots", [Figures(plots)], "summary", "GPIO plots"))
    return sections


PAGE = KindPage(gpio_sections, build_gpio_figures, (("gpio.csv", gpio_rows),))
