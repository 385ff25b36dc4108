"""Waveform -> edges -> pulses on synthetic records (no instrument involved).

The synthetic signal is built here independently of the sim: a piecewise-linear
trace through the corners of each pulse (np.interp), sampled every dt.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from instruments.pulses import Pulses, auto_threshold, extract_pulses, find_edges
from instruments.scope import Waveform


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
