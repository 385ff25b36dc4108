"""Statistics of a latency histogram (cyclictest -h, or any bucketed sample), with the
conventions of :func:`station.analysis.stats.describe`: values in ns, the keys count, min_ns,
mean_ns, std_ns, max_ns and percentiles_ns (the PERCENTILES keys).

Conventions:

* A sample in bucket k lies in [k, k+1) bucket widths: cyclictest truncates a latency to its
  unit. The figures are those of the truncated values k·bucket_ns, as cyclictest's own
  min/avg/max are, so they sit about half a bucket below the true latencies.
* Overflows are samples beyond the histogram's range (-h): their values are unknown, except
  that they are >= the range and <= the exact maximum when that is given. They count in
  ``count`` and in the percentiles' ranks; a percentile that falls among them is None in
  ``percentiles_ns`` and ``"> range"`` in ``percentile_flags`` (the largest sample is the
  exact maximum when given, so the rank n is known). mean/std/max are None when the overflows
  make them unknown (mean: unless the exact average is given).
* Percentiles: the inverted empirical CDF, the order statistic X_(r) with r = ceil(p/100·n),
  numpy's ``method="inverted_cdf"``.
* Exact min/avg/max (cyclictest's, over every cycle) are taken as given; the histogram's own
  are bucket-resolution. std is the histogram's (ddof=1, as describe()).
* ``percentile_ci95_ns``: distribution-free, from order statistics: ranks l and u from
  Binomial(n, p) with P(X_(l) <= ξ_p <= X_(u)) >= 95 %, reported as the bounds of their
  buckets, [k_l, k_u + 1)·bucket_ns. A bound the data cannot give (rank below 1 or above n,
  or an overflow with no exact maximum) is None.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from station.analysis.quantile_functions import binom_ppf
from station.analysis.stats import PERCENTILES

if TYPE_CHECKING:
    from station.parsers.cyclictest import CyclictestThread

MAX_TOTAL = 2**63 - 1
BEYOND_RANGE = "> range"


def _int_array(values: Any, what: str) -> np.ndarray:
    try:
        a = np.asarray(values)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"{what}: not an array of integers ({e})") from None
    if a.ndim != 1:
        raise ValueError(f"{what}: a 1-D array is needed, not {a.ndim}-D")
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind == "u":
        if int(a.max()) > MAX_TOTAL:
            raise ValueError(f"{what}: values beyond int64")
        return a.astype(np.int64)
    if a.dtype.kind == "i":
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.floor(a)) or np.any(np.abs(a) > 2**53):
            raise ValueError(f"{what}: not integers")
        return a.astype(np.int64)
    raise ValueError(f"{what}: integers needed, not {a.dtype}")


def _whole(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise ValueError(f"{what}: an integer is needed, not {type(v).__name__}")
    return int(v)


def _number(v: Any, what: str) -> float | None:
    if v is None:
        return None
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float | np.integer | np.floating)
        or not math.isfinite(v)
    ):
        raise ValueError(f"{what}: a finite number or None is needed")
    return float(v)


@dataclass(frozen=True, eq=False)
class Histogram:
    """A validated histogram: ``bucket_us`` (bucket index, in units of ``bucket_ns``; µs by
    default) increasing, without duplicates, with non-zero ``counts``; read-only int64 arrays.
    ``range_us``: the first bucket beyond the histogram (cyclictest's -h), None if unknown."""

    bucket_us: np.ndarray
    counts: np.ndarray
    overflows: int = 0
    exact_min_us: float | None = None
    exact_avg_us: float | None = None
    exact_max_us: float | None = None
    range_us: int | None = None
    bucket_ns: float = 1000

    def __post_init__(self) -> None:
        b = _int_array(self.bucket_us, "bucket_us")
        c = _int_array(self.counts, "counts")
        if b.shape != c.shape:
            raise ValueError(f"bucket_us has {b.size} entries, counts {c.size}")
        if np.any(c < 0):
            raise ValueError("counts must not be negative")
        if np.any(b < 0):
            raise ValueError("bucket indices must not be negative")
        order = np.argsort(b, kind="stable")
        b, c = b[order], c[order]
        if np.any(b[1:] == b[:-1]):
            raise ValueError("a bucket appears twice")
        keep = c > 0
        b, c = b[keep], c[keep]
        overflows = _whole(self.overflows, "overflows")
        if overflows < 0:
            raise ValueError("overflows must not be negative")
        total = sum(c.tolist()) + overflows
        if total > MAX_TOTAL:
            raise ValueError(f"{total} samples: more than int64 can count")
        rng = None if self.range_us is None else _whole(self.range_us, "range_us")
        if rng is not None and (rng < 1 or (b.size and int(b[-1]) >= rng)):
            raise ValueError(f"range_us {rng} must be beyond every bucket")
        width = _number(self.bucket_ns, "bucket_ns")
        if width is None or width <= 0:
            raise ValueError("bucket_ns must be positive")
        for name in ("exact_min_us", "exact_avg_us", "exact_max_us"):
            object.__setattr__(self, name, _number(getattr(self, name), name))
        lo, hi = self.exact_min_us, self.exact_max_us
        # the exact extremes must hold every sample: overflows lie at or beyond the range
        beyond = rng if rng is not None else int(b[-1]) + 1 if b.size else 0
        if hi is not None and ((b.size and hi < b[-1]) or (overflows and hi < beyond)):
            raise ValueError(f"exact_max_us {hi} is below samples of the histogram")
        if lo is not None and ((b.size and lo >= b[0] + 1) or (hi is not None and lo > hi)):
            raise ValueError(f"exact_min_us {lo} is above samples of the histogram")
        b.setflags(write=False)
        c.setflags(write=False)
        for name, value in (("bucket_us", b), ("counts", c), ("overflows", overflows), ("range_us",
                                                                                        rng),
                            ("bucket_ns", width)):
            object.__setattr__(self, name, value)

    @property
    def in_range(self) -> int:
        return sum(self.counts.tolist())

    @property
    def count(self) -> int:
        return self.in_range + self.overflows

    def describe(self) -> dict | None:
        return _describe(self)

    def percentile_ci95_ns(
        self, confidence: float = 0.95, effective_n: Mapping[str, float | None] | None = None
    ) -> dict[str, tuple[float | None, float | None]]:
        return _percentile_ci(self, confidence, effective_n)


def describe_histogram(
    bucket_us: Any,
    counts: Any,
    overflows: int = 0,
    exact_min_us: float | None = None,
    exact_avg_us: float | None = None,
    exact_max_us: float | None = None,
    bucket_ns: float = 1000,
    *,
    range_us: int | None = None,
) -> dict | None:
    """describe()'s dict for a histogram (None if it holds no sample), plus ``resolution_ns``
    (the bucket width), ``overflows``, ``range_ns``, ``percentile_flags`` (None, or "> range"
    where the percentile is beyond the histogram) and ``percentile_ci95_ns`` ([lo, hi] per
    percentile). See the module doc for the conventions."""
    return Histogram(bucket_us, counts, overflows, exact_min_us, exact_avg_us, exact_max_us,
                     range_us,
                     bucket_ns).describe()


def percentile_ci95_ns(
    bucket_us: Any,
    counts: Any,
    overflows: int = 0,
    *,
    exact_max_us: float | None = None,
    bucket_ns: float = 1000,
    range_us: int | None = None,
    confidence: float = 0.95,
) -> dict[str, tuple[float | None, float | None]]:
    """Distribution-free confidence interval of each PERCENTILES entry, in ns: (lo, hi), either
    None where the data give no bound."""
    h = Histogram(bucket_us, counts, overflows, exact_max_us=exact_max_us, range_us=range_us,
                  bucket_ns=bucket_ns)
    return h.percentile_ci95_ns(confidence)


def _rank(p: float, n: int) -> int:
    # exact arithmetic: 99.99 % of 10 000 is rank 9999, not 9999.000000000002 → 10 000
    return max(1, math.ceil(Fraction(str(p)) * n / 100))


class _Ranks:
    """Order statistics of a histogram: the bucket of X_(r), or the overflow region above it."""

    def __init__(self, h: Histogram) -> None:
        self.h = h
        self.cum = np.cumsum(h.counts)  # fits int64: the total was checked
        self.n_in = int(self.cum[-1]) if self.cum.size else 0
        self.n = self.n_in + h.overflows
        w = h.bucket_ns
        if h.range_us is not None:
            self.overflow_lo: float | None = h.range_us * w
        elif h.bucket_us.size:
            self.overflow_lo = (int(h.bucket_us[-1]) + 1) * w
        else:
            self.overflow_lo = None
        self.overflow_hi = None if h.exact_max_us is None else (math.floor(h.exact_max_us) + 1) * w

    def bucket(self, r: int) -> int | None:
        """The bucket index of X_(r), 1 <= r <= n; None among the overflows."""
        if r > self.n_in:
            return None
        return int(self.h.bucket_us[int(np.searchsorted(self.cum, r, side="left"))])

    def value(self, r: int) -> float | None:
        k = self.bucket(r)
        if k is not None:
            return k * self.h.bucket_ns
        if r == self.n and self.h.exact_max_us is not None:
            return self.h.exact_max_us * self.h.bucket_ns
        return None

    def lower(self, r: int) -> float | None:
        if r < 1:
            return None
        k = self.bucket(r)
        if k is not None:
            return k * self.h.bucket_ns
        if r == self.n and self.h.exact_max_us is not None:
            return math.floor(self.h.exact_max_us) * self.h.bucket_ns
        return self.overflow_lo

    def upper(self, r: int) -> float | None:
        if r > self.n:
            return None
        k = self.bucket(r)
        return (k + 1) * self.h.bucket_ns if k is not None else self.overflow_hi


def _percentile_ci(h: Histogram, confidence: float, effective_n: Mapping[str,
                                                                         float | None] | None = None
                   ) -> dict[str, tuple[float | None, float | None]]:
    """Each percentile's distribution-free interval; with `effective_n` (per key: the independent
    cycles the histogram is worth at that level, dependence.py; None: no interval), the ranks of
    Binomial(n_eff, p) scaled back to the histogram's n (the i.i.d. interval when n_eff = n)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    rk = _Ranks(h)
    out: dict[str, tuple[float | None, float | None]] = {}
    if rk.n == 0:
        return {key: (None, None) for key in PERCENTILES}
    tail = (1 - confidence) / 2
    for key, p in PERCENTILES.items():
        q = p / 100
        n_eff = rk.n if effective_n is None else effective_n.get(key)
        if n_eff is None:
            out[key] = (None, None)
            continue
        m = max(1, min(rk.n, math.floor(n_eff)))
        # P(X_(l) <= ξ) = P(B >= l) and P(X_(u) >= ξ) = P(B <= u - 1) for B ~ Binomial(m, q)
        lo_rank = int(binom_ppf(tail, m, q))
        hi_rank = int(binom_ppf(1 - tail, m, q)) + 1
        if m != rk.n:  # as levels, read off the n cycles
            lo_rank = math.floor(lo_rank / m * rk.n) if lo_rank >= 1 else 0
            hi_rank = math.ceil(hi_rank / m * rk.n) if hi_rank <= m else rk.n + 1
        out[key] = (rk.lower(lo_rank), rk.upper(hi_rank))
    return out


def _describe(h: Histogram) -> dict | None:
    rk = _Ranks(h)
    n = rk.n
    if n == 0:
        return None
    w = h.bucket_ns
    b = h.bucket_us.astype(np.float64)
    c = h.counts.astype(np.float64)
    # every value known: no overflow, or the only one is the exact maximum
    extra = (
        []
        if h.overflows == 0
        else [h.exact_max_us]
        if h.overflows == 1 and h.exact_max_us is not None
        else None
    )
    mean_u = std_u = None
    if extra is not None:
        vals = np.concatenate([b, np.asarray(extra, dtype=np.float64)])
        wts = np.concatenate([c, np.ones(len(extra))])
        mean_u = float(np.dot(vals, wts) / n)
        std_u = float(math.sqrt(max(0.0, np.dot(wts,
                                                (vals - mean_u) ** 2)) / (n - 1))) if n > 1 else 0.0
    # cyclictest's exact figures first; else the histogram's where it knows them
    mean_ns = (
        h.exact_avg_us * w if h.exact_avg_us is not None else None if mean_u is None else mean_u * w
    )
    min_ns = h.exact_min_us * w if h.exact_min_us is not None else rk.value(1)
    max_ns = (
        h.exact_max_us * w
        if h.exact_max_us is not None
        else rk.value(n)
        if h.overflows == 0
        else None
    )
    pct: dict[str, float | None] = {}
    flags: dict[str, str | None] = {}
    for key, p in PERCENTILES.items():
        r = _rank(p, n)
        pct[key] = rk.value(r)
        flags[key] = BEYOND_RANGE if r > rk.n_in else None
    ci = _percentile_ci(h, 0.95)
    return {
        "count": n,
        "min_ns": min_ns,
        "mean_ns": mean_ns,
        "std_ns": std_u * w if std_u is not None else None,
        "max_ns": max_ns,
        "percentiles_ns": pct,
        "resolution_ns": float(w),
        "overflows": h.overflows,
        "range_ns": None if h.range_us is None else float(h.range_us * w),
        "percentile_flags": flags,
        "percentile_ci95_ns": {k: [lo, hi] for k, (lo, hi) in ci.items()},
    }


def combine(histograms: Iterable[Histogram]) -> Histogram:
    """The all-threads histogram: counts and overflows summed; exact min/max/avg where every
    non-empty part has them (the avg weighted by sample counts). Parts of different ranges
    are cut to the smallest: what lies beyond it becomes overflows."""
    hs = list(histograms)
    if not hs:
        raise ValueError("nothing to combine")
    if any(not isinstance(h, Histogram) for h in hs):
        raise ValueError("combine() takes Histogram objects")
    widths = {h.bucket_ns for h in hs}
    if len(widths) != 1:
        raise ValueError(f"bucket widths differ: {sorted(widths)}")
    ranges = [h.range_us for h in hs]
    rng = min(ranges) if all(r is not None for r in ranges) else None  # type: ignore[type-var]
    b = np.concatenate([h.bucket_us for h in hs])
    c = np.concatenate([h.counts for h in hs])
    overflows = sum(h.overflows for h in hs)
    if rng is not None:
        beyond = b >= rng
        overflows += sum(c[beyond].tolist())
        b, c = b[~beyond], c[~beyond]
    if sum(c.tolist()) + overflows > MAX_TOTAL:
        raise ValueError("more samples than int64 can count")
    uniq, inv = np.unique(b, return_inverse=True)
    summed = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(summed, inv, c)
    parts = [h for h in hs if h.count]
    mins = [h.exact_min_us for h in parts]
    maxs = [h.exact_max_us for h in parts]
    avgs = [h.exact_avg_us for h in parts]
    n = sum(h.count for h in parts)
    return Histogram(
        uniq, summed, overflows,
        exact_min_us=min(mins) if parts and None not in mins else None,  # type: ignore[type-var]
        exact_avg_us=sum(a * h.count for a, h in zip(avgs, parts,
                                                     strict=True)) / n  # type: ignore[operator]
        if parts and None not in avgs else None,
        exact_max_us=max(maxs) if parts and None not in maxs else None,  # type: ignore[type-var]
        range_us=rng, bucket_ns=widths.pop(),
    )


def from_cyclictest(thread: CyclictestThread, *, range_us: int | None = None) -> Histogram:
    """A parsed cyclictest thread as a Histogram, in its unit (µs, or ns with -N). Overflows: the
    printed count (text) or cycles - sum(histogram) (JSON). The text's average is only the integer
    part, so it is not used as exact (the mean is then the histogram's, or None with overflows).
    ``range_us``: the run's -h (``HistogramOutput.histogram_range`` /
    ``CyclictestReport.histogram_range``)."""
    if not thread.has_histogram:
        raise ValueError(f"thread {thread.index} has no histogram (was -h given?)")
    overflows = (
        thread.overflows
        if thread.overflows is not None
        else max(0, thread.cycles - thread.in_range)
    )
    if (
        thread.overflows is None
        and range_us is not None
        and thread.max is not None
        and thread.max < range_us
    ):
        # no sample reached the range, so cycles beyond the histogram's sum are not overflows: a
        # cyclictest stopped by a signal counts a cycle before it files it in the histogram
        overflows = 0
    return Histogram(
        thread.buckets, thread.counts, overflows,
        exact_min_us=thread.min, exact_avg_us=None if thread.avg_truncated else thread.avg,
        exact_max_us=thread.max, range_us=range_us, bucket_ns=thread.unit_ns,
    )
