"""Rendering of an analysed campaign: HTML, Markdown, JSON, CSV and SVG figures.

The analysis produces the report dictionary (schema: docs/report-schema.md);
this package only renders it, plus figures drawn from the raw samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from station.analysis.samples import RunSamples
from station.report.cyclictest_figures import build_cyclictest_figures
from station.report.cyclictest_sections import cyclictest_sections
from station.report.export import (
    write_csv,
    write_cyclictest_csv,
    write_gpio_csv,
    write_interruptions_csv,
    write_json,
)
from station.report.figures import build_figures, write_figures
from station.report.gpio_figures import build_gpio_figures
from station.report.gpio_sections import gpio_sections
from station.report.html import render_html
from station.report.interruptions_figures import build_interruptions_figures
from station.report.interruptions_sections import interruptions_sections
from station.report.markdown import render_markdown
from station.report.module_sections import module_sections
from station.report.page import Part

__all__ = ["PARTS", "write_reports"]

#: Each kind's report part, in page order: the first with anything to show leads the page (its
#: answer above the warnings), the others follow it (station/report/page.py: page_sections).
PARTS: tuple[Part, ...] = (cyclictest_sections, module_sections, interruptions_sections, gpio_sections)


def write_reports(report: Mapping[str, Any], samples: Mapping[str, RunSamples],
                  out_dir: Path, parts: Sequence[Part] = PARTS) -> dict[str, Path]:
    """Write report.html, report.md, report.json, stats.csv and figures/*.svg into out_dir,
    cyclictest.csv when the report has a "cyclictest" section, interruptions.csv when it has
    an "interruptions" section and gpio.csv when it has a "gpio" section.

    ``samples`` maps run ids to their raw arrays; a run without an entry just
    has no figure. ``parts`` build the pages' sections (PARTS: every kind's). Returns every
    written file keyed by its path relative to out_dir (``"report.html"``, ``"figures/sw-hist-inb.svg"`` …).
    """
    out_dir = Path(out_dir)
    # Each part places its kind's figures on the page; the order here is only the files' order.
    figures = (build_gpio_figures(report, samples) + build_interruptions_figures(report, samples)
               + build_cyclictest_figures(report, samples) + build_figures(report, samples))
    paths = write_figures(figures, out_dir)
    paths["report.json"] = write_json(report, out_dir / "report.json")
    paths["stats.csv"] = write_csv(report, out_dir / "stats.csv")
    if report.get("cyclictest"):
        paths["cyclictest.csv"] = write_cyclictest_csv(report, out_dir / "cyclictest.csv")
    if report.get("interruptions"):
        paths["interruptions.csv"] = write_interruptions_csv(report, out_dir / "interruptions.csv")
    if report.get("gpio"):
        paths["gpio.csv"] = write_gpio_csv(report, out_dir / "gpio.csv")
    md = out_dir / "report.md"
    md.write_text(render_markdown(report, figures, parts), encoding="utf-8")
    paths["report.md"] = md
    html = out_dir / "report.html"
    html.write_text(render_html(report, figures, parts), encoding="utf-8")
    paths["report.html"] = html
    return paths
