"""Waveform -> edges -> pulses on synthetic records (no instrument involved).

The synthetic signal is built here independently of the sim: a piecewise-linear
trace through the corners of each pulse (np.interp), sampled every dt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from instruments import pulses, schmitt_kernel
from instruments.pulses import (
    Pulses,
    auto_threshold,
    extract_pulses,
    find_edges,
    waveform_edges,
    waveform_threshold,
)
from instruments.scope import CodeScale, Waveform
from station.bench.scope_session import ScopeSession
from tests.scope_helpers import pulse_source, reset_scope, sim_scope
from tests.scope_helpers import settings as scope_settings


def trace(
    pulses: list[tuple[float, float]],
    n: int,
    dt: float = 1.0,
    t0: float = 0.0,
    ramp: float = 2.0,
    levels: tuple[float, float] = (0.0, 3.3),
    noise: float = 0.0,
    seed: int = 0,
) -> Waveform:
    """Pulses given as (lead, trail) 50 % times; `ramp` is the full 0-100 % edge duration."""
    idle, active = levels
    xs, ys = [-1e18], [idle]
    for lead, trail in pulses:
        xs += [lead - ramp / 2, lead + ramp / 2, trail - ramp / 2, trail + ramp / 2]
        ys += [idle, active, active, idle]
    xs.append(1e18)
    ys.append(idle)
    t = t0 + dt * np.arange(n)
    v = np.interp(t, xs, ys)
    if noise:
        v = v + np.random.default_rng(seed).normal(0, noise, n)
    return Waveform(t0_s=t0, dt_s=dt, volts=v, channel=1, index=7)


def test_single_pulse_width_and_start_are_sub_sample():
    wf = trace([(100.3, 140.8)], n=300, ramp=3.0)
    p = extract_pulses(wf, threshold=1.65, hysteresis=0.3)
    assert isinstance(p, Pulses) and len(p) == 1 and p.index == 7
    # both samples around each crossing lie on the linear ramp: interpolation is exact
    assert p.start_s[0] == pytest.approx(100.3, abs=1e-9)
    assert p.width_s[0] == pytest.approx(40.5, abs=1e-9)


def test_pulses_cut_by_the_record_are_dropped():
    wf = trace([(-20.0, 30.0), (100.0, 150.0), (250.0, 400.0)], n=300, ramp=2.0)
    assert wf.volts[0] > 3.0 and wf.volts[-1] > 3.0  # starts and ends inside a pulse
    p = extract_pulses(wf)
    assert len(p) == 1
    assert p.start_s[0] == pytest.approx(100.0, abs=1e-9)
    assert p.width_s[0] == pytest.approx(50.0, abs=1e-9)


def test_record_starting_inside_the_hysteresis_band_does_not_invent_a_pulse():
    # starts on a rising ramp, between the hysteresis thresholds: the state is unknown
    wf = trace([(0.0, 50.0), (100.0, 120.0)], n=200, t0=-0.2, ramp=4.0)
    p = extract_pulses(wf, threshold=1.65, hysteresis=1.0)
    assert len(p) == 1 and p.width_s[0] == pytest.approx(20.0, abs=1e-9)


def test_active_low_pulses():
    wf = trace([(50.0, 70.0), (150.0, 190.0)], n=300, levels=(3.3, 0.0), ramp=2.0)
    p = extract_pulses(wf, polarity="low")
    np.testing.assert_allclose(p.width_s, [20.0, 40.0], atol=1e-9)
    # read as active-high, the same record has one complete "pulse": the gap between them
    q = extract_pulses(wf, polarity="high")
    np.testing.assert_allclose(q.width_s, [80.0], atol=1e-9)


def test_hysteresis_ignores_noise_riding_on_a_slow_edge():
    # a slow edge (100 samples) with noise crosses the bare threshold many times
    wf = trace([(100.0, 300.0)], n=400, ramp=100.0, noise=0.05, seed=3)
    rising, falling = find_edges(wf.volts, 1.65, 0.0)
    assert len(rising) > 1  # what a comparator without hysteresis sees
    p = extract_pulses(wf, threshold=1.65, hysteresis=0.5)
    assert len(p) == 1 and p.width_s[0] == pytest.approx(200.0, abs=2.0)


def test_flat_or_noise_only_records_have_no_pulses():
    assert len(extract_pulses(trace([], n=1000))) == 0
    assert len(extract_pulses(trace([], n=1000, noise=0.02, seed=1))) == 0
    # a TDS at 1 V/div: 40 mV steps, the noise moves a flat trace by a code or two
    quantised = np.round(trace([], n=1000, noise=0.02, seed=2).volts / 0.04) * 0.04
    assert auto_threshold(quantised, resolution_v=0.04) is None
    assert len(extract_pulses(Waveform(0.0, 1.0, quantised, resolution_v=0.04))) == 0
    always_high = trace([(-10.0, 2000.0)], n=1000)
    assert len(extract_pulses(always_high)) == 0
    # levels closer than a histogram bin can be: one level, not a crash in the binning
    assert auto_threshold(np.array([0.0, 5e-324, 0.0, 5e-324])) is None
    with pytest.raises(ValueError, match="not a scope record"):
        auto_threshold(np.array([-1e308, 1e308]))


def test_auto_threshold_is_the_midpoint_of_the_levels():
    wf = trace([(100.0 * k, 100.0 * k + 7.0) for k in range(1, 10)], n=1000, levels=(0.4, 2.9), noise=0.01)
    thr = auto_threshold(wf.volts)
    assert thr is not None
    threshold, hysteresis = thr
    assert threshold == pytest.approx(1.65, abs=0.03)
    assert 0.2 <= hysteresis < 1.0


# --- properties ---------------------------------------------------------------------------
@st.composite
def pulse_trains(draw):
    dt = draw(st.floats(0.5, 2.0))
    ramp = draw(st.floats(0.3, 4.0)) * dt
    n = draw(st.integers(200, 3000))
    t_end = n * dt
    shortest = ramp + 3 * dt  # a pulse or gap must leave the edges apart
    t = draw(st.floats(-40.0, 20.0)) * dt
    pulses = []
    while t < t_end + 50 * dt:
        width = draw(st.floats(shortest, shortest + 80 * dt))
        gap = draw(st.floats(shortest, shortest + 80 * dt))
        pulses.append((t, t + width))
        t += width + gap
    low = draw(st.floats(-1.0, 1.0))
    swing = draw(st.floats(0.5, 5.0))
    polarity = draw(st.sampled_from(["high", "low"]))
    return dt, ramp, n, pulses, (low, low + swing), polarity


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(pulse_trains(), st.integers(0, 2**31 - 1), st.booleans())
def test_widths_of_random_pulse_trains_are_recovered(train, seed, auto):
    dt, ramp, n, pulses, (low, high), polarity = train
    first, last = 0.0, (n - 1) * dt
    margin = ramp / 2 + 2 * dt
    # keep the record boundaries clear of edges: near one, "complete" is ambiguous
    assume(all(abs(e - b) > margin for p in pulses for e in p for b in (first, last)))
    levels = (low, high) if polarity == "high" else (high, low)
    sigma = 0.003 * (high - low)
    wf = trace(pulses, n, dt=dt, ramp=ramp, levels=levels, noise=sigma, seed=seed)
    if auto:
        got = extract_pulses(wf, polarity=polarity)
    else:
        got = extract_pulses(wf, threshold=(low + high) / 2, hysteresis=0.2 * (high - low), polarity=polarity)
    complete = [(a, b) for a, b in pulses if a > first and b < last]
    assert len(got) == len(complete)
    if complete:
        want_start = np.array([a for a, _ in complete])
        want_width = np.array([b - a for a, b in complete])
        # each crossing is found between the two samples around it: within dt; the
        # noise adds a little through the edge slope
        tol = dt + 10 * sigma / (high - low) * max(ramp, dt)
        np.testing.assert_allclose(got.start_s, want_start, atol=tol)
        np.testing.assert_allclose(got.width_s, want_width, atol=2 * tol)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-2.0, 2.0), min_size=0, max_size=400),
    st.floats(-1.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_edges_alternate_and_lie_between_their_samples(values, threshold, hysteresis):
    v = np.array(values, dtype=np.float64)
    rising, falling = find_edges(v, threshold, hysteresis)

    # alternation: one of the two interleavings is in time order
    def interleaves(a: np.ndarray, b: np.ndarray) -> bool:
        if not 0 <= len(a) - len(b) <= 1:
            return False
        merged = np.empty(len(a) + len(b))
        merged[0::2], merged[1::2] = a, b
        return bool(np.all(np.diff(merged) >= 0))

    assert interleaves(rising, falling) or interleaves(falling, rising)
    # the trace, read as straight lines between samples, is at the threshold there
    positions = np.concatenate([rising, falling])
    if len(positions):
        at = np.interp(positions, np.arange(len(v)), v)
        np.testing.assert_allclose(at, threshold, atol=1e-9)


# --- the code path: extraction on the digitizer's integer codes ------------------------------
# A Waveform that keeps its codes (what the dialects return) is read on them; the same record
# in volts goes through the float64 path. Both must give the same thresholds and edges, and
# the edges known from the synthetic record. BLOCK/CHUNK/BATCH_BLOCKS (and the histogram's
# sample size) are shrunk per example, so that block, chunk and batch boundaries fall inside
# edges, inside hysteresis bands and at record ends of records of a few thousand samples.
CODE_DTYPES = [np.int8, np.uint8, np.int16, np.uint16]


def digitised(wf: Waveform, scale: CodeScale, dtype: type) -> Waveform:
    """The volts of `wf` as a digitizer with `scale` would send them (clipped to the dtype)."""
    info = np.iinfo(dtype)
    codes = np.clip(np.rint((wf.volts - scale.offset_v) / scale.volts_per_code + scale.offset_code), info.min, info.max)
    return Waveform(wf.t0_s, wf.dt_s, channel=wf.channel, index=wf.index, codes=codes.astype(dtype), scale=scale)


def in_volts(wf: Waveform) -> Waveform:
    """The same record for the float64 path."""
    return Waveform(wf.t0_s, wf.dt_s, wf.volts, wf.channel, wf.index, wf.resolution_v)


@contextlib.contextmanager
def layout(
    block: int,
    chunk_blocks: int,
    batch: int,
    histogram_samples: int = pulses.HISTOGRAM_SAMPLES,
    noise_samples: int = pulses.NOISE_SAMPLES,
    histogram_min_count: int = pulses.HISTOGRAM_MIN_COUNT,
    compiled: bool = False,
) -> Iterator[None]:
    """The code path's slicing, and the threshold's sample sizes (both paths), for a while; with
    `compiled`, the code path's edges come from the compiled walk (instruments/schmitt_kernel.py)
    whatever the record's length, else from numpy's passes."""
    with patch.multiple(
        pulses,
        BLOCK=block,
        CHUNK=block * chunk_blocks,
        BATCH_BLOCKS=batch,
        HISTOGRAM_SAMPLES=histogram_samples,
        NOISE_SAMPLES=noise_samples,
        HISTOGRAM_MIN_COUNT=histogram_min_count,
    ), patch.object(schmitt_kernel, "MIN_SAMPLES", 0 if compiled else 1 << 62):
        yield


layouts = st.builds(
    layout,
    block=st.sampled_from([8, 16, 64, 1024]),
    chunk_blocks=st.integers(1, 3),
    batch=st.sampled_from([1, 3, 1024]),
    histogram_samples=st.sampled_from([97, pulses.HISTOGRAM_SAMPLES]),
    noise_samples=st.sampled_from([53, pulses.NOISE_SAMPLES]),
    histogram_min_count=st.sampled_from([5, pulses.HISTOGRAM_MIN_COUNT]),
    compiled=st.booleans(),
)


@st.composite
def code_scales(draw, dtype: type, low_v: float, high_v: float, noise_v: float) -> CodeScale:
    """A scale on which the levels lie inside the dtype's codes (noise included), at least
    20 codes apart; volts_per_code may be negative (an inverted channel)."""
    info = np.iinfo(dtype)
    span_codes = draw(st.floats(20.0, 0.6 * (int(info.max) - int(info.min))))
    step = (high_v - low_v) / span_codes * draw(st.sampled_from([1.0, -1.0]))
    margin = 6 * noise_v / abs(step) + 2
    room = (int(info.max) - int(info.min)) - span_codes - 2 * margin
    low_code = int(info.min) + margin + draw(st.floats(0.0, max(room, 0.0))) + (span_codes if step < 0 else 0)
    offset_code = draw(st.floats(-300.0, 300.0))
    return CodeScale(volts_per_code=step, offset_code=offset_code, offset_v=low_v - (low_code - offset_code) * step)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(pulse_trains(), st.data())
def test_code_path_finds_the_known_edges_and_equals_the_float_path(train, data):
    dt, ramp, n, trains, (low, high), polarity = train
    dtype = data.draw(st.sampled_from(CODE_DTYPES))
    seed = data.draw(st.integers(0, 2**31 - 1))
    first, last = 0.0, (n - 1) * dt
    margin = ramp / 2 + 2 * dt
    assume(all(abs(e - b) > margin for p in trains for e in p for b in (first, last)))
    levels = (low, high) if polarity == "high" else (high, low)
    # up to 5 % of the swing: the hysteresis (4 sigmas above 2.5 %) then depends on the noise sample
    sigma = data.draw(st.floats(0.0, 0.05)) * (high - low)
    scale = data.draw(code_scales(dtype, low, high, sigma))
    wf = digitised(trace(trains, n, dt=dt, ramp=ramp, levels=levels, noise=sigma, seed=seed), scale, dtype)
    flat = in_volts(wf)
    mode = data.draw(st.sampled_from(["auto", "given", "threshold only"]))
    given = {
        "auto": {},
        "given": {"threshold": (low + high) / 2, "hysteresis": 0.2 * (high - low)},
        "threshold only": {"threshold": (low + high) / 2},
    }[mode]
    with data.draw(layouts):
        got = extract_pulses(wf, polarity=polarity, **given)
        want = extract_pulses(flat, polarity=polarity, **given)
        auto = auto_threshold(flat.volts, flat.resolution_v)
        assert waveform_threshold(wf) == auto
        threshold = given.get("threshold", auto[0] if auto else None)
        hysteresis = given.get("hysteresis", auto[1] if auto else 0.0)
        if threshold is not None:  # the same volts, the same float operations: the same edges
            for a, b in zip(waveform_edges(wf, **given), find_edges(flat.volts, threshold, hysteresis), strict=True):
                np.testing.assert_array_equal(a, b)
    # the float path's own result, within a tenth of a sample (in fact to the bit)
    assert len(got) == len(want)
    np.testing.assert_allclose(got.start_s, want.start_s, rtol=0, atol=0.1 * dt)
    np.testing.assert_allclose(got.width_s, want.width_s, rtol=0, atol=0.1 * dt)
    # the known edges: each crossing between the two samples around it; noise and the
    # digitizer's steps (and the threshold read on them) move it along the edge's slope
    complete = [(a, b) for a, b in trains if a > first and b < last]
    assert len(got) == len(complete)
    if complete:
        step = abs(scale.volts_per_code)
        tol = dt + (10 * sigma + 2 * step + 0.01 * (high - low)) / (high - low) * max(ramp, dt)
        np.testing.assert_allclose(got.start_s, [a for a, _ in complete], rtol=0, atol=tol)
        np.testing.assert_allclose(got.width_s, [b - a for a, b in complete], rtol=0, atol=2 * tol)


SMALL = {"block": 8, "chunk_blocks": 3, "batch": 2}  # boundaries every 8, 24 and 16 samples


def codes_waveform(codes: list[int] | np.ndarray, dtype: type = np.int8, **scale: float) -> Waveform:
    """Codes at 40 mV each (unless `scale` says otherwise), one sample per second."""
    scale = {"volts_per_code": 0.04} | scale
    return Waveform(0.0, 1.0, codes=np.asarray(codes).astype(dtype), scale=CodeScale(**scale))


@pytest.mark.parametrize("dtype", CODE_DTYPES)
def test_the_threshold_samples_the_record_where_the_float_path_does(dtype: type) -> None:
    # every 10th sample sits 2 codes off its level (and 1 code of noise, every 7th): the
    # histogram of v[::10] and the noise of v[::7] see those, the rest of the record does not
    n = 1000
    info = np.iinfo(dtype)
    base = int(info.min) + 20
    codes = np.full(n, base)
    codes[300:700] = base + 90
    codes[::10] += 2
    codes[::7] += 1
    wf = codes_waveform(codes, dtype)
    with layout(**SMALL, histogram_samples=100, noise_samples=n // 7, histogram_min_count=5):
        got, want = waveform_threshold(wf), auto_threshold(in_volts(wf).volts, wf.resolution_v)
        assert got == want
        np.testing.assert_array_equal(extract_pulses(wf).width_s, extract_pulses(in_volts(wf)).width_s)
    # the levels of the sample, not of the rest: within half a histogram bin (93 codes / 256)
    assert got is not None and got[0] == pytest.approx(0.04 * (base + 2 + base + 92) / 2, abs=0.04 * 93 / 512)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16])
def test_a_lone_short_pulse_in_a_long_record_is_counted_whole(dtype: type) -> None:
    # the histogram's sample (every 200th point) may miss a 50-sample pulse: its half of the
    # range is then counted over the whole record
    n = 20_000
    first = int(np.iinfo(dtype).min)
    codes = np.full(n, first + 10)
    codes[10_001:10_051] = first + 110
    wf = codes_waveform(codes, dtype, offset_code=first)
    with layout(**SMALL, histogram_samples=100):
        p = extract_pulses(wf)
        assert waveform_threshold(wf) == auto_threshold(in_volts(wf).volts, wf.resolution_v)
    assert len(p) == 1 and p.width_s[0] == pytest.approx(50.0) and p.start_s[0] == pytest.approx(10_000.5)


def test_a_long_stay_in_the_hysteresis_band_is_walked_back_to_the_crossing() -> None:
    # low (code 0), then 5000 samples above the threshold but short of the high band, then
    # high: the rise is where the trace crossed the threshold, 5000 samples before it reached
    # the band; the fall likewise, 6000 samples before the low band
    codes = [0] * 3000 + [60] * 5000 + [100] * 2000 + [40] * 6000 + [0] * 1000
    wf = codes_waveform(codes, np.int16)
    for shape in (SMALL, {"block": 1024, "chunk_blocks": 4, "batch": 1024}):
        with layout(**shape):
            rising, falling = waveform_edges(wf, threshold=2.0, hysteresis=1.0)  # bands: <= 1.5 V, >= 2.5 V
            np.testing.assert_allclose(rising, [2999.0 + 2.0 / 2.4], rtol=0, atol=1e-9)
            np.testing.assert_allclose(falling, [9999.0 + (2.0 - 4.0) / (1.6 - 4.0)], rtol=0, atol=1e-9)
            assert len(extract_pulses(wf, threshold=2.0, hysteresis=1.0)) == 1


@pytest.mark.parametrize("dtype", CODE_DTYPES)
def test_records_with_one_level_have_no_pulses_on_the_code_path(dtype: type) -> None:
    info = np.iinfo(dtype)
    mid = (int(info.min) + int(info.max)) // 2
    rng = np.random.default_rng(5)
    for codes in (
        np.full(3000, mid),  # flat: one code
        mid + rng.integers(-1, 2, 3000),  # a code or so of noise (below MIN_SWING_SIGMAS steps)
        np.r_[np.full(5, mid), np.full(2995, mid + 60)],  # always high after a start inside a pulse
        [mid],  # one sample
        [],  # none
    ):
        wf = codes_waveform(codes, dtype)
        with layout(**SMALL):
            assert len(extract_pulses(wf)) == 0
            assert waveform_threshold(wf) == auto_threshold(in_volts(wf).volts, wf.resolution_v)
            if len(codes) >= 3000:  # a given threshold at the level: edges of noise, but not on a flat line
                assert len(extract_pulses(wf, threshold=0.04 * mid + 0.02, hysteresis=0.0)) == (
                    len(extract_pulses(in_volts(wf), threshold=0.04 * mid + 0.02, hysteresis=0.0))
                )


def test_records_starting_and_ending_inside_a_pulse_on_the_code_path() -> None:
    codes = [90] * 37 + [10] * 100 + [90] * 50 + [10] * 100 + [90] * 41
    for polarity, widths in (("high", [50.0]), ("low", [100.0, 100.0])):
        with layout(**SMALL):
            p = extract_pulses(codes_waveform(codes), polarity=polarity)
        np.testing.assert_allclose(p.width_s, widths)


# --- the Waveform that keeps its codes ---------------------------------------------------------
def test_a_waveform_from_codes_gives_the_volts_the_dialects_gave() -> None:
    codes = np.array([-128, -50, 0, 3, 127], np.int8)
    # TDS/MSO: YZEro + YMUlt·(code − YOFf); InfiniiVision: (code − yreference)·yincrement + yorigin
    y_mult, y_off, y_zero = 0.0392, -50.0, 0.0123
    tds = Waveform(-1e-6, 1e-8, codes=codes, scale=CodeScale(y_mult, y_off, y_zero), index=3)
    np.testing.assert_array_equal(tds.volts, y_zero + y_mult * (codes.astype(np.float64) - y_off))
    ucodes = np.array([1, 128, 255], np.uint8)
    y_inc, y_ref, y_orig = -0.01, 128.0, 0.5
    keysight = Waveform(0.0, 1e-9, codes=ucodes, scale=CodeScale(y_inc, y_ref, y_orig))
    np.testing.assert_array_equal(keysight.volts, (ucodes.astype(np.float64) - y_ref) * y_inc + y_orig)
    assert tds.volts is tds.volts  # converted once
    assert tds.volts.dtype == np.float64 and len(tds) == 5 and tds.resolution_v == pytest.approx(y_mult)
    assert keysight.resolution_v == pytest.approx(0.01)
    np.testing.assert_allclose(tds.times(), -1e-6 + 1e-8 * np.arange(5))
    assert "int8" in repr(tds) and "index=3" in repr(tds)


def test_a_waveform_needs_volts_or_codes_with_their_scale() -> None:
    volts = np.array([0.0, 1.0])
    wf = Waveform(0.5, 1e-3, volts, 2, 4, 0.01)  # positional, as before
    assert (wf.volts is volts, wf.codes, wf.channel, wf.index, wf.resolution_v) == (True, None, 2, 4, 0.01)
    with pytest.raises(TypeError, match="either volts or codes"):
        Waveform(0.0, 1.0)
    with pytest.raises(TypeError, match="either volts or codes"):
        Waveform(0.0, 1.0, volts, codes=np.zeros(2, np.int8), scale=CodeScale(1.0))
    with pytest.raises(TypeError, match="scale"):
        Waveform(0.0, 1.0, codes=np.zeros(2, np.int8))
    with pytest.raises(TypeError, match="integer"):
        Waveform(0.0, 1.0, codes=np.zeros(2), scale=CodeScale(1.0))


def test_wide_codes_take_the_float_path() -> None:
    codes = np.r_[np.zeros(100), np.full(50, 80), np.zeros(100)].astype(np.int32)
    p = extract_pulses(Waveform(0.0, 1.0, codes=codes, scale=CodeScale(0.04)))
    np.testing.assert_allclose(p.width_s, [50.0])


def test_a_scope_acquisition_is_extracted_on_its_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    # the simulated TDS end to end: the waveform keeps its int8 codes; the pulses, and the
    # station's own call (ScopeSession.acquire_pulses, a fixed threshold), come without
    # converting the record to volts, and equal what the volts give
    source = pulse_source()
    with sim_scope(source, "tektronix_tds") as server, reset_scope(server, "tektronix_tds") as scope:
        scope.configure(scope_settings(record_length=15_000))
        wf = scope.acquire_single()
        assert wf.codes is not None and wf.codes.dtype == np.int8 and wf.scale is not None
        volts = wf.scale.volts(wf.codes)

        def no_volts(self: Waveform) -> np.ndarray:
            raise AssertionError("the record was converted to volts")

        monkeypatch.setattr(Waveform, "volts", property(no_volts))
        auto, fixed = extract_pulses(wf), extract_pulses(wf, threshold=1.65)
        starts, widths = ScopeSession(scope, "", server.resource, threshold_v=1.65).acquire_pulses()
        monkeypatch.undo()
    assert len(auto) >= 20 and len(widths) >= 20
    for got, threshold in ((auto, None), (fixed, 1.65)):
        want = extract_pulses(Waveform(wf.t0_s, wf.dt_s, volts, resolution_v=wf.resolution_v), threshold=threshold)
        np.testing.assert_array_equal(got.start_s, want.start_s)
        np.testing.assert_array_equal(got.width_s, want.width_s)
