"""The interruption detector's part of the report page: its summary table (the answer), then each
run under its own heading: its conclusion, its spoilers, its gap tables and histograms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.report.export import interruptions_rows
from station.report.figures import RenderedFigure
from station.report.interruptions_figures import build_interruptions_figures, run_figures
from station.report.interruptions_tables import RunSection, interruptions_tables
from station.report.page import Block, Callout, Figures, KindPage, Section, Subsection, Verdict

SPOILERS_TITLE = "Spoilers: the measured CPU's settings may disturb the measurement"


def _run(run: RunSection, figures: Sequence[RenderedFigure]) -> Subsection:
    blocks: list[Block] = []
    if run.conclusion:
        blocks.append(Verdict(run.conclusion, "Conclusion"))
    if run.problem:
        blocks.append(Verdict(run.problem, problem=True))
    if run.spoilers:
        blocks.append(Callout(SPOILERS_TITLE, run.spoilers, "spoilers"))
    blocks += [t for t in (run.groups, run.families, run.comparison) if t]
    mine = run_figures(figures, run.anchor)
    if mine:
        blocks.append(Figures(mine))
    return Subsection(run.anchor, run.heading, blocks, "irq-run")


def interruptions_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    it = interruptions_tables(report)
    if not it:
        return []
    return [
        Section("interruptions", "Interruptions", [it.summary], "summary", "Interruptions",
                "The interruption detector's numbers are in µs, ms and s as its columns say; "
                "interruptions.csv holds its gap groups."),
        Section("interruption-runs", "Interruptions, per run", [_run(run, figures) for run in it.runs],
                nav="Interruptions per run"),
    ]


PAGE = KindPage(interruptions_sections, build_interruptions_figures, (("interruptions.csv", interruptions_rows),))
