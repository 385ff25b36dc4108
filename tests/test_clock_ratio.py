"""The clocks' ratio per acquisition (station/kinds/module/clock_ratio.py): the injected ratio is
found, a delayed write does not tilt it, and the compiled loop gives numpy's result to the bit."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.kinds.module import clock_ratio


def _acquisitions(rng: np.random.Generator, ratios: list[float], pulses: int, spacing_ns: float,
                  delayed: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Starts on the scope's timebase, writes on the target's clock, owner: each acquisition's
    events every `spacing_ns` (target clock), seen at `ratio` × that on the scope with 1 ns of
    jitter; delayed: acquisition -> the pulse whose write is stamped 20 µs late (its pulse is not)."""
    starts, writes, owner = [], [], []
    t0 = 1e12
    for i, r in enumerate(ratios):
        x = t0 + spacing_ns * np.arange(pulses)
        y = 5e8 * i + r * (x - t0) + rng.normal(0, 1.0, pulses)
        if i in delayed:
            x = x.copy()
            x[delayed[i]] += 20_000.0
        starts.append(y)
        writes.append(x)
        owner.append(np.full(pulses, i))
        t0 += 1e9
    return np.concatenate(starts), np.concatenate(writes), np.concatenate(owner)


@pytest.mark.parametrize("path", ["numpy", "compiled"])
def test_each_acquisitions_injected_clock_ratio_is_found_and_a_late_write_does_not_tilt_it(path):
    rng = np.random.default_rng(7)
    truth = [1 + ppm * 1e-6 for ppm in (-3000, -25, 0, 150, 400, 2900)]
    starts, writes, owner = _acquisitions(rng, truth, 50, 100_000.0, delayed={1: 10, 4: 49})
    if path == "compiled":
        if clock_ratio._compiled.available() is not None:
            pytest.skip(clock_ratio._compiled.available())
        with patch.object(clock_ratio, "MIN_COMPILED", 0):
            got = clock_ratio.clock_ratios(starts, writes, owner)
    else:
        got = clock_ratio.clock_ratios_numpy(starts, writes, owner)
    per_acquisition = got.reshape(len(truth), -1)
    assert (per_acquisition == per_acquisition[:, :1]).all()
    # 1 ns of jitter on 50 pulses over 4.9 ms of writes: the slope's standard error is 1e-7 (5 of them
    # allowed); the late write left in would tilt it by ~5e-4 at the record's end, ~1e-4 inside it
    np.testing.assert_allclose(per_acquisition[:, 0], truth, rtol=0, atol=5e-7)


def test_a_ratio_that_cannot_be_told_is_one():
    """Fewer than 3 pulses, writes spanning under RATIO_MIN_SPAN_NS, no write times, a slope no
    clock has: 1 (the width is taken on the scope's clock as it is)."""
    rng = np.random.default_rng(3)
    short_s, short_w, short_o = _acquisitions(rng, [1.0001], 2, 1e6, {})
    narrow_s, narrow_w, narrow_o = _acquisitions(rng, [1.0001], 50, 10_000.0, {})
    wild_s, wild_w, wild_o = _acquisitions(rng, [1.01], 50, 100_000.0, {})
    for s, w, o in ((short_s, short_w, short_o), (narrow_s, narrow_w, narrow_o), (wild_s, wild_w, wild_o),
                    (narrow_s, np.full(len(narrow_s), np.nan), narrow_o)):
        assert (clock_ratio.clock_ratios(s, w, o) == 1.0).all()
        assert (clock_ratio.clock_ratios_numpy(s, w, o) == 1.0).all()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=25), st.integers(0, 2**32 - 1),
       st.sampled_from([0.0, 0.05, 0.3]), st.booleans())
def test_the_compiled_ratios_are_numpys_to_the_bit(sizes, seed, late, nan_starts):
    """Acquisitions of 1 to 60 pulses as pairing gives them (in order, writes not decreasing: ties
    are no step), writes on a coarse grid (equal slopes, residuals exactly at RATIO_OUTLIER_NS), late
    writes, NaN starts, spans either side of RATIO_MIN_SPAN_NS, ratios either side of MAX_RATIO_OFF."""
    if clock_ratio._compiled.available() is not None:
        pytest.skip(clock_ratio._compiled.available())
    rng = np.random.default_rng(seed)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    writes = np.concatenate([np.cumsum(rng.choice([0.0, 25_000.0, 50_000.0], n)) + 1e9 * i
                             for i, n in enumerate(sizes)])
    ratio = np.repeat(1 + rng.choice([0.0, 1e-4, 4.99e-3, 6e-3], len(sizes)), sizes)
    starts = ratio * writes + 100.0 * rng.integers(-3, 4, len(writes))
    writes = np.where(rng.random(len(writes)) < late, writes + 300.0 * rng.integers(1, 3, len(writes)), writes)
    writes = np.maximum.accumulate(writes.reshape(-1)) if len(sizes) == 1 else \
        np.concatenate([np.maximum.accumulate(w) for w in np.split(writes, np.cumsum(sizes)[:-1])])
    if nan_starts:
        starts[rng.random(len(starts)) < 0.1] = np.nan
    assert clock_ratio._in_order(writes, owner)
    with patch.object(clock_ratio, "MIN_COMPILED", 0):
        compiled = clock_ratio.clock_ratios(starts, writes, owner)
    np.testing.assert_array_equal(compiled, clock_ratio.clock_ratios_numpy(starts, writes, owner))
