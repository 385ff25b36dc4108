"""The quantities a worst case reports: the quantile at the asked exceedance and the probability of
missing a deadline, fitted or empirical, with their intervals."""

from __future__ import annotations

import math

import numpy as np

from station.analysis import dependence
from station.analysis.quantile_functions import binom_ppf
from station.analysis.worst_case.constants import LEVEL, MIN_EXPECTED_BEYOND, stats
from station.analysis.worst_case.fit import _Fit, _Profile
from station.analysis.worst_case.sample import _Sample


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
    lo, hi = prof.interval(lambda v: prof.at(math.exp(v), log_p) - prof.cutoff, log_q0,
                           max_span=math.log(1e6))
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
    """Clopper–Pearson interval of a probability seen c times in n trials (exact, conservative); c
    and n may be effective (fractional) counts."""
    lo = 0.0 if c == 0 else float(stats.beta.ppf((1 - level) / 2, c, n - c + 1))
    hi = 1.0 if c == n else float(stats.beta.ppf(1 - (1 - level) / 2, c + 1, n - c))
    return lo, hi


def _empirical_deadline(x: _Sample, deadline_ns: float) -> dict:
    """The observed fraction beyond the deadline with its Clopper–Pearson interval over the
    effective number of events (dependence.exceedance_effective_n: exceedances that come together
    count as fewer chances); where not every exceedance is at hand (a deadline below the kept tail),
    n."""
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
    """The observed fraction with its exact (Clopper-Pearson) interval, always: it holds at its
    level for any distribution, where the fit's interval did not even inside the data. Above the
    threshold the fit's figure goes beside it, with a note where it is further out than a fit is
    trusted."""
    block = _empirical_deadline(x, deadline_ns)
    if deadline_ns <= fit.u:
        return block
    fitted = _fitted_deadline(fit, deadline_ns)
    block["fit_p_exceed"] = fitted["p_exceed"]
    block["fit"] = fitted
    if fitted["p_exceed"] < supported_exceedance(x.count):
        block["note"] = (_too_far(fitted["p_exceed"], x.count) if fitted["p_exceed"] > 0
                         else "the fit puts the deadline beyond the tail's end point, which the "
                              "sample cannot show")
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


def supported_exceedance(n: int) -> float:
    """The smallest per-event probability a fit to n events is trusted at (MIN_EXPECTED_BEYOND /
    n)."""
    return MIN_EXPECTED_BEYOND / n


def _too_far(p: float, n: int) -> str:
    decades = math.log10(1.0 / (p * n))
    needed = math.ceil(MIN_EXPECTED_BEYOND / p)
    where = f"{decades:.1f} decades beyond" if decades > 0 else "at"
    return (f"{p:g} per event is {where} the 1 in {n:,} this sample resolves; a tail fit is "
            f"trusted only where {MIN_EXPECTED_BEYOND:g} events are expected beyond it ({needed:,} "
            f"events for {p:g}): on the twin's latency models its interval held the true quantile "
            "ever less often past that")
