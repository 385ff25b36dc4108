"""Machine-readable outputs: report.json and stats.csv, both in raw nanoseconds, and the helpers a
kind's CSV files (its KindPage.csv: cyclictest.csv, gpio.csv …, in their own units) are written
with."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from station.common.formatting import percentile_is_reliable

#: the statistics columns of a distribution, in ns (stats.csv, a kind's CSV like cyclictest.csv)
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


def percentile_columns(stats: Mapping[str, Any], pkeys: list[str]) -> dict[str, Any]:
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


def csv_bool(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool | np.bool_) else value


def write_rows(path: Path, header: list[str], rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            # Empty cell for a missing value, repr-exact floats otherwise.
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path
