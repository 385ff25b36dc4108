"""What the dialect tests share: settings, a simulated scope per dialect, and the checks
that hold whatever the instrument (ground truth from the edge source and the sim's
acquisition log, never from constants)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

from instruments.pulses import extract_pulses
from instruments.scope import Scope, ScopeSettings, ScopeTimeout, Waveform, open_scope
from instruments.sim import AcquisitionInfo, PeriodicEdgeSource, SimScopeServer, run_in_thread

RISE_TIME_S = 15e-9


def settings(**overrides: object) -> ScopeSettings:
    base: dict[str, object] = dict(
        volts_per_div=1.0,
        position_div=-2.0,
        time_per_div=250e-6,
        record_length=120_000,
        trigger_level_v=1.65,
        trigger_slope="rise",
        acquire_timeout_s=5.0,
    )
    base.update(overrides)
    return ScopeSettings(**base)  # type: ignore[arg-type]


def pulse_source() -> PeriodicEdgeSource:
    # 100.037 µs, not 100 µs: every legal TDS timebase/record length puts a whole number of
    # samples in 100 µs, which would land all edges at one sub-sample phase and bias the
    # mean-error check; a real timer's jitter never locks to the scope's sample clock either
    return PeriodicEdgeSource(period_s=100.037e-6, width_s=(1e-6, 20e-6), seed=2015)


@contextlib.contextmanager
def sim_scope(source: PeriodicEdgeSource, dialect: str) -> Iterator[SimScopeServer]:
    """A simulated `dialect` scope on a background loop for the duration."""
    sim = SimScopeServer(source, seed=7, rise_time_s=RISE_TIME_S, noise_v=0.02, dialect=dialect)
    with run_in_thread(sim):
        yield sim


@contextlib.contextmanager
def reset_scope(server: SimScopeServer, dialect: str) -> Iterator[Scope]:
    with open_scope(server.resource, dialect=dialect, timeout_s=2.0) as s:
        s.reset()
        yield s


def check_timing(wf: Waveform, info: AcquisitionInfo, applied: ScopeSettings) -> None:
    """dt and time 0 (the trigger) agree with where the sim put the samples on the source clock."""
    assert len(wf) == applied.record_length and wf.volts.dtype == np.float64 and wf.channel == 1
    assert wf.dt_s == pytest.approx(applied.sample_interval_s, rel=1e-8)
    assert wf.dt_s * 1e9 == pytest.approx(info.dt_ns, rel=1e-8)
    assert wf.t0_s * 1e9 == pytest.approx(info.first_sample_ns - info.trigger_ns, abs=1e-3)
    assert -wf.t0_s == pytest.approx(applied.trigger_position_pct / 100 * 10 * applied.time_per_div, abs=wf.dt_s)
    low, high = np.percentile(wf.volts, [5, 99.5])
    assert low == pytest.approx(0.0, abs=0.1) and high == pytest.approx(3.3, abs=0.1)


def check_on_grid(wf: Waveform, step_v: float, offset_codes: float) -> None:
    """Volts sit on the digitizer's grid: (V / step + offset) is a whole number of codes."""
    codes = wf.volts / step_v + offset_codes
    np.testing.assert_allclose(codes, np.round(codes), atol=1e-6)
    assert wf.resolution_v == pytest.approx(step_v)


def check_widths(scope: Scope, server: SimScopeServer, source: PeriodicEdgeSource, applied: ScopeSettings) -> None:
    """Pulse widths from five acquisitions equal the injected ones within a sample plus a rise time."""
    dt = applied.sample_interval_s
    ramp_s = RISE_TIME_S / 0.8
    errors = []
    for _ in range(5):
        wf = scope.acquire_single()
        info = server.acquisitions[-1]
        got = extract_pulses(wf)
        first = info.first_sample_ns
        last = first + (info.record_length - 1) * info.dt_ns
        truth = source.edges(int(first) - 1, int(last) + 2)
        margin = (ramp_s + dt) * 1e9
        complete = truth[(truth[:, 0] > first + margin) & (truth[:, 1] < last - margin)]
        cut = truth[(truth[:, 0] < first) | (truth[:, 1] > last)]
        # pulses in ns on the source clock; the waveform's time 0 is the trigger
        starts = info.trigger_ns + got.start_s * 1e9
        nearest = np.abs(starts[:, None] - truth[None, :, 0]).argmin(axis=1)
        matched = truth[nearest]
        assert len(got) == len(complete) and len(got) >= 20
        assert not np.isin(matched[:, 0], cut[:, 0]).any()
        err = got.width_s - (matched[:, 1] - matched[:, 0]) * 1e-9
        # each edge is found between the two samples around it (or within the ramp):
        # a width is off by less than a sample interval plus a rise time
        assert np.all(np.abs(err) < dt + RISE_TIME_S), err
        assert np.all(np.abs(starts - matched[:, 0]) < (dt + RISE_TIME_S) * 1e9)
        errors.append(err)
    all_err = np.concatenate(errors)
    # ... and the errors do not lean one way: sub-sample interpolation, no bias
    assert abs(all_err.mean()) < dt / 5


def check_mute_timeout(dialect: str) -> None:
    """A scope that hears but never answers: ScopeTimeout naming the resource and *IDN?."""
    sim = SimScopeServer(PeriodicEdgeSource(), mute=True, dialect=dialect)
    with run_in_thread(sim), pytest.raises(ScopeTimeout) as caught:
        open_scope(sim.resource, dialect=dialect, timeout_s=0.3)
    message = str(caught.value)
    assert sim.resource in message and "*IDN?" in message and "check" in message
    assert sim.commands == ["*IDN?"]  # it was heard, never answered


def split_log(log: list[str], configure: list[str]) -> list[str]:
    """Assert the log opens with `configure`; the rest (the acquisition) is returned."""
    assert log[: len(configure)] == configure
    return log[len(configure) :]
