"""A scope capture as CSV, one row per pulse (docs/import.md defines the columns), read into
the station's own hw_pulses.csv layout: acquisition, start_s, width_s, armed_host_s."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass

import pandas as pd

from station.importers.source import ImportInputError, Source

COLUMNS = ("acquisition", "start_s", "width_s", "armed_host_s")  # the station's hw_pulses.csv
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_ACQUISITION = ("acquisition", "frame", "acq", "segment")
_TIMED = re.compile(r"(start|rise|rise_time|width)_(s|ms|us|ns)")
MAX_FIELD = 64  # a number longer than this is no number a scope wrote


@dataclass
class ScopeTable:
    source: Source
    pulses: pd.DataFrame  # COLUMNS, ready to be written as hw_pulses.csv
    layout: dict[str, str]  # station column -> the file's column it came from
    ignored_columns: list[str]


def read_scope_csv(src: Source) -> ScopeTable:
    lines = [ln.removesuffix("\r") for ln in src.text().split("\n")]
    first = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")), None)
    if first is None:
        raise ImportInputError(src.path, "no header line (a scope CSV needs one naming its columns)", line=1)
    reader = csv.reader(lines[first:])
    try:
        header = [h.strip().lower() for h in next(reader)]
        layout, scale = _layout(src, header, first + 1)
        cols: dict[str, list[float]] = {name: [] for name in layout}
        index = {name: header.index(col) for name, col in layout.items()}
        for row in reader:
            lineno = first + reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()) or row[0].lstrip().startswith("#"):
                continue
            if len(row) != len(header):
                raise ImportInputError(src.path, f"{len(row)} fields, the header has {len(header)}", line=lineno)
            for name, i in index.items():
                cols[name].append(_number(src, row[i], lineno, layout[name], name))
    except csv.Error as exc:  # a NUL, an unterminated quote, a field beyond csv's limit
        raise ImportInputError(src.path, f"not CSV: {exc}", line=first + reader.line_num) from None
    if not cols["width_s"]:
        raise ImportInputError(src.path, "no pulse rows after the header", line=first + 1)
    n = len(cols["width_s"])
    frame = pd.DataFrame({
        "acquisition": pd.array(cols["acquisition"], dtype="int64") if "acquisition" in cols else [0] * n,
        "start_s": [v * scale["start_s"] for v in cols["start_s"]] if "start_s" in cols else [math.nan] * n,
        "width_s": [v * scale["width_s"] for v in cols["width_s"]],
        "armed_host_s": cols.get("armed_host_s", [math.nan] * n),
    })
    ignored = [h for h in header if h not in layout.values()]
    return ScopeTable(src, frame[list(COLUMNS)], layout, ignored)


def _layout(src: Source, header: list[str], lineno: int) -> tuple[dict[str, str], dict[str, float]]:
    """Which column of the file is which of ours, and the factor to seconds of each timed one."""
    layout: dict[str, str] = {}
    scale: dict[str, float] = {}
    for col in header:
        m = _TIMED.fullmatch(col)
        name = ("width_s" if m.group(1) == "width" else "start_s") if m else (
            "acquisition" if col in _ACQUISITION else "armed_host_s" if col == "armed_host_s" else None)
        if name is None:
            continue
        if name in layout:
            raise ImportInputError(src.path, f"columns {layout[name]!r} and {col!r} both give {name}", line=lineno)
        layout[name] = col
        scale[name] = UNITS[m.group(2)] if m else 1.0
    if "width_s" not in layout:
        raise ImportInputError(src.path, f"header {','.join(header)[:80]!r} has no width column "
                               "(width_s, width_ms, width_us or width_ns)", line=lineno)
    return layout, scale


def _number(src: Source, text: str, lineno: int, column: str, name: str) -> float:
    t = text.strip()
    try:
        if len(t) > MAX_FIELD:
            raise ValueError
        value = int(t) if name == "acquisition" else float(t)
    except ValueError:
        kind = "a whole number" if name == "acquisition" else "a number"
        raise ImportInputError(src.path, f"column {column!r}: {t[:40]!r} is not {kind}", line=lineno) from None
    if name == "acquisition" and not 0 <= value < 2**62:
        raise ImportInputError(src.path, f"column {column!r}: acquisition {value} out of range", line=lineno)
    if name != "acquisition" and not math.isfinite(value):
        raise ImportInputError(src.path, f"column {column!r}: {t!r} is not a finite number", line=lineno)
    if name == "width_s" and value <= 0:
        raise ImportInputError(src.path, f"column {column!r}: width {t} is not positive", line=lineno)
    return value
