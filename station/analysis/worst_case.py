"""Worst-case interrupt latency by peaks over threshold: the latency exceeded with a tiny
probability per event (1e-9 by default), with an interval and the diagnostics a reviewer needs
to decide whether that extrapolation can be trusted.

Method (Coles 2001, "An Introduction to Statistical Modeling of Extreme Values", ch. 4):

* Above a high threshold u the excesses Y = X - u of the latencies are modelled by a generalised
  Pareto distribution GPD(σ, ξ), and the fraction of events above u by ζ_u (binomial). The
  latency exceeded with probability p per event is then
  x_p = u + σ/ξ·((ζ_u/p)^ξ - 1), which tends to u + σ·log(ζ_u/p) as ξ → 0.
* Ties: latencies are integers (1 ns, 10 ns, ... quanta) while the GPD is continuous. When the top
  of the sample has ties, each value is spread by a uniform jitter of ± half the quantum (the gcd
  of the gaps between distinct values); with more than a few distinct values above u this changes
  nothing the fit can see, with fewer the result is flagged. The jitter of a value is a hash of
  ``seed`` and the value's position in the sample, not a draw from a stream, so it does not depend
  on how many top values were at hand: a ``TailSample`` gives the same fit as the whole array.
* Threshold: candidates are the quantiles 0.90 … 0.995 of the sample, then higher ones in steps
  of √2 in the number of excesses; those with 50 … 5000 excesses are fitted by maximum likelihood
  (Grimshaw's one-dimensional profile in ξ/σ) for the parameter-stability table (shape, Wald
  interval, scale, mean excess: Coles 2001 §4.3.1). The threshold used has at most √n excesses
  (at 1e-9 the bias of a low threshold, not the variance, ruins intervals; k of order √n keeps it
  a fixed fraction of the standard error for Student-t-like tails) and at least 100 when the
  sample allows: the lowest such candidate whose shape agrees with those at the higher candidates
  with at least half its excesses (nested estimates differ with variance ≈ se_high² − se_low²,
  Wadsworth 2016; Bonferroni, 1 % overall) and whose fit passes the goodness-of-fit test (up to
  three candidates tried upwards).
* Intervals: 95 % profile likelihood (Coles 2001 §4.3.3) of the full likelihood
  Binomial(n, ζ_u) × GPD(σ, ξ), so the uncertainty of ζ_u is included: for the quantile, x_p is
  fixed and (ξ, ζ_u) maximised, σ following from the constraint; for a deadline d above u,
  the exceedance probability P(X > d) is profiled the same way (x = d fixed, p varied). The
  delta method is not used: at 1e-9 the likelihood of x_p is strongly skewed. Shape and scale
  carry Wald intervals from the expected information (the ones the table shows too).
* Goodness of fit: Anderson–Darling statistic of the excesses against the fitted GPD, with a
  p-value by parametric bootstrap (each replicate refitted, so the estimation of σ and ξ is
  accounted for, as in the tables of Choulakian & Stephens 2001).
* Independence: clustered extremes (a long SMI hitting several consecutive periodic events)
  make the intervals too narrow. The extremal index θ is estimated by the intervals estimator
  of Ferro & Segers 2003 from the gaps between exceedances (θ = 1: no clustering; 1/θ: mean
  cluster size) and tested against independence by simulating geometric gaps with the same
  exceedance rate: a significant (p < 0.01) and material (θ < 0.9) clustering fails the check.
* A deadline below u gets the empirical fraction with its Clopper–Pearson interval.
* No extrapolation is called reliable: a fit's interval is trusted only where MIN_EXPECTED_BEYOND
  (10) events of the sample are expected beyond the quantile (p ≥ 10/n). No check on the data can
  see a tail component rarer than the sample resolves, and on the twin's own seed-2015 models the
  coverage of the fits' 95 % intervals, against the models' true quantiles over 50 seeded samples
  of 200 000 events (benchmarks/bench_worst_case_coverage.py --distances), was 45/50 at n·p = 10 and
  44/50 at 3, then 35/50 at 1, 23/50 at 0.3 and 17/50 at 0.1 and 0.01 (LPT: an exponential tail on
  1e-4 of the events over a gamma body; every fit passed the checks above, 49/50 called reliable
  under the earlier two-decade limit); PCIe, with its rare uniform delays, 0–35/50. Beyond 10/n
  the estimate is still given, marked unsupported, beside the distribution-free bound.
  Further out, the result is ``reliable: False`` with the reason (the estimates are still given),
  and a deadline whose fitted probability lies further out gets the observed fraction instead.
  What any sample supports is the distribution-free ``bound``: with probability LEVEL the largest
  of n values is at least the latency exceeded with probability 1 - (1 - LEVEL)^(1/n) ≈ 3/n, for
  every continuous distribution (ties only make it conservative).

A sample too large to hold (hour-long campaigns: hundreds of millions of events) is given as a
``TailSample``: its ``Distribution`` (counts, order statistics, counts above a deadline) and only
its largest values with their positions (the independence check needs them). While the kept values
include the top 10 % (at the default cap of 2**18 values: samples up to about 2.6 M events) the
result is exactly the whole array's. Beyond, the candidates with more excesses than were kept drop
out of the diagnostics table (the method says so) and nothing else changes as long as more values
were kept than a fitted candidate has excesses (MAX_EXCEEDANCES): the quantum comes from the
distribution, and a jitter below half the quantum keeps every kept value above every dropped one.

Every check that fails makes the result ``reliable: False`` with a plain-English reason; the
estimates are still given when they can be computed. ``fit_reliable`` tells whether the fit itself
passed (the extrapolation distance aside): a deadline probability from the fit needs only that.
Inputs with NaN/inf raise ValueError.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from station.analysis import dependence
from station.analysis.distribution import Distribution
from station.analysis.quantile_functions import binom_ppf, chi2_1_ppf, norm_isf
from station.common.lazy_import import lazy_module

stats = lazy_module("scipy.stats")  # a Clopper-Pearson interval's beta quantiles
optimize = lazy_module("scipy.optimize")  # imported by the first fit, not by every report

EXCEEDANCE = 1e-9  # the default worst case: the latency exceeded once in a billion events
LEVEL = 0.95
MIN_SAMPLES = 1000
MIN_EXCEEDANCES = 50  # a candidate threshold needs at least this many to be fitted at all
RELIABLE_EXCEEDANCES = 100  # fewer, and the result is not publishable
MAX_EXCEEDANCES = 5000  # candidates fitted for the stability table
MIN_DISTINCT_TOP = 10  # distinct values in the top 10 %: below, nothing to fit
MIN_DISTINCT_EXCEEDANCES = 30  # distinct (unjittered) values above the threshold
GOF_REPLICATES = 199
GOF_ALPHA = 0.05
GOF_TRIES = 3  # thresholds tried upwards when the fit is rejected
STABILITY_ALPHA = 0.01
STABILITY_WINDOW = 2.0  # compare with higher candidates down to 1/STABILITY_WINDOW of the excesses
INDEPENDENCE_REPLICATES = 299
INDEPENDENCE_ALPHA = 0.01
MATERIAL_THETA = 0.9
HEAVY_SHAPE = 0.5  # ξ ≥ 0.5: infinite variance, the extrapolation is unbounded in practice
IRREGULAR_SHAPE = -0.5  # ξ ≤ -0.5: maximum likelihood loses its usual properties (Smith 1985)
MIN_EXPECTED_BEYOND = 10.0  # a fit is trusted down to probability this / n per event, no further
# Tail fractions of the candidate thresholds: the quantiles 0.90 … 0.995, then higher for big n.
_BASE_TAILS = (0.10, 0.08, 0.06, 0.05, 0.04, 0.03, 0.02, 0.015, 0.01, 0.005)



@functools.cache
def _chi2_half() -> float:
    """Half the χ²(1) quantile at LEVEL: the profile-likelihood interval's drop."""
    return float(chi2_1_ppf(LEVEL)) / 2.0


_TINY_THETA = 1e-7  # |ξ/σ| below this (in units of the mean excess) is ξ = 0 for the fit
TAIL_CAP = 1 << 18  # values a TailSample keeps by default: far more than any fitted candidate needs


@dataclass(frozen=True, eq=False)
class TailSample:
    """The top of a large sample, enough for the tail fit: the whole sample's distribution and its
    largest values with their positions (0-based, in event order). The kept values are every
    sample value ≥ ``edge`` (ties at the edge included), in any order."""

    distribution: Distribution  # of the WHOLE sample
    values: np.ndarray  # every sample value >= edge, any order
    positions: np.ndarray  # int64, their positions in the sample, same order as values

    def __post_init__(self) -> None:
        values = np.asarray(self.values).ravel()
        if values.dtype.kind in "ub":
            values = values.astype(np.int64)
        positions = np.asarray(self.positions).ravel()
        if positions.size and positions.dtype.kind not in "iu":
            raise ValueError(f"positions must be integers, got dtype {positions.dtype}")
        if values.shape != positions.shape:
            raise ValueError(f"{values.size} values but {positions.size} positions")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "positions", positions.astype(np.int64, copy=False))

    @staticmethod
    def edge_for(distribution: Distribution, cap: int = TAIL_CAP) -> float:
        """The smallest value to keep: the cap-th largest of the sample, or the next distinct value
        up when ties there would make more than 2·cap values (inf for an empty sample). Only the
        top `cap` distinct values can hold it, so this costs O(cap) on any distribution."""
        if cap < 1:
            raise ValueError(f"cap must be at least 1, got {cap}")
        if not distribution.count:
            return math.inf
        at_least = np.cumsum(distribution.counts[-cap:][::-1])  # samples ≥ each value, from the top down
        j = min(int(np.searchsorted(at_least, cap, side="left")), at_least.size - 1)
        if at_least[j] > 2 * cap and j > 0:
            j -= 1
        return float(distribution.values[-1 - j])

    @classmethod
    def of(cls, samples: np.ndarray, cap: int = TAIL_CAP) -> TailSample:
        """The tail sample of a 1-D array (integers or floats)."""
        a = np.asarray(samples).ravel()
        if a.dtype.kind in "ub":
            a = a.astype(np.int64)
        distribution = Distribution.of(a)
        positions = np.flatnonzero(a >= cls.edge_for(distribution, cap))
        return cls(distribution, a[positions], positions)

    @classmethod
    def pooled(cls, parts: Sequence[TailSample], lengths: Sequence[int], cap: int = TAIL_CAP) -> TailSample:
        """Samples put one after another (run order): positions of part i shifted by the sum of the
        earlier parts' lengths; the kept top is cut back to the pooled sample's own cap edge."""
        parts, lengths = list(parts), [int(v) for v in lengths]
        if len(parts) != len(lengths):
            raise ValueError(f"{len(parts)} parts but {len(lengths)} lengths")
        for i, (part, length) in enumerate(zip(parts, lengths, strict=True)):
            if part.distribution.count != length:
                raise ValueError(f"part {i}: length {length} but its distribution counts {part.distribution.count}")
        distribution = Distribution.pooled([p.distribution for p in parts])
        if not parts:
            return cls(distribution, np.empty(0, np.int64), np.empty(0, np.int64))
        offsets = np.cumsum([0, *lengths[:-1]], dtype=np.int64)
        values = np.concatenate([p.values for p in parts])
        positions = np.concatenate([p.positions + off for p, off in zip(parts, offsets, strict=True)])
        # Each part holds all of its values ≥ its own edge, so the pooled top is complete only above every
        # value a part left out (that binds only when a part moved its edge over ties the pool spreads out).
        edge = cls.edge_for(distribution, cap)
        left_out = max(p._largest_left_out() for p in parts)
        if edge <= left_out:
            at = int(np.searchsorted(distribution.values, left_out, side="right"))
            edge = float(distribution.values[at]) if at < distribution.values.size else math.inf
        keep = values >= edge
        return cls(distribution, values[keep], positions[keep])

    @property
    def edge(self) -> float:
        """The smallest kept value (inf when none is kept): every sample value ≥ it is kept."""
        return float(self.values.min()) if self.values.size else math.inf

    def _largest_left_out(self) -> float:
        """The largest sample value not kept (-inf when all are)."""
        at = int(np.searchsorted(self.distribution.values, self.edge, side="left"))
        return float(self.distribution.values[at - 1]) if at > 0 else -math.inf

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k largest values and their positions, largest first (ties in event order)."""
        if not 0 <= k <= self.values.size:
            raise ValueError(f"k = {k}, but {self.values.size} values are kept")
        order = np.lexsort((-self.positions, self.values))[::-1][:k]
        return self.values[order], self.positions[order]


def worst_case(
    samples_ns: np.ndarray | TailSample,
    *,
    exceedance: float = EXCEEDANCE,
    deadline_ns: float | None = None,
    seed: int = 0,
) -> dict:
    """Estimate the latency exceeded with probability ``exceedance`` per event (see the module
    docstring), from the whole sample or its ``TailSample``. Returns a JSON-serialisable dict;
    never raises on finite data."""
    if not (isinstance(exceedance, int | float) and 0.0 < exceedance < 1.0):
        raise ValueError(f"exceedance must be a probability in (0, 1), got {exceedance!r}")
    if deadline_ns is not None and not math.isfinite(float(deadline_ns)):
        raise ValueError(f"deadline_ns must be finite, got {deadline_ns!r}")
    sample = _TailInput.of(samples_ns) if isinstance(samples_ns, TailSample) else _ArrayInput.of(samples_ns)
    # Values near the float limit (garbage, not latencies) overflow on the way; every such result is
    # a non-finite number that _clean turns into None, and the check below refuses to call it reliable.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        estimate = _estimate(sample, float(exceedance), None if deadline_ns is None else float(deadline_ns), int(seed))
    result = _clean(estimate)
    q = result["quantile_ns"]
    if result["reliable"] and (q is None or None in (q["estimate"], q["ci_low"], q["ci_high"])):
        # an overflow on absurd inputs turned an estimate into None: never call that reliable
        result["reliable"] = False
        result["reasons"].append("the estimates overflow floating point for these values")
    return result


# --------------------------------------------------------------------------- the whole sample


class _Sample(Protocol):
    """What the estimate asks of the whole sample (floats): ``Distribution``'s answers, and its top."""

    @property
    def count(self) -> int: ...
    @property
    def max(self) -> float: ...
    def count_above(self, threshold: float) -> int: ...
    def order_statistics(self, ranks: Sequence[int]) -> np.ndarray: ...

    def top(self, edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(values ≥ edge at hand, their positions ascending, the distinct values ≥ edge of the
        whole sample, how many values ≥ edge the whole sample has)."""
        ...


@dataclass(frozen=True)
class _ArrayInput:
    x: np.ndarray  # float64, finite

    @classmethod
    def of(cls, samples_ns: np.ndarray) -> _ArrayInput:
        x = np.asarray(samples_ns)
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise ValueError(f"samples_ns must be numeric, got dtype {x.dtype}")
        x = x.astype(np.float64, copy=False).ravel()
        bad = ~np.isfinite(x)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"samples_ns contains {int(bad.sum())} NaN or infinite value(s) (first at index {first}): "
                "remove lost or invalid events before estimating a worst case"
            )
        return cls(x)

    @property
    def count(self) -> int:
        return int(self.x.size)

    @property
    def max(self) -> float:
        return float(self.x.max())

    def count_above(self, threshold: float) -> int:
        return int(np.count_nonzero(self.x > threshold))

    def order_statistics(self, ranks: Sequence[int]) -> np.ndarray:
        at = np.asarray(ranks, dtype=np.int64) - 1
        return np.partition(self.x, np.unique(at))[at]

    def top(self, edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        idx = np.flatnonzero(self.x >= edge)
        raw = self.x[idx]
        return raw, idx, np.unique(raw), int(raw.size)


@dataclass(frozen=True)
class _TailInput:
    distribution: Distribution  # float64 values, finite
    values: np.ndarray  # float64, every sample value ≥ their minimum, in event order
    positions: np.ndarray  # int64, ascending

    @classmethod
    def of(cls, tail: TailSample) -> _TailInput:
        dist = _float_distribution(tail.distribution)
        values = tail.values.astype(np.float64)
        if not (np.isfinite(dist.values).all() and np.isfinite(values).all()):
            raise ValueError(
                "the tail sample contains NaN or infinite value(s): remove lost or invalid events before "
                "estimating a worst case"
            )
        order = np.argsort(tail.positions, kind="stable")  # event order, as the array path sees its top
        values, positions = values[order], tail.positions[order]
        n = dist.count
        if positions.size and (positions[0] < 0 or positions[-1] >= n or (np.diff(positions) == 0).any()):
            raise ValueError(f"tail sample positions must be distinct and within the sample's {n} events")
        if values.size and _count_at_least(dist, float(values.min())) != values.size:
            # int64 values past 2**53 compared with a float edge: a rounded edge may hold only some of
            # the values that round to it; the kept values above it are still complete
            above = values > values.min()
            values, positions = values[above], positions[above]
            if values.size and _count_at_least(dist, float(values.min())) != values.size:
                raise ValueError(
                    "the tail sample's values are not every sample value above its edge: "
                    "collect all values >= TailSample.edge_for(distribution) with their positions"
                )
        return cls(dist, values, positions)

    @property
    def count(self) -> int:
        return self.distribution.count

    @property
    def max(self) -> float:
        return self.distribution.max

    def count_above(self, threshold: float) -> int:
        return self.distribution.count_above(threshold)

    def order_statistics(self, ranks: Sequence[int]) -> np.ndarray:
        return self.distribution.order_statistics(ranks)

    def top(self, edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        d = self.distribution
        at = int(np.searchsorted(d.values, edge, side="left"))
        keep = self.values >= edge
        return self.values[keep], self.positions[keep], d.values[at:], int(d.counts[at:].sum())


def _float_distribution(d: Distribution) -> Distribution:
    """The distribution of the sample as float64, as the array path sees it (integers past 2**53
    that round to the same float merge)."""
    if d.values.dtype == np.float64:
        return d
    f = d.values.astype(np.float64)
    if f.size < 2 or bool((f[1:] > f[:-1]).all()):
        return Distribution(f, d.counts)
    return Distribution.weighted(f, d.counts)


def _count_at_least(d: Distribution, value: float) -> int:
    return int(d.counts[np.searchsorted(d.values, value, side="left"):].sum())


# --------------------------------------------------------------------------- the pipeline


def _empty_result(x: _Sample, exceedance: float, deadline_ns: float | None, reasons: list[str]) -> dict:
    n = x.count
    deadline = None
    if deadline_ns is not None and n:
        deadline = _empirical_deadline(x, deadline_ns)
    return {
        "method": _METHOD.format(quantum="none"),
        "samples": n,
        "observed_max_ns": x.max if n else None,
        "exceedance": exceedance,
        "quantum_ns": None,
        "threshold_ns": None,
        "threshold_quantile": None,
        "exceedances": None,
        "exceedance_rate": None,
        "distinct_exceedance_values": None,
        "threshold_diagnostics": [],
        "shape": None,
        "scale": None,
        "quantile_ns": None,
        "gof": None,
        "independence": None,
        "deadline": deadline,
        "supported_exceedance": supported_exceedance(n) if n else None,
        "bound": distribution_free_bound(x),
        "fit_reliable": False,
        "reliable": False,
        "reasons": reasons,
    }


_METHOD = (
    "Peaks over threshold: a generalised Pareto distribution fitted by maximum likelihood to the "
    "excesses over the lowest candidate threshold with a stable shape and an accepted Anderson-Darling "
    "test (ties broken by a uniform jitter within the quantum: {quantum}). Where the sample resolves the "
    "per-event probability (10 events expected beyond it) the latency it gives, and any deadline's "
    "probability, are the empirical ones with exact 95 % intervals (order statistics, Clopper-Pearson), "
    "the fit's figures beside them; further out only the fit speaks, with a 95 % profile-likelihood "
    "interval that includes the uncertainty of the exceedance rate, and it is marked unsupported."
)


_KEPT_NOTE = (
    " The tail sample keeps only the largest {kept} of the {top} values in the top 10 %: the threshold "
    "diagnostics start at the first candidate with fewer excesses than that."
)


def _estimate(x: _Sample, p: float, deadline_ns: float | None, seed: int) -> dict:
    n = x.count
    if n < MIN_SAMPLES:
        what = "no samples" if n == 0 else f"only {n} samples"
        return _empty_result(x, p, deadline_ns, [f"{what}: at least {MIN_SAMPLES} are needed for a tail fit"])
    rng = np.random.default_rng(seed)  # the GOF bootstrap and the independence simulation only

    # The top 10 % (with every value tied to its lower edge, so the jitter spreads ties fairly). A tail
    # sample may hold fewer (its cap binds): then the top is what it kept, and the quantum and the
    # distinct values still come from the whole sample's distribution, as with an array.
    k_top = int(math.floor(n * _BASE_TAILS[0]))
    edge = float(x.order_statistics([n - k_top])[0])
    raw, idx, distinct_top, size_top = x.top(edge)
    if distinct_top.size < MIN_DISTINCT_TOP:
        return _empty_result(
            x, p, deadline_ns,
            [f"only {distinct_top.size} distinct value(s) in the top 10 % of the sample: no tail to fit"],
        )
    if raw.size <= MIN_EXCEEDANCES:  # only a tail sample with a tiny cap gets here
        return _empty_result(
            x, p, deadline_ns, [f"the tail sample keeps only {raw.size} values: too few for a tail fit"],
        )
    quantum = _quantum(size_top, distinct_top)
    vals = raw + _jitter(idx, seed, quantum) if quantum > 0 else raw
    order = np.argsort(vals, kind="stable")
    vals, raw, idx = vals[order], raw[order], idx[order]
    top = vals.size  # ascending; the k largest are vals[top - k:], the threshold vals[top - k - 1]

    candidates = _candidates(n, top)
    diagnostics: list[dict] = []
    fits: list[_Fit] = []
    for tail, k in candidates:
        u = float(vals[top - k - 1])
        y = vals[top - k:] - u  # past 1e308: inf (worst_case's errstate), refused below
        row: dict[str, Any] = {
            "quantile": 1.0 - tail,
            "threshold_ns": u,
            "exceedances": k,
            "mean_excess_ns": _safe_mean(y),
            "shape": None,
            "shape_ci_low": None,
            "shape_ci_high": None,
            "scale_ns": None,
            "stable": None,
        }
        diagnostics.append(row)
        if k <= MAX_EXCEEDANCES and np.isfinite(y).all():
            fit = _fit_gpd(y, n, u, 1.0 - tail)
            if fit is not None:
                fits.append(fit)
                lo, hi = fit.shape_ci()
                row.update(shape=fit.xi, shape_ci_low=lo, shape_ci_high=hi, scale_ns=fit.sigma)
    if not fits:
        result = _empty_result(x, p, deadline_ns, ["no candidate threshold could be fitted (values too extreme?)"])
        result["threshold_diagnostics"] = diagnostics
        return result

    stable = _stability(fits)
    for fit, ok in zip(fits, stable, strict=True):
        for row in diagnostics:
            if row["exceedances"] == fit.k:
                row["stable"] = ok
    # the pool: at most √n excesses (or the fewest on offer), and at least RELIABLE_EXCEEDANCES
    # unless the sample offers nothing better; ascending thresholds, the stable ones first
    eligible = max(_eligible_exceedances(n), min(f.k for f in fits))
    floor = RELIABLE_EXCEEDANCES if any(RELIABLE_EXCEEDANCES <= f.k <= eligible for f in fits) else 0
    pool = [(f, ok) for f, ok in zip(fits, stable, strict=True) if floor <= f.k <= eligible]
    order = [f for f, ok in pool if ok] or [pool[-1][0]]
    chosen, gof = order[0], None
    for fit in order[:GOF_TRIES]:
        g = _gof(fit, rng)
        if gof is None or g["passed"]:
            chosen, gof = fit, g
        if g["passed"]:
            break
    assert gof is not None

    reasons: list[str] = []
    fit = chosen
    exc_raw = raw[top - fit.k:]
    distinct_exc = int(np.unique(exc_raw).size)
    positions = idx[top - fit.k:]
    independence = _independence(np.sort(positions), n, rng)

    if fit.k < RELIABLE_EXCEEDANCES:
        reasons.append(f"only {fit.k} exceedances of the threshold: at least {RELIABLE_EXCEEDANCES} are needed")
    if not gof["passed"]:
        reasons.append(
            f"the excesses over the threshold do not follow a generalised Pareto distribution "
            f"(Anderson-Darling p = {gof['p_value']:.3g})"
        )
    if not independence["passed"]:
        reasons.append(
            f"large latencies come in clusters (extremal index {independence['extremal_index']:.2f}, "
            f"p = {independence['p_value']:.3g}): independence fails, the intervals would be too narrow"
        )
    if quantum > 0 and distinct_exc < MIN_DISTINCT_EXCEEDANCES:
        reasons.append(
            f"only {distinct_exc} distinct values above the threshold (quantum {quantum:g} ns): "
            "the data are too coarse for a continuous tail model"
        )
    if fit.xi >= HEAVY_SHAPE:
        reasons.append(
            f"the tail is so heavy (shape {fit.xi:.2f} ≥ {HEAVY_SHAPE}, infinite variance) that the extrapolated "
            "worst case is unbounded in practice"
        )
    if fit.xi <= IRREGULAR_SHAPE:
        reasons.append(
            f"the shape {fit.xi:.2f} is ≤ {IRREGULAR_SHAPE}: a nearly hard upper limit, where the likelihood "
            "intervals lose their usual guarantees"
        )

    quantile = _quantile_block(fit, p, x)
    if quantile["estimate"] is None or quantile["ci_low"] is None or quantile["ci_high"] is None:
        reasons.append("the interval of the extrapolated quantile is unbounded: the data cannot bound the worst case")
    deadline = None
    if deadline_ns is not None:
        deadline = _deadline_block(fit, deadline_ns, x)
    fit_reliable = not reasons
    if p < supported_exceedance(n):
        reasons.append(_too_far(p, n))

    method = _METHOD.format(quantum=f"{quantum:g} ns" if quantum > 0 else "no ties, none applied")
    if top < size_top:
        method += _KEPT_NOTE.format(kept=top, top=size_top)
    return {
        "method": method,
        "samples": n,
        "observed_max_ns": x.max,
        "exceedance": p,
        "quantum_ns": quantum,
        "threshold_ns": fit.u,
        "threshold_quantile": fit.quantile,
        "exceedances": fit.k,
        "exceedance_rate": fit.k / n,
        "distinct_exceedance_values": distinct_exc,
        "threshold_diagnostics": diagnostics,
        "shape": dict(zip(("estimate", "ci_low", "ci_high"), (fit.xi, *fit.shape_ci()), strict=True)),
        "scale": dict(zip(("estimate", "ci_low", "ci_high"), (fit.sigma, *fit.scale_ci()), strict=True)),
        "quantile_ns": quantile,
        "gof": gof,
        "independence": independence,
        "deadline": deadline,
        "supported_exceedance": supported_exceedance(n),
        "bound": distribution_free_bound(x),
        "fit_reliable": fit_reliable,
        "reliable": not reasons,
        "reasons": reasons,
    }


def supported_exceedance(n: int) -> float:
    """The smallest per-event probability a fit to n events is trusted at (MIN_EXPECTED_BEYOND / n)."""
    return MIN_EXPECTED_BEYOND / n


def _too_far(p: float, n: int) -> str:
    decades = math.log10(1.0 / (p * n))
    needed = math.ceil(MIN_EXPECTED_BEYOND / p)
    where = f"{decades:.1f} decades beyond" if decades > 0 else "at"
    return (f"{p:g} per event is {where} the 1 in {n:,} this sample resolves; a tail fit is trusted only "
            f"where {MIN_EXPECTED_BEYOND:g} events are expected beyond it ({needed:,} events for {p:g}): on "
            "the twin's latency models its interval held the true quantile ever less often past that")


#: the largest values whose positions say how the top of a sample clusters (the bound's n_eff); few,
#: so that any kept tail holds them (a TailSample keeps at least its cap, 40 in the smallest tests)
BOUND_TOP = 20


def distribution_free_bound(x: _Sample, level: float = LEVEL) -> dict | None:
    """What the sample supports with no model: with probability `level` the largest of n values is
    at least the latency exceeded with probability p = 1 - (1 - level)^(1/n) (≈ 3/n at 95 %), for
    any continuous distribution: P(max < x_p) = (1 - p)^n = 1 - level. None for an empty sample.
    Events whose largest values come in clusters (one disturbance delaying several in a row) hold
    fewer chances than n: n is taken as n·θ, θ the share of distinct fine blocks among the
    BOUND_TOP largest values' positions (dependence.exceedance_effective_n's extremal index)."""
    n = x.count
    if not n:
        return None
    n_eff, how = float(n), ""
    if n > BOUND_TOP and hasattr(x, "top"):  # a sample in event order (a Distribution has none)
        _, positions, _, total = x.top(float(x.order_statistics([n - BOUND_TOP + 1])[0]))
        # ties that make the top more than twice as many values are no few distinct events: no estimate
        if total <= 2 * BOUND_TOP and positions.size == total:
            theta = dependence.extremal_index(positions, n)
            n_eff, how = n * theta, (f"extremal index {theta:.2f} of the {total} largest values, blocks of "
                                     f"{dependence.FINE_EVENTS} events")
    p = -math.expm1(math.log1p(-level) / max(n_eff, 1.0))
    return {"exceedance": p, "bound_ns": x.max, "level": level, "one_in": 1.0 / p, "effective_n": n_eff,
            "method": "distribution-free: the sample maximum as an upper confidence bound"
                      + (f", events counted by clusters of the largest values ({how})" if how else "")}


def _quantum(size: int, distinct: np.ndarray) -> float:
    """The resolution of tied data (`size` values taking the `distinct` ones): 0 without ties, else
    the gcd of the gaps between distinct values when they are integers (exactly representable),
    else the smallest gap."""
    if distinct.size == size:
        return 0.0
    gaps = np.diff(distinct)
    if np.all(distinct == np.round(distinct)) and np.abs(distinct).max() < 2.0**53:
        g = float(np.gcd.reduce(gaps.astype(np.int64)))
        if g > 0:
            return g
    return float(gaps.min())


_SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SPLITMIX_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SPLITMIX_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function on uint64 (wrapping arithmetic): a bijection that mixes well."""
    with np.errstate(over="ignore"):
        z = z + _SPLITMIX_GAMMA
        z = (z ^ (z >> np.uint64(30))) * _SPLITMIX_M1
        z = (z ^ (z >> np.uint64(27))) * _SPLITMIX_M2
    return z ^ (z >> np.uint64(31))


def _jitter(positions: np.ndarray, seed: int, quantum: float) -> np.ndarray:
    """Uniform on [-quantum/2, quantum/2) for each position, a function of (seed, position) only:
    the same value gets the same jitter whether the whole array or a tail sample was given."""
    key = _splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    h = _splitmix64(positions.astype(np.uint64) ^ key)
    u = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53  # 53 random bits: [0, 1)
    return -quantum / 2 + quantum * u


def _candidates(n: int, top: int) -> list[tuple[float, int]]:
    tails = list(_BASE_TAILS)
    while n * tails[-1] >= 2 * MIN_EXCEEDANCES:  # above 0.995, steps of √2 in the number of excesses
        tails.append(tails[-1] / math.sqrt(2))
    out: list[tuple[float, int]] = []
    for tail in tails:
        k = int(math.floor(n * tail))
        if MIN_EXCEEDANCES <= k < top and (not out or k < out[-1][1]):
            out.append((tail, k))
    return out


def _eligible_exceedances(n: int) -> int:
    """At most √n excesses for the threshold that is used: at 1e-9 the extrapolation turns a small
    bias of the shape into a large one of the quantile, and bias, not variance, is what a lower
    threshold costs. With k = √n the bias stays a fixed fraction of the standard error for tails
    like Student's t (second-order parameter -1/2) and shrinks for faster ones."""
    return max(MIN_EXCEEDANCES, min(MAX_EXCEEDANCES, int(math.sqrt(n))))


def _safe_mean(y: np.ndarray) -> float | None:
    m = float(y.max()) if y.size else 0.0
    if not math.isfinite(m) or m <= 0:
        return None
    return float(np.mean(y / m)) * m


# --------------------------------------------------------------------------- GPD fitting


@dataclass
class _Fit:
    """A GPD fit at one threshold; y are the excesses in units of ``unit`` (their mean)."""

    y: np.ndarray
    unit: float
    n: int
    k: int
    u: float
    quantile: float
    xi: float
    sigma_u: float  # σ in units of ``unit``
    loglik: float  # binomial × GPD log-likelihood at the maximum, excesses in units of ``unit``

    @property
    def sigma(self) -> float:
        # Python floats: a product or sum past 1e308 becomes inf without numpy's overflow warning
        return float(self.sigma_u) * float(self.unit)

    @property
    def zeta(self) -> float:
        return self.k / self.n

    def shape_ci(self) -> tuple[float, float]:
        z = float(norm_isf((1 - LEVEL) / 2))  # Python floats: inf past 1e308, not a numpy warning
        se = (1 + max(self.xi, IRREGULAR_SHAPE)) / math.sqrt(self.k)
        return self.xi - z * se, self.xi + z * se

    def scale_ci(self) -> tuple[float, float]:
        z = float(norm_isf((1 - LEVEL) / 2))  # Python floats: inf past 1e308, not a numpy warning
        se = self.sigma * math.sqrt(2 * (1 + max(self.xi, IRREGULAR_SHAPE)) / self.k)
        return max(self.sigma - z * se, 0.0), self.sigma + z * se


def _gpd_profile(theta: float, y: np.ndarray) -> tuple[float, float, float]:
    """Grimshaw's profile: for θ = ξ/σ the likelihood is maximised by ξ = mean log(1 + θy);
    returns (log-likelihood, ξ, σ)."""
    if abs(theta) < _TINY_THETA:
        theta = _TINY_THETA
    a = 1.0 + theta * y
    if a.min() <= 0:
        return -math.inf, math.nan, math.nan
    xi = float(np.mean(np.log(a)))
    sigma = xi / theta
    if not (sigma > 0 and xi > -1):
        return -math.inf, xi, sigma
    return -y.size * (math.log(sigma) + xi + 1.0), xi, sigma


def _fit_gpd(y_ns: np.ndarray, n: int, u: float, quantile: float) -> _Fit | None:
    k = y_ns.size
    unit = _safe_mean(y_ns)
    if unit is None or unit <= 0:
        return None
    y = y_ns / unit
    ymax = float(y.max())
    lo = -1.0 / ymax
    thetas = np.concatenate([lo * (1 - np.geomspace(1e-9, 1.0, 40)[:-1]), np.geomspace(1e-4, 1e3, 50)])
    vals = np.array([_gpd_profile(t, y)[0] for t in thetas])
    if not np.isfinite(vals).any():
        return None
    i = int(np.argmax(vals))
    a = thetas[i - 1] if i > 0 else lo * (1 - 1e-12)
    b = thetas[i + 1] if i + 1 < thetas.size else thetas[i] * 10
    res = optimize.minimize_scalar(
        lambda t: -_gpd_profile(t, y)[0], bounds=(a, b), method="bounded",
        options={"xatol": 1e-10 * max(abs(a), abs(b))},
    )
    best = res.x if -res.fun >= vals[i] else thetas[i]
    ll, xi, sigma = _gpd_profile(float(best), y)
    if not math.isfinite(ll):
        return None
    zeta = k / n
    return _Fit(y=y, unit=unit, n=n, k=k, u=u, quantile=quantile, xi=xi, sigma_u=sigma,
                loglik=ll + _binom_ll(zeta, k, n))


def _binom_ll(zeta: float, k: int, n: int) -> float:
    if not 0 < zeta < 1:
        return -math.inf
    return k * math.log(zeta) + (n - k) * math.log1p(-zeta)


def _fit_many(y: np.ndarray, theta0: float, iterations: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised maximum likelihood of each row of y (the bootstrap replicates): Newton on
    Grimshaw's profile in θ = ξ/σ, starting from θ0, with halving to stay in the support.
    Returns (ξ, σ) per row; rows that fail come back as NaN (a replicate whose mean log term is
    0 divides by it: that row fails, which is handled, so numpy is not let to warn of it)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _fit_many_rows(y, theta0, iterations)


def _fit_many_rows(y: np.ndarray, theta0: float, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    b = y.shape[0]
    theta = np.full(b, theta0 if abs(theta0) >= _TINY_THETA else _TINY_THETA)
    ymax = y.max(axis=1)
    lower = -1.0 / ymax

    def parts(th: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a = 1.0 + th[:, None] * y
        m0 = np.log(a).mean(axis=1)
        r = y / a
        m1 = r.mean(axis=1)
        m2 = (r * r).mean(axis=1)
        return a, m0, m1, m2

    done = np.zeros(b, dtype=bool)
    for _ in range(iterations):
        th = np.where(np.abs(theta) < _TINY_THETA, np.copysign(_TINY_THETA, theta), theta)
        _, m0, m1, m2 = parts(th)
        grad = -m1 / m0 + 1.0 / th - m1
        hess = m2 / m0 + (m1 / m0) ** 2 - 1.0 / th**2 + m2
        step = np.where(hess < 0, -grad / hess, np.sign(grad) * 0.1 * np.abs(th) + 1e-3 * np.sign(grad))
        new = th + step
        # stay strictly inside the support (1 + θ y > 0), halving towards the boundary
        new = np.where(new <= lower, (th + lower) / 2, new)
        done = np.abs(new - th) <= 1e-8 * np.maximum(np.abs(th), 1.0)
        theta = new
        if done.all():
            break
    th = np.where(np.abs(theta) < _TINY_THETA, np.copysign(_TINY_THETA, theta), theta)
    _, m0, _, _ = parts(th)
    xi = m0
    sigma = m0 / th
    bad = ~(done & np.isfinite(xi) & (sigma > 0) & (xi > -1))
    xi[bad] = np.nan
    sigma[bad] = np.nan
    return xi, sigma


def _stability(fits: list[_Fit]) -> list[bool]:
    """A candidate is stable when the shapes at the higher candidates agree with its own, the
    difference of nested estimates having variance ≈ se_high² − se_low² under a GPD tail. Only
    higher candidates with at least RELIABLE_EXCEEDANCES and a tenth of this one's excesses are
    compared: the shape at 50 excesses is so noisy that one outlier there would otherwise push
    the threshold to the top, where the estimates are worst."""
    out = []
    for j, f in enumerate(fits):
        others = [g for g in fits[j + 1:] if g.k >= max(RELIABLE_EXCEEDANCES, f.k / STABILITY_WINDOW)]
        if not others:
            out.append(True)
            continue
        z = norm_isf(STABILITY_ALPHA / (2 * len(others)))
        c = (1 + max(f.xi, IRREGULAR_SHAPE)) ** 2
        out.append(all(abs(g.xi - f.xi) <= z * math.sqrt(max(c / g.k - c / f.k, 1e-12)) for g in others))
    return out


# --------------------------------------------------------------------------- goodness of fit


def _gpd_logcdf_parts(
    y: np.ndarray, xi: np.ndarray | float, sigma: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """log F and log(1 - F) of the GPD at y (broadcast)."""
    xi = np.asarray(xi, dtype=float)
    sigma = np.asarray(sigma, dtype=float)
    z = y / sigma
    small = np.abs(xi) < 1e-12
    safe_xi = np.where(small, 1.0, xi)
    a = np.maximum(1.0 + safe_xi * z, 1e-300)
    log_sf = np.where(small, -z, -np.log(a) / safe_xi)
    log_sf = np.minimum(log_sf, 0.0)
    log_cdf = np.log(np.maximum(-np.expm1(log_sf), 1e-300))
    return log_cdf, np.maximum(log_sf, -700.0)


def _anderson_darling(y_sorted: np.ndarray, xi: np.ndarray | float, sigma: np.ndarray | float) -> np.ndarray:
    """A² of each row of y_sorted (ascending) against GPD(σ, ξ) of that row."""
    k = y_sorted.shape[-1]
    log_cdf, log_sf = _gpd_logcdf_parts(y_sorted, xi, sigma)
    w = 2.0 * np.arange(1, k + 1) - 1.0
    return -k - (w * (log_cdf + log_sf[..., ::-1])).sum(axis=-1) / k


def _gof(fit: _Fit, rng: np.random.Generator) -> dict:
    xi, sigma = fit.xi, fit.sigma_u
    y = np.sort(fit.y)
    stat = float(_anderson_darling(y, xi, sigma))
    # Replicates from the fitted GPD, sorted (the quantile function is increasing), refitted.
    uni = np.sort(rng.uniform(size=(GOF_REPLICATES, fit.k)), axis=1)
    tail = -np.log1p(-uni)  # standard exponential
    reps = sigma * (np.expm1(xi * tail) / xi if abs(xi) > 1e-12 else tail)
    rxi, rsigma = _fit_many(reps, xi / sigma)
    ok = np.isfinite(rxi)
    rstats = _anderson_darling(reps[ok], rxi[ok, None], rsigma[ok, None])
    used = int(ok.sum())
    p_value = (1.0 + float(np.sum(rstats >= stat))) / (used + 1.0)
    return {
        "test": "Anderson-Darling, parametric bootstrap with refitting",
        "statistic": stat,
        "p_value": p_value,
        "replicates": used,
        "alpha": GOF_ALPHA,
        "passed": bool(p_value >= GOF_ALPHA),
    }


# --------------------------------------------------------------------------- independence


def _ferro_segers(gaps: np.ndarray) -> np.ndarray:
    """Intervals estimator of the extremal index for each row of inter-exceedance gaps (not
    truncated at 1, so it can serve as a test statistic)."""
    gaps = np.atleast_2d(gaps).astype(np.float64)
    m = gaps.shape[1]
    s1 = gaps.sum(axis=1)
    s2 = (gaps * gaps).sum(axis=1)
    short = 2.0 * s1**2 / (m * s2)
    g1 = gaps - 1.0
    d = (g1 * (gaps - 2.0)).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        long = np.where(d > 0, 2.0 * g1.sum(axis=1) ** 2 / (m * np.where(d > 0, d, 1.0)), np.inf)
    return np.where(gaps.max(axis=1) <= 2, short, long)


def _independence(positions: np.ndarray, n: int, rng: np.random.Generator) -> dict:
    k = positions.size
    gaps = np.diff(positions)
    theta = float(_ferro_segers(gaps)[0]) if gaps.size >= 2 else 1.0
    zeta = k / n
    # Under independence the exceedances form a Bernoulli(ζ) sequence: geometric gaps.
    null = _ferro_segers(rng.geometric(zeta, size=(INDEPENDENCE_REPLICATES, max(gaps.size, 2))))
    p_value = (1.0 + float(np.sum(null <= theta))) / (INDEPENDENCE_REPLICATES + 1.0)
    extremal = min(1.0, theta) if math.isfinite(theta) else 1.0
    adjacent = int(np.sum(gaps == 1))
    return {
        "test": "Ferro-Segers intervals estimator of the extremal index against geometric gaps",
        "extremal_index": extremal,
        "mean_cluster_size": 1.0 / extremal if extremal > 0 else None,
        "adjacent_exceedances": adjacent,
        "expected_adjacent": float((k - 1) * zeta),
        "p_value": p_value,
        "rule": f"fails when p < {INDEPENDENCE_ALPHA} and extremal index < {MATERIAL_THETA}",
        "passed": bool(not (p_value < INDEPENDENCE_ALPHA and extremal < MATERIAL_THETA)),
    }


# --------------------------------------------------------------------------- profile likelihood


class _Profile:
    """Profile likelihood of the binomial × GPD model under the constraint that the level
    exceeded with probability p is u + q (excess q, in the fit's units)."""

    def __init__(self, fit: _Fit) -> None:
        self.fit = fit
        self.y = fit.y
        self.ymax = float(fit.y.max())
        self.k, self.n = fit.k, fit.n
        self.c = 1.0 / math.sqrt(fit.k)  # ζ = ζ̂·exp(c·t): t is on a unit scale
        self.best = self._loglik(fit.sigma_u, fit.xi, fit.zeta)
        self.cutoff = self.best - _chi2_half()
        self.start = np.array([fit.xi, 0.0])

    def _loglik(self, sigma: float, xi: float, zeta: float) -> float:
        if not (sigma > 0 and 0 < zeta < 1 and math.isfinite(sigma)):
            return -math.inf
        if abs(xi) < 1e-9:
            g = -self.y.sum() / sigma
        else:
            if 1.0 + xi * self.ymax / sigma <= 0:
                return -math.inf
            g = -(1.0 + 1.0 / xi) * float(np.log1p(xi * self.y / sigma).sum())
        return _binom_ll(zeta, self.k, self.n) - self.k * math.log(sigma) + g

    def _sigma(self, q: float, log_p: float, xi: float, zeta: float) -> float:
        lr = math.log(zeta) - log_p
        if lr <= 0 or xi * lr > 700:  # beyond 700 σ would underflow: no usable model there
            return math.nan
        g = lr if abs(xi * lr) < 1e-12 else math.expm1(xi * lr) / xi
        return q / g if g > 0 else math.nan

    def at(self, q: float, log_p: float) -> float:
        """The profile log-likelihood at (q, log p), warm-started from the previous optimum."""
        zhat = self.fit.zeta

        def nll(v: np.ndarray) -> float:
            xi, t = float(v[0]), float(v[1])
            zeta = zhat * math.exp(self.c * t)
            if not zeta < 1:
                return 1e300
            sigma = self._sigma(q, log_p, xi, zeta)
            ll = self._loglik(sigma, xi, zeta) if math.isfinite(sigma) else -math.inf
            return -ll if math.isfinite(ll) else 1e300

        self.start = np.clip(self.start, [-0.999, -10.0], [5.0, 10.0])
        best_v, best = self.start, nll(self.start)
        for x0 in (self.start, np.array([max(self.fit.xi, -0.999), 0.0])):
            res = optimize.minimize(
                nll, x0, method="Nelder-Mead", bounds=[(-0.999, 5.0), (-10.0, 10.0)],
                options={"xatol": 1e-4, "fatol": 1e-4, "maxiter": 400, "initial_simplex": self._simplex(x0)},
            )
            if res.fun < best:
                best_v, best = res.x, float(res.fun)
            if best < 1e299 and x0 is self.start:
                break
        if best < 1e299:
            self.start = np.asarray(best_v, dtype=float)
        return -best if best < 1e299 else -math.inf

    def _simplex(self, x0: np.ndarray) -> np.ndarray:
        # steps of about one standard error of ξ and of log ζ (t is in those units already)
        se = (1 + max(self.fit.xi, IRREGULAR_SHAPE)) / math.sqrt(self.k)
        return np.array([x0, x0 + [se, 0.0], x0 + [0.0, 1.0]])

    def interval(self, h: Any, v0: float, max_span: float) -> tuple[float | None, float | None]:
        """Roots of h(v) = profile(v) − cutoff on either side of v0 (h(v0) ≥ 0), searching
        outwards with doubling steps up to max_span; None when none is found."""
        out: list[float | None] = []
        for direction in (-1.0, 1.0):
            self.start = np.array([self.fit.xi, 0.0])
            prev, step, root = v0, 0.01, None
            while abs(prev - v0) < max_span:
                v = prev + direction * step
                hv = h(v)
                if hv < 0:
                    lo, hi = (v, prev) if direction < 0 else (prev, v)
                    try:
                        root = optimize.brentq(lambda s: max(h(s), -1e6), lo, hi, xtol=1e-3)
                    except ValueError:  # the optimiser's warm start changed a sign: keep the outer point
                        root = v
                    break
                prev, step = v, step * 2
            out.append(root)
        return out[0], out[1]


def _quantile_block(fit: _Fit, p: float, x: _Sample) -> dict:
    """Where the sample resolves p (MIN_EXPECTED_BEYOND events expected beyond it) the empirical
    quantile with its exact order-statistic interval — on the twin's models the GPD intervals held
    only 86-90 % there for a stated 95 % — with the fit beside it as an indication; beyond, the
    fit's extrapolation (which the caller marks unsupported)."""
    if p >= supported_exceedance(x.count):
        block = _empirical_quantile(x, p)
        if p < fit.zeta:
            block["fit"] = _fitted_quantile(fit, p)
        return block
    return _fitted_quantile(fit, p)


def _fitted_quantile(fit: _Fit, p: float) -> dict:
    prof = _Profile(fit)
    lr = math.log(fit.zeta / p)
    g = lr if abs(fit.xi * lr) < 1e-12 else math.expm1(fit.xi * lr) / fit.xi
    q_hat = fit.sigma_u * g
    log_q0 = math.log(q_hat)
    log_p = math.log(p)
    lo, hi = prof.interval(lambda v: prof.at(math.exp(v), log_p) - prof.cutoff, log_q0, max_span=math.log(1e6))
    unit = fit.unit
    return {
        "exceedance": p,
        "estimate": fit.u + q_hat * unit,
        "ci_low": None if lo is None else fit.u + math.exp(lo) * unit,
        "ci_high": None if hi is None else fit.u + math.exp(hi) * unit,
        "level": LEVEL,
        "interval": "profile likelihood (binomial x GPD)",
    }


def _empirical_quantile(x: _Sample, p: float) -> dict:
    n = x.count
    r = int(math.ceil((1 - p) * n))  # X_(r), the inverted empirical CDF
    lo_r = int(binom_ppf((1 - LEVEL) / 2, n, 1 - p))
    hi_r = int(binom_ppf(1 - (1 - LEVEL) / 2, n, 1 - p)) + 1
    ranks = sorted({min(max(v, 1), n) for v in (r, lo_r, hi_r)})
    at = {v: float(o) for v, o in zip(ranks, x.order_statistics(ranks), strict=True)}
    return {
        "exceedance": p,
        "estimate": at[min(max(r, 1), n)],
        "ci_low": at[min(max(lo_r, 1), n)] if lo_r >= 1 else None,
        "ci_high": at[min(max(hi_r, 1), n)] if hi_r <= n else None,
        "level": LEVEL,
        "interval": "empirical, order statistics",
    }


def binomial_interval(c: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """Clopper–Pearson interval of a probability seen c times in n trials (exact, conservative); c and
    n may be effective (fractional) counts."""
    lo = 0.0 if c == 0 else float(stats.beta.ppf((1 - level) / 2, c, n - c + 1))
    hi = 1.0 if c == n else float(stats.beta.ppf(1 - (1 - level) / 2, c + 1, n - c))
    return lo, hi


def _empirical_deadline(x: _Sample, deadline_ns: float) -> dict:
    """The observed fraction beyond the deadline with its Clopper–Pearson interval over the effective
    number of events (dependence.exceedance_effective_n: exceedances that come together count as
    fewer chances); where not every exceedance is at hand (a deadline below the kept tail), n."""
    n = x.count
    c = x.count_above(deadline_ns)
    n_eff, how = float(n), "independent: a deadline below the top tenth of the sample is no tail"
    if 10 * c <= n:  # a deadline in the tail, where any kept tail holds every exceedance
        values, positions, _, _ = x.top(deadline_ns)
        beyond = positions[values > deadline_ns]
        if beyond.size == c:
            n_eff, how = dependence.exceedance_effective_n(beyond, n)
    scale = n_eff / n if n else 1.0
    lo, hi = binomial_interval(c * scale, n * scale)
    return {
        "deadline_ns": deadline_ns,
        "source": "empirical",
        "p_exceed": c / n,
        "ci_low": lo,
        "ci_high": hi,
        "level": LEVEL,
        "observed_exceedances": c,
        "effective_n": n_eff,
        "dependence": how,
    }


def _deadline_block(fit: _Fit, deadline_ns: float, x: _Sample) -> dict:
    """The observed fraction with its exact (Clopper-Pearson) interval, always: it holds at its level
    for any distribution, where the fit's interval did not even inside the data. Above the threshold
    the fit's figure goes beside it, with a note where it is further out than a fit is trusted."""
    block = _empirical_deadline(x, deadline_ns)
    if deadline_ns <= fit.u:
        return block
    fitted = _fitted_deadline(fit, deadline_ns)
    block["fit_p_exceed"] = fitted["p_exceed"]
    block["fit"] = fitted
    if fitted["p_exceed"] < supported_exceedance(x.count):
        block["note"] = (_too_far(fitted["p_exceed"], x.count) if fitted["p_exceed"] > 0
                         else "the fit puts the deadline beyond the tail's end point, which the sample cannot show")
    return block


def _fitted_deadline(fit: _Fit, deadline_ns: float) -> dict:
    q = (deadline_ns - fit.u) / fit.unit
    z = 1.0 + fit.xi * q / fit.sigma_u
    if fit.xi < 0 and z <= 0:
        log_p = -math.inf
    elif abs(fit.xi) < 1e-12:
        log_p = math.log(fit.zeta) - q / fit.sigma_u
    else:
        log_p = math.log(fit.zeta) - math.log(z) / fit.xi
    prof = _Profile(fit)

    def h(v: float) -> float:
        return prof.at(q, v) - prof.cutoff

    floor = math.log(1e-300)
    if log_p > floor:
        lo, hi = prof.interval(h, log_p, max_span=50.0)
        p_hat = math.exp(log_p)
        ci_low = 0.0 if lo is None else math.exp(lo)
        ci_high = None if hi is None else min(1.0, math.exp(hi))
    else:  # beyond the fitted upper end point: the largest plausible probability, by a scan
        p_hat, ci_low, ci_high = 0.0, 0.0, 0.0
        grid = np.arange(floor, math.log(fit.zeta), 20.0)
        inside = [v for v in grid if h(v) >= 0]
        if inside:
            v = inside[-1]
            _, hi = prof.interval(h, v, max_span=60.0)
            ci_high = None if hi is None else min(1.0, math.exp(hi))
    return {"p_exceed": p_hat, "ci_low": ci_low, "ci_high": ci_high, "level": LEVEL,
            "interval": "profile likelihood (binomial x GPD)"}


# --------------------------------------------------------------------------- output


def _clean(obj: Any) -> Any:
    """Plain JSON types only; a non-finite float (an overflow on absurd inputs) becomes None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj
