"""A scope capture, one row per pulse, as CSV or as Parquet with the same columns (docs/import.md
defines them; `station scope capture` writes both), read into the station's own hw_pulses.csv
layout: acquisition, start_s, width_s, armed_host_s, and frame and rise_s when the file has them."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from station.capture.pulses import PAIRING_ORDER
from station.importers.source import (
    MEASUREMENT_FILE,
    ImportInputError,
    Source,
    is_measurement_capture,
)

# the station's hw_pulses.csv, always written
COLUMNS = ("acquisition", "start_s", "width_s", "armed_host_s")
OPTIONAL = ("frame", "rise_s")  # written after them when the file has them
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
PARQUET_MAGIC = b"PAR1"
# "acquisition", or one of the others without it
_ACQUISITION = ("acquisition", "frame", "acq", "segment")
_FRAME = ("frame", "segment")  # beside an "acquisition" column: the frame within the acquisition
_TIMED = re.compile(r"(start|rise|rise_time|width)_(s|ms|us|ns)")
_WHOLE = ("acquisition", "frame")
MAX_FIELD = 64  # a number longer than this is no number a scope wrote
MAX_INDEX = 2**62


@dataclass
class ScopeTable:
    source: Source
    # COLUMNS (and those of OPTIONAL the file has), ready to be written as hw_pulses.csv
    pulses: pd.DataFrame
    layout: dict[str, str]  # station column -> the file's column it came from
    ignored_columns: list[str]


SCALED = {"start_s", "width_s", "rise_s"}  # the columns read with a unit, scaled to seconds


def read_scope(src: Source) -> ScopeTable:
    """A scope capture as Parquet (by its magic bytes) or CSV."""
    return read_scope_parquet(src) if src.data[:4] == PARQUET_MAGIC else read_scope_csv(src)


def read_scope_csv(src: Source) -> ScopeTable:
    lines = [ln.removesuffix("\r") for ln in src.text().split("\n")]
    first = next((i for i, ln in enumerate(lines)
                  if ln.strip() and not ln.lstrip().startswith("#")), None)
    if first is None:
        raise ImportInputError(src.path,
                               "no header line (a scope CSV needs one naming its columns)", line=1)
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
                raise ImportInputError(src.path, f"{len(row)} fields, the header has {len(header)}",
                                       line=lineno)
            for name, i in index.items():
                cols[name].append(_number(src, row[i], lineno, layout[name], name))
    except csv.Error as exc:  # a NUL, an unterminated quote, a field beyond csv's limit
        raise ImportInputError(src.path, f"not CSV: {exc}", line=first + reader.line_num) from None
    if not cols["width_s"]:
        raise ImportInputError(src.path, "no pulse rows after the header", line=first + 1)
    arrays = {name: np.array(values, dtype=np.int64 if name in _WHOLE else np.float64)
              for name, values in cols.items()}
    return _table(src, header, layout, scale, arrays)


def read_scope_parquet(src: Source) -> ScopeTable:
    """The same columns as a scope CSV, in a Parquet file: numbers (whole numbers for acquisition
    and frame), no nulls but in a rise column (NaN: not resolved). Errors name the row (from 1)."""
    try:
        # one thread: a threaded read leaves cleanup behind it, and a process that exits right after
        # (an import refused at once) then aborts in pyarrow's thread pool 1 time in ~12 here
        # (apache/arrow#33975, #39162); these are a file's bytes already in memory
        table = pq.read_table(pa.BufferReader(src.data), use_threads=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise ImportInputError(src.path, f"not a Parquet file pyarrow can read: {reason}") from None
    header = [str(name).strip().lower() for name in table.column_names]
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ImportInputError(src.path, f"column {twice[0]!r} appears twice")
    layout, scale = _layout(src, header, None)
    if not table.num_rows:
        raise ImportInputError(src.path, "no pulse rows")
    arrays = {name: _parquet_column(src, table.column(header.index(col)), col, name)
              for name, col in layout.items()}
    return _table(src, header, layout, scale, arrays)


def _table(src: Source, header: list[str], layout: dict[str, str], scale: dict[str, float],
           cols: dict[str, np.ndarray]) -> ScopeTable:
    n = len(cols["width_s"])

    # in seconds; what the file lacks: acquisition 0, times unknown
    def column(name: str) -> np.ndarray:
        if name not in cols:
            return np.zeros(n, np.int64) if name == "acquisition" else np.full(n, math.nan)
        return cols[name] * scale[name] if name in SCALED else cols[name]

    # the pairing's columns in the stream's order (capture/pulses.py), then what else the file has
    frame = pd.DataFrame({name: column(name) for name in PAIRING_ORDER})
    for name in ("frame", "rise_s"):
        if name in cols:
            frame[name] = column(name)
    ignored = [h for h in header if h not in layout.values()]
    return ScopeTable(src, frame, layout, ignored)


def _layout(
    src: Source, header: list[str], lineno: int | None
) -> tuple[dict[str, str], dict[str, float]]:
    """Which column of the file is which of ours, and the factor to seconds of each timed one.

    Exact names win: with an `acquisition` column, `frame` (or `segment`) is the frame within
    the acquisition, not its alias; with a `start_<u>` column, `rise_<u>` (or `rise_time_<u>`)
    is the pulse's rise time, not its start."""
    has_acquisition = "acquisition" in header
    has_start = any((m := _TIMED.fullmatch(col)) and m.group(1) == "start" for col in header)
    layout: dict[str, str] = {}
    scale: dict[str, float] = {}
    for col in header:
        m = _TIMED.fullmatch(col)
        if m:
            kind = m.group(1)
            name = (
                "width_s"
                if kind == "width"
                else "start_s"
                if kind == "start" or not has_start
                else "rise_s"
            )
        elif col == "acquisition" or (col in _ACQUISITION and not has_acquisition):
            name = "acquisition"
        elif col in _FRAME:
            name = "frame"
        elif col == "armed_host_s":
            name = "armed_host_s"
        else:
            continue
        if name in layout:
            raise ImportInputError(src.path,
                                   f"columns {layout[name]!r} and {col!r} both give {name}",
                                   line=lineno)
        layout[name] = col
        scale[name] = UNITS[m.group(2)] if m else 1.0
    if "width_s" not in layout and is_measurement_capture(header):
        raise ImportInputError(src.path, MEASUREMENT_FILE, line=lineno)
    if "width_s" not in layout:
        raise ImportInputError(src.path, f"header {','.join(header)[:80]!r} has no width column "
                               "(width_s, width_ms, width_us or width_ns)", line=lineno)
    return layout, scale


def _number(src: Source, text: str, lineno: int, column: str, name: str) -> float:
    t = text.strip()
    if name == "rise_s" and t.lower() in ("", "nan"):
        return math.nan  # a rise time the record did not resolve
    try:
        if len(t) > MAX_FIELD:
            raise ValueError
        value = int(t) if name in _WHOLE else float(t)
    except ValueError:
        kind = "a whole number" if name in _WHOLE else "a number"
        raise ImportInputError(src.path, f"column {column!r}: {t[:40]!r} is not {kind}",
                               line=lineno) from None
    problem = _problem(name, value)
    if problem:
        raise ImportInputError(src.path, f"column {column!r}: {t[:40]!r} {problem}", line=lineno)
    return value


def _problem(name: str, value: float) -> str | None:
    """Why a value cannot be in column `name` (None: it can)."""
    if name in _WHOLE:
        return None if 0 <= value < MAX_INDEX else f"is out of range (0 to 2^62) for {name}"
    if name == "rise_s" and math.isnan(value):
        return None
    if not math.isfinite(value):
        return "is not a finite number"
    if name == "width_s" and value <= 0:
        return "is not a positive width"
    if name == "rise_s" and value < 0:
        return "is no rise time (negative)"
    return None


def _parquet_column(src: Source, column: pa.ChunkedArray, col: str, name: str) -> np.ndarray:
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise ImportInputError(src.path, f"column {col!r}: {kind} values, not numbers")
    if column.null_count and name != "rise_s":
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise ImportInputError(src.path, f"row {row + 1}: column {col!r} is empty")
    values = column.to_numpy(zero_copy_only=False)  # (a rise column's nulls come as NaN)
    as_float = values.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if name in _WHOLE:
            bad = ~((as_float >= 0) & (as_float < MAX_INDEX) & (as_float == np.floor(as_float)))
        elif name == "rise_s":
            bad = np.isinf(as_float) | (as_float < 0)
        else:
            bad = ~np.isfinite(as_float) | ((as_float <= 0) if name == "width_s" else False)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = values[row].item()
        why = _problem(name, float(value)) or "is not a whole number"
        raise ImportInputError(src.path, f"row {row + 1}: column {col!r}: {value!r} {why}")
    return values.astype(np.int64) if name in _WHOLE else as_float
