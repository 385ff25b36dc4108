"""The anytime-valid quantile boundary (issue 50; station/analysis/anytime/): its mixture is the
integral it claims to be, and its time-uniform error is at most what it states, computed exactly
(dynamic programming over the binomial counts, no simulation) for laws on either side of the
quantile, ties included; the confidence sequence built on it covers a known quantile of a
discrete law as the boundary promises, and never widens."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from station.analysis.anytime.boundary import QuantileBoundary
from station.analysis.anytime.quantile_cs import QuantileSequence


def ever_crosses(theta: float, horizon: int, crossed) -> float:  # noqa: ANN001
    """P(∃ t ≤ horizon: crossed(t, S_t)) for S_t a Binomial(t, theta) path: the probability
    mass of the paths still inside, carried one step at a time, the crossing ones removed."""
    inside = np.array([1.0])  # P(S_0 = 0, not crossed)
    gone = 0.0
    for t in range(1, horizon + 1):
        step = np.zeros(t + 1)
        step[:-1] += inside * (1 - theta)
        step[1:] += inside * theta
        out = np.array([crossed(t, s) for s in range(t + 1)])
        gone += float(step[out].sum())
        step[out] = 0.0
        inside = step
    return gone


@pytest.mark.parametrize(("p", "t_opt"), [(0.5, 30), (0.9, 60), (0.99, 300)])
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_each_side_errs_at_most_half_alpha_at_any_time_exactly(p, t_opt, alpha):
    b = QuantileBoundary(p, alpha, t_opt)
    ranks = {t: b.ranks(t) for t in range(1, 301)}
    # lower side: the count at the quantile, Bernoulli(F(q)) with F(q) ≥ p, falls below k_lo
    for theta in (p, min(1.0, p + 0.3 * (1 - p))):
        err = ever_crosses(theta, 300, lambda t, s: s < ranks[t][0])
        assert err <= alpha / 2, (theta, err)
    # upper side: the count below the quantile, F(q−) ≤ p, reaches k_hi
    for theta in (p, p * 0.97):
        err = ever_crosses(theta, 300, lambda t, s: s >= ranks[t][1])
        assert err <= alpha / 2, (theta, err)
    # and it is not empty of power: at p itself each side spends a fair part of its budget
    assert ever_crosses(p, 300, lambda t, s: s < ranks[t][0] or s >= ranks[t][1]) > alpha / 20


def test_the_mixture_is_the_integral_it_names():
    b = QuantileBoundary(0.9, 0.05, 60)
    a_, b_, *_ = b._prior
    prior = stats.beta(a_, b_)
    for t, s in ((10, 9), (40, 30), (40, 40), (100, 97)):
        def ratio(pi, lo, hi, t=t, s=s):  # noqa: ANN001, ANN202
            return (pi / 0.9) ** s * ((1 - pi) / 0.1) ** (t - s) * prior.pdf(pi) / (
                prior.cdf(hi) - prior.cdf(lo))
        below = integrate.quad(ratio, 0, 0.9, args=(0, 0.9), limit=200)[0]
        above = integrate.quad(ratio, 0.9, 1, args=(0.9, 1), limit=200)[0]
        assert b.log_m(t, s, "below") == pytest.approx(math.log(below), rel=1e-6, abs=1e-9)
        assert b.log_m(t, s, "above") == pytest.approx(math.log(above), rel=1e-6, abs=1e-9)


def test_ranks_move_with_time_and_bound_only_when_the_data_can():
    b = QuantileBoundary(0.5, 0.05, 30)
    assert b.ranks(0) == (0, 1) and b.ranks(3) == (0, 4)  # three runs bound no median
    lows, highs = zip(*(b.ranks(t) for t in range(1, 2000)), strict=True)
    assert all(0 <= lo <= hi for lo, hi in zip(lows, highs, strict=True))
    finite = next(t for t in range(1, 2000) if lows[t - 1] > 0 and highs[t - 1] <= t)
    assert finite <= 12  # the median of runs gets a two-sided interval within a dozen runs
    assert highs[-1] - lows[-1] < 0.1 * 2000  # and narrows


def test_a_known_quantile_of_a_discrete_law_is_covered_by_the_sequence():
    """Integer latencies with heavy ties (a Poisson law, its 0.9-quantile from its own CDF):
    over seeded sequences of 200 values looked at after every value, the fraction ever missing
    the truth stays under alpha (with a binomial slack for 400 sequences)."""
    law = stats.poisson(12)
    truth = float(law.ppf(0.9))
    rng = np.random.default_rng(50)
    alpha, trials, missed = 0.1, 400, 0
    for _ in range(trials):
        cs = QuantileSequence(0.9, alpha, t_opt=100)
        for value in law.rvs(200, random_state=rng):
            lo, hi = cs.add(float(value))
            if not lo <= truth <= hi:
                missed += 1
                break
    assert missed / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e9, 1e9), max_size=80), st.sampled_from([0.5, 0.9, 0.99]))
def test_the_sequence_never_widens_and_takes_any_values(values, p):
    cs = QuantileSequence(p, 0.05)
    before = (-math.inf, math.inf)
    for v in values:
        now = cs.add(v)
        assert now[0] >= before[0] and now[1] <= before[1]
        before = now
    with pytest.raises(ValueError, match="NaN"):
        cs.add(math.nan)


@pytest.mark.parametrize(("args", "words"), [((0, 0.05), "p must"), ((0.5, 1.0), "alpha must"),
                                             ((0.5, 0.05, 0.5), "t_opt")])
def test_a_boundary_outside_its_domain_is_refused(args, words):
    with pytest.raises(ValueError, match=words):
        QuantileBoundary(*args)
