"""report.html: one self-contained page (inline CSS, inline SVG figures, no URL, no script)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from station.report.cyclictest_figures import KIND as CYCLICTEST_KIND
from station.report.cyclictest_tables import cyclictest_tables
from station.report.figures import RenderedFigure
from station.report.gpio_figures import KIND as GPIO_KIND
from station.report.gpio_tables import gpio_tables
from station.report.gpio_tables import leads as gpio_leads
from station.report.interruptions_figures import run_figures
from station.report.interruptions_tables import interruptions_tables, leads
from station.report.tables import (
    Cell,
    all_tables,
    audit_entries,
    campaign_facts,
    findings,
    glance_figures,
    ground_truth_entries,
    twin_preset_table,
)

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("station.report", "templates"),
    autoescape=True,  # every string from the report dict is data, never markup
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def cell_class(cell: Cell) -> str:
    """The CSS classes that make a cell look like what it is."""
    classes = ["num" if cell.numeric else "", "weak" if cell.weak else "",
               "wrap" if cell.wrap else "", f"status-{cell.status}" if cell.status else "",
               *(f"flag-{f}" for f in cell.flags)]
    return " ".join(c for c in classes if c)


_ENV.filters["cell_class"] = cell_class

FIGURE_GROUPS = [
    ("overview", "Software latency by interface"),
    ("tail", "Tails: exceedance probability"),
    ("scope", "Oscilloscope: inb vs no-inb (t_rw)"),
    ("run", "Per run: software vs oscilloscope"),
]


def inline_svg(svg: str, title: str) -> Markup:
    """A standalone SVG file made fit to sit inside HTML.

    Drops the XML prolog and DOCTYPE (invalid in HTML), the RDF metadata and
    the xmlns declarations: the HTML parser puts <svg> in the SVG namespace by
    itself, and the page then carries no URL at all, not even a namespace name.
    """
    body = svg[svg.index("<svg"):]
    body = re.sub(r"<metadata>.*?</metadata>\s*", "", body, flags=re.S)
    body = re.sub(r'\s+xmlns(?::\w+)?="[^"]*"', "", body)
    body = body.replace("<svg", f'<svg role="img" aria-label="{Markup.escape(title)}"', 1)
    # Our own matplotlib output, already sanitised above; not user data.
    return Markup(body)  # noqa: S704


def _figure_items(figures: Sequence[RenderedFigure], kind: str) -> list[dict[str, Any]]:
    return _items([f for f in figures if f.kind == kind])


def _items(figures: Sequence[RenderedFigure]) -> list[dict[str, Any]]:
    return [{"name": f.name, "title": f.title, "caption": f.caption,
             "svg": inline_svg(f.svg, f.title)} for f in figures]


def render_html(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> str:
    campaign = report.get("campaign") or {}
    interruptions = interruptions_tables(report)
    interruption_runs = [{"run": run, "figures": _items(run_figures(figures, run.anchor))}
                         for run in (interruptions.runs if interruptions else [])]
    answer = findings(report)
    glance = glance_figures(figures) if answer else []  # under the findings, not again among the figures
    rest = [f for f in figures if all(f is not g for g in glance)]
    groups = []
    for kind, heading in FIGURE_GROUPS:
        members = _figure_items(rest, kind)
        if members:
            groups.append({"kind": kind, "heading": heading, "figures": members})
    return _ENV.get_template("report.html.j2").render(
        title=f"IRQ latency report: {campaign.get('name', 'campaign')}",
        campaign=campaign,
        facts=campaign_facts(report),
        findings=answer,
        glance=_items(glance),
        notes=[str(n) for n in report.get("notes") or []],
        tables=all_tables(report),
        cyclictest=cyclictest_tables(report),
        cyclictest_figures=_figure_items(figures, CYCLICTEST_KIND),
        interruptions=interruptions,
        interruption_runs=interruption_runs,
        interruptions_first=leads(report),
        gpio=gpio_tables(report),
        gpio_figures=_figure_items(figures, GPIO_KIND),
        gpio_first=gpio_leads(report),
        figure_groups=groups,
        audit=audit_entries(report),
        ground_truth=ground_truth_entries(report),
        twin_preset=twin_preset_table(report),
    )
