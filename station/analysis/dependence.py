"""Intervals for a time-ordered sample whose events are not independent (issue 46).

A bench's latency comes in phases (the seed's dd loop: seconds of writeback, sync, checksum) and
carries state from event to event (caches, frequency), so n events hold fewer than n independent
pieces of information, and std/√n or an order-statistic interval over n is too sure of itself.

The sample arrives as consecutive *fine blocks* (a few hundred events each, in time order). Each
statistic is a ratio of block totals — a mean is Σx/Σn, a quantile's level is Σ1{x ≤ ξ}/Σn — so its
variance is that of a ratio of sums of dependent blocks, estimated one of two ways:

* **a load's cycle** (the dd loop's write, sync, checksum, remove, over and over) shows in the block
  medians' autocorrelation as a trough then a peak beyond ±3/√k, the peak at one cycle
  (`cycle_blocks`). A run then averages whole cycles, and each cycle's phases cancel in it: the
  variance is a Bartlett lag window one cycle wide over the linearised block totals (its Fejér
  kernel is zero at the cycle's frequency and every harmonic, so a strictly periodic profile adds
  next to nothing, as it adds next to nothing to a mean over whole cycles), with the normal
  multiplier (see spread_of). Batch means there would count each phase as an independent piece of
  error, and over-cover (100 % of 900 twin runs against a 95 % goal).
* otherwise **batch means**: the blocks are merged into k equal batches, the batch size doubled
  while the batch means are still correlated with their neighbours (lag-1 autocorrelation beyond
  1.645/√k: a one-sided 5 % test), and the ratio's variance taken from the k batches, k/(k−1)·Σ(Y_b
  − R·N_b)²/N², with Student's t at k−1 degrees of freedom. Fewer than MIN_BATCHES uncorrelated
  batches: the run is too short for its own dependence, and the interval is withheld with that
  reason (a bound that pretended would be worse).

Quantiles: the level's standard error σ_p from the indicator's block totals gives an effective
sample size n_eff = p(1−p)/σ_p² (never above n); the interval is the distribution-free one of
Binomial(n_eff, p), its ranks scaled back to the n events (so it is the i.i.d. interval when the
events are independent), n_eff shrunk by (z/t_ν)² for the variance estimate's own uncertainty. In a
tail whose exceedances are too few for that (fewer than MIN_EXCEEDANCES beyond the estimate),
n_eff = n·θ with θ the blocks estimate of the extremal index (blocks holding an exceedance over
exceedances): clustered exceedances count once per cluster.

What each interval assumes: the run is stationary once its batches are long enough (phases
repeat within it; a trend over the run is not covered), and its truth is the run's own long-run
value *given its machine state*. Two runs of one condition differ by more than that: comparisons
use the runs as units (station/kinds/module/findings.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from station.analysis.distribution import Distribution
from station.analysis.quantile_functions import binom_ppf
from station.analysis.stats import PERCENTILES
from station.common.lazy_import import lazy_module

special = lazy_module("scipy.special")

#: events per fine block (the finest batch); a run's blocks are merged from these
FINE_EVENTS = 500
#: batches a stated interval needs once they are long enough to be uncorrelated
MIN_BATCHES = 10
#: at most this many batches to start from (the finest the test looks at)
START_BATCHES = 1024
#: exceedances a tail quantile needs for its batch-means variance; fewer: the extremal index
MIN_EXCEEDANCES = 50
Z95 = 1.959963984540054
#: one-sided 5 % normal quantile: lag-1 autocorrelation beyond 1.645/√k is still correlation
Z_TEST = 1.6448536269514722


def t_ppf(q: float, df: float) -> float:
    """Student's t quantile (scipy.special.stdtrit, without scipy.stats' import)."""
    return float(special.stdtrit(df, q))


@dataclass(frozen=True)
class Batching:
    """The batch size chosen for one statistic: `size` fine blocks a batch, `count` batches, the
    lag-1 autocorrelation of their means, and whether the finest batches were already
    uncorrelated."""

    size: int
    count: int
    lag1: float
    independent: bool

    @property
    def enough(self) -> bool:
        return self.count >= MIN_BATCHES


def _merge(y: np.ndarray, n: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive groups of `size` blocks; a short last group joins the one before it."""
    k = max(len(y) // size, 1)
    edges = np.arange(k) * size
    yb, nb = np.add.reduceat(y, edges), np.add.reduceat(n, edges)
    return yb, nb


def _lag1(means: np.ndarray, weights: np.ndarray) -> float:
    if len(means) < 3:
        return math.nan
    d = (means - np.average(means, weights=weights))
    den = float(np.dot(d, d))
    return float(np.dot(d[1:], d[:-1]) / den) if den > 0 else 0.0


def choose_batching(y: np.ndarray, n: np.ndarray) -> Batching:
    """The smallest batch size (in fine blocks, doubling) at which the batch means of y/n are no
    longer correlated with their neighbours."""
    y, n = np.asarray(y, np.float64), np.asarray(n, np.float64)
    size = first = max(1, math.ceil(len(y) / START_BATCHES))
    while True:
        yb, nb = _merge(y, n, size)
        keep = nb > 0
        r1 = _lag1(yb[keep] / nb[keep], nb[keep])
        correlated = r1 > Z_TEST / math.sqrt(len(yb))  # NaN (under 3 batches): not shown to be
        if len(yb) < MIN_BATCHES or not correlated:
            return Batching(size, len(yb), r1, independent=size == first and not correlated)
        size *= 2


def ratio_se(y: np.ndarray, n: np.ndarray, batching: Batching) -> float:
    """Standard error of Σy/Σn from the chosen batches, widened by √((1 + r)/(1 − r)) where their
    lag-1 autocorrelation r is still positive: the test that stopped the doubling has little power
    with few batches, and what correlation is left between them is variance they do not show
    (delays in phases of ~50 stimuli, 1 000 a run: 86 % held without, 90 % with;
    tests/test_gpio_analysis.py)."""
    yb, nb = _merge(np.asarray(y, np.float64), np.asarray(n, np.float64), batching.size)
    total = nb.sum()
    r = yb.sum() / total
    k = len(yb)
    if k < 2:
        return math.inf
    se = math.sqrt(k / (k - 1) * float(np.sum((yb - r * nb) ** 2))) / total
    lag1 = batching.lag1 if math.isfinite(batching.lag1) else 0.0
    return se * math.sqrt((1 + lag1) / (1 - lag1)) if 0 < lag1 < 1 else se


#: a cycle is looked for within this share of the run's blocks (so a run holds at least 1.67 of
#them)
CYCLE_SPAN = 0.6
#: its trough and its peak must pass ±CYCLE_Z/√k: at 2/√k one of ~120 lags crossed by chance in 47
#of : 150 independent twin runs (a window over a spurious cycle then under-covers); at 3, in none of
#150, : while 140 of 150 runs with the seed's dd cycle still showed it
CYCLE_Z = 3.0


def cycle_blocks(medians: Iterable[float]) -> int | None:
    """The length, in fine blocks, of a load's cycle in the blocks' medians: their autocorrelation
    dips below −CYCLE_Z/√k (the phases half a cycle apart) and then peaks above +CYCLE_Z/√k (the
    same phase a cycle on) within the first CYCLE_SPAN of the run; the peak's lag, or None (no
    cycle, or a run too short for one)."""
    m = np.asarray(list(medians), np.float64)
    k = len(m)
    if k < 2 * MIN_BATCHES or not np.all(np.isfinite(m)):
        return None
    d = m - m.mean()
    power = np.abs(np.fft.rfft(d, 2 * k)) ** 2
    acov = np.fft.irfft(power)[:k]
    if acov[0] <= 0:
        return None
    r = acov / acov[0]
    top = int(k * CYCLE_SPAN)
    limit = CYCLE_Z / math.sqrt(k)
    trough = np.nonzero(r[1:top + 1] < -limit)[0]
    if not len(trough):
        return None
    start = int(trough[0]) + 1
    peak = start + int(np.argmax(r[start:top + 1]))
    return peak if peak > start and r[peak] > limit else None


def window_se(y: np.ndarray, n: np.ndarray, width: int) -> float:
    """Standard error of Σy/Σn from a Bartlett lag window `width` blocks wide over the linearised
    block totals z = y − R·n: Σ_{|h|<width} (1 − |h|/width) Σ_i z_i z_{i+h} / N² (never negative:
    the Fejér kernel of length `width`, zero at a period of `width` blocks and its harmonics)."""
    y, n = np.asarray(y, np.float64), np.asarray(n, np.float64)
    total = float(n.sum())
    z = y - y.sum() / total * n
    k = len(z)
    width = max(1, min(int(width), k))
    acov = np.fft.irfft(np.abs(np.fft.rfft(z, 2 * k)) ** 2)[:width]
    weights = 1 - np.arange(width) / width
    var = acov[0] + 2 * float(np.dot(weights[1:], acov[1:]))
    return math.sqrt(max(var, 0.0)) / total


@dataclass(frozen=True)
class Spread:
    """How one statistic's standard error was taken: `se` (None: withheld, `withheld` says why), the
    degrees of freedom of its t multiplier (inf: the normal one), `method` for the report, and the
    batch or window it used."""

    se: float | None
    df: float
    method: str
    independent: bool = False
    batches: int = 0
    events_per_batch: int | None = None
    window_blocks: int | None = None
    withheld: str | None = None

    def t(self, confidence: float) -> float:
        return Z95 if confidence == 0.95 and math.isinf(self.df) else t_ppf(0.5 + confidence / 2,
                                                                            self.df)


def spread_of(y: np.ndarray, n: np.ndarray, cycle: int | None, what: str = "an interval",
              block: int = FINE_EVENTS) -> Spread:
    """The standard error of Σy/Σn: a lag window one load cycle wide where the run shows a cycle,
    batch means otherwise. With a cycle the multiplier is the normal one: on the twin's cycles
    (durations jittered cycle to cycle) the window's estimate grows with the run's own error, and
    |error|/se stays lighter-tailed than normal (its 95th percentile 1.67 over 389 runs of 10 s) —
    Student's t at the window's nominal 1.5·k/M degrees of freedom covered 99.7 %."""
    if cycle:
        return Spread(window_se(y, n, cycle), math.inf,
                      f"a lag window of one load cycle ({cycle} blocks)",
                      window_blocks=cycle)
    b = choose_batching(y, n)
    if not b.enough:
        return Spread(None, math.nan, "batch means", batches=b.count,
                      events_per_batch=b.size * block,
                      withheld=(f"the events stay correlated over batches of {b.size * block // 2} "
                                f"events: the run is too short for {what} on its own (fewer than "
                                f"{MIN_BATCHES} independent batches)"))
    return Spread(ratio_se(y, n, b), b.count - 1, f"batch means ({b.count} batches)",
                  independent=b.independent,
                  batches=b.count, events_per_batch=b.size * block)


def rows_median_p99(rows: np.ndarray) -> np.ndarray:
    """np.percentile(rows, [50, 99], axis=1), to the bit (but the sign of a zero where +0 and −0
    tie: the two orderings differ; latencies hold no −0): each row sorted (numpy's vectorised
    sort takes about half the time of the partition np.percentile does: a seed-scale run's 17 000
    blocks of 500), then numpy's linear interpolation as numpy computes it (its virtual index
    (n − 1)·q, its lerp taken from the upper neighbour from a fraction of one half on). Rows
    holding a NaN go to np.percentile itself."""
    if not rows.size or np.isnan(rows).any():
        return np.percentile(rows, [50, 99], axis=1)
    s = np.sort(rows, axis=1)
    n = s.shape[1]
    out = np.empty((2, s.shape[0]))
    for i, q in enumerate((50 / 100, 99 / 100)):
        virtual = (n - 1) * q
        lo = math.floor(virtual)
        t = virtual - lo
        a, b = s[:, lo], s[:, min(lo + 1, n - 1)]
        with np.errstate(invalid="ignore"):  # infinities: NaN, as numpy's
            d = b - a
            out[i] = b - d * (1 - t) if t >= 0.5 else a + d * t
    return out


@dataclass
class FineBlocks:
    """A time-ordered sample as consecutive blocks of `block` events (FINE_EVENTS; fewer for a short
    sample such as a GPIO run's thousand delays): per block its count, Σ(x − centre), the count at
    or below each of `levels` (ns) and the time of its first event (s, if given)."""

    levels: tuple[float, ...] = ()
    block: int = FINE_EVENTS
    centre: float | None = None
    counts: list[int] = field(default_factory=list)
    sums: list[float] = field(default_factory=list)
    below: list[np.ndarray] = field(default_factory=list)
    starts_s: list[float] = field(default_factory=list)
    medians: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    _carry: np.ndarray = field(default_factory=lambda: np.empty(0))
    _carry_t: np.ndarray = field(default_factory=lambda: np.empty(0))

    def add(self, values: np.ndarray, times_s: np.ndarray | None = None) -> None:
        x = np.concatenate([self._carry, np.asarray(values, np.float64)])
        t = (np.concatenate([self._carry_t, np.asarray(times_s, np.float64)]) if times_s is not None
             else np.full(len(x), math.nan))
        whole = len(x) // self.block * self.block
        self._carry, self._carry_t = x[whole:], t[whole:]
        if whole:
            self._blocks(x[:whole], t[:whole])

    def close(self) -> FineBlocks:
        if len(self._carry):
            self._blocks(self._carry, self._carry_t)
            self._carry = self._carry_t = np.empty(0)
        return self

    # A run's blocks go from the worker that analysed it to the report's process pickled: as lists
    # of floats and one small array per block (8 400 at seed scale) that took ~0.12 s a run to
    # pickle and as long to unpickle, the last run's in the report's serial tail. As arrays: ~9 ms.
    _LISTS = ("counts", "sums", "starts_s", "medians", "p99s")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["counts"] = np.asarray(self.counts, np.int64)
        for name in self._LISTS[1:]:
            state[name] = np.asarray(getattr(self, name), np.float64)
        state["below"] = (np.stack(self.below) if self.below
                          else np.empty((0, len(self.levels)), np.int64))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        for name in self._LISTS:  # back to what add() appends to, value for value
            if isinstance(state[name], np.ndarray):
                state[name] = state[name].tolist()
        state["below"] = list(state["below"])
        self.__dict__.update(state)

    def _blocks(self, x: np.ndarray, t: np.ndarray) -> None:
        if self.centre is None:
            self.centre = float(x.mean())
        size = self.block
        m = math.ceil(len(x) / size)
        edges = np.arange(m) * size
        self.counts += np.diff(np.r_[edges, len(x)]).tolist()
        self.sums += np.add.reduceat(x - self.centre, edges).tolist()
        self.starts_s += t[edges].tolist()
        whole = len(x) == m * size  # the usual case: every block whole, one call each
        if self.levels:
            # a level at a time over the blocks as rows: a (events × levels) matrix of counts
            # summed by reduceat took 8× as long (a seed-scale run: 1.1 s of its report)
            if whole:
                rows = x.reshape(m, size)
                below = np.stack([np.count_nonzero(rows <= v, axis=1) for v in self.levels],
                                 axis=1).astype(np.int64)
            else:
                below = np.stack([np.add.reduceat((x <= v).astype(np.int64), edges)
                                  for v in self.levels], axis=1)
            self.below += list(below)
        if whole:
            q = rows_median_p99(x.reshape(m, size))
            self.medians += q[0].tolist()
            self.p99s += q[1].tolist()
        else:
            for lo in edges:
                q = np.percentile(x[lo:lo + size], [50, 99])
                self.medians.append(float(q[0]))
                self.p99s.append(float(q[1]))

    def over_time(self, points: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(s from the first block, median, p99) of at most `points` stretches of consecutive
        blocks: each stretch's value the median of its blocks' (a rolling summary, for the figure);
        None without times."""
        t = np.asarray(self.starts_s, np.float64)
        if len(t) < 2 or not np.all(np.isfinite(t)):
            return None
        size = max(1, math.ceil(len(t) / points))
        k = len(t) // size
        shape = (k, size)

        def stretch(a: list[float]) -> np.ndarray:
            return np.median(np.asarray(a[:k * size], np.float64).reshape(shape), axis=1)

        return t[:k * size:size] - t[0], stretch(self.medians), stretch(self.p99s)

    @property
    def n(self) -> np.ndarray:
        return np.asarray(self.counts, np.float64)

    def below_at(self, i: int) -> np.ndarray:
        return np.asarray([b[i] for b in self.below], np.float64)


def mean_interval(blocks: FineBlocks, confidence: float = 0.95) -> dict[str, Any]:
    """The sample mean with its dependence-aware interval (spread_of: a cycle's window or batch
    means); `withheld` says why there is none."""
    n, y = blocks.n, np.asarray(blocks.sums, np.float64)
    total = float(n.sum())
    est = (blocks.centre or 0.0) + float(y.sum()) / total if total else math.nan
    out: dict[str, Any] = {"estimate_ns": est, "se_ns": None, "ci95_ns": None, "batches": 0,
                           "events_per_batch": None, "effective_n": None, "withheld": None}
    if len(n) < MIN_BATCHES:
        out["withheld"] = (
            f"{int(total)} events make {len(n)} blocks of {blocks.block}: too few to see their "
            "dependence"
        )
        return out
    sp = spread_of(y, n, cycle_blocks(blocks.medians), block=blocks.block)
    out.update(batches=sp.batches, events_per_batch=sp.events_per_batch,
               window_blocks=sp.window_blocks,
               method=sp.method, independent=sp.independent)
    if sp.se is None:
        out["withheld"] = sp.withheld
        return out
    t = sp.t(confidence)
    out.update(se_ns=sp.se, ci95_ns=[est - t * sp.se, est + t * sp.se])
    return out


def quantile_intervals(dist: Distribution, blocks: FineBlocks,
                       keys: Iterable[str] = tuple(PERCENTILES),
                       confidence: float = 0.95) -> dict[str, dict[str, Any]]:
    """Each percentile's estimate (numpy's, as describe() gives it) and its dependence-aware
    interval. `blocks.levels` must hold the estimates, in `keys` order (FineBlocks counts at or
    below them)."""
    total = dist.count
    out: dict[str, dict[str, Any]] = {}
    described = (dist.describe() or {}).get("percentiles_ns") or {}
    cycle = cycle_blocks(blocks.medians)
    for i, key in enumerate(keys):
        p = PERCENTILES[key] / 100
        est = described.get(key)
        below = blocks.below_at(i)
        above = total - int(below.sum())
        entry: dict[str, Any] = {"estimate_ns": est, "ci95_ns": [None, None], "effective_n": None,
                                 "method": None, "withheld": None}
        n_eff, method = level_effective_n(below, blocks, p, above, total, confidence, cycle)
        if n_eff is None:
            entry["withheld"] = method
            out[key] = entry
            continue
        entry.update(effective_n=n_eff, method=method)
        entry["ci95_ns"] = list(_order_interval(dist, p, n_eff, confidence))
        out[key] = entry
    return out


def level_effective_n(below: np.ndarray, blocks: FineBlocks, p: float, above: int, total: int,
                      confidence: float, cycle: int | None = None) -> tuple[float | None, str]:
    """The independent events a level p's indicator is worth (None: withheld, with the reason):
    batch means or a cycle's window where the exceedances are many, the extremal index in a tail."""
    n = blocks.n
    if len(n) < MIN_BATCHES:
        return None, f"{total} events: too few blocks of {blocks.block} to see their dependence"
    if above >= MIN_EXCEEDANCES and total - above >= MIN_EXCEEDANCES:
        sp = spread_of(below, n, cycle, "this percentile's interval", blocks.block)
        if sp.se is None:
            return None, str(sp.withheld)
        return batch_effective_n(sp, p, total, confidence), sp.method
    # a tail: count each cluster of exceedances once (blocks estimate of the extremal index)
    exceed = n - below
    if above == 0:
        return float(total), "no exceedance: independent bound"
    theta = theta_of(int(np.count_nonzero(exceed)), above, len(n))
    return float(total) * theta, f"extremal index {theta:.2f} (blocks of {blocks.block})"


def batch_effective_n(spread: Spread, p: float, total: int, confidence: float) -> float:
    """The independent events a level p's indicator is worth, from its standard error (`spread`, of
    its block totals): p(1 − p)/se², never above the total, shrunk by (z/t)² for the variance
    estimate's own uncertainty."""
    se = spread.se or 0.0
    shrink = (Z95 / spread.t(confidence)) ** 2
    return (min(float(total), p * (1 - p) / se**2) if se > 0 else float(total)) * shrink


def _order_interval(dist: Distribution, p: float, n_eff: float,
                    confidence: float) -> tuple[float | None, float | None]:
    """Distribution-free interval for the p-quantile with n_eff independent events: the ranks of
    Binomial(n_eff, p) as levels, read off the whole sample (None: beyond what it holds)."""
    tail = (1 - confidence) / 2
    m = max(int(math.floor(n_eff)), 1)
    lo_rank = int(binom_ppf(tail, m, p))
    hi_rank = int(binom_ppf(1 - tail, m, p)) + 1
    n = dist.count
    lo = None if lo_rank < 1 else _order_statistic(dist, max(1, math.floor(lo_rank / m * n)))
    hi = None if hi_rank > m else _order_statistic(dist, min(n, math.ceil(hi_rank / m * n)))
    return lo, hi


def _order_statistic(dist: Distribution, r: int) -> float:
    """X_(r), 1 ≤ r ≤ n."""
    cum = np.cumsum(dist.counts)
    return float(dist.values[int(np.searchsorted(cum, r, side="left"))])


def extremal_index(positions: np.ndarray, n: int) -> float:
    """The blocks estimate of the extremal index of exceedances at `positions` among n events: the
    fine blocks they fall in against the blocks independent ones would fill (1: each alone; 0.25:
    four to a cluster); 1 without any."""
    pos = np.asarray(positions, np.int64)
    return theta_of(int(np.unique(pos // FINE_EVENTS).size), int(pos.size),
                    math.ceil(n / FINE_EVENTS))


def theta_of(blocks_hit: int, exceedances: int, blocks: int) -> float:
    """blocks_hit over the blocks that `exceedances` independent ones would hit, k(1 − (1 − 1/k)^c):
    the share blocks_hit/c alone is biased low where a block holds several by chance."""
    if exceedances <= 0 or blocks <= 0:
        return 1.0
    expected = blocks * -math.expm1(exceedances * math.log1p(-1.0 / blocks)) if blocks > 1 else 1.0
    return min(1.0, blocks_hit / expected)


def exceedance_effective_n(positions: np.ndarray, n: int, confidence: float = 0.95) -> tuple[float,
                                                                                             str]:
    """The effective number of independent events behind a probability of exceeding a level, from
    the positions (in event order, 0-based) of the n events' exceedances, over fine blocks
    (block_exceedance_effective_n)."""
    pos = np.asarray(positions, np.int64)
    if pos.size == 0 or n <= 0:
        return float(max(n, 0)), "no exceedance: independent bound"
    k = math.ceil(n / FINE_EVENTS)
    counts = np.full(k, float(FINE_EVENTS))
    counts[-1] = n - FINE_EVENTS * (k - 1)
    return block_exceedance_effective_n(np.bincount(pos // FINE_EVENTS, minlength=k), counts,
                                        confidence,
                                        f"blocks of {FINE_EVENTS}")


def block_exceedance_effective_n(exceed: np.ndarray, counts: np.ndarray, confidence: float = 0.95,
                                 blocks_are: str = f"blocks of {FINE_EVENTS}") -> tuple[float, str]:
    """The same from consecutive blocks' exceedance counts and event counts (fine blocks, or the
    slices of a histogram). Enough exceedances and blocks: batch means of the exceedance indicator,
    as for a quantile's level (a load's phases of seconds make exceedances come and go together);
    fewer: the blocks estimate of the extremal index, each cluster of exceedances inside a block
    counted once (phases longer than a block are then not seen, and the method says so); none: n,
    the independent bound (there is nothing to see clusters in)."""
    y, counts = np.asarray(exceed, np.float64), np.asarray(counts, np.float64)
    c, n, k = int(y.sum()), int(counts.sum()), len(counts)
    if c == 0 or n <= 0:
        return float(max(n, 0)), "no exceedance: independent bound"
    theta = theta_of(int(np.count_nonzero(y)), c, k)
    cluster = f"extremal index {theta:.2f} ({blocks_are})"
    if c < MIN_EXCEEDANCES or n - c < MIN_EXCEEDANCES or k < MIN_BATCHES:
        return n * theta, cluster
    sp = spread_of(y, counts, None)
    if sp.se is None:
        return n * theta, f"{cluster}; too few batches for the exceedances' slower dependence"
    return batch_effective_n(sp, c / n, n, confidence), sp.method


def blocks_of(values: np.ndarray, levels: Iterable[float] = (),
              block: int = FINE_EVENTS) -> FineBlocks:
    """FineBlocks of a whole time-ordered sample."""
    fb = FineBlocks(levels=tuple(float(v) for v in levels), block=block)
    fb.add(np.asarray(values, np.float64))
    return fb.close()


def cycle_seconds(blocks: FineBlocks, period_s: float | None) -> float | None:
    """The load's cycle (cycle_blocks of the block medians) in seconds: from the blocks' start times
    where they were given, else from the events' period; None without a cycle."""
    cycle = cycle_blocks(blocks.medians)
    if cycle is None:
        return None
    t = np.asarray(blocks.starts_s, np.float64)
    if len(t) > cycle and np.all(np.isfinite(t)):
        return float((t[-1] - t[0]) / (len(t) - 1) * cycle)
    return cycle * blocks.block * period_s if period_s else None


def summary_sentence(mean: dict[str, Any], percentiles: dict[str, dict[str, Any]], total: int,
                     cycle_s: float | None, period_s: float | None) -> str:
    """What was found, in one sentence: e.g. "events are not independent: latency follows a 4.8 s
    cycle; intervals use a lag window of one cycle (47,500 events), effective sample 830 of 100 000
    at the median"."""
    if mean.get("withheld") and mean.get("batches", 0) == 0:
        return f"Too few events ({total:,}) to judge their dependence: intervals are withheld."
    batch = mean.get("events_per_batch")
    window = mean.get("window_blocks")
    length = (
        f"batches of {batch * period_s:.2g} s"
        if batch and period_s
        else f"batches of {batch} events"
        if batch
        else f"a lag window of one cycle ({window * FINE_EVENTS:,} events)"
        if window
        else "—"
    )
    median = percentiles.get("p50") or {}
    n_eff = median.get("effective_n")
    eff = f", effective sample {n_eff:,.0f} of {total:,} at the median" if n_eff else ""
    if mean.get("independent"):
        return (f"No dependence between events was found (at batches of {FINE_EVENTS}): intervals "
                f"as for independent events{eff}.")
    cycle = f"latency follows a {cycle_s:.2g} s cycle; " if cycle_s else ""
    if mean.get("withheld"):
        return f"Events are not independent: {cycle}{mean['withheld']}."
    return f"Events are not independent: {cycle}intervals use {length}{eff}."
