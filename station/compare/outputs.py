"""Writing a comparison (`station compare`): compare.json, compare.csv (and
compare-cyclictest.csv), compare.md, compare.html and figures/*.svg, as write_reports does
for one campaign."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from station.compare.figures import build_compare_figures
from station.compare.html import render_compare_html
from station.compare.markdown import render_compare_markdown
from station.compare.tables import COMPARE_CSV_COLUMNS, compare_rows, cyclictest_rows
from station.report.export import write_json, write_rows
from station.report.figures import write_figures


def write_compare_reports(result: Mapping[str, Any], samples: Mapping[tuple, np.ndarray],
                          out_dir: Path) -> dict[str, Path]:
    """Every output into out_dir; returns them keyed by their path relative to out_dir."""
    out_dir = Path(out_dir)
    figures = build_compare_figures(result, samples)
    paths = write_figures(figures, out_dir)
    paths["compare.json"] = write_json(result, out_dir / "compare.json")
    if result.get("module"):
        paths["compare.csv"] = write_rows(out_dir / "compare.csv", COMPARE_CSV_COLUMNS, compare_rows(result))
    if result.get("cyclictest"):
        paths["compare-cyclictest.csv"] = write_rows(out_dir / "compare-cyclictest.csv", *cyclictest_rows(result))
    for name, text in (("compare.md", render_compare_markdown(result, figures)),
                       ("compare.html", render_compare_html(result, figures))):
        (out_dir / name).write_text(text, encoding="utf-8")
        paths[name] = out_dir / name
    return paths
