"""The 10–90 % rise time of each pulse's leading edge, from the record the pulse was found in.

The levels are the record's own: the histogram modes of the lower and of the upper half of its
range (the scope "histogram" method that `instruments.pulses.auto_threshold` uses for its
threshold), each refined to the median of the values in its modal bin. The 10 % and 90 % levels
lie between them. For each leading edge, found by pulse extraction at a fractional sample
position, the 10 % crossing is where the line between the last sample at or below 10 % before
the edge and the next sample crosses 10 %; the 90 % crossing is where the line between the
last sample below 90 % and the first at or above it crosses 90 %. The rise time is the time
between the two crossings.

An edge the record does not resolve gives NaN: fewer than `min_samples` samples strictly between
its 10 % and 90 % crossings (a sample interval too coarse for the edge: the interpolation would
then measure the sample grid, not the edge), a crossing outside the record (or the frame) or
beyond `max_edge_samples`, a runt that falls back below 10 % before it reaches 90 %, a record
with a single level. Anything else gives a finite, non-negative number: whatever the record
holds, the functions here return NaN rather than raise.

    rise_times(waveform, pulses.start_s)                       a single record
    rise_times(frames, frame_pulses.start_s, frame_pulses.frame)  a segmented acquisition
    record_levels(record)                                      the (low, high) levels in volts
    rise_times_at(volts, positions, dt_s, levels, rows=...)   on plain arrays of volts
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np

from instruments.scope import Frames, Waveform

HISTOGRAM_BINS = 256
LOW, HIGH = 0.1, 0.9  # the share of the swing at which an edge starts and ends
MIN_SAMPLES = 2  # samples strictly between the 10 % and 90 % crossings for a resolved edge
MAX_EDGE_SAMPLES = 1 << 20  # an edge searched further than this from its crossing is not resolved
WINDOW = 128  # samples each side looked at at once for every edge (then edge by edge, growing)
BATCH = 1 << 15  # edges per vectorised batch: BATCH × WINDOW values in memory at once
CHUNK = 1 << 22  # codes counted per pass of the level histogram

Polarity = Literal["high", "low"]
# the volts of samples: take(rows, indices) for integer arrays of one shape
Take = Callable[[np.ndarray, np.ndarray], np.ndarray]


# --- levels ------------------------------------------------------------------------------------
def record_levels(record: Waveform | Frames) -> tuple[float, float] | None:
    """(low, high) logic levels in volts of a record (every frame of a segmented one); None
    when it has fewer than two levels (flat, or no finite value)."""
    codes = record.codes
    if codes is not None and record.scale is not None and codes.dtype.itemsize <= 2:
        values, weights = _code_counts(codes.reshape(-1))
        with np.errstate(all="ignore"):
            values = record.scale.volts(values)
    else:
        values = record.volts if isinstance(record, Waveform) else record.scale.volts(record.codes)
        values, weights = np.asarray(values, dtype=np.float64).reshape(-1), None
    return histogram_levels(values, weights)


def histogram_levels(values: np.ndarray, weights: np.ndarray | None = None) -> tuple[float,
                                                                                     float] | None:
    """(low, high): the modes of the lower and upper halves of the values' range (each value
    counted `weights` times), None for fewer than two distinct finite values."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    w = None if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    finite = np.isfinite(v)
    if w is not None:
        finite &= w > 0
        w = w[finite]
    v = v[finite]
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    span = hi - lo
    if not (span > 0 and math.isfinite(span)):
        return None
    bins = np.clip(((v - lo) / span * HISTOGRAM_BINS).astype(np.int64), 0, HISTOGRAM_BINS - 1)
    counts = np.bincount(bins, w, minlength=HISTOGRAM_BINS)
    half = HISTOGRAM_BINS // 2
    levels = []
    for mode in (int(np.argmax(counts[:half])), half + int(np.argmax(counts[half:]))):
        in_bin = bins == mode
        levels.append(_median(v[in_bin], None if w is None else w[in_bin]))
    low, high = levels
    return (low, high) if high > low else None


def _median(values: np.ndarray, weights: np.ndarray | None) -> float:
    """The (weighted) median: within a level's bin, the level itself rather than the edge
    samples that share the bin."""
    if not len(values):
        return math.nan
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(np.ones(len(values)) if weights is None else weights[order])
    return float(values[order][min(np.searchsorted(cumulative, 0.5 * cumulative[-1]),
                                   len(values) - 1)])


def _code_counts(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct codes of a 1- or 2-byte integer array and how many times each occurs."""
    native = codes.astype(codes.dtype.newbyteorder("="), copy=False)
    unsigned = native.view(f"u{native.dtype.itemsize}")
    counts = np.zeros(1 << (8 * native.dtype.itemsize), np.int64)
    for i in range(0, len(unsigned), CHUNK):
        counts += np.bincount(unsigned[i : i + CHUNK], minlength=len(counts))
    present = np.flatnonzero(counts)
    return present.astype(unsigned.dtype).view(native.dtype), counts[present]


# --- rise times --------------------------------------------------------------------------------
def rise_times(
    record: Waveform | Frames,
    start_s: np.ndarray,
    frame: np.ndarray | None = None,
    *,
    polarity: Polarity = "high",
    levels: tuple[float, float] | None = None,
    min_samples: int = MIN_SAMPLES,
    max_edge_samples: int = MAX_EDGE_SAMPLES,
) -> np.ndarray:
    """The 10–90 % time (s) of each pulse's leading edge, NaN where the record does not resolve it.

    `start_s` are the pulses' start times as pulse extraction gives them: from the record's
    trigger (a Waveform), or from frame 0's trigger with `frame` the frame each lies in (Frames).
    `polarity` "high": the leading edge rises; "low": it falls (its 90–10 % fall time).
    `levels` (low, high) in volts: default, the record's own (`record_levels`).
    """
    start = np.asarray(start_s, dtype=np.float64).reshape(-1)
    nan = np.full(len(start), np.nan)
    if not len(start):
        return nan
    if levels is None:
        levels = record_levels(record)
    if levels is None:
        return nan
    if isinstance(record, Frames):
        rows = np.zeros(len(start), np.int64) if frame is None else np.asarray(frame).reshape(-1)
        if rows.shape != start.shape or rows.dtype.kind not in "iu":
            return nan
        ok = (rows >= 0) & (rows < len(record))
        rows = np.where(ok, rows, 0).astype(np.int64)
        with np.errstate(all="ignore"):
            tags = np.asarray(record.trigger_s,
                              dtype=np.float64)[rows] if len(record) else np.zeros(len(rows))
            position = np.where(ok, (start - tags - record.t0_s) / record.dt_s, np.nan)
        take = _frames_take(record)
        points = record.points
    else:
        rows = np.zeros(len(start), np.int64)
        with np.errstate(all="ignore"):
            position = (start - record.t0_s) / record.dt_s
        take = _waveform_take(record)
        points = len(record)
    return _rise_times(take, points, rows, position, record.dt_s, levels, polarity, min_samples,
                       max_edge_samples)


def rise_times_at(
    volts: np.ndarray,
    positions: np.ndarray,
    dt_s: float,
    levels: tuple[float, float] | None = None,
    *,
    rows: np.ndarray | None = None,
    polarity: Polarity = "high",
    min_samples: int = MIN_SAMPLES,
    max_edge_samples: int = MAX_EDGE_SAMPLES,
) -> np.ndarray:
    """`rise_times` on plain arrays: `volts` one record (1-D) or frames (2-D, `rows` the frame of
    each edge), `positions` the fractional sample index of each leading edge's crossing in its
    record or frame; `levels` default to the histogram levels of all of `volts`."""
    v = np.asarray(volts, dtype=np.float64)
    v2 = v.reshape(1, -1) if v.ndim == 1 else v.reshape(len(v), -1) if v.ndim >= 2 else v.reshape(1,
                                                                                                  1)
    position = np.asarray(positions, dtype=np.float64).reshape(-1)
    if rows is None:
        row = np.zeros(len(position), np.int64)
    else:
        row = np.asarray(rows).reshape(-1)
        if row.shape != position.shape or row.dtype.kind not in "iu":
            return np.full(len(position), np.nan)
        ok = (row >= 0) & (row < len(v2))
        position = np.where(ok, position, np.nan)
        row = np.where(ok, row, 0).astype(np.int64)
    if levels is None:
        levels = histogram_levels(v2)
    if levels is None or not v2.size:
        return np.full(len(position), np.nan)
    return _rise_times(lambda r, i: v2[r, i], v2.shape[1], row, position, dt_s, levels, polarity,
                       min_samples,
                       max_edge_samples)


def _waveform_take(wf: Waveform) -> Take:
    if wf.codes is not None and wf.scale is not None:
        codes, scale = wf.codes, wf.scale
        return lambda rows, index: scale.volts(codes[index])
    volts = np.asarray(wf.volts, dtype=np.float64)
    return lambda rows, index: volts[index]


def _frames_take(frames: Frames) -> Take:
    codes, scale = frames.codes, frames.scale
    return lambda rows, index: scale.volts(codes[rows, index])


def _rise_times(take: Take, points: int, rows: np.ndarray, position: np.ndarray, dt_s: float,
                levels: tuple[float, float], polarity: Polarity, min_samples: int,
                max_edge_samples: int) -> np.ndarray:
    """Rise times (s) of the edges crossing at `position` (fractional sample) of record `rows`."""
    if polarity not in ("high", "low"):
        raise ValueError(f"polarity must be 'high' or 'low', got {polarity!r}")
    out = np.full(len(position), np.nan)
    low, high = float(levels[0]), float(levels[1])
    try:
        dt = float(dt_s)
    except (TypeError, ValueError):
        return out
    if not (
        dt > 0 and math.isfinite(dt) and high > low and math.isfinite(high - low) and points >= 2
    ):
        return out
    if polarity == "low":  # a falling leading edge is a rising one of the negated record
        take = _negated(take)
        low, high = -high, -low
    at10, at90 = low + LOW * (high - low), low + HIGH * (high - low)
    edge = _Edge(take, points, at10, at90, max(int(min(max_edge_samples, points)), 1),
                 max(int(min_samples), 0))
    with np.errstate(all="ignore"):
        usable = np.isfinite(position) & (position >= 0) & (position <= points - 1)
        # the first sample at or after the crossing
        anchor = np.ceil(np.where(usable, position, 0)).astype(np.int64)
    todo = np.flatnonzero(usable)
    unsettled = []
    for i in range(0, len(todo), BATCH):
        edges = todo[i : i + BATCH]
        out[edges], open_ = edge.batch(rows[edges], anchor[edges])
        unsettled.append(edges[open_])
    # slow edges: one by one, growing windows
    for e in np.concatenate(unsettled) if unsettled else []:
        out[e] = edge.one(int(rows[e]), int(anchor[e]))
    with np.errstate(all="ignore"):
        rise = out * dt
    return np.where(np.isfinite(rise) & (rise >= 0), rise, np.nan)


def _negated(take: Take) -> Take:
    return lambda rows, index: -take(rows, index)


class _Edge:
    """The 10 % and 90 % crossings around an edge's first sample past its crossing (`anchor`):
    `a` the last sample at or below 10 % at or before it, `b` the first at or above 90 % after
    `a`, with no sample at or below 10 % between (else a runt); each searched over at most
    `limit` samples. Rise times here are in samples."""

    def __init__(self, take: Take, points: int, at10: float, at90: float, limit: int,
                 min_samples: int) -> None:
        self.take, self.points, self.at10, self.at90 = take, points, at10, at90
        self.limit, self.min_samples = limit, min_samples

    def batch(self, rows: np.ndarray, anchor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every edge in windows of WINDOW samples each side: (rise, unsettled), unsettled
        where a crossing may lie beyond the window but within the limit (then NaN)."""
        width = min(WINDOW, self.limit)
        steps = np.arange(width)
        row = rows[:, None]
        back = anchor[:, None] - steps  # anchor, anchor - 1, ...
        with np.errstate(all="ignore"):
            is_low = (self.take(row, np.maximum(back, 0)) <= self.at10) & (back >= 0)
        found_a = is_low.any(axis=1)
        a = anchor - is_low.argmax(axis=1)
        forward = a[:, None] + 1 + steps
        inside = forward < self.points
        with np.errstate(all="ignore"):
            values = self.take(row, np.minimum(forward, self.points - 1))
            is_high = (values >= self.at90) & inside
            is_low = (values <= self.at10) & inside
        found_b, k = is_high.any(axis=1), is_high.argmax(axis=1)
        fell = is_low.any(axis=1) & (~found_b | (is_low.argmax(axis=1) < k))  # a runt
        more = width < self.limit
        unsettled = more & ((~found_a & (anchor - width + 1 > 0))
                            | (found_a & ~found_b & ~fell & (a + width < self.points - 1)))
        ok = found_a & found_b & ~fell & ~unsettled
        rise = np.full(len(anchor), np.nan)
        rise[ok] = self._interpolate(rows[ok], a[ok], a[ok] + 1 + k[ok])
        return rise, unsettled

    def one(self, row: int, anchor: int) -> float:
        """One edge, over windows growing up to the limit."""
        span, stop, first = 4 * WINDOW, anchor + 1, max(anchor - self.limit + 1, 0)
        a = -1
        while a < 0 and stop > first:
            start = max(stop - span, first)
            with np.errstate(all="ignore"):
                low = np.flatnonzero(self.take(row, np.arange(start, stop)) <= self.at10)
            if len(low):
                a = start + int(low[-1])
            stop, span = start, 2 * span
        if a < 0:
            return math.nan
        span, start, end = 4 * WINDOW, a + 1, min(a + 1 + self.limit, self.points)
        while start < end:
            stop = min(start + span, end)
            with np.errstate(all="ignore"):
                values = self.take(row, np.arange(start, stop))
                high, low = np.flatnonzero(values >= self.at90), np.flatnonzero(values <= self.at10)
            if len(low) and (not len(high) or low[0] < high[0]):
                return math.nan  # a runt
            if len(high):
                b = start + int(high[0])
                return float(self._interpolate(np.array([row]), np.array([a]), np.array([b]))[0])
            start, span = stop, 2 * span
        return math.nan

    def _interpolate(self, rows: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """t90 − t10 in samples, linear between the samples around each crossing; NaN where fewer
        than min_samples samples lie between a and b."""
        take = self.take
        with np.errstate(all="ignore"):
            va, va1 = take(rows, a), take(rows, a + 1)
            vb1, vb = take(rows, b - 1), take(rows, b)
            t10 = a + (self.at10 - va) / (va1 - va)
            t90 = (b - 1) + (self.at90 - vb1) / (vb - vb1)
            rise = t90 - t10
        return np.where(b - 1 - a >= self.min_samples, rise, np.nan)
