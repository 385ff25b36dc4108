"""How likely an accidental pairing is, and the bound each acquisition's pairing states.

For a wrong alignment, each pulse's residual is its width minus the
latency of an unrelated event: for t of its n residuals to fall within
2·AGREE_NS of each other, t-1 of those latencies must each fall in one window
of that width, which happens with probability at most p (the largest share of
the run's t_SW in any such window). So a wrong alignment agrees on t or more
pulses with probability at most n·C(n-1, t-1)·p^(t-1), and one of W candidates
with W times that (W: every candidate the search may look at, 4·window + 1):
the bound an acquisition's pairing states. It assumes the latencies of
different events independent; p is the largest share over the run's blocks of
BLOCK_RECORDS records and the whole run (a quieter phase has more alike t_SW). It is paired only
when that bound is at most FALSE_PAIR_BOUND; the run's expected false pairs are
the sum of the bounds of what was paired. Acquisitions of few pulses (a short
record) cannot reach it: they stay unpaired, counted, and the report says why.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

MIN_PULSES = 5
MAX_SPREAD_NS = 150.0
# a pulse agrees with its acquisition's alignment within this of the median residual
AGREE_NS = MAX_SPREAD_NS
# the most an acquisition's pairing may be wrong with (per acquisition paired)
FALSE_PAIR_BOUND = 1e-4


def max_share_within(values: np.ndarray, counts: np.ndarray | None, width: float) -> float:
    """The largest share of a sample (distinct sorted values x counts, or raw values) in any
    window of `width`: the chance that an unrelated event's latency falls in a given window is at
    most this."""
    values = np.asarray(values, np.float64)
    if counts is None:
        values = np.sort(values[np.isfinite(values)])
        counts = np.ones(len(values), np.int64)
    if not len(values):
        return 1.0
    cum = np.r_[0, np.cumsum(counts)]
    inside = cum[np.searchsorted(values, values + width, side="right")] - cum[:-1]
    return float(inside.max() / cum[-1])


# the stretch of records a share is also taken over (by event number: batch-free)
BLOCK_RECORDS = 10_000


class BlockShare:
    """max_share_within(·, 2·AGREE_NS) of the run's own t_SW as a whole and over each block of
    BLOCK_RECORDS events (numbered by event, so it does not depend on how the records are read):
    the largest, the p of the false-pair bound."""

    def __init__(self) -> None:
        self.block = -1
        self._values: list[np.ndarray] = []
        self.best = 0.0

    def add(self, event: np.ndarray, latency: np.ndarray) -> None:
        event = np.asarray(event, np.int64)
        if not len(event):
            return
        blocks = event // BLOCK_RECORDS
        latency = np.asarray(latency)
        # integers (every record's) are counted exactly, as they are
        if latency.dtype.kind not in "iu":
            latency = latency.astype(np.float64)
        # in stream order (always, but after a restart): cut, not masked
        if (np.diff(blocks) >= 0).all():
            cuts = np.flatnonzero(np.diff(blocks)) + 1
            parts = zip(blocks[np.r_[0, cuts]], np.split(latency, cuts), strict=True)
        else:
            parts = ((b, latency[blocks == b]) for b in np.unique(blocks))
        for b, values in parts:
            if b != self.block:
                self._close()
                self.block = int(b)
            self._values.append(values)

    def _close(self) -> None:
        if self._values:
            values = np.concatenate(self._values)
            if len(values) >= BLOCK_RECORDS // 2:  # a block too thin says little (the run's last)
                self.best = max(self.best, _block_share(values, 2 * AGREE_NS))
        self._values = []

    def result(self, whole: float) -> float:
        self._close()
        return max(self.best, whole)


# integer values spanning at most this many ns per value are counted on a dense grid
DENSE_RANGE = 16


def _block_share(values: np.ndarray, width: float) -> float:
    """max_share_within(values, None, width), for a block of integer latencies on a grid of 1 ns
    (a histogram's running sum: several times faster than sorting a block and searching it) when
    they span little; else by max_share_within. Equal either way: the densest window can start at
    a value, and integers x, v have x <= v + width exactly when x - v <= floor(width)."""
    if values.dtype.kind in "iu" and len(values):
        low, high = int(values.min()), int(values.max())
        if high - low <= DENSE_RANGE * len(values):
            reach = int(np.floor(width))
            per_ns = np.bincount((values - low).astype(np.intp), minlength=high - low + 1)
            running = np.r_[0, np.cumsum(per_ns)]  # running[k]: values below low + k
            ends = np.minimum(np.arange(high - low + 1) + reach + 1, high - low + 1)
            return float((running[ends] - running[:-1]).max() / len(values))
    return max_share_within(np.asarray(values, np.float64), None, width)


def false_pair_log_bound(n: np.ndarray, agree: np.ndarray, candidates: np.ndarray,
                         share: float) -> np.ndarray:
    """log of W·n·C(n-1, t-1)·p^(t-1): the chance that one of W wrong alignments has t of its n
    pulses agreeing (the module docstring). 0 (certainty) where nothing agrees or p is 1."""
    n, t, w = (np.asarray(x, np.float64) for x in (n, agree, candidates))
    t = np.clip(t, 1, np.maximum(n, 1))
    log_choose = gammaln(n) - gammaln(t) - gammaln(n - t + 1)
    log_p = np.log(min(max(share, 1e-300), 1.0))
    return np.minimum(
        np.log(np.maximum(w, 1)) + np.log(np.maximum(n, 1)) + log_choose + (t - 1) * log_p, 0.0
    )


def never_significant(sizes: np.ndarray, candidates: int, share: float) -> np.ndarray:
    """Whether an acquisition of `sizes` pulses cannot beat chance among `candidates` whatever its
    residuals: with n pulses present, t of them agreeing, the bound is no smaller than with t of t
    (log n − log t and the binomial term are ≥ 0), so the best any alignment can reach is the
    smallest bound of m of m agreeing, m ≤ size. The pairing searches such an acquisition no
    further (it would refuse every alignment it found)."""
    sizes = np.asarray(sizes, np.int64)
    top = int(max(sizes.max(initial=0), 1))
    m = np.arange(1, top + 1)
    best = np.minimum.accumulate(false_pair_log_bound(m, m, np.full(top, candidates), share))
    return best[np.clip(sizes, 1, top) - 1] > np.log(FALSE_PAIR_BOUND)


def pulses_needed(share: float, candidates: int) -> int | None:
    """The fewest pulses an acquisition needs, all agreeing, to be paired among `candidates`
    (None: no number is enough, the t_SW are all within 2·AGREE_NS of each other)."""
    for n in range(MIN_PULSES, 10_000):
        if false_pair_log_bound(n, n, candidates, share) <= np.log(FALSE_PAIR_BOUND):
            return n
        if share >= 1.0:
            return None
    return None
