"""A histogram's time order from its slices: cyclictest.slices runs cyclictest as consecutive
invocations, each printing its own histogram, so a run whose cycles keep no time order is still
seen as a sequence of stretches of time.

Each slice is one block of station/analysis/dependence.py (its cycles, and its count at or below
each level), and the pooled histogram's intervals are the ones a time-ordered sample gets there:
a percentile's effective sample from the slices' batch means (or a load cycle's lag window, or the
extremal index in a tail), the distribution-free interval of Binomial(n_eff, p) read off the pooled
histogram; a deadline's exceedance probability over the effective cycles. Fewer than
dependence.MIN_BATCHES slices: no interval (the reason says so), as for a run too short for its
own dependence.

What it assumes: the dependence between cycles does not outlast a few slices (batch means merge
neighbouring slices while their means stay correlated), and the truth is the run's own long-run
value given its machine state; a slice's start (threads created, memory locked) goes unmeasured."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from station.analysis import dependence
from station.analysis.histogram import Histogram, combine
from station.analysis.stats import PERCENTILES
from station.analysis.worst_case import binomial_interval

BEYOND = "the percentile lies beyond the histogram's range (among the overflows)"


def at_or_below(h: Histogram, level_ns: float) -> int:
    """Cycles of h whose (truncated) latency is at or below level_ns; overflows are above any level
    inside the range."""
    return int(h.counts[h.bucket_us * h.bucket_ns <= level_ns].sum())


def slice_blocks(slices: Sequence[Histogram], levels_ns: Sequence[float]) -> dependence.FineBlocks:
    """The slices as dependence.py's blocks: each slice's cycles, its count at or below each level,
    its median and p99 (the cycle detector's series; a figure among the overflows counts as the
    range)."""
    counts = [h.count for h in slices]
    blocks = dependence.FineBlocks(
        levels=tuple(levels_ns), block=max(1, round(sum(counts) / max(len(counts), 1))), centre=0.0
    )
    for h in slices:
        d = h.describe() or {}
        pct = d.get("percentiles_ns") or {}
        edge = float(h.range_us * h.bucket_ns) if h.range_us is not None else math.inf
        blocks.counts.append(h.count)
        blocks.sums.append(0.0)  # a mean needs every value: the overflows have none
        blocks.below.append(np.asarray([at_or_below(h, v) for v in levels_ns], np.int64))
        blocks.medians.append(edge if pct.get("p50") is None else float(pct["p50"]))
        blocks.p99s.append(edge if pct.get("p99") is None else float(pct["p99"]))
        blocks.starts_s.append(math.nan)
    return blocks


def percentile_intervals(slices: Sequence[Histogram], confidence: float = 0.95) -> dict[str,
                                                                                        dict[str,
                                                                                             Any]]:
    """Per PERCENTILES key of the slices' pooled histogram: its interval from the slices' time order
    (`ci95_ns`, [lo, hi], a side None where the data give none), `effective_n`, `method`, and
    `withheld` (why there is no interval, else None)."""
    pooled = combine(slices)
    total = pooled.count
    described = pooled.describe() or {}
    pct = described.get("percentiles_ns") or {}
    keys = list(PERCENTILES)
    levels = [math.inf if pct.get(k) is None else float(pct[k]) for k in keys]
    blocks = slice_blocks(slices, levels)
    cycle = dependence.cycle_blocks(blocks.medians)
    effective: dict[str, float | None] = {}
    out: dict[str, dict[str, Any]] = {}
    for i, key in enumerate(keys):
        entry: dict[str, Any] = {"ci95_ns": [None, None], "effective_n": None, "method": None,
                                 "withheld": None}
        if pct.get(key) is None:
            entry["withheld"] = BEYOND if total else "no cycle"
        else:
            below = blocks.below_at(i)
            above = total - int(below.sum())
            n_eff, method = dependence.level_effective_n(below, blocks, PERCENTILES[key] / 100,
                                                         above, total,
                                                         confidence, cycle)
            if min(above, total - above) < dependence.MIN_EXCEEDANCES:
                # slices are blocks of thousands of cycles: too coarse for the extremal index (a
                # seeded study held 81-83 % with it), so a tail percentile needs its exceedances'
                # batch means
                entry["withheld"] = (f"{min(above, total - above)} cycles beyond it: too few "
                                     f"(under {dependence.MIN_EXCEEDANCES}) to see how they "
                                     "cluster across slices")
            elif n_eff is None:
                entry["withheld"] = _in_slices(method, len(slices))
            else:
                entry.update(effective_n=n_eff, method=f"{len(slices)} slices: {method}")
                effective[key] = n_eff
        out[key] = entry
    for key, (lo, hi) in pooled.percentile_ci95_ns(confidence, effective).items():
        if key in effective:
            out[key]["ci95_ns"] = [lo, hi]
    return out


def exceedance(slices: Sequence[Histogram], deadline_ns: float,
               confidence: float = 0.95) -> dict[str, Any]:
    """How often a cycle reached deadline_ns (its own bucket counts as reaching it; overflows as
    beyond), with a Clopper–Pearson interval over the effective cycles the slices show."""
    above = np.asarray(
        [h.count - int(h.counts[h.bucket_us < deadline_ns // h.bucket_ns].sum()) for h in slices],
        np.float64,
    )
    counts = np.asarray([h.count for h in slices], np.float64)
    n, c = int(counts.sum()), int(above.sum())
    if len(slices) < dependence.MIN_BATCHES:
        n_eff, how = float(n), (f"cycles taken as independent: {len(slices)} slices are too few to "
                                f"see their dependence (at least {dependence.MIN_BATCHES})")
    else:
        n_eff, how = dependence.block_exceedance_effective_n(above, counts, confidence,
                                                             f"{len(slices)} slices")
    scale = n_eff / n if n else 1.0
    lo, hi = binomial_interval(c * scale, n * scale, confidence) if n else (None, None)
    return {"cycles": n, "above": c, "p_exceed": c / n if n else None, "ci_low": lo, "ci_high": hi,
            "effective_n": n_eff, "method": how}


def _in_slices(reason: str, k: int) -> str:
    """dependence.py's reasons speak of blocks and batches of events: here a block is a slice."""
    if "too few blocks" in reason or "fewer than" in reason:
        return (f"{k} slices: too few to see the cycles' dependence (at least "
                f"{dependence.MIN_BATCHES} uncorrelated ones; raise cyclictest.slices)")
    return reason
