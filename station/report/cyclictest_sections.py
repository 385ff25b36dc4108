"""cyclictest's part of the report page: its maximum-latency table (the answer), then its latency
plots and the per-thread tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.report.cyclictest_figures import KIND, MAXIMA_KIND, build_cyclictest_figures
from station.report.cyclictest_tables import cyclictest_tables
from station.report.export import cyclictest_rows
from station.report.figures import RenderedFigure
from station.report.page import Block, Figures, KindPage, Section


def cyclictest_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    ct = cyclictest_tables(report)
    if not ct:
        return []
    plots = [f for f in figures if f.kind == KIND]
    answer: list[Block] = [t for t in (ct.max_latency, ct.deadline, ct.targets) if t]
    # the maxima figure is shown under the findings; a report whose findings were left out keeps it here
    maxima = [f for f in figures if f.kind == MAXIMA_KIND]
    if maxima:
        answer.append(Figures(maxima))
    sections = [Section("max-latency", "cyclictest: maximum latency", answer, "summary", "Maximum latency",
                        "cyclictest's own numbers are whole µs as it reports them; cyclictest.csv holds them.")]
    if plots:
        sections.append(Section("latency-plots", "Latency plots", [Figures(plots)], nav="Latency plots"))
    if ct.threads:
        sections.append(Section("threads", "cyclictest runs, per thread", [*ct.threads], nav="Threads"))
    return sections


PAGE = KindPage(cyclictest_sections, build_cyclictest_figures, (("cyclictest.csv", cyclictest_rows),))
