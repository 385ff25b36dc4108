"""Rendering of an analysed campaign: HTML, Markdown, JSON, CSV and SVG figures.

The analysis produces the report dictionary (schema: docs/report-schema.md);
this package only renders it, plus figures drawn from the raw samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from station import kind_registry
from station.analysis.samples import RunSamples
from station.report.export import write_json, write_rows
from station.report.figures import drawn, write_figures
from station.report.html import html_template, render_html
from station.report.markdown import render_markdown
from station.report.model import (
    ReportSchemaError,
    report_json_schema,
    report_model,
    validate_report,
)
from station.report.page import KindPage
from station.report.stopping import stopping_figures

__all__ = ["ReportSchemaError", "kind_pages", "prepare_writing", "report_json_schema",
           "report_model", "validate_report", "write_reports"]


def kind_pages() -> list[tuple[kind_registry.Kind, KindPage]]:
    """Every registered kind's report part (Kind.report), in the registry's order: the first with
    anything to show leads the page (station/report/page.py: page_sections)."""
    return [(k, k.load("report")) for k in kind_registry.kinds().values() if k.report is not None]


def prepare_writing() -> None:
    """What writing any report needs, done ahead: report.json's model with every kind's part
    (pydantic builds ~70 classes), each kind's page, the HTML template compiled. The report
    writer calls it while worker processes analyse the runs, so that none of it is left for after
    the last run."""
    report_model()
    kind_pages()
    html_template()


def write_reports(report: Mapping[str, Any], samples: Mapping[str, RunSamples],
                  out_dir: Path) -> dict[str, Path]:
    """Write report.html, report.md, report.json and figures/*.svg into out_dir, and each kind's
    CSV files (stats.csv, cyclictest.csv …) where the report has its part.

    ``samples`` maps run ids to their raw arrays; a run without an entry just
    has no figure. Each registered kind's report part (Kind.report) adds its figures, CSV files
    and sections. The report is first validated against report_model() (ReportSchemaError).
    Returns every
    written file keyed by its path relative to out_dir (``"report.html"``,
    ``"figures/sw-hist-inb.svg"`` …).
    """
    # before any file: a report its schema refuses is the analysis's bug, not a page to render
    validate_report(report)
    out_dir = Path(out_dir)
    pages = kind_pages()
    # Each part places its kind's figures on the page; the order here is only the files' order.
    figures = drawn([*stopping_figures(report),
                     *(f for _, page in pages for f in page.figures(report, samples))])
    paths = write_figures(figures, out_dir)
    paths["report.json"] = write_json(report, out_dir / "report.json")
    # a kind's tables where the report has its section (the module's: always)
    for kind, page in pages:
        if kind.top_level_runs or report.get(kind.name):
            for name, rows in page.csv:
                if (table := rows(report)) is not None:  # None: the part has nothing for this file
                    paths[name] = write_rows(out_dir / name, *table)
    parts = [page.sections for _, page in pages]
    md = out_dir / "report.md"
    md.write_text(render_markdown(report, figures, parts), encoding="utf-8")
    paths["report.md"] = md
    html = out_dir / "report.html"
    html.write_text(render_html(report, figures, parts), encoding="utf-8")
    paths["report.html"] = html
    return paths
