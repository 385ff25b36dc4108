"""compare.html: one self-contained page like report.html (its stylesheet, inline SVG, no URL,
no script), rendered with the report's Jinja environment."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from station.compare.part import ComparePart
from station.compare.tables import all_compare_tables
from station.report.figures import RenderedFigure
from station.report.html import _ENV, _items


def _report_style() -> Markup:
    """report.html's <style> element, taken from its template: one stylesheet for both pages."""
    source = _ENV.loader.get_source(_ENV, "report.html.j2")[0]  # type: ignore[union-attr]
    match = re.search(r"<style>.*?</style>", source, flags=re.S)
    return Markup(match.group(0) if match else "")  # noqa: S704 - our own template's text


def render_compare_html(result: Mapping[str, Any], figures: Sequence[RenderedFigure],
                        parts: Sequence[ComparePart]) -> str:
    labels = [c["label"] for c in result.get("campaigns") or []]
    return _ENV.get_template("compare.html.j2").render(
        title="IRQ latency comparison: " + " vs ".join(labels),
        style=_report_style(),
        notes=[str(n) for n in result.get("notes") or []],
        tables=all_compare_tables(result, parts),
        figures=_items(figures),
    )
