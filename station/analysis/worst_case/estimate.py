"""The worst-case pipeline: the sample checked, the candidate thresholds fitted and judged, the
estimate chosen and its diagnostics, every result JSON-clean."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from station.analysis import dependence
from station.analysis.worst_case.constants import (
    _BASE_TAILS,
    EXCEEDANCE,
    GOF_TRIES,
    HEAVY_SHAPE,
    IRREGULAR_SHAPE,
    LEVEL,
    MAX_EXCEEDANCES,
    MIN_DISTINCT_EXCEEDANCES,
    MIN_DISTINCT_TOP,
    MIN_EXCEEDANCES,
    MIN_SAMPLES,
    RELIABLE_EXCEEDANCES,
)
from station.analysis.worst_case.fit import (
    _Fit,
    _fit_gpd,
    _gof,
    _independence,
    _safe_mean,
    _stability,
)
from station.analysis.worst_case.quantities import (
    _deadline_block,
    _empirical_deadline,
    _quantile_block,
    _too_far,
    supported_exceedance,
)
from station.analysis.worst_case.sample import TailSample, _ArrayInput, _Sample, _TailInput


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
    sample = _TailInput.of(samples_ns) if isinstance(samples_ns,
                                                     TailSample) else _ArrayInput.of(samples_ns)
    # Values near the float limit (garbage, not latencies) overflow on the way; every such result is
    # a non-finite number that _clean turns into None, and the check below refuses to call it
    # reliable.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        estimate = _estimate(sample, float(exceedance),
                             None if deadline_ns is None else float(deadline_ns), int(seed))
    result = _clean(estimate)
    q = result["quantile_ns"]
    if result["reliable"] and (q is None or None in (q["estimate"], q["ci_low"], q["ci_high"])):
        # an overflow on absurd inputs turned an estimate into None: never call that reliable
        result["reliable"] = False
        result["reasons"].append("the estimates overflow floating point for these values")
    return result




# --------------------------------------------------------------------------- the pipeline


def _empty_result(x: _Sample, exceedance: float, deadline_ns: float | None,
                  reasons: list[str]) -> dict:
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
    "excesses over the lowest candidate threshold with a stable shape and an accepted "
    "Anderson-Darling test (ties broken by a uniform jitter within the quantum: {quantum}). Where "
    "the sample resolves the per-event probability (10 events expected beyond it) the latency it "
    "gives, and any deadline's probability, are the empirical ones with exact 95 % intervals "
    "(order statistics, Clopper-Pearson), the fit's figures beside them; further out only the fit "
    "speaks, with a 95 % profile-likelihood interval that includes the uncertainty of the "
    "exceedance rate, and it is marked unsupported."
)


_KEPT_NOTE = (
    " The tail sample keeps only the largest {kept} of the {top} values in the top 10 %: the "
    "threshold diagnostics start at the first candidate with fewer excesses than that."
)


def _estimate(x: _Sample, p: float, deadline_ns: float | None, seed: int) -> dict:
    n = x.count
    if n < MIN_SAMPLES:
        what = "no samples" if n == 0 else f"only {n} samples"
        return _empty_result(x, p, deadline_ns,
                             [f"{what}: at least {MIN_SAMPLES} are needed for a tail fit"])
    rng = np.random.default_rng(seed)  # the GOF bootstrap and the independence simulation only

    # The top 10 % (with every value tied to its lower edge, so the jitter spreads ties fairly). A
    # tail sample may hold fewer (its cap binds): then the top is what it kept, and the quantum and
    # the distinct values still come from the whole sample's distribution, as with an array.
    k_top = int(math.floor(n * _BASE_TAILS[0]))
    edge = float(x.order_statistics([n - k_top])[0])
    raw, idx, distinct_top, size_top = x.top(edge)
    if distinct_top.size < MIN_DISTINCT_TOP:
        return _empty_result(
            x, p, deadline_ns,
            [f"only {distinct_top.size} distinct value(s) in the top 10 % of the sample: no tail "
             "to fit"],
        )
    if raw.size <= MIN_EXCEEDANCES:  # only a tail sample with a tiny cap gets here
        return _empty_result(
            x, p, deadline_ns,
            [f"the tail sample keeps only {raw.size} values: too few for a tail fit"],
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
        result = _empty_result(x, p, deadline_ns,
                               ["no candidate threshold could be fitted (values too extreme?)"])
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
    floor = (
        RELIABLE_EXCEEDANCES if any(RELIABLE_EXCEEDANCES <= f.k <= eligible for f in fits) else 0
    )
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
        reasons.append(f"only {fit.k} exceedances of the threshold: at least "
                       f"{RELIABLE_EXCEEDANCES} are needed")
    if not gof["passed"]:
        reasons.append(
            f"the excesses over the threshold do not follow a generalised Pareto distribution "
            f"(Anderson-Darling p = {gof['p_value']:.3g})"
        )
    if not independence["passed"]:
        reasons.append(
            "large latencies come in clusters (extremal index "
            f"{independence['extremal_index']:.2f}, p = {independence['p_value']:.3g}): "
            "independence fails, the intervals would be too narrow"
        )
    if quantum > 0 and distinct_exc < MIN_DISTINCT_EXCEEDANCES:
        reasons.append(
            f"only {distinct_exc} distinct values above the threshold (quantum {quantum:g} ns): "
            "the data are too coarse for a continuous tail model"
        )
    if fit.xi >= HEAVY_SHAPE:
        reasons.append(
            f"the tail is so heavy (shape {fit.xi:.2f} ≥ {HEAVY_SHAPE}, infinite variance) that "
            "the extrapolated worst case is unbounded in practice"
        )
    if fit.xi <= IRREGULAR_SHAPE:
        reasons.append(
            f"the shape {fit.xi:.2f} is ≤ {IRREGULAR_SHAPE}: a nearly hard upper limit, where the "
            "likelihood intervals lose their usual guarantees"
        )

    quantile = _quantile_block(fit, p, x)
    if quantile["estimate"] is None or quantile["ci_low"] is None or quantile["ci_high"] is None:
        reasons.append("the interval of the extrapolated quantile is unbounded: the data cannot "
                       "bound the worst case")
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
        "shape": dict(zip(("estimate", "ci_low", "ci_high"), (fit.xi, *fit.shape_ci()),
                          strict=True)),
        "scale": dict(zip(("estimate", "ci_low", "ci_high"), (fit.sigma, *fit.scale_ci()),
                          strict=True)),
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
        # ties that make the top more than twice as many values are no few distinct events: no
        # estimate
        if total <= 2 * BOUND_TOP and positions.size == total:
            theta = dependence.extremal_index(positions, n)
            n_eff, how = n * theta, (f"extremal index {theta:.2f} of the {total} largest values, "
                                     f"blocks of {dependence.FINE_EVENTS} events")
    p = -math.expm1(math.log1p(-level) / max(n_eff, 1.0))
    return {
        "exceedance": p,
        "bound_ns": x.max,
        "level": level,
        "one_in": 1.0 / p,
        "effective_n": n_eff,
        "method": "distribution-free: the sample maximum as an upper confidence bound"
        + (f", events counted by clusters of the largest values ({how})" if how else ""),
    }


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
    # above 0.995, steps of √2 in the number of excesses
    while n * tails[-1] >= 2 * MIN_EXCEEDANCES:
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
