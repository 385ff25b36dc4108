"""The GPIO response's part of the report page: its findings (one sentence each) and tables, then
its plots. Both are its answer (band summary): a gpio campaign opens with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.kinds.gpio.figures import KIND, build_gpio_figures
from station.kinds.gpio.tables import gpio_tables
from station.report.export import csv_bool, to_jsonable
from station.report.figures import RenderedFigure
from station.report.page import Block, Figures, KindPage, Section, Sentence, Sentences


def gpio_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    gt = gpio_tables(report)
    if not gt:
        return []
    blocks: list[Block] = (
        [Sentences([Sentence(f.text, f.kind) for f in gt.findings])] if gt.findings else []
    )
    blocks += [t for t in (gt.runs, gt.outliers, gt.comparisons) if t]
    sections = [Section("gpio", "GPIO response", blocks, "summary", "GPIO response",
                        "GPIO response delays are in µs as their columns say; gpio.csv holds one "
                        "row per run.")]
    plots = [f for f in figures if f.kind == KIND]
    if plots:
        sections.append(Section("gpio-plots", "GPIO response plots", [Figures(plots)], "summary",
                                "GPIO plots"))
    return sections


#: Columns of gpio.csv: one row per run, its counts, its delay distribution in µs (as the report's
#: "gpio" section has it), then its outliers (outlier_*).
GPIO_RUN_KEYS = ("target", "case", "load", "repetition", "status", "responder", "mode", "threaded",
                 "priority", "governor", "stimuli", "answered", "missed", "censored", "ambiguous",
                 "unanswering",
                 "miss_fraction", "resolution_ns")
GPIO_CSV_COLUMNS = ["run_id", *GPIO_RUN_KEYS, "min_us", "p50_us", "mean_us", "mean_ci_lo_us",
                    "mean_ci_hi_us", "std_us", "p99_us", "p999_us", "max_us", "spread_us",
                    "outlier_threshold_us", "outlier_count", "outlier_fraction",
                    "outlier_excess_max_us", "outlier_period_us", "outlier_period_share",
                    "outlier_window_us", "outlier_expected_fraction", "outlier_explanation"]
GPIO_DELAY_KEYS = ("min", "p50", "mean", "std", "p99", "p999", "max", "spread")
GPIO_OUTLIER_KEYS = {"threshold_us": "outlier_threshold_us", "count": "outlier_count",
                     "fraction": "outlier_fraction", "excess_max_us": "outlier_excess_max_us",
                     "period_us": "outlier_period_us", "period_share": "outlier_period_share",
                     "window_us": "outlier_window_us",
                     "expected_fraction": "outlier_expected_fraction",
                     "explanation": "outlier_explanation"}


def gpio_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per gpio run, in the section's order; a run that answered nothing has
    empty delay and outlier cells."""
    rows = []
    for r in (report.get("gpio") or {}).get("runs") or []:
        delay = r.get("delay_us") or {}
        ci = delay.get("mean_ci")
        ci = ci if isinstance(ci, list | tuple) and len(ci) == 2 else (None, None)
        outliers = r.get("outliers") or {}
        row = {"run_id": r.get("id"),
               **{k: r.get(k) for k in GPIO_RUN_KEYS},
               **{f"{k}_us": delay.get(k) for k in GPIO_DELAY_KEYS},
               "mean_ci_lo_us": ci[0], "mean_ci_hi_us": ci[1],
               **{column: outliers.get(k) for k, column in GPIO_OUTLIER_KEYS.items()}}
        rows.append({k: csv_bool(to_jsonable(row.get(k))) for k in GPIO_CSV_COLUMNS})
    return list(GPIO_CSV_COLUMNS), rows


PAGE = KindPage(gpio_sections, build_gpio_figures, (("gpio.csv", gpio_rows),))
