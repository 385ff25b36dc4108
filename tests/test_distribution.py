"""A sample held as values and counts gives numpy's statistics of the sample itself, exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from station.analysis.distribution import DENSE_SPAN, Distribution
from station.kinds.module.outliers import ROBUST_Z, robust_threshold

integers = hnp.arrays(np.int64, st.integers(1, 400), elements=st.integers(-(2**40), 2**40))
latencies = hnp.arrays(np.int64, st.integers(1, 400), elements=st.integers(1_000, 40_000))
floats = hnp.arrays(np.float64, st.integers(1, 400),
                    elements=st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False, width=32))
samples = st.one_of(integers, latencies, floats)
quantiles = st.lists(st.floats(0, 100), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(samples, quantiles)
def test_order_statistics_are_numpys(a: np.ndarray, q: list[float]) -> None:
    d = Distribution.of(a)
    assert d.count == a.size
    assert np.array_equal(d.samples(), np.sort(a))
    assert np.array_equal(d.percentiles(q), np.percentile(a, q))
    assert d.median() == np.median(a)
    assert d.mad() == np.median(np.abs(a - np.median(a)))
    assert (d.min, d.max) == (a.min(), a.max())


@settings(max_examples=200, deadline=None)
@given(samples, st.data())
def test_counts_and_histograms_are_numpys(a: np.ndarray, data: st.DataObject) -> None:
    d = Distribution.of(a)
    threshold = data.draw(st.sampled_from(list(a)) | st.floats(-2e9, 2e9))
    assert d.count_above(threshold) == int(np.sum(a > threshold))
    lo, hi = float(a.min()), float(a.max())
    edges = np.linspace(lo - data.draw(st.floats(0, 10)), hi + data.draw(st.floats(0, 10)),
                        data.draw(st.integers(2, 30)))
    assert np.array_equal(d.histogram(edges), np.histogram(a, bins=edges)[0])
    # a range that cuts the sample: what lies outside is in no bin, as numpy's
    inner = np.linspace(lo + (hi - lo) / 3, hi - (hi - lo) / 3, 5) if hi > lo else np.array([lo, lo + 1])
    assert np.array_equal(d.histogram(inner), np.histogram(a, bins=inner)[0])


@settings(max_examples=200, deadline=None)
@given(st.one_of(integers, latencies), st.one_of(integers, latencies))
def test_pooling_is_concatenating(a: np.ndarray, b: np.ndarray) -> None:
    pooled = Distribution.pooled([Distribution.of(a), Distribution.of(b)])
    assert np.array_equal(pooled.samples(), np.sort(np.concatenate([a, b])))


@settings(max_examples=100, deadline=None)
@given(latencies)
def test_mean_and_std_agree_with_numpy(a: np.ndarray) -> None:
    d = Distribution.of(a)
    assert d.mean() == a.sum() / a.size  # an exact integer sum
    assert np.isclose(d.std(1), np.std(a, ddof=1) if a.size > 1 else 0.0, rtol=1e-12, atol=1e-9)


def test_a_stall_far_beyond_the_bulk_is_counted_not_allocated() -> None:
    rng = np.random.default_rng(7)
    bulk = rng.integers(2_000, 9_000, 100_000)
    stalls = np.array([5 * DENSE_SPAN, 10**12, 10**12])  # a second-long stall, twice
    d = Distribution.of(np.concatenate([bulk, stalls]))
    assert d.values.size <= 7_000 + 2  # distinct values, not the span
    assert d.count_above(10**11) == 2 and d.max == 10**12
    assert np.array_equal(d.percentiles([50, 99.999]), np.percentile(np.concatenate([bulk, stalls]), [50, 99.999]))


@settings(max_examples=100, deadline=None)
@given(latencies)
def test_robust_threshold_is_the_samples_median_plus_z_mads(a: np.ndarray) -> None:
    v = a.astype(np.float64)
    med = np.median(v)
    mad = 1.4826 * np.median(np.abs(v - med))
    if mad > 0:  # exact: order statistics
        assert robust_threshold(Distribution.of(a)) == robust_threshold(a) == med + ROBUST_Z * mad
    elif v.std() > 0:  # more than half on one value: the standard deviation stands in (summed differently)
        assert np.isclose(robust_threshold(Distribution.of(a)), med + ROBUST_Z * v.std(), rtol=1e-12)
    else:
        assert robust_threshold(Distribution.of(a)) == np.inf


# t_HW as the report counts it: multiples of 0.01 ns, many just below a multiple of the grid
hundredths = hnp.arrays(np.int64, st.integers(1, 400), elements=st.integers(0, 5_000_000)).map(lambda a: a * 0.01)
near_grid = hnp.arrays(np.float64, st.integers(1, 200), elements=st.sampled_from(
    [99.99999999999999, 100.0, 100.00000000000001, 199.99999999999997, 200.0, 999.9999999999999, 1000.0, 150.0]))


@settings(max_examples=300, deadline=None)
@given(st.one_of(latencies, floats, hundredths, near_grid), st.data())
def test_a_distribution_on_the_figures_grid_draws_the_same_histogram(a: np.ndarray, data: st.DataObject) -> None:
    """compare keeps each curve on the figures' 100 ns grid: the figure's bins (figures.bin_edges:
    a width that is a multiple of the grid, edges aligned to it) must count exactly as before."""
    from station.report.figures import BIN_NS, Series, bin_edges

    d = Distribution.of(a)
    small = d.on_grid(BIN_NS)
    assert (small.count, small.min, small.max) == (d.count, d.min, d.max)
    assert small.values.size <= (d.max - d.min) / BIN_NS + 3
    edges = bin_edges([Series("x", d, "k")])
    assert np.array_equal(edges, bin_edges([Series("x", small, "k")]))
    assert np.array_equal(small.histogram(edges), np.histogram(a, bins=edges)[0])
    width = BIN_NS * data.draw(st.integers(1, 50))  # any other width on the grid, as a wider range picks
    first = np.floor(float(a.min()) / width) * width
    other = np.arange(first, (np.floor(float(a.max()) / width) + 1) * width + width / 2, width)
    assert np.array_equal(small.histogram(other), d.histogram(other))
