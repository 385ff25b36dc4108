"""Generalized Pareto fits of the excesses over each candidate threshold, their stability, goodness
of fit (Anderson-Darling, parametric bootstrap), the exceedances' independence (Ferro-Segers), and
the profile likelihood that gives the intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from station.analysis.quantile_functions import norm_isf
from station.analysis.worst_case.constants import (
    _TINY_THETA,
    GOF_ALPHA,
    GOF_REPLICATES,
    INDEPENDENCE_ALPHA,
    INDEPENDENCE_REPLICATES,
    IRREGULAR_SHAPE,
    LEVEL,
    MATERIAL_THETA,
    RELIABLE_EXCEEDANCES,
    STABILITY_ALPHA,
    STABILITY_WINDOW,
    _chi2_half,
    optimize,
)

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
    thetas = np.concatenate([lo * (1 - np.geomspace(1e-9, 1.0, 40)[:-1]), np.geomspace(1e-4, 1e3,
                                                                                       50)])
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
        step = np.where(hess < 0, -grad / hess,
                        np.sign(grad) * 0.1 * np.abs(th) + 1e-3 * np.sign(grad))
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
        others = [g for g in fits[j + 1:] if g.k >= max(RELIABLE_EXCEEDANCES,
                                                        f.k / STABILITY_WINDOW)]
        if not others:
            out.append(True)
            continue
        z = norm_isf(STABILITY_ALPHA / (2 * len(others)))
        c = (1 + max(f.xi, IRREGULAR_SHAPE)) ** 2
        out.append(all(abs(g.xi - f.xi) <= z * math.sqrt(max(c / g.k - c / f.k,
                                                             1e-12)) for g in others))
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


def _anderson_darling(y_sorted: np.ndarray, xi: np.ndarray | float,
                      sigma: np.ndarray | float) -> np.ndarray:
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
                options={"xatol": 1e-4, "fatol": 1e-4, "maxiter": 400,
                         "initial_simplex": self._simplex(x0)},
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
                    # the optimiser's warm start changed a sign: keep the outer point
                    except ValueError:
                        root = v
                    break
                prev, step = v, step * 2
            out.append(root)
        return out[0], out[1]


def _safe_mean(y: np.ndarray) -> float | None:
    m = float(y.max()) if y.size else 0.0
    if not math.isfinite(m) or m <= 0:
        return None
    return float(np.mean(y / m)) * m
