"""Histogram statistics against numpy on raw samples of known distributions that were then
binned as cyclictest bins (truncated to whole µs), the order-statistic confidence intervals
against the true quantiles, overflows, combine(), and garbage in."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from station.analysis.histogram import (
    BEYOND_RANGE,
    MAX_TOTAL,
    Histogram,
    combine,
    describe_histogram,
    from_cyclictest,
    percentile_ci95_ns,
)
from station.analysis.stats import PERCENTILES, describe
from station.parsers.cyclictest import CyclictestThread

EXAMPLES = int(os.environ.get("STATION_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def binned(raw_us: np.ndarray, range_us: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """cyclictest's histogram of raw latencies in µs: buckets of the truncated values, and overflows."""
    k = np.floor(raw_us).astype(np.int64)
    overflows = 0
    if range_us is not None:
        overflows = int((k >= range_us).sum())
        k = k[k < range_us]
    b, c = np.unique(k, return_counts=True)
    return b, c, overflows


def inverted_cdf(values: np.ndarray, p: float) -> float:
    return float(np.percentile(values, p, method="inverted_cdf"))


@pytest.mark.parametrize("dist", ["uniform", "lognormal", "exponential"])
def test_against_numpy_on_binned_samples(dist: str):
    rng = np.random.default_rng(20240611)
    n = 200_000
    raw = {"uniform": lambda: rng.uniform(10, 60, n),
           "lognormal": lambda: rng.lognormal(math.log(20), 0.4, n),
           "exponential": lambda: 12 + rng.exponential(8, n)}[dist]()
    b, c, _ = binned(raw)
    d = describe_histogram(b, c)
    floor = np.floor(raw)
    ref = describe(raw * 1000)  # the raw samples, in ns
    assert set(ref) <= set(d)  # describe()'s keys, and more
    assert d["count"] == n and d["overflows"] == 0 and d["resolution_ns"] == 1000
    assert d["min_ns"] == floor.min() * 1000 and d["max_ns"] == floor.max() * 1000
    # the mean of the truncated values: within one bucket of the raw mean (about half a bucket below)
    assert d["mean_ns"] == pytest.approx(floor.mean() * 1000, rel=1e-12)
    assert 0 <= ref["mean_ns"] - d["mean_ns"] < 1000
    assert d["std_ns"] == pytest.approx(np.std(floor, ddof=1) * 1000, rel=1e-9)
    assert abs(d["std_ns"] - ref["std_ns"]) < 1000
    for key, p in PERCENTILES.items():
        # exactly numpy's inverted CDF on the binned values, and within one bucket of np.percentile
        assert d["percentiles_ns"][key] == inverted_cdf(floor, p) * 1000, key
        assert d["percentile_flags"][key] is None
        if dist == "uniform" or p <= 99:  # the far tail of skewed samples has gaps wider than a bucket
            assert abs(d["percentiles_ns"][key] - ref["percentiles_ns"][key]) <= 1000, key
        lo, hi = d["percentile_ci95_ns"][key]
        assert lo is None or lo <= d["percentiles_ns"][key]
        assert hi is None or d["percentiles_ns"][key] < hi


def test_small_samples_and_ranks():
    # 1..10 µs once each: p50 is the 5th value, p99 and beyond the 10th
    b = np.arange(1, 11)
    d = describe_histogram(b, np.ones(10, dtype=int))
    assert d["percentiles_ns"] == {"p50": 5000.0, "p99": 10000.0, "p99.99": 10000.0, "p99.999": 10000.0}
    assert d["count"] == 10 and d["std_ns"] == pytest.approx(np.std(np.arange(1, 11), ddof=1) * 1000)
    # rank arithmetic is exact: 99.99 % of 10 000 is the 9 999th sample, not the 10 000th
    b, c = np.array([5, 6]), np.array([9999, 1])
    assert describe_histogram(b, c)["percentiles_ns"]["p99.99"] == 5000.0
    one = describe_histogram([7], [1])
    assert one["std_ns"] == 0.0 and one["percentiles_ns"]["p50"] == 7000.0
    assert describe_histogram([], []) is None
    assert percentile_ci95_ns([], []) == {k: (None, None) for k in PERCENTILES}


def test_exact_figures_win_and_bucket_width():
    d = describe_histogram([3, 4], [5, 5], exact_min_us=3, exact_avg_us=3.75, exact_max_us=4)
    assert (d["min_ns"], d["mean_ns"], d["max_ns"]) == (3000.0, 3750.0, 4000.0)
    # -N: buckets of 1 ns
    n = describe_histogram([3000, 4000], [5, 5], bucket_ns=1)
    assert n["resolution_ns"] == 1 and n["percentiles_ns"]["p50"] == 3000.0 and n["mean_ns"] == 3500.0


def test_ci_covers_the_true_quantile_about_95_percent_of_the_time():
    """200 seeded trials of 1000 samples of 10 + Exp(100 µs): the distribution-free interval (widened
    to bucket bounds) holds the true p50 and p99 in about 95 % of them."""
    rng = np.random.default_rng(7)
    true = {key: 10 + 100 * -math.log(1 - p / 100) for key, p in PERCENTILES.items() if p <= 99}
    hits = dict.fromkeys(true, 0)
    trials = 200
    for _ in range(trials):
        b, c, _ = binned(10 + rng.exponential(100, 1000))
        ci = percentile_ci95_ns(b, c)
        for key, xi in true.items():
            lo, hi = ci[key]
            hits[key] += lo is not None and hi is not None and lo <= xi * 1000 <= hi
    for key in true:
        assert 0.90 <= hits[key] / trials <= 0.99, (key, hits[key])


def test_ci_of_the_far_tail_is_open():
    b, c, _ = binned(np.random.default_rng(1).uniform(0, 100, 1000))
    ci = percentile_ci95_ns(b, c)
    assert ci["p99.999"][1] is None  # 1000 samples say nothing of where p99.999 ends
    assert ci["p99.999"][0] is not None


def test_overflows():
    rng = np.random.default_rng(3)
    raw = 10 + rng.exponential(5, 10_000)
    b_all, c_all, _ = binned(raw)
    b, c, overflows = binned(raw, range_us=40)
    assert 0 < overflows < 100  # about 0.25 %: p99 (33 µs) in range, p99.99 (56 µs) beyond
    full = describe_histogram(b_all, c_all)
    cut = describe_histogram(b, c, overflows, range_us=40)
    assert cut["count"] == 10_000 and cut["overflows"] == overflows and cut["range_ns"] == 40_000
    assert cut["percentiles_ns"]["p50"] == full["percentiles_ns"]["p50"]
    assert cut["percentiles_ns"]["p99"] == full["percentiles_ns"]["p99"]
    assert cut["percentile_flags"]["p99"] is None
    for key in ("p99.99", "p99.999"):
        assert cut["percentiles_ns"][key] is None and cut["percentile_flags"][key] == BEYOND_RANGE
        lo, hi = cut["percentile_ci95_ns"][key]
        assert lo == 40_000 and hi is None  # beyond the range, no maximum known
    assert cut["mean_ns"] is None and cut["std_ns"] is None and cut["max_ns"] is None
    assert cut["min_ns"] == full["min_ns"]
    # with cyclictest's exact figures: the mean and the max are known, and so is the last rank
    mx = float(np.floor(raw.max()))
    ex = describe_histogram(b, c, overflows, exact_avg_us=float(np.floor(raw).mean()), exact_max_us=mx,
                            range_us=40)
    assert ex["mean_ns"] == pytest.approx(full["mean_ns"]) and ex["max_ns"] == mx * 1000
    assert ex["percentiles_ns"]["p99.999"] == mx * 1000  # rank n: the maximum, beyond the range
    assert ex["percentile_flags"]["p99.999"] == BEYOND_RANGE
    assert ex["percentile_ci95_ns"]["p99.99"] == [40_000, None]  # p99.99 may lie above the sample maximum
    # an upper rank among the overflows is bounded by the exact maximum
    half = describe_histogram([1], [40], 60, exact_max_us=20, range_us=10)
    assert half["percentiles_ns"]["p50"] is None and half["percentile_flags"]["p50"] == BEYOND_RANGE
    assert half["percentile_ci95_ns"]["p50"] == [1000, 21_000]
    # one overflow and the exact maximum: every value is known again
    one = describe_histogram([1, 2], [3, 3], 1, exact_max_us=50, range_us=10)
    assert one["std_ns"] == pytest.approx(np.std([1, 1, 1, 2, 2, 2, 50], ddof=1) * 1000)
    assert one["mean_ns"] == pytest.approx(np.mean([1, 1, 1, 2, 2, 2, 50]) * 1000)
    # nothing in range at all
    none_in = describe_histogram([], [], 5, range_us=10)
    assert none_in["count"] == 5 and none_in["min_ns"] is None
    assert all(v is None for v in none_in["percentiles_ns"].values())
    # without the range: overflows lie beyond the last bucket (rank 2 of 2 is the overflow)
    assert describe_histogram([4], [1], 1)["percentile_ci95_ns"]["p99"] == [5000, None]


def test_combine():
    rng = np.random.default_rng(11)
    a_raw, b_raw = 10 + rng.exponential(5, 3000), 14 + rng.exponential(3, 5000)
    ha = Histogram(*binned(a_raw)[:2], exact_min_us=float(np.floor(a_raw.min())),
                   exact_avg_us=float(np.floor(a_raw).mean()), exact_max_us=float(np.floor(a_raw.max())))
    hb = Histogram(*binned(b_raw)[:2], exact_min_us=float(np.floor(b_raw.min())),
                   exact_avg_us=float(np.floor(b_raw).mean()), exact_max_us=float(np.floor(b_raw.max())))
    both = np.concatenate([a_raw, b_raw])
    all_ = combine([ha, hb])
    ref = describe_histogram(*binned(both)[:2])
    got = all_.describe()
    assert got["count"] == 8000 and got["percentiles_ns"] == ref["percentiles_ns"]
    assert got["mean_ns"] == pytest.approx(ref["mean_ns"]) and got["std_ns"] == pytest.approx(ref["std_ns"])
    assert (got["min_ns"], got["max_ns"]) == (ref["min_ns"], ref["max_ns"])
    # ranges: cut to the smallest, the rest becomes overflows
    h1 = Histogram([5, 20, 40], [1, 2, 3], 4, range_us=50)
    h2 = Histogram([5, 25], [1, 1], 0, range_us=30)
    c = combine([h1, h2])
    assert c.range_us == 30 and c.overflows == 4 + 3 and c.bucket_us.tolist() == [5, 20, 25]
    assert c.counts.tolist() == [2, 2, 1] and c.count == h1.count + h2.count
    assert combine([h1, Histogram([1], [1])]).range_us is None  # one range unknown
    assert combine([ha, Histogram([1], [1])]).exact_min_us is None  # not known for every part
    with pytest.raises(ValueError):
        combine([])
    with pytest.raises(ValueError):
        combine([ha, Histogram([1], [1], bucket_ns=1)])


def test_from_cyclictest_threads():
    common = dict(index=0, cycles=12, min=3, max=70, buckets=[3, 4], counts=[5, 5], has_histogram=True)
    text = CyclictestThread(**common, avg=9.0, avg_truncated=True, overflows=2)
    js = CyclictestThread(**common, avg=9.5, cpu=0, node=0)
    ht, hj = from_cyclictest(text, range_us=50), from_cyclictest(js, range_us=50)
    assert ht.overflows == hj.overflows == 2
    assert ht.exact_avg_us is None and hj.exact_avg_us == 9.5  # the text's average is only its integer part
    assert ht.describe()["mean_ns"] is None and hj.describe()["mean_ns"] == 9500
    with pytest.raises(ValueError, match="no histogram"):
        from_cyclictest(CyclictestThread(index=1, cycles=5, min=1, avg=1.0, max=1, buckets=[], counts=[],
                                         has_histogram=False))


# ------------------------------------------------------------------------ garbage in


@pytest.mark.parametrize("args", [
    ([1, 2], [3]),  # lengths differ
    ([1, 2], [3, -1]),  # negative count
    ([-1], [1]),  # negative bucket
    ([1, 1], [1, 1]),  # a bucket twice
    ([1.5], [1]),  # not an integer
    ([[1]], [[1]]),  # 2-D
    (["a"], [1]),
    ([1], [2**64 - 1]),
    ([1, 2], [2**62, 2**62]),  # more samples than int64 counts
    ([1], [float("nan")]),
    ([True], [1]),
])
def test_bad_histograms(args):
    with pytest.raises(ValueError):
        describe_histogram(*args)


@pytest.mark.parametrize("kwargs", [
    {"overflows": -1}, {"overflows": 1.5}, {"overflows": True}, {"bucket_ns": 0}, {"bucket_ns": float("inf")},
    {"range_us": 3}, {"range_us": 0}, {"exact_avg_us": float("nan")}, {"exact_min_us": "3"},
    {"exact_max_us": 4}, {"exact_min_us": 2}, {"overflows": 1, "range_us": 10, "exact_max_us": 9},
])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        describe_histogram([1, 5], [1, 1], **kwargs)


anything = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=3))


@st.composite
def garbled_histograms(draw) -> list:
    """describe_histogram's arguments: a histogram (valid or not: a bucket twice, beyond the range),
    with any of its five arguments replaced by garbage."""
    k = draw(st.integers(0, 6))
    args = [draw(st.lists(st.integers(0, 60), min_size=k, max_size=k)),
            draw(st.lists(st.integers(0, 60), min_size=k, max_size=k)),
            draw(st.integers(0, 60)), draw(st.one_of(st.none(), st.integers(1, 100))),
            draw(st.sampled_from([1, 1000, 2.5]))]
    for i in draw(st.sets(st.integers(0, 4))):
        args[i] = draw(st.one_of(st.lists(anything, max_size=6), anything))
    return args


def _integral(x) -> bool:
    """A number with an integer value, of any type (the histogram reads lists through numpy)."""
    return isinstance(x, int | float) and math.isfinite(x) and x == int(x)


def _valid_plain(buckets, counts, overflows, range_us, bucket_ns) -> bool | None:
    """Whether plain Python ints (and a plain number for bucket_ns) make a valid histogram by the
    rules of the module's doc; None for any other input, whose validity this does not judge."""
    ints = isinstance(buckets, list) and isinstance(counts, list) and type(overflows) is int
    ints = ints and all(type(x) is int for x in buckets + counts) and (range_us is None or type(range_us) is int)
    if not ints or type(bucket_ns) not in (int, float):
        return None
    if len(buckets) != len(counts) or len(set(buckets)) != len(buckets):
        return False
    if any(x < 0 or x > MAX_TOTAL for x in buckets + counts) or overflows < 0 or sum(counts) + overflows > MAX_TOTAL:
        return False
    filled = [k for k, c in zip(buckets, counts, strict=True) if c]
    if range_us is not None and (range_us < 1 or any(k >= range_us for k in filled)):
        return False
    return math.isfinite(bucket_ns) and bucket_ns > 0


@FUZZ
@given(garbled_histograms())
def test_garbage_is_a_value_error(args):
    """Garbage is refused with a ValueError and nothing else; a valid histogram is never refused; what
    is accepted was a histogram, and the figures are its own: count, extremes, percentiles by rank."""
    buckets, counts, overflows, range_us, bucket_ns = args
    valid = _valid_plain(buckets, counts, overflows, range_us, bucket_ns)
    try:
        d = describe_histogram(buckets, counts, overflows, range_us=range_us, bucket_ns=bucket_ns)
    except ValueError:
        assert valid is not True, (buckets, counts, overflows, range_us, bucket_ns)
        return
    assert valid is not False
    assert isinstance(buckets, list) and isinstance(counts, list) and len(buckets) == len(counts)
    assert all(_integral(x) and x >= 0 for x in buckets + counts)
    assert len({int(x) for x in buckets}) == len(buckets)
    sample = sorted((int(k), int(c)) for k, c in zip(buckets, counts, strict=True) if c)  # (bucket, count)
    in_range = sum(c for _, c in sample)
    n = in_range + overflows
    if n == 0:
        assert d is None
        return
    w = float(bucket_ns)
    assert (d["count"], d["overflows"], d["resolution_ns"]) == (n, overflows, w)
    assert d["range_ns"] == (None if range_us is None else range_us * w)
    assert d["min_ns"] == (sample[0][0] * w if sample else None)
    assert d["max_ns"] == (sample[-1][0] * w if not overflows else None)
    if not overflows:
        assert d["mean_ns"] == pytest.approx(sum(k * c for k, c in sample) / n * w, rel=1e-9)
    for key, p in PERCENTILES.items():
        rank = max(1, math.ceil(Fraction(str(p)) * n / 100))  # the inverted CDF: X_(rank), overflows last
        below = 0
        value = None
        for k, c in sample:
            below += c
            if below >= rank:
                value = k * w
                break
        assert d["percentiles_ns"][key] == value, key
        assert d["percentile_flags"][key] == (None if rank <= in_range else BEYOND_RANGE), key


@st.composite
def histograms(draw):
    k = draw(st.integers(0, 30))
    buckets = draw(st.lists(st.integers(0, 10_000), min_size=k, max_size=k, unique=True))
    counts = draw(st.lists(st.integers(0, 10**6), min_size=k, max_size=k))
    overflows = draw(st.integers(0, 1000))
    rng = draw(st.one_of(st.none(), st.integers(max(buckets, default=0) + 1, 20_000)))
    # an exact maximum that holds every sample: the overflows too, at or beyond the range
    top = max(buckets, default=0) if not overflows else rng or max(buckets, default=-1) + 1
    mx = draw(st.one_of(st.none(), st.integers(top, 30_000)))
    return Histogram(buckets, counts, overflows, exact_max_us=mx, range_us=rng)


@FUZZ
@given(histograms())
def test_valid_histograms_give_coherent_figures(h: Histogram):
    d = h.describe()
    if h.count == 0:
        assert d is None
        return
    assert d["count"] == h.count
    values = [d["percentiles_ns"][k] for k in PERCENTILES]
    known = [v for v in values if v is not None]
    assert known == sorted(known)
    for key, v in d["percentiles_ns"].items():
        lo, hi = d["percentile_ci95_ns"][key]
        if v is not None:
            assert lo is None or lo <= v
            assert hi is None or v < hi
            if d["min_ns"] is not None:
                assert d["min_ns"] <= v
            if d["max_ns"] is not None:
                assert v <= d["max_ns"]
        else:
            assert d["percentile_flags"][key] == BEYOND_RANGE
        if lo is not None and hi is not None:
            assert lo < hi


def test_a_cycle_counted_but_not_yet_filed_is_not_an_overflow():
    """cyclictest stopped by a signal can count a cycle before filing it in its histogram (seen
    under hackbench on Ctrl-C: cycles = sum + 1, max well inside the range); that is no overflow."""
    buckets, counts = np.array([20, 30, 1284]), np.array([10, 5, 1])
    racing = CyclictestThread(index=1, cycles=17, min=20, avg=80.0, max=1284, buckets=buckets, counts=counts,
                              has_histogram=True)
    h = from_cyclictest(racing, range_us=10_000)
    assert h.overflows == 0 and h.exact_max_us == 1284
    # a real overflow: the maximum is beyond the range
    beyond = CyclictestThread(index=1, cycles=17, min=20, avg=800.0, max=12_000, buckets=buckets, counts=counts,
                              has_histogram=True)
    assert from_cyclictest(beyond, range_us=10_000).overflows == 1
