"""report.html: one self-contained page (inline CSS, inline SVG figures, no URL, no script)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from station.report.figures import RenderedFigure
from station.report.page import (
    Callout,
    Figures,
    Part,
    Sentences,
    Subsection,
    Verdict,
    glance,
    page_sections,
)
from station.report.tables import (
    Cell,
    Table,
    audit_entries,
    campaign_facts,
    findings,
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


def _items(figures: Sequence[RenderedFigure]) -> list[dict[str, Any]]:
    return [{"name": f.name, "title": f.title, "caption": f.caption,
             "svg": inline_svg(f.svg, f.title)} for f in figures]


# The template tells a section's blocks apart by these tests: {% if block is table %}.
for _name, _type in {"table": Table, "figures": Figures, "sentences": Sentences, "verdict": Verdict,
                     "callout": Callout, "subsection": Subsection}.items():
    _ENV.tests[_name] = lambda value, _type=_type: isinstance(value, _type)
_ENV.filters["figure_items"] = _items


def html_template() -> jinja2.Template:
    """The page's template, compiled once (jinja's environment keeps it)."""
    return _ENV.get_template("report.html.j2")


def render_html(report: Mapping[str, Any], figures: Sequence[RenderedFigure],
                parts: Sequence[Part]) -> str:
    """The page: the header's facts, the findings, every part's sections (page.py orders them), the
    Target appendix."""
    campaign = report.get("campaign") or {}
    return html_template().render(
        title=f"IRQ latency report: {campaign.get('name', 'campaign')}",
        campaign=campaign,
        facts=campaign_facts(report),
        findings=findings(report),
        glance=_items(glance(report, figures)),
        sections=page_sections(report, figures, parts),
        audit=audit_entries(report),
        ground_truth=ground_truth_entries(report),
        twin_preset=twin_preset_table(report),
    )
