"""Machine-readable outputs: report.json and stats.csv, both in raw nanoseconds; cyclictest.csv,
interruptions.csv and gpio.csv beside them when the report has those sections (in their own units)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from station.formatting import percentile_is_reliable, percentile_keys

#: Leading columns of stats.csv; percentile columns (p50_ns …) and
#: ``unreliable_percentiles`` follow. Documented in docs/report-schema.md.
CSV_RUN_COLUMNS = ["run_id", "interface", "variant", "load", "repetition", "status", "source",
                   "count", "min_ns", "mean_ns", "std_ns", "max_ns"]
#: Leading columns of cyclictest.csv: cyclictest's own per-thread summary (whole µs, as it
#: reports them), then the histogram statistics in ns like stats.csv.
CYCLICTEST_CSV_COLUMNS = ["run_id", "target", "load", "repetition", "status", "thread", "cpu",
                          "cycles", "min_us", "avg_us", "max_us", "overflows",
                          "count", "min_ns", "mean_ns", "std_ns", "max_ns"]
#: Columns of interruptions.csv: the run, then one of its gap groups (µs, ms and s as in the
#: report's "interruptions" section).
INTERRUPTIONS_CSV_COLUMNS = ["run_id", "target", "load", "repetition", "status", "cpu",
                             "threshold_us", "measured_s", "run_gaps", "run_max_us", "trace",
                             "smi_counter", "cause", "source", "count", "median_us", "p99_us",
                             "max_us", "total_ms", "period_ms", "periodic"]
#: Columns of gpio.csv: one row per run, its counts, its delay distribution in µs (as the report's
#: "gpio" section has it), then its outliers (outlier_*).
GPIO_RUN_KEYS = ("target", "case", "load", "repetition", "status", "responder", "mode", "threaded",
                 "priority", "governor", "stimuli", "answered", "missed", "censored", "ambiguous", "unanswering",
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
                     "window_us": "outlier_window_us", "expected_fraction": "outlier_expected_fraction",
                     "explanation": "outlier_explanation"}
STATS_COLUMNS = ("count", "min_ns", "mean_ns", "std_ns", "max_ns")


def to_jsonable(value: Any) -> Any:
    """Plain JSON types from numpy scalars/arrays, tuples, paths.

    Non-finite floats become null: NaN and Infinity are not JSON, and strict
    parsers (browsers' JSON.parse, jq) reject them.
    """
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(report: Mapping[str, Any], path: Path) -> Path:
    text = json.dumps(to_jsonable(report), indent=2, sort_keys=True, ensure_ascii=False,
                      allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def stats_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per run per source (sw, hw) that has statistics."""
    runs = report.get("runs") or []
    pkeys = percentile_keys(r.get(src) for r in runs for src in ("sw", "hw"))
    header = [*CSV_RUN_COLUMNS, *(f"{k}_ns" for k in pkeys), "unreliable_percentiles"]
    rows = []
    for r in runs:
        for source in ("sw", "hw"):
            stats = r.get(source)
            if not stats:
                continue
            percentiles = stats.get("percentiles_ns") or {}
            row: dict[str, Any] = {
                "run_id": r.get("id"), "interface": r.get("interface"),
                "variant": r.get("variant"), "load": r.get("load"),
                "repetition": r.get("repetition"), "status": r.get("status"), "source": source,
                "count": stats.get("count"), "min_ns": stats.get("min_ns"),
                "mean_ns": stats.get("mean_ns"), "std_ns": stats.get("std_ns"),
                "max_ns": stats.get("max_ns"),
            }
            for k in pkeys:
                row[f"{k}_ns"] = percentiles.get(k)
            row["unreliable_percentiles"] = ";".join(
                k for k in pkeys
                if k in percentiles and not percentile_is_reliable(k, stats.get("count")))
            rows.append({k: to_jsonable(v) for k, v in row.items()})
    return header, rows


def _percentile_columns(stats: Mapping[str, Any], pkeys: list[str]) -> dict[str, Any]:
    """p*_ns columns, and which percentiles are from too few samples or beyond the histogram."""
    percentiles = stats.get("percentiles_ns") or {}
    return {
        **{f"{k}_ns": percentiles.get(k) for k in pkeys},
        "unreliable_percentiles": ";".join(
            k for k in pkeys if percentiles.get(k) is not None
            and not percentile_is_reliable(k, stats.get("count"))),
        # null here is a statement (above the histogram's range), not a missing value
        "beyond_range_percentiles": ";".join(
            k for k in pkeys if k in percentiles and percentiles[k] is None),
    }


def cyclictest_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per cyclictest run per thread, then its pooled "all" row."""
    runs = (report.get("cyclictest") or {}).get("runs") or []
    pkeys = percentile_keys([t.get("stats") for r in runs for t in r.get("threads") or []]
                            + [r.get("combined") for r in runs])
    header = [*CYCLICTEST_CSV_COLUMNS, *(f"{k}_ns" for k in pkeys), "unreliable_percentiles",
              "beyond_range_percentiles"]
    rows = []
    for r in runs:
        run = {"run_id": r.get("id"), "target": r.get("target"), "load": r.get("load"),
               "repetition": r.get("repetition"), "status": r.get("status")}
        entries = [({"thread": t.get("thread"), "cpu": t.get("cpu"), "cycles": t.get("cycles"),
                     "min_us": t.get("min_us"), "avg_us": t.get("avg_us"),
                     "max_us": t.get("max_us"), "overflows": t.get("overflows")},
                    t.get("stats") or {}) for t in r.get("threads") or []]
        if r.get("combined"):
            entries.append(({"thread": "all", "overflows": r["combined"].get("overflows")},
                            r["combined"]))
        for own, stats in entries:
            row = {**run, **own, **{k: stats.get(k) for k in STATS_COLUMNS},
                   **_percentile_columns(stats, pkeys)}
            rows.append({k: to_jsonable(row.get(k)) for k in header})
    return header, rows


def _csv_bool(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool | np.bool_) else value


def interruptions_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per interruption detector run per gap group (cause, source). A run
    analysed with no gaps has one row with an empty cause and a count of 0; a run whose output
    could not be read has none."""
    runs = (report.get("interruptions") or {}).get("runs") or []
    rows = []
    for r in runs:
        if "gaps" not in r and "conclusion" not in r:
            continue
        run = {"run_id": r.get("id"), "target": r.get("target"), "load": r.get("load"),
               "repetition": r.get("repetition"), "status": r.get("status"), "cpu": r.get("cpu"),
               "threshold_us": r.get("threshold_us"), "measured_s": r.get("measured_s"),
               "run_gaps": r.get("gaps"), "run_max_us": r.get("max_us"), "trace": r.get("trace"),
               "smi_counter": r.get("smi_counter")}
        for g in r.get("groups") or [{"count": 0}]:
            row = {**run, **{k: g.get(k) for k in ("cause", "source", "count", "median_us",
                                                   "p99_us", "max_us", "total_ms", "period_ms",
                                                   "periodic")}}
            rows.append({k: _csv_bool(to_jsonable(row.get(k))) for k in INTERRUPTIONS_CSV_COLUMNS})
    return list(INTERRUPTIONS_CSV_COLUMNS), rows


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
        rows.append({k: _csv_bool(to_jsonable(row.get(k))) for k in GPIO_CSV_COLUMNS})
    return list(GPIO_CSV_COLUMNS), rows


def write_rows(path: Path, header: list[str], rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            # Empty cell for a missing value, repr-exact floats otherwise.
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path
