"""The worst-case estimator against injected truth: interval coverage of the 1e-9 quantile and of
a deadline's exceedance probability over seeded repetitions, clustered extremes, a tail that is
not generalised Pareto, and garbage inputs (hypothesis)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from station.analysis.worst_case import MIN_SAMPLES, worst_case

P = 1e-9
N = 200_000
REPETITIONS = 60
DEADLINE_P = 1e-5  # a deadline at the true 1e-5 quantile lies above the threshold at this N

Sampler = Callable[[np.random.Generator, int], np.ndarray]


def _gpd_above_body(rng: np.random.Generator, n: int) -> np.ndarray:
    # 90 % of events in a bounded body below 10 µs, 10 % in an exact GPD tail above it
    tail = rng.uniform(size=n) < 0.1
    excess = stats.genpareto.rvs(0.2, scale=2000.0, size=n, random_state=rng)
    return np.where(tail, 10_000.0 + excess, 10_000.0 * rng.beta(5, 2, size=n))


# name → (sampler, quantile function x(p) of the true per-event exceedance probability p)
FAMILIES: dict[str, tuple[Sampler, Callable[[float], float]]] = {
    # GPD tail (ξ = 0.2) above a body
    "gpd-tail": (_gpd_above_body, lambda p: 10_000 + 2000 / 0.2 * ((0.1 / p) ** 0.2 - 1)),
    # Student t with 4 degrees of freedom (ξ = 0.25, tail only asymptotically GPD)
    "student-t4": (
        lambda rng, n: 10_000 + 1000 * np.abs(rng.standard_t(4, size=n)),
        lambda p: 10_000 + 1000 * float(stats.t.isf(p / 2, 4)),
    ),
    # shifted exponential (ξ = 0)
    "exponential": (
        lambda rng, n: 20_000 + rng.exponential(500.0, size=n),
        lambda p: 20_000 + 500.0 * math.log(1 / p),
    ),
    # bounded, Beta(2, 3) on [20, 50] µs (ξ = -1/3, not GPD at any finite threshold)
    "beta": (
        lambda rng, n: 20_000 + 30_000 * rng.beta(2, 3, size=n),
        lambda p: 20_000 + 30_000 * float(stats.beta.isf(p, 2, 3)),
    ),
}


def _latencies(name: str, seed: int, n: int = N) -> np.ndarray:
    sampler, _ = FAMILIES[name]
    return np.round(sampler(np.random.default_rng(seed), n))  # integer ns, with ties


@pytest.mark.parametrize("name", list(FAMILIES))
def test_intervals_cover_the_injected_quantile_and_deadline_probability(name: str) -> None:
    _, quantile = FAMILIES[name]
    truth = quantile(P)
    deadline = quantile(DEADLINE_P)
    covered = deadline_covered = reliable = 0
    for rep in range(REPETITIONS):
        result = worst_case(_latencies(name, 7000 + rep), deadline_ns=deadline, seed=rep)
        q = result["quantile_ns"]
        assert q["exceedance"] == P and q["level"] == 0.95
        assert q["ci_low"] is not None and q["ci_high"] is not None
        assert q["ci_low"] <= q["estimate"] <= q["ci_high"]
        covered += q["ci_low"] <= truth <= q["ci_high"]
        d = result["deadline"]
        assert d["deadline_ns"] == deadline
        assert d["source"] == "empirical"  # the observed fraction, exact; the fit's figure beside it
        if "note" in d:  # only where the fit put it further out than a fit is trusted
            assert d["fit"]["p_exceed"] < result["supported_exceedance"], d
        assert d["ci_low"] <= d["p_exceed"] <= d["ci_high"]
        deadline_covered += d["ci_low"] <= DEADLINE_P <= d["ci_high"]
        reliable += result["reliable"]
    figures = (
        f"{name}: 1e-9 quantile {truth:.0f} ns covered in {covered}/{REPETITIONS}, deadline "
        f"{deadline:.0f} ns (p = {DEADLINE_P:g}) covered in {deadline_covered}/{REPETITIONS}, "
        f"reliable in {reliable}/{REPETITIONS}"
    )
    print(figures)
    assert covered >= 0.9 * REPETITIONS, figures
    assert deadline_covered >= 0.9 * REPETITIONS, figures


def _bursty(rng: np.random.Generator, n: int) -> np.ndarray:
    """Exponential latencies where a long stall (1 in 1000 events) also delays the next few
    periodic events, decaying: the way one SMI hits several consecutive events."""
    x = 20_000 + rng.exponential(500.0, size=n)
    starts = np.flatnonzero(rng.uniform(size=n) < 1 / 1000)
    stall = rng.exponential(3000.0, size=starts.size) + 3000
    for lag in range(6):
        at = starts + lag
        keep = at < n
        x[at[keep]] = np.maximum(x[at[keep]], 20_000 + stall[keep] * (1 - lag / 6))
    return np.round(x)


def test_clustered_extremes_fail_independence_and_the_shuffled_series_passes() -> None:
    rng = np.random.default_rng(11)
    x = _bursty(rng, N)
    clustered = worst_case(x, seed=1)
    ind = clustered["independence"]
    print(f"clustered: extremal index {ind['extremal_index']:.2f}, p = {ind['p_value']:.3g}")
    assert ind["passed"] is False
    assert ind["extremal_index"] < 0.7 and ind["p_value"] < 0.01
    assert clustered["reliable"] is False
    assert any("independence" in r for r in clustered["reasons"]), clustered["reasons"]

    shuffled = worst_case(rng.permutation(x), seed=1)  # the same marginal distribution
    ind = shuffled["independence"]
    print(f"shuffled: extremal index {ind['extremal_index']:.2f}, p = {ind['p_value']:.3g}")
    assert ind["passed"] is True
    assert not any("independence" in r for r in shuffled["reasons"])


def test_deadline_below_the_threshold_is_the_empirical_fraction() -> None:
    x = _latencies("exponential", 5)
    deadline = float(np.quantile(x, 0.99))  # well below the threshold (at most √n excesses)
    result = worst_case(x, deadline_ns=deadline, seed=0)
    assert deadline < result["threshold_ns"]
    d = result["deadline"]
    count = int(np.count_nonzero(x > deadline))
    assert d["source"] == "empirical"
    assert d["observed_exceedances"] == count
    assert d["p_exceed"] == count / x.size
    assert d["ci_low"] < d["p_exceed"] < d["ci_high"]
    # Clopper-Pearson: about ± 2 binomial standard errors at this count
    se = math.sqrt(count) / x.size
    assert d["ci_high"] - d["ci_low"] == pytest.approx(4 * se, rel=0.15)


def test_a_tail_with_a_far_second_mode_is_flagged_by_the_goodness_of_fit() -> None:
    rng = np.random.default_rng(3)
    body = 20_000 + rng.exponential(500.0, size=N - 40)
    far_mode = rng.normal(40_000, 300, size=40)  # 40 events far beyond the exponential tail
    x = np.round(rng.permutation(np.concatenate([body, far_mode])))
    result = worst_case(x, seed=0)
    print(f"second mode: AD p = {result['gof']['p_value']:.3g}, reasons {result['reasons']}")
    assert result["gof"]["passed"] is False
    assert result["reliable"] is False
    assert any("generalised Pareto" in r for r in result["reasons"])

    clean = worst_case(np.round(body), seed=0)
    assert clean["gof"]["passed"] is True


def test_result_shape_and_determinism() -> None:
    x = _latencies("gpd-tail", 1, n=50_000)
    deadline = float(np.sort(x)[-30])  # 30 events beyond: within what a fit is trusted at (10/n)
    a = worst_case(x, deadline_ns=deadline, seed=4)
    b = worst_case(x, deadline_ns=deadline, seed=4)
    assert a == b
    json.dumps(a, allow_nan=False)
    assert a["samples"] == x.size and a["observed_max_ns"] == float(x.max())
    assert a["threshold_ns"] < a["quantile_ns"]["estimate"]
    assert a["exceedances"] == int(round(a["exceedance_rate"] * x.size))
    assert a["quantum_ns"] == 1.0 and "1 ns" in a["method"]
    table = a["threshold_diagnostics"]
    assert [row["quantile"] for row in table] == sorted(row["quantile"] for row in table)
    assert table[0]["quantile"] == pytest.approx(0.90)
    chosen = [row for row in table if row["exceedances"] == a["exceedances"]]
    assert chosen and chosen[0]["shape"] == a["shape"]["estimate"] and chosen[0]["stable"]
    for key in ("shape", "scale"):
        assert a[key]["ci_low"] < a[key]["estimate"] < a[key]["ci_high"]
    assert {"statistic", "p_value", "passed"} <= set(a["gof"])
    assert {"extremal_index", "p_value", "passed"} <= set(a["independence"])
    assert a["deadline"]["deadline_ns"] == deadline and a["deadline"]["source"] == "empirical"
    assert a["deadline"]["fit"]["ci_low"] <= a["deadline"]["fit"]["p_exceed"] <= a["deadline"]["fit"]["ci_high"]
    assert a["deadline"]["observed_exceedances"] == int(np.count_nonzero(x > deadline))


def test_small_empty_and_invalid_inputs() -> None:
    empty = worst_case(np.array([]))
    assert empty["reliable"] is False and empty["samples"] == 0 and empty["observed_max_ns"] is None
    assert empty["reasons"]

    few = worst_case(np.arange(MIN_SAMPLES - 1, dtype=np.int64), deadline_ns=10)
    assert few["reliable"] is False and few["quantile_ns"] is None and few["shape"] is None
    assert few["observed_max_ns"] == MIN_SAMPLES - 2
    assert "samples" in few["reasons"][0]
    assert few["deadline"]["observed_exceedances"] == MIN_SAMPLES - 12

    for bad in (np.nan, np.inf, -np.inf):
        x = np.ones(5000)
        x[17] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            worst_case(x)
    with pytest.raises(ValueError, match="exceedance"):
        worst_case(np.ones(10), exceedance=0.0)


def test_coarse_quantisation_and_very_heavy_tails_are_flagged() -> None:
    rng = np.random.default_rng(8)
    coarse = 20_000 + 250 * np.floor(rng.exponential(1.0, size=N) * 2)  # 250 ns steps, σ = 500 ns
    result = worst_case(coarse, seed=0)
    assert result["quantum_ns"] == 250
    assert result["reliable"] is False
    assert any("distinct values" in r for r in result["reasons"]), result["reasons"]

    heavy = np.round(10_000 + 1000 * rng.pareto(1.2, size=N))  # ξ ≈ 0.83
    result = worst_case(heavy, seed=0)
    assert result["shape"]["estimate"] > 0.5
    assert result["reliable"] is False
    assert any("heavy" in r for r in result["reasons"]), result["reasons"]


def _estimates_missing(r: dict) -> bool:
    q = r["quantile_ns"]
    return q is None or None in (q["estimate"], q["ci_low"], q["ci_high"]) or r["shape"] is None


_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
_arrays = st.one_of(
    hnp.arrays(np.float64, st.integers(0, 3000), elements=_finite),
    hnp.arrays(np.int64, st.integers(0, 3000), elements=st.integers(-(2**62), 2**62)),
    hnp.arrays(np.float64, st.integers(0, 3000), elements=st.floats(0, 1e6, allow_subnormal=False)),
    st.builds(lambda v, m: np.full(m, v), _finite, st.integers(0, 3000)),
    st.builds(
        lambda s, m, q: np.round(np.random.default_rng(s).exponential(q * 20, m) / q) * q,
        st.integers(0, 2**32 - 1), st.integers(MIN_SAMPLES, 4000), st.sampled_from([1, 10, 1e-12, 1e300]),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(x=_arrays, deadline=st.one_of(st.none(), _finite), seed=st.integers(0, 2**31))
def test_garbage_never_crashes_and_stays_json(x: np.ndarray, deadline: float | None, seed: int) -> None:
    result = worst_case(x, deadline_ns=deadline, seed=seed)
    json.dumps(result, allow_nan=False)
    assert isinstance(result["reliable"], bool)
    assert result["samples"] == x.size
    if _estimates_missing(result):
        assert result["reliable"] is False and result["reasons"]
    if not result["reliable"]:
        assert result["reasons"] and all(isinstance(r, str) and r for r in result["reasons"])


@settings(max_examples=20, deadline=None)
@given(
    x=hnp.arrays(np.float64, st.integers(1, 2000), elements=st.floats(-1e9, 1e9)),
    where=st.integers(0, 10_000),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_nan_or_inf_anywhere_is_a_value_error(x: np.ndarray, where: int, bad: float) -> None:
    x = x.copy()
    x[where % x.size] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        worst_case(x)


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-12, 1 - 1e-12), st.integers(1, 10**9), st.floats(0.0, 1.0))
def test_the_fits_quantiles_are_scipy_stats_own_without_importing_it(q, n, p):
    """worst_case computes the χ²(1), normal and binomial quantiles it needs as scipy.stats does,
    from scipy.special (scipy.stats costs 0.3 s of a report to import): equal to the bit."""
    from station.analysis import quantile_functions as qf

    assert qf.chi2_1_ppf(q) == stats.chi2.ppf(q, 1)
    assert qf.norm_isf(q) == stats.norm.isf(q)
    assert qf.binom_ppf(q, n, p) == stats.binom.ppf(q, n, p)


def test_a_campaigns_worst_case_fit_and_percentile_intervals_do_not_import_scipy_stats():
    """The module kind's report calls the tail fit and the percentiles' intervals on every campaign:
    they must not pay scipy.stats' import (station/analysis/quantile_functions.py)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from station.analysis.worst_case import worst_case, TailSample\n"
            "x = np.random.default_rng(5).gamma(4, 1000, 200_000).astype(np.int64) + 5000\n"
            "worst_case(TailSample.of(x, cap=20_000))\n"
            "from station.kinds.module.findings import quantile_with_ci\n"
            "quantile_with_ci(x)\n"
            "print([m for m in sys.modules if m.startswith('scipy.stats')])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
