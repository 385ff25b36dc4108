"""Statistics accumulated batch by batch, so a run's analysis holds a few batches of records and
its histograms, never the whole run (an hour at 10 kHz is 36 M records).

* ``DistributionBuilder``: a Distribution (distinct values × counts) merged batch by batch.
  Integers (t_SW in ns) stay exact; floats (scope widths, paired HW−SW differences) are binned
  at ``quantum_ns`` first, so memory follows the span of the data over the bin, not the sample
  count, and every order statistic of the binned sample is within half a bin of the raw one.
* ``Moments``: count, extremes, mean and standard deviation of floats, exact to rounding
  (each batch's sum taken about a fixed centre, the total by math.fsum).
* ``ClusterMoments``: the cluster-robust standard error of a mean over clusters that arrive
  one after another (a scope's acquisitions), clusters cut across batches included.
"""

from __future__ import annotations

import math

import numpy as np

from station.analysis.distribution import DENSE_SPAN, Distribution

# widths and differences of scope pulses are binned at 10 ps: a fifth of the sample interval of
# a 20 GS/s scope, far below any scope's edge resolution; order statistics move by ≤ 5 ps
WIDTH_QUANTUM_NS = 0.01
MERGE_EVERY = 8  # batch distributions merged into one every so many batches


class DistributionBuilder:
    """The Distribution of every batch `add`ed; floats binned at `quantum_ns` when given.

    Integers (and bins) are counted into one dense array over the span the batches reach, up to
    DENSE_SPAN wide: memory follows the data's span over the resolution, whatever the count.
    Values beyond that window (a stall of milliseconds) are kept as distributions, merged."""

    def __init__(self, quantum_ns: float | None = None) -> None:
        self.quantum_ns = quantum_ns
        self._lo = 0
        self._dense: np.ndarray | None = None  # counts of self._lo, self._lo + 1, ...
        self._parts: list[Distribution] = []  # float samples, and integers outside the window

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        if self.quantum_ns is not None:  # bin index, exact integer counting
            values = np.rint(np.asarray(values, np.float64) / self.quantum_ns).astype(np.int64)
        v = np.asarray(values)
        if v.dtype.kind in "iub":
            self._count(v.astype(np.int64, copy=False))
        else:
            self._keep(Distribution.of(v))

    def _count(self, v: np.ndarray) -> None:
        low, high = int(v.min()), int(v.max()) + 1
        if self._dense is None:
            self._lo, self._dense = low, np.zeros(min(high - low, DENSE_SPAN), np.int64)
        lo, hi = self._lo, self._lo + len(self._dense)
        # widen the window towards the batch, never past DENSE_SPAN
        new_lo = max(min(lo, low), hi - DENSE_SPAN)
        new_hi = min(max(hi, high), new_lo + DENSE_SPAN)
        if (new_lo, new_hi) != (lo, hi):
            grown = np.zeros(new_hi - new_lo, np.int64)
            grown[lo - new_lo:hi - new_lo] = self._dense
            self._lo, self._dense = new_lo, grown
            lo, hi = new_lo, new_hi
        if low < lo or high > hi:
            inside = (v >= lo) & (v < hi)
            self._keep(Distribution.of(v[~inside]))
            v = v[inside]
            if not v.size:
                return
            low, high = int(v.min()), int(v.max()) + 1
        self._dense[low - lo:high - lo] += np.bincount(v - low, minlength=high - low)

    def _keep(self, part: Distribution) -> None:
        self._parts.append(part)
        if len(self._parts) >= MERGE_EVERY:
            self._parts = [Distribution.pooled(self._parts)]

    def result(self) -> Distribution:
        parts = list(self._parts)
        if self._dense is not None:
            at = np.flatnonzero(self._dense)
            parts.append(Distribution(at.astype(np.int64) + self._lo, self._dense[at]))
        pooled = Distribution.pooled(parts)
        if self.quantum_ns is None:
            return pooled
        per_ns = round(1.0 / self.quantum_ns)
        # k / 100 is the nearest double to k·0.01; k·0.01 is not
        if per_ns * self.quantum_ns == 1.0:
            return Distribution(pooled.values / per_ns, pooled.counts)
        return Distribution(pooled.values * self.quantum_ns, pooled.counts)


class Moments:
    """Count, min, max, mean and standard deviation of float batches."""

    def __init__(self) -> None:
        self.count = 0
        self.min = math.inf
        self.max = -math.inf
        self._centre: float | None = None
        self._sums: list[float] = []  # Σ(x − centre) per batch
        self._squares: list[float] = []  # Σ(x − centre)² per batch

    def add(self, values: np.ndarray) -> None:
        x = np.asarray(values, np.float64)
        if not x.size:
            return
        if self._centre is None:  # the first batch's mean: later deviations stay small
            self._centre = float(x.mean())
        d = x - self._centre
        self.count += x.size
        self.min, self.max = min(self.min, float(x.min())), max(self.max, float(x.max()))
        self._sums.append(float(d.sum()))
        self._squares.append(float(np.dot(d, d)))

    @property
    def mean(self) -> float:
        if not self.count:
            return math.nan
        return (self._centre or 0.0) + math.fsum(self._sums) / self.count

    def std(self, ddof: int = 1) -> float:
        if self.count - ddof <= 0:
            return 0.0
        s = math.fsum(self._sums)
        return math.sqrt(max(math.fsum(self._squares) - s * s / self.count,
                             0.0) / (self.count - ddof))

    def mean_se(self) -> tuple[float, float]:
        """stats.mean_se of the values seen."""
        if self.count < 2:
            return (self.mean, math.inf)
        return self.mean, self.std(1) / math.sqrt(self.count)


class ClusterMoments:
    """Mean and cluster-robust standard error of values grouped in consecutive clusters:
    se = √(k/(k−1)·Σ_c (Σ_{i∈c}(x_i − mean))²) / n over the k clusters (correlation.shift).
    Batches must come in cluster order; a cluster may continue into the next batch."""

    def __init__(self) -> None:
        self.values = Moments()
        self.clusters = 0
        self._centre: float | None = None
        self._a = self._b = self._c = 0.0  # Σ s_c², Σ s_c·n_c, Σ n_c² (s_c: Σ(x − centre) in c)
        # the last cluster: (id, s, n), maybe unfinished
        self._open: tuple[int, float, int] | None = None
        # False: a cluster came back after another (then the SE is not computed)
        self.ordered = True

    def add(self, clusters: np.ndarray, values: np.ndarray) -> None:
        x = np.asarray(values, np.float64)
        if not x.size:
            return
        ids = np.asarray(clusters)
        self.values.add(x)
        if self._centre is None:
            self._centre = float(x.mean())
        if np.any(ids[1:] < ids[:-1]) or (self._open is not None and ids[0] < self._open[0]):
            self.ordered = False
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        s = np.add.reduceat(x - self._centre, starts)
        n = np.diff(np.r_[starts, x.size]).astype(np.float64)
        first_id = int(ids[0])
        if self._open is not None:
            if self._open[0] == first_id:  # the open cluster continues here
                s[0] += self._open[1]
                n[0] += self._open[2]
            else:
                self._close(*self._open[1:])
        # the batch's closed clusters, added in order from the running sums: the same
        if len(s) > 1:
            # float additions as one cluster at a time (an accumulate adds sequentially), without a
            # Python call per acquisition (70 000 in a seed-scale run)
            closed_s, closed_n = s[:-1], n[:-1]
            self.clusters += len(closed_s)
            self._a = float(np.cumsum(np.r_[self._a, closed_s * closed_s])[-1])
            self._b = float(np.cumsum(np.r_[self._b, closed_s * closed_n])[-1])
            self._c = float(np.cumsum(np.r_[self._c, closed_n * closed_n])[-1])
        self._open = (int(ids[starts[-1]]), float(s[-1]), float(n[-1]))

    def _close(self, s: float, n: float) -> None:
        self.clusters += 1
        self._a += s * s
        self._b += s * n
        self._c += n * n

    @property
    def seen(self) -> int:
        """The clusters seen, the one still open included."""
        return self.clusters + (self._open is not None)

    def mean_se(self) -> tuple[float, float]:
        """correlation.cluster_mean_se: fewer than 10 clusters fall back to the plain SE."""
        a, b, c, k = self._a, self._b, self._c, self.clusters
        if self._open is not None:
            s, n = self._open[1:]
            a, b, c, k = a + s * s, b + s * n, c + n * n, k + 1
        if k < 10 or not self.ordered:
            return self.values.mean_se()
        mean = self.values.mean
        d = mean - (self._centre or 0.0)
        total = max(a - 2 * d * b + d * d * c, 0.0)
        return mean, math.sqrt(k / (k - 1) * total) / self.values.count
