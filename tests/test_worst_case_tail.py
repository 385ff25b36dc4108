"""The worst case from a TailSample (a large sample's Distribution plus its largest values with their
positions) against the same estimate on the whole array: identical while the kept top holds the top
10 %, identical but for the low diagnostics rows when it does not, pooled runs as their concatenation,
and garbage inputs (hypothesis)."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from station.analysis.distribution import Distribution
from station.analysis.worst_case import MIN_SAMPLES, TAIL_CAP, TailSample, _jitter, worst_case

Sampler = Callable[[np.random.Generator, int], np.ndarray]


def _gpd_above_body(rng: np.random.Generator, n: int) -> np.ndarray:
    tail = rng.uniform(size=n) < 0.1
    excess = stats.genpareto.rvs(0.2, scale=2000.0, size=n, random_state=rng)
    return np.where(tail, 10_000.0 + excess, 10_000.0 * rng.beta(5, 2, size=n))


FAMILIES: dict[str, Sampler] = {
    "student-t4": lambda rng, n: 10_000 + 1000 * np.abs(rng.standard_t(4, size=n)),
    "gpd-tail": _gpd_above_body,
    "exponential": lambda rng, n: 20_000 + rng.exponential(500.0, size=n),
}


def _latencies(name: str, seed: int, n: int) -> np.ndarray:
    """Whole ns as int64 (ties, the way the report's runs hold them)."""
    return np.round(FAMILIES[name](np.random.default_rng(seed), n)).astype(np.int64)


def _top10_edge(x: np.ndarray) -> float:
    """The lower edge of the array path's top 10 %, from a full sort (the truth a cap is held against)."""
    n = x.size
    return float(np.sort(x)[n - n // 10 - 1])


def _shuffled(tail: TailSample, seed: int) -> TailSample:
    """The same tail sample with its values in another order (a streaming caller's chunk order)."""
    order = np.random.default_rng(seed).permutation(tail.values.size)
    return TailSample(tail.distribution, tail.values[order], tail.positions[order])


# --------------------------------------------------------------------------- the cap does not bind


@pytest.mark.parametrize(
    ("name", "n", "seed", "cap"),
    [
        ("student-t4", 200_000, 1, TAIL_CAP),  # n < cap: everything is kept
        ("gpd-tail", 20_000, 2, TAIL_CAP),
        ("exponential", 60_000, 3, TAIL_CAP),
        ("student-t4", 200_000, 4, 30_000),  # a genuine tail: more than the top 10 %, far less than n
        ("gpd-tail", 150_000, 5, 16_000),
        ("exponential", 100_000, 6, 10_500),
    ],
)
def test_the_tail_sample_gives_the_array_result_when_the_cap_does_not_bind(name: str, n: int, seed: int,
                                                                            cap: int) -> None:
    x = _latencies(name, seed, n)
    tail = TailSample.of(x, cap=cap)
    assert tail.edge <= _top10_edge(x)  # the cap does not bind
    assert tail.values.size == np.count_nonzero(x >= tail.edge) and tail.values.size <= max(n, 2 * cap)
    plain = worst_case(x, seed=seed)
    assert worst_case(tail, seed=seed) == plain
    assert worst_case(_shuffled(tail, seed), seed=seed) == plain
    assert "tail sample keeps only" not in plain["method"]

    # a deadline below the threshold (the observed fraction only) and one above it that 30 events
    # exceed (the observed fraction, and the fit's figure beside it)
    below = float(np.quantile(x, 0.98))
    above = float(np.sort(x)[n - 30])
    for deadline, fitted in ((below, False), (above, True)):
        want = worst_case(x, deadline_ns=deadline, seed=seed)
        assert want["deadline"]["source"] == "empirical"
        assert ("fit" in want["deadline"]) == fitted, (deadline, want["threshold_ns"])
        assert worst_case(tail, deadline_ns=deadline, seed=seed) == want


def test_a_float_sample_without_ties_gives_the_array_result() -> None:
    x = 20_000 + np.random.default_rng(9).exponential(500.0, size=50_000)  # scope pulse widths: no ties
    result = worst_case(x, deadline_ns=27_000.5, seed=2)
    assert result["quantum_ns"] == 0.0
    assert worst_case(TailSample.of(x, cap=6000), deadline_ns=27_000.5, seed=2) == result


def test_an_inside_the_data_exceedance_uses_the_distributions_order_statistics() -> None:
    x = _latencies("exponential", 12, 100_000)
    want = worst_case(x, exceedance=0.01, seed=1)  # p above the threshold's rate: empirical quantile
    assert want["quantile_ns"]["interval"] == "empirical, order statistics"
    assert worst_case(TailSample.of(x, cap=11_000), exceedance=0.01, seed=1) == want


# --------------------------------------------------------------------------- the cap binds


_SAME_WHEN_BOUND = [
    "samples", "observed_max_ns", "exceedance", "quantum_ns", "threshold_ns", "threshold_quantile", "exceedances",
    "exceedance_rate", "distinct_exceedance_values", "shape", "scale", "quantile_ns", "gof", "independence",
    "deadline", "reliable", "reasons",
]


@pytest.mark.parametrize(
    ("name", "n", "seed", "cap"),
    [
        ("student-t4", 400_000, 21, 20_000),
        ("gpd-tail", 400_000, 22, 12_000),
        ("exponential", 3_000_000, 23, TAIL_CAP),  # the real cap: 10 % is 300 000
    ],
)
def test_a_binding_cap_only_drops_the_low_diagnostics_rows(name: str, n: int, seed: int, cap: int) -> None:
    x = _latencies(name, seed, n)
    tail = TailSample.of(x, cap=cap)
    assert tail.edge > _top10_edge(x)  # the cap binds
    deadline = float(np.sort(x)[n - 20])
    plain = worst_case(x, deadline_ns=deadline, seed=seed)
    bound = worst_case(tail, deadline_ns=deadline, seed=seed)
    assert "fit" in plain["deadline"] and plain["fit_reliable"], plain["reasons"]
    for key in _SAME_WHEN_BOUND:
        assert bound[key] == plain[key], key
    assert set(bound) == set(plain)

    kept = tail.values.size
    assert f"keeps only the largest {kept} of the {np.count_nonzero(x >= _top10_edge(x))} values" in bound["method"]
    rows = {row["quantile"]: row for row in plain["threshold_diagnostics"]}
    table = bound["threshold_diagnostics"]
    assert len(table) < len(rows)
    assert table and all(row == rows[row["quantile"]] for row in table)
    # exactly the candidates the kept top can hold are left, and the chosen one among them
    assert [r["quantile"] for r in table] == [q for q, r in rows.items() if r["exceedances"] < kept]
    assert any(r["exceedances"] == bound["exceedances"] for r in table)


# --------------------------------------------------------------------------- building tail samples


def _by_position(tail: TailSample) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(tail.positions)
    return tail.values[order], tail.positions[order]


def _assert_same_tail(a: TailSample, b: TailSample) -> None:
    va, pa = _by_position(a)
    vb, pb = _by_position(b)
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(va, vb)
    np.testing.assert_array_equal(a.distribution.values, b.distribution.values)
    np.testing.assert_array_equal(a.distribution.counts, b.distribution.counts)


@pytest.mark.parametrize("cap", [TAIL_CAP, 9_000])
def test_pooled_halves_are_the_tail_sample_of_the_concatenation(cap: int) -> None:
    a = _latencies("student-t4", 31, 70_000)
    b = _latencies("student-t4", 32, 110_000) + 300  # a run with a slower tail
    whole = np.concatenate([a, b])
    pooled = TailSample.pooled([TailSample.of(a, cap=cap), TailSample.of(b, cap=cap)], [a.size, b.size], cap=cap)
    _assert_same_tail(pooled, TailSample.of(whole, cap=cap))
    assert pooled.positions.max() >= a.size  # b's positions were shifted
    assert worst_case(pooled, deadline_ns=30_000, seed=5) == worst_case(TailSample.of(whole, cap=cap),
                                                                        deadline_ns=30_000, seed=5)
    if cap == TAIL_CAP:  # nothing cut: the pooled tail is the whole concatenation
        assert worst_case(pooled, deadline_ns=30_000, seed=5) == worst_case(whole, deadline_ns=30_000, seed=5)


def test_pooling_parts_kept_with_a_smaller_cap_keeps_only_what_is_complete() -> None:
    a = _latencies("exponential", 33, 50_000)
    b = _latencies("exponential", 34, 30_000) - 200
    pooled = TailSample.pooled([TailSample.of(a, cap=800), TailSample.of(b, cap=800)], [a.size, b.size], cap=5000)
    whole = np.concatenate([a, b])
    at = np.flatnonzero(whole >= pooled.edge)  # every value above its edge, none missing
    np.testing.assert_array_equal(np.sort(pooled.positions), at)
    assert pooled.edge == max(TailSample.of(a, cap=800).edge, TailSample.of(b, cap=800).edge)
    assert 800 <= pooled.values.size < 5000


def test_pooling_with_empty_and_float_parts_and_wrong_lengths() -> None:
    rng = np.random.default_rng(40)
    parts = [rng.exponential(5.0, 3000), np.empty(0), np.round(rng.exponential(5.0, 5000)), rng.normal(0, 1, 10)]
    tails = [TailSample.of(p, cap=700) for p in parts]
    pooled = TailSample.pooled(tails, [p.size for p in parts], cap=700)
    _assert_same_tail(pooled, TailSample.of(np.concatenate(parts), cap=700))
    assert TailSample.pooled([], []).distribution.count == 0
    with pytest.raises(ValueError, match="length"):
        TailSample.pooled(tails, [p.size + 1 for p in parts])
    with pytest.raises(ValueError, match="parts"):
        TailSample.pooled(tails, [3000])


def test_a_streamed_tail_sample_is_the_same_object() -> None:
    """The caller that cannot hold the sample: the distribution first, then values ≥ edge_for chunk by chunk."""
    x = _latencies("gpd-tail", 50, 300_000)
    chunks = np.array_split(x, 7)
    dist = Distribution.pooled([Distribution.of(c) for c in chunks])
    edge = TailSample.edge_for(dist, cap=35_000)  # above the top 10 %: exact
    values, positions, start = [], [], 0
    for c in chunks:
        at = np.flatnonzero(c >= edge)
        values.append(c[at])
        positions.append(at + start)
        start += c.size
    streamed = TailSample(dist, np.concatenate(values), np.concatenate(positions))
    _assert_same_tail(streamed, TailSample.of(x, cap=35_000))
    assert worst_case(streamed, seed=3) == worst_case(x, seed=3)


def test_the_edge_keeps_ties_up_to_twice_the_cap() -> None:
    x = np.array([0] * 10 + [5] * 100 + [7] * 3 + [9], dtype=np.int64)
    assert TailSample.edge_for(Distribution.of(x), cap=60) == 5  # 104 values ≥ 5: at most 2 × 60
    assert TailSample.edge_for(Distribution.of(x), cap=20) == 7  # 104 > 40: one distinct value up
    assert TailSample.edge_for(Distribution.of(x), cap=200) == 0  # fewer than the cap: all of it
    assert TailSample.edge_for(Distribution.of(np.ones(1000)), cap=10) == 1  # nowhere to move up
    assert TailSample.edge_for(Distribution.of(np.empty(0)), cap=10) == np.inf
    tail = TailSample.of(x, cap=20)
    assert sorted(tail.values.tolist()) == [7, 7, 7, 9] and tail.positions.dtype == np.int64
    values, positions = tail.top(2)
    assert values.tolist() == [9, 7] and positions.tolist() == [113, 110]
    with pytest.raises(ValueError, match="cap"):
        TailSample.edge_for(Distribution.of(x), cap=0)


def test_an_incomplete_or_invalid_tail_sample_is_refused() -> None:
    x = _latencies("exponential", 60, 20_000)
    tail = TailSample.of(x, cap=3000)
    keep = tail.values != tail.values.max()  # the largest value lost: the fit would be wrong, not just worse
    with pytest.raises(ValueError, match="every sample value"):
        worst_case(TailSample(tail.distribution, tail.values[keep], tail.positions[keep]))
    with pytest.raises(ValueError, match="positions"):
        worst_case(TailSample(tail.distribution, tail.values, tail.positions + x.size))
    with pytest.raises(ValueError, match="positions"):
        TailSample(tail.distribution, tail.values, tail.positions[:-1])
    bad = x.astype(np.float64)
    bad[17] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        worst_case(TailSample.of(bad))
    bad[17] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        worst_case(TailSample.of(bad))


# --------------------------------------------------------------------------- the jitter


def test_the_jitter_is_uniform_in_the_quantum_and_a_function_of_seed_and_position() -> None:
    positions = np.arange(200_000, dtype=np.int64)
    j = _jitter(positions, 7, 10.0)
    assert j.min() >= -5.0 and j.max() < 5.0
    assert stats.kstest(j, stats.uniform(loc=-5.0, scale=10.0).cdf).pvalue > 1e-3
    # the same (seed, position) gives the same jitter however many positions are asked for
    picked = np.array([5, 123_456, 17, 199_999])
    np.testing.assert_array_equal(_jitter(picked, 7, 10.0), j[picked])
    other = _jitter(positions, 8, 10.0)
    assert abs(float(np.corrcoef(j, other)[0, 1])) < 0.01 and not np.array_equal(j, other)
    # neighbours are not correlated either (the positions are consecutive integers)
    assert abs(float(np.corrcoef(j[:-1], j[1:])[0, 1])) < 0.01


# --------------------------------------------------------------------------- garbage (hypothesis)


_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
_arrays = st.one_of(
    hnp.arrays(np.float64, st.integers(0, 3000), elements=_finite),
    hnp.arrays(np.int64, st.integers(0, 3000), elements=st.integers(-(2**62), 2**62)),
    hnp.arrays(np.int64, st.integers(0, 3000), elements=st.integers(-50, 50)),  # many ties, negative
    hnp.arrays(np.float64, st.integers(0, 3000), elements=st.floats(-1e6, 1e6, allow_subnormal=False)),
    st.builds(lambda v, m: np.full(m, v), _finite, st.integers(0, 3000)),
    st.builds(
        lambda s, m, q: np.round(np.random.default_rng(s).exponential(q * 20, m) / q) * q - q * 7,
        st.integers(0, 2**32 - 1), st.integers(MIN_SAMPLES, 4000), st.sampled_from([1, 10, 1e-12, 1e300]),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(x=_arrays, deadline=st.one_of(st.none(), _finite), seed=st.integers(0, 2**31),
       cap=st.sampled_from([TAIL_CAP, 1000, 350, 40]))
def test_garbage_gives_the_array_result_or_at_least_no_crash(x: np.ndarray, deadline: float | None, seed: int,
                                                            cap: int) -> None:
    tail = TailSample.of(x, cap=cap)
    result = worst_case(tail, deadline_ns=deadline, seed=seed)
    json.dumps(result, allow_nan=False)
    assert result["samples"] == x.size
    assert result["observed_max_ns"] == (float(x.max()) if x.size else None)
    n = x.size
    # as floats, the way the array path compares them (int64 past 2**53 rounds)
    binds = n >= MIN_SAMPLES and float(np.min(tail.values.astype(np.float64))) > _top10_edge(x.astype(np.float64))
    if not binds:
        assert result == worst_case(x, deadline_ns=deadline, seed=seed)
    q = result["quantile_ns"]
    if q is None or None in (q["estimate"], q["ci_low"], q["ci_high"]) or result["shape"] is None:
        assert result["reliable"] is False and result["reasons"]
