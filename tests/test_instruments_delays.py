"""Delay capture: two channels of one acquisition, each stimulus edge paired with its response.

Against the simulated scopes over real TCP (every dialect), with a jittered stimulus on CH1
and an echo responder on CH2 whose delays and misses are drawn per pulse: the truth comes
from the sources and the sim's acquisition log, never from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from instruments.delays import Delays, edge_times, measure_delays, pair_delays
from instruments.scope import ScopeSettings, Waveform, open_scope
from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from instruments.sim.source import ResponseSource

DIALECTS = ("tektronix_tds", "tektronix_mso", "keysight_infiniivision")
PERIOD_S, JITTER_S, WIDTH_S = 100e-6, 40e-6, 10e-6
DELAY_S = (1e-6, 45e-6)
WINDOW_S = 55e-6  # below the shortest stimulus interval, period - jitter = 60 µs
MISS_PROBABILITY = 0.05
RISE_TIME_S = 100e-9  # a ramp of ~6 samples: "clean edges" the interpolation resolves
# The miss count is checked against an injected one only if the responder missed at least once: each
# decided (not censored) stimulus is missed with probability 0.05, so no miss among n happens with
# 0.95^n, which is ≤ 1e-6 per dialect for n ≥ ln(1e-6) / ln(0.95) = 269.3, i.e. 270 stimuli.
MISS_RISK = 1e-6
MIN_DECIDED = math.ceil(math.log(MISS_RISK) / math.log1p(-MISS_PROBABILITY))  # 270
# A 2.5 ms record decides at least 24 stimuli (a lead every 100 µs + up to 40 µs of jitter, after the
# first 0.1 µs and 55 µs before the end): 12 acquisitions give ≥ 288 (0.95^288 = 3.8e-7), ~300 as run.
# (8 gave ~195: no miss once in 22 000 runs per dialect.)
ACQUISITIONS = 12


def delay_settings(**overrides: object) -> ScopeSettings:
    base: dict[str, object] = dict(
        volts_per_div=0.5,  # 3.3 V over 6.6 divisions: a digitizer step of 20 mV on the TDS
        position_div=-3.0,
        time_per_div=250e-6,
        record_length=100_000,  # the TDS rounds up to 120 000: a sample every 21-25 ns on each model
        trigger_level_v=1.65,
        trigger_slope="rise",
        acquire_timeout_s=5.0,
        extra_channels=(2,),
    )
    base.update(overrides)
    return ScopeSettings(**base)  # type: ignore[arg-type]


def _sources(seed: int) -> tuple[PeriodicEdgeSource, ResponseSource]:
    stimulus = PeriodicEdgeSource(period_s=PERIOD_S, width_s=WIDTH_S, jitter_s=JITTER_S, seed=seed)
    response = ResponseSource(stimulus, delay_s=DELAY_S, miss_probability=MISS_PROBABILITY, seed=seed)
    return stimulus, response


@pytest.mark.parametrize("dialect", DIALECTS)
def test_delays_recovered_misses_counted(dialect: str) -> None:
    stimulus, response = _sources(seed=11)
    sim = SimScopeServer(
        stimulus, seed=3, rise_time_s=RISE_TIME_S, noise_v=0.005, dialect=dialect, channel_sources={2: response}
    )
    errors, correct, total, missed_truth, missed_seen = [], 0, 0, 0, 0
    decided: set[int] = set()  # lead times (ns) of the stimuli whose answer the record decides
    with run_in_thread(sim), open_scope(sim.resource, dialect=dialect, timeout_s=5.0) as scope:
        scope.reset()
        applied = scope.configure(delay_settings())
        assert applied.extra_channels == (2,)
        dt = applied.sample_interval_s
        for _ in range(ACQUISITIONS):
            waveforms = scope.acquire_channels()
            info = sim.acquisitions[-1]
            assert sorted(waveforms) == [1, 2]
            assert {w.channel for w in waveforms.values()} == {1, 2}
            assert waveforms[1].index == waveforms[2].index
            got = measure_delays(waveforms[1], waveforms[2], window_s=WINDOW_S, response_edge="rise")
            # truth: the stimulus pulses that lead inside the record, their delays (NaN: missed)
            first = info.first_sample_ns
            last = first + (info.record_length - 1) * info.dt_ns
            pulses = stimulus.edges(int(first), int(last))
            leads = pulses[(pulses[:, 0] > first + RISE_TIME_S * 1e9) & (pulses[:, 0] < last)][:, 0]
            truth = response.delays_ns(leads)
            # a stimulus whose window the record cuts without an answer is censored, not missed
            undecided = np.isnan(truth) & (leads + WINDOW_S * 1e9 > last)
            measured_ns = info.trigger_ns + got.stimulus_s * 1e9
            nearest = np.abs(measured_ns[:, None] - leads[None, :]).argmin(axis=1)
            assert np.all(np.abs(measured_ns - leads[nearest]) < dt * 1e9)  # each found edge is a real one
            assert len(got) + got.censored == len(leads)
            assert sorted(nearest) == sorted(set(nearest))
            expected = truth[nearest]
            total += len(got)
            both_missed = np.isnan(expected) & np.isnan(got.delay_s)
            err = got.delay_s - expected * 1e-9
            correct += int(both_missed.sum() + (np.abs(err) < dt).sum())
            errors.append(err[~np.isnan(err)])
            missed_truth += int(np.isnan(truth).sum() - undecided.sum())
            decided.update(leads[~undecided].astype(np.int64).tolist())
            missed_seen += got.missed
            assert got.unanswering == 0  # an echo's falling edges are no "rise" response
    all_errors = np.concatenate(errors)
    print(f"\n{dialect}: {total} stimuli, {missed_seen} missed (injected {missed_truth}), "
          f"delay error max {np.abs(all_errors).max() / dt:.3f} samples, mean {all_errors.mean() / dt:+.4f}")
    assert total >= ACQUISITIONS * 15
    assert correct / total >= 0.999
    # enough distinct stimuli that a responder without a single miss has a chance ≤ 1e-6 (see MIN_DECIDED)
    assert len(decided) >= MIN_DECIDED, len(decided)
    assert missed_seen == missed_truth and missed_truth > 0
    assert np.all(np.abs(all_errors) <= 0.1 * dt)


def test_acquire_channels_fetches_each_channel_and_leaves_the_source_on_the_trigger() -> None:
    stimulus, response = _sources(seed=5)
    sim = SimScopeServer(stimulus, seed=1, rise_time_s=RISE_TIME_S, channel_sources={3: response})
    with run_in_thread(sim), open_scope(sim.resource, dialect="tektronix_tds", timeout_s=5.0) as scope:
        scope.reset()
        scope.configure(delay_settings(extra_channels=(3,)))
        assert scope.query("SELect:CH3?") == "1" and scope.query("CH3:SCAle?") == scope.query("CH1:SCAle?")
        sim.clear_log()
        both = scope.acquire_channels()
        log = sim.commands
        assert log.index("DATa:SOUrce CH3;*ESR?") < log.index("DATa:SOUrce CH1;*ESR?")
        assert log.count("CURVe?") == 2
        one = scope.acquire_single()  # no source command needed: CH1 is where it was left
        assert one.channel == 1 and one.index == both[1].index + 1
    # CH3 saw the response: its pulses are CH1's, later
    assert len(measure_delays(both[1], both[3], window_s=WINDOW_S, response_edge="rise").answered) > 5


def test_settings_refuse_a_channel_twice() -> None:
    with pytest.raises(ValueError, match="differ"):
        delay_settings(extra_channels=(1,))
    with pytest.raises(ValueError, match="1..4"):
        delay_settings(extra_channels=(5,))


def test_pairing_rules_by_hand() -> None:
    s = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    # 10 → 12; 20 → nothing before 30 (its answer at 31 belongs to 30); 40 → 45 is past the window
    # (the window is 4); 50's window reaches past the record end (52) with no answer: censored
    r = np.array([5.0, 12.0, 31.0, 45.0])
    got = pair_delays(s, r, window_s=4.0, record_end_s=52.0)
    np.testing.assert_array_equal(got.stimulus_s, [10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(got.delay_s, [2.0, np.nan, 1.0, np.nan])
    assert (got.missed, got.censored, got.unanswering) == (2, 1, 1)  # 5.0 precedes every stimulus


@st.composite
def _train(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Stimuli at least `gap` apart, each answered within the window or not, plus stray responses."""
    gap, window = 10.0, draw(st.floats(1.0, 9.5))
    n = draw(st.integers(0, 60))
    spacing = np.array(draw(st.lists(st.floats(gap, 3 * gap), min_size=n, max_size=n)))
    s = np.cumsum(spacing)
    delays = np.array(draw(st.lists(st.one_of(st.none(), st.floats(0.01, window)), min_size=n, max_size=n)),
                      dtype=np.float64)
    answered = ~np.isnan(delays)
    # strays only where no window is open and beyond the end
    end = float(s[-1] + gap) if n else 100.0
    r = np.sort(s[answered] + delays[answered])
    return s, r, delays, window, end


@given(_train())
@settings(max_examples=200, deadline=None)
def test_pairing_recovers_any_train(train: tuple[np.ndarray, np.ndarray, np.ndarray, float, float]) -> None:
    s, r, delays, window, end = train
    got = pair_delays(s, r, window_s=window, record_end_s=end)
    assert got.censored == 0 and got.ambiguous == 0 and got.unanswering == 0
    np.testing.assert_allclose(got.delay_s, delays, rtol=0, atol=1e-9)


@given(st.lists(st.floats(-1e3, 1e3), max_size=50), st.lists(st.floats(-1e3, 1e3), max_size=50),
       st.floats(1e-3, 1e3), st.floats(-1e3, 1e3))
@settings(max_examples=300, deadline=None)
def test_pairing_of_garbage_keeps_its_books(s: list[float], r: list[float], window: float, end: float) -> None:
    got = pair_delays(np.sort(s), np.sort(r), window_s=window, record_end_s=end)
    assert isinstance(got, Delays)
    assert len(got) + got.censored + got.ambiguous == len(s)
    answered = got.answered
    assert np.all((answered > 0) & (answered <= window))
    assert 0 <= got.unanswering <= len(r)
    # each response edge answers at most one stimulus: the one that follows it
    used = np.searchsorted(np.sort(r), got.stimulus_s[~np.isnan(got.delay_s)], side="right")
    assert len(set(used.tolist())) == len(answered)


# two logic levels held for a while, with glitches and garbage levels among them (subnormal volts
# too: a record whose whole range is 0 to 5e-324 V is one level): records with edges.
_garbled_logic = st.lists(
    st.tuples(st.one_of(st.sampled_from([0.0, 3.3]), st.floats(-5.0, 5.0, allow_nan=False)),
              st.integers(1, 40)),
    max_size=30,
).map(lambda runs: np.repeat(np.array([v for v, _ in runs], dtype=np.float64), [k for _, k in runs]))


@given(_garbled_logic, st.one_of(st.integers(0, 60), _garbled_logic), st.floats(1e-8, 1e-6))
@settings(max_examples=200, deadline=None)
def test_measuring_garbage_records_keeps_its_books(volts: np.ndarray, echo: int | np.ndarray, window: float) -> None:
    """Any two records (the response: the stimulus delayed by `echo` samples, or another record):
    every rising edge of the stimulus is a row (answered or missed), censored or ambiguous, never
    lost; every response edge after the first stimulus answers one row or is counted as answering
    none; each answer is the first response edge after its stimulus, within the window."""
    a = Waveform(t0_s=-1e-6, dt_s=1e-8, volts=volts)
    b = Waveform(t0_s=-1e-6, dt_s=1e-8, volts=np.roll(volts, echo) if isinstance(echo, int) else echo)
    got = measure_delays(a, b, window_s=window, response_edge="either")
    stimuli, responses = edge_times(a, "rise"), edge_times(b, "either")  # the edges the records hold
    assert len(got) + got.censored + got.ambiguous == len(stimuli)
    assert np.all(np.isin(got.stimulus_s, stimuli)) and np.all(np.diff(got.stimulus_s) > 0)
    after_first = int(len(responses) - np.searchsorted(responses, stimuli[0], side="right")) if len(stimuli) else 0
    assert len(got.answered) + got.unanswering == after_first
    answered = ~np.isnan(got.delay_s)
    first_after = np.searchsorted(responses, got.stimulus_s[answered], side="right")
    answer, stimulus = responses[first_after], got.stimulus_s[answered]
    np.testing.assert_array_equal(got.delay_s[answered], answer - stimulus)
    assert np.all((answer > stimulus) & (answer <= stimulus + window))  # inside the window (as times: no rounding)


def test_waveforms_of_two_acquisitions_are_refused() -> None:
    a = Waveform(t0_s=0.0, dt_s=1e-9, volts=np.zeros(4), index=1)
    b = Waveform(t0_s=0.0, dt_s=1e-9, volts=np.zeros(4), index=2)
    with pytest.raises(ValueError, match="different acquisitions"):
        measure_delays(a, b, window_s=1e-6)


def test_a_late_answer_makes_the_next_stimulus_ambiguous_not_fast():
    # stimulus 0 answered at 105 (past its 90 window): stimulus 1's window holds 105 and its own 110
    got = pair_delays(np.array([0.0, 100.0, 200.0]), np.array([105.0, 110.0, 205.0]), window_s=90.0,
                      record_end_s=300.0)
    np.testing.assert_array_equal(got.stimulus_s, [0.0, 200.0])
    np.testing.assert_array_equal(got.delay_s, [np.nan, 5.0])
    assert (got.missed, got.ambiguous, got.unanswering) == (1, 1, 2)


def _square(edges: list[tuple[float, float]], n: int = 400) -> Waveform:
    volts = np.zeros(n)
    for at_us, level in edges:
        volts[int(at_us):] = level
    return Waveform(t0_s=0.0, dt_s=1e-6, volts=volts, index=0)


def test_an_echo_is_paired_direction_by_direction():
    # a pulse every 100 µs; the echo of the fall at 60 comes 53 µs late, after the next rise
    stimulus = _square([(10, 3.3), (60, 0), (110, 3.3), (160, 0), (210, 3.3), (260, 0)])
    response = _square([(13, 3.3), (113, 0), (117, 3.3), (163, 0), (213, 3.3), (263, 0)])
    mixed = measure_delays(stimulus, response, window_s=45e-6, stimulus_edge="either", response_edge="either")
    echo = measure_delays(stimulus, response, window_s=45e-6, stimulus_edge="either", response_edge="either",
                          same_direction=True)
    # taken in any direction, the late fall passes for a 3 µs answer to the rise at 110
    assert np.nanmin(np.abs(mixed.delay_s * 1e6 - 3.0)) < 0.01 and 7.0 not in np.round(mixed.delay_s * 1e6, 6)
    np.testing.assert_allclose(echo.stimulus_s * 1e6, [9.5, 59.5, 109.5, 159.5, 209.5, 259.5])
    np.testing.assert_allclose(echo.delay_s * 1e6, [3.0, np.nan, 7.0, 3.0, 3.0, 3.0])
    assert echo.missed == 1
