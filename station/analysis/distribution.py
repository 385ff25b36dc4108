"""A sample held as its distinct values and how often each occurs.

Latencies in whole ns take a few thousand distinct values for millions of events, so a run's
t_SW is a few kB here instead of 8 bytes per event, and every statistic the report quotes is
computed from it exactly: count, extremes, mean and standard deviation (integer sums for
integer samples), numpy's percentiles (the same interpolation), the median absolute deviation,
counts above a threshold, histograms. Pooling runs is merging counts. Floating-point samples
(scope pulse widths) are exact too; they just have as many distinct values as samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from station.analysis.stats import PERCENTILES

# integer samples are counted with one bincount over [min, min + DENSE_SPAN); the rare values
# beyond (a stall of milliseconds) are sorted: memory stays at 8 bytes per ns of the bulk's span
DENSE_SPAN = 1 << 22


# a normal sample's median absolute deviation times this is its standard deviation
MAD_TO_SIGMA = 1.4826


def robust_sigma(values: np.ndarray, median: float | None = None) -> tuple[float, float]:
    """(the median, MAD_TO_SIGMA × the median absolute deviation about it) of a plain sample."""
    v = np.asarray(values, dtype=np.float64)
    center = float(np.median(v)) if median is None else median
    return center, MAD_TO_SIGMA * float(np.median(np.abs(v - center)))


@dataclass(frozen=True, eq=False)
class Distribution:
    """``values`` strictly increasing (int64 or float64), ``counts`` ≥ 1 (int64), same length."""

    values: np.ndarray
    counts: np.ndarray

    # --- building -----------------------------------------------------------------------------

    @classmethod
    def of(cls, samples: np.ndarray) -> Distribution:
        """The distribution of a 1-D sample (integers or finite floats)."""
        a = np.asarray(samples).ravel()
        if a.dtype.kind in "ub":
            a = a.astype(np.int64)
        if not a.size:
            return cls(
                np.empty(0, a.dtype if a.dtype.kind == "i" else np.float64), np.empty(0, np.int64)
            )
        if a.dtype.kind == "i":
            return cls._of_integers(a.astype(np.int64, copy=False))
        return cls._sorted_runs(np.sort(a.astype(np.float64, copy=False)))

    @classmethod
    def _of_integers(cls, a: np.ndarray) -> Distribution:
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < DENSE_SPAN:
            counts = np.bincount(a - lo)
            at = np.flatnonzero(counts)
            return cls(at.astype(np.int64) + lo, counts[at].astype(np.int64))
        inside = a < lo + DENSE_SPAN
        bulk = cls._of_integers(a[inside])
        rest = cls._sorted_runs(np.sort(a[~inside]))
        return cls(np.concatenate([bulk.values, rest.values]), np.concatenate([bulk.counts,
                                                                               rest.counts]))

    @classmethod
    def _sorted_runs(cls, s: np.ndarray) -> Distribution:
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        return cls(s[starts], np.diff(np.r_[starts, s.size]).astype(np.int64))

    @classmethod
    def pooled(cls, parts: Iterable[Distribution]) -> Distribution:
        """The distribution of the parts' samples put together."""
        parts = [p for p in parts if p.count]
        if not parts:
            return cls(np.empty(0, np.int64), np.empty(0, np.int64))
        if len(parts) == 1:
            return parts[0]
        floats = any(p.values.dtype.kind == "f" for p in parts)
        return cls.weighted(
            np.concatenate([p.values.astype(np.float64) if floats else p.values for p in parts]),
            np.concatenate([p.counts for p in parts]),
        )

    @classmethod
    def weighted(cls, values: np.ndarray, counts: np.ndarray) -> Distribution:
        """`values` (any order, repeats allowed) each occurring `counts` times."""
        if not values.size:
            return cls(values, counts.astype(np.int64))
        order = np.argsort(values, kind="stable")
        v, c = values[order], counts[order].astype(np.int64)
        starts = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])
        return cls(v[starts], np.add.reduceat(c, starts))

    def shifted(self, by: float) -> Distribution:
        """Every sample plus `by` (as floats unless `by` is a whole number on integer samples)."""
        if self.values.dtype.kind == "i" and float(by).is_integer():
            return Distribution(self.values + int(by), self.counts)
        return Distribution(self.values.astype(np.float64) + float(by), self.counts)

    def on_grid(self, grid: float) -> Distribution:
        """A smaller distribution with the same count, min, max and histogram on any edges that are
        multiples of `grid` (as figures' bins are): each value between the extremes moves down to
        the grid point at or below it (but not below the min, which shares its cell), so at most
        (max - min) / grid + 2 values remain. Only for drawing: its other statistics differ."""
        if self.counts.size <= 2:
            return self
        inner = self.values[1:-1].astype(np.float64)
        # never above: tests/test_distribution.py, values near the grid
        floor = np.floor(inner / grid) * grid
        low = float(self.values[0])
        floor = np.maximum(floor, low)
        values = np.r_[low, floor, float(self.values[-1])]
        if self.values.dtype.kind == "i" and float(grid).is_integer():
            values = values.astype(np.int64)
        return Distribution.weighted(values, self.counts)

    # --- statistics ---------------------------------------------------------------------------

    @cached_property
    def count(self) -> int:
        return int(self._cumulative[-1]) if self.counts.size else 0

    def __len__(self) -> int:
        return self.count

    @property
    def min(self) -> float:
        return float(self.values[0])

    @property
    def max(self) -> float:
        return float(self.values[-1])

    def mean(self) -> float:
        if self.values.dtype.kind == "i":  # an exact integer sum, then one rounding
            return _exact_dot(self.values, self.counts) / self.count
        return float(np.dot(self.values, self.counts) / self.count)

    def std(self, ddof: int = 1) -> float:
        n = self.count
        if n - ddof <= 0:
            return 0.0
        if self.values.dtype.kind == "i":  # exact: n·Σx² − (Σx)² in integers, then one division
            s1 = _exact_dot(self.values, self.counts)
            s2 = _exact_dot(self.values, self.counts, squared=True)
            return math.sqrt((n * s2 - s1 * s1) / (n * (n - ddof)))
        d = self.values.astype(np.float64) - self.mean()
        return math.sqrt(float(np.dot(self.counts, d * d)) / (n - ddof))

    @cached_property
    def _cumulative(self) -> np.ndarray:  # cached_property writes past the frozen dataclass's guard
        return np.cumsum(self.counts)

    def order_statistics(self, ranks: Sequence[int] | np.ndarray) -> np.ndarray:
        """X_(r) for each 1-based rank r (1 ≤ r ≤ count), as floats."""
        return self.values[np.searchsorted(self._cumulative, np.asarray(ranks),
                                           side="left")].astype(np.float64)

    def percentiles(self, q: Sequence[float]) -> np.ndarray:
        """numpy.percentile(samples, q) (linear interpolation between order statistics), exactly."""
        n = self.count
        pos = np.asarray(q, np.float64) / 100.0 * (n - 1)  # 0-based fractional rank
        below = np.floor(pos).astype(np.int64)
        above = np.minimum(below + 1, n - 1)
        lo = self.order_statistics(below + 1)
        hi = self.order_statistics(above + 1)
        frac = pos - below
        # numpy's _lerp: exact at both ends
        return np.where(frac >= 0.5, hi - (hi - lo) * (1 - frac), lo + (hi - lo) * frac)

    def median(self) -> float:
        return self._median

    @cached_property
    def _median(self) -> float:
        return float(self.percentiles([50.0])[0])

    def robust_sigma(self, center: float | None = None) -> float:
        """MAD_TO_SIGMA × the MAD: the spread robust outlier rules measure an excess against."""
        return MAD_TO_SIGMA * self.mad(center)

    def mad(self, center: float | None = None) -> float:
        """median(|x − center|) (numpy's median of the deviations), center the median by default."""
        if center is None or float(center) == self._median:
            return self._mad_about_median
        return self._mad(float(center))

    @cached_property
    def _mad_about_median(self) -> float:
        return self._mad(self._median)

    def _mad(self, center: float) -> float:
        dev = np.abs(self.values.astype(np.float64) - center)
        return float(Distribution.weighted(dev, self.counts).percentiles([50.0])[0])

    def count_above(self, threshold: float) -> int:
        """How many samples are > threshold."""
        return int(self.counts[np.searchsorted(self.values, threshold, side="right"):].sum())

    def histogram(self, edges: np.ndarray) -> np.ndarray:
        """numpy.histogram(samples, bins=edges)[0]: the last bin holds its right edge."""
        cum = np.r_[0, self._cumulative]
        at = np.searchsorted(self.values, edges, side="left")
        at[-1] = np.searchsorted(self.values, edges[-1], side="right")
        counts = np.diff(cum[at])
        return counts

    def describe(self) -> dict | None:
        """station.analysis.stats.describe() of the samples."""
        if not self.count:
            return None
        pct = self.percentiles(list(PERCENTILES.values()))
        return {
            "count": self.count,
            "min_ns": self.min,
            "mean_ns": self.mean(),
            "std_ns": self.std(1),
            "max_ns": self.max,
            "percentiles_ns": {k: float(p) for k, p in zip(PERCENTILES, pct, strict=True)},
        }

    def samples(self) -> np.ndarray:
        """The sample itself, sorted (for code that needs an array; memory: one value per
        sample)."""
        return np.repeat(self.values, self.counts)


def _exact_dot(values: np.ndarray, counts: np.ndarray, squared: bool = False) -> int:
    """Σ values·counts (Σ values²·counts) without int64 overflow (Python integers past 2**62)."""
    if not values.size:
        return 0
    top = max(abs(int(values[0])), abs(int(values[-1])))
    if (top * top if squared else top) * int(counts.sum()) < 2**62:
        return int(np.dot(values * values if squared else values, counts))
    return sum((int(v) * int(v) if squared else int(v)) * int(c)
               for v, c in zip(values.tolist(), counts.tolist(), strict=True))
