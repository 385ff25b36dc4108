"""The report page as kind-neutral sections: what html.py and markdown.py both render.

A run kind's report part is a function ``(report, figures) -> list[Section]``: it turns its part
of the report dict into sections made of a few block types. ``page_sections`` orders every part's
sections by their band, one rule for every kind, so neither renderer names a kind: a new kind
brings a part and no renderer change.

The page around the sections is generic and stays with the renderers: the header's facts, the
findings (report["findings"], with the figures that answer the question) and the Target appendix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from station.report.figures import RenderedFigure
from station.report.tables import Table, findings, glance_figures

#: Where a section sits on the page. summary: the part's answer, above the warnings when the part
#: leads the page; detail: what backs it, below the warnings; figures: the shared figure section
#: after every part's summary and detail, before the Target appendix.
Band = Literal["summary", "detail", "figures"]


@dataclass(frozen=True)
class Figures:
    """Figures side by side, under a heading of their own when they are one group of several."""

    figures: list[RenderedFigure]
    heading: str | None = None
    id: str | None = None  # the heading's anchor


@dataclass(frozen=True)
class Sentence:
    text: str
    kind: str = ""  # the CSS class finding-<kind>: what the sentence is about


@dataclass(frozen=True)
class Sentences:
    """A short list of sentences, the answer first: a kind's own findings."""

    items: list[Sentence]


@dataclass(frozen=True)
class Verdict:
    """One paragraph set apart: a conclusion, or why there is none (problem)."""

    text: str
    label: str | None = None  # shown bold before the text: "Conclusion"
    problem: bool = False


@dataclass(frozen=True)
class Callout:
    """A boxed warning list: the report's notes, what may disturb one run's measurement."""

    title: str
    items: list[str]
    css: str = ""  # a class beside "warnings" in HTML


@dataclass(frozen=True)
class Subsection:
    """One of several alike parts of a section (a run), each under its own heading."""

    id: str
    heading: str
    blocks: list[Block]
    css: str = "subsection"  # the HTML class of its <article>


#: What a section is made of; a Table's heading is one level below its section's or subsection's.
Block = Table | Figures | Sentences | Verdict | Callout | Subsection


@dataclass(frozen=True)
class Section:
    id: str  # the HTML id; finding links (`see`) and the nav point at it
    title: str | None  # None: no heading (the warnings box)
    blocks: list[Block]
    band: Band = "detail"
    nav: str | None = None  # its link's text in the header; None: not linked
    footer: str | None = None  # a sentence for the HTML page's footer: its units, its CSV


#: A kind's report part: its sections, built from the report dict and the figures (less those
#: already shown under the findings).
Part = Callable[[Mapping[str, Any], Sequence[RenderedFigure]], list[Section]]
Rows = tuple[list[str], list[dict[str, Any]]]  # a CSV file's header and rows


@dataclass(frozen=True)
class KindPage:
    """What a run kind adds to the report's outputs (its Kind.report): its sections of the page,
    its figures (drawn from the report and the runs' samples) and its CSV files, each written
    when the kind has runs in the report."""

    sections: Part
    figures: Callable[[Mapping[str, Any], Mapping[str, Any]],
                      list[RenderedFigure]] = lambda report, samples: []
    # (file name, its rows; None: no such file for this report)
    csv: tuple[tuple[str, Callable[[Mapping[str, Any]], Rows | None]], ...] = ()


def glance(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[RenderedFigure]:
    """The figures shown under the findings; without findings none, and each stays in its part."""
    return glance_figures(figures) if findings(report) else []


def warnings_section(report: Mapping[str, Any]) -> list[Section]:
    notes = [str(n) for n in report.get("notes") or []]
    return [Section("warnings", None, [Callout("Warnings", notes)])] if notes else []


def stopping_section(report: Mapping[str, Any], figures: Sequence[RenderedFigure]
                     ) -> list[Section]:
    """The stop rule (docs/stopping.md), what the campaign asked: first after the lead's summary,
    its table and its figure."""
    from station.report.stopping import stopping_table

    table = stopping_table(report)
    if table is None:
        return []
    blocks: list[Block] = [table]
    if mine := [f for f in figures if f.kind == "stopping"]:
        blocks.append(Figures(mine, "The intervals, round by round", "figures-stopping"))
    return [Section("stopping", "Stop rule", blocks, nav="Stop rule")]


def page_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure],
                  parts: Sequence[Part]) -> list[Section]:
    """Every part's sections in page order, the warnings among them.

    The first part (in ``parts``' order) with a summary or detail section leads: its summary,
    then the warnings, then its detail. Every other part follows whole, in ``parts``' order; then
    every part's figures band. So a campaign of one kind opens with that kind's answer, and a
    kind beside another's runs comes after them.
    """
    shown = glance(report, figures)
    rest = [f for f in figures if all(f is not g for g in shown)]
    built = [part(report, rest) for part in parts]
    bodies = [[s for s in sections if s.band != "figures"] for sections in built]
    lead = next((body for body in bodies if body), [])
    page = [*(s for s in lead if s.band == "summary"),
            *stopping_section(report, rest),
            *warnings_section(report),
            *(s for s in lead if s.band == "detail"),
            *(s for body in bodies if body is not lead
              for band in ("summary", "detail") for s in body if s.band == band),
            *(s for sections in built for s in sections if s.band == "figures")]
    ids = [s.id for s in page]
    if len(set(ids)) < len(ids):  # the nav and the findings' links need one target each
        raise ValueError(
            f"two sections share an id: {sorted({i for i in ids if ids.count(i) > 1})}"
        )
    return page
