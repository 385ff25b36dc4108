"""Writing a comparison (`station compare`): compare.json, compare.csv (and
compare-cyclictest.csv), compare.md, compare.html and figures/*.svg, as write_reports does
for one campaign."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from station.compare.analysis import compare_parts
from station.compare.html import render_compare_html
from station.compare.markdown import render_compare_markdown
from station.report.export import write_json, write_rows
from station.report.figures import drawn, write_figures


def write_compare_reports(result: Mapping[str, Any], samples: Mapping[tuple, Any],
                          out_dir: Path) -> dict[str, Path]:
    """Every output into out_dir; returns them keyed by their path relative to out_dir."""
    out_dir = Path(out_dir)
    parts = [part for _, part in compare_parts()]
    figures = drawn([f for part in parts for f in part.figures(result, samples)])
    paths = write_figures(figures, out_dir)
    paths["compare.json"] = write_json(result, out_dir / "compare.json")
    for kind, part in compare_parts():  # a kind's files where the comparison has its section
        if result.get(kind.name):
            for name, rows in part.csv:
                paths[name] = write_rows(out_dir / name, *rows(result))
    for name, text in (("compare.md", render_compare_markdown(result, figures, parts)),
                       ("compare.html", render_compare_html(result, figures, parts))):
        (out_dir / name).write_text(text, encoding="utf-8")
        paths[name] = out_dir / name
    return paths
