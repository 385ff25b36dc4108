"""The scope side of a campaign: open the instrument named in the campaign,
configure it once, and turn each single acquisition into pulse widths (a module run)
or into stimulus-to-response delays (a gpio run, two channels)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from instruments.delays import Delays, measure_delays
from instruments.pulses import extract_frame_pulses, extract_pulses
from instruments.rise_time import rise_times
from instruments.scope import (
    Frames,
    Scope,
    ScopeDataError,
    ScopeError,
    ScopeSettings,
    Waveform,
    WidthMeasurement,
    open_scope,
)
from station.config import ScopeSettingsConfig

T = TypeVar("T")

if TYPE_CHECKING:
    from instruments.sim.bus import BusProfile


def twin_bus(scope: ScopeSettingsConfig) -> BusProfile:
    """The twin scope's bus (instruments/sim/bus.py): the named profile, at `bus_rate` if one is
    given."""
    from instruments.sim.bus import bus_profile
    from instruments.sim.server import DIALECTS

    profile = bus_profile(
        DIALECTS[scope.dialect].default_bus if scope.bus == "model" else scope.bus
    )
    return profile if scope.bus_rate is None else profile.with_rate(scope.bus_rate)


def bus_text(scope: ScopeSettingsConfig) -> str:
    """How the scope's data reaches the station, for the manifest: the twin's simulated bus, or the
    interface a VISA resource names (GPIB, TCPIP, USB, ...)."""
    if scope.kind == "twin":
        bus = twin_bus(scope)
        if bus.bytes_per_s == float("inf"):
            return f"twin, {bus.name} (no delay)"
        return (
            f"twin, {bus.name}: {1e3 * bus.overhead_s:g} ms a reply + {bus.bytes_per_s / 1e3:g} "
            "kB/s"
        )
    if scope.kind == "visa" and scope.resource:
        from instruments.scpi import resource_kind

        return " ".join(part for part in resource_kind(scope.resource) if part) or scope.resource
    return "none"


@dataclass(frozen=True)
class Capture:
    """What one acquisition gave: its pulses (start from the acquisition's first trigger), the
    frame each lies in (0 for a single record), and how long the scope was looking."""

    start_s: np.ndarray
    width_s: np.ndarray
    frame: np.ndarray
    live_s: float  # the time the record (or the frames together) covers
    frames: int = 1
    # frames of a segmented acquisition that hold no whole pulse: the event that triggered the
    # frame lasted past its end (or began before it), so its width is lost; these are the
    # longest pulses first, and a worst case without them is only a lower bound
    frames_without_pulse: int = 0


@dataclass(frozen=True)
class DetailedCapture(Capture):
    """A Capture with, per pulse, the 10–90 % rise time of its leading edge (s; NaN where the
    sample interval does not resolve it: instruments/rise_time.py), and the host's wall clock
    (time.time()) just before the scope was armed and once its record was in."""

    rise_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    armed_host_s: float = math.nan
    done_host_s: float = math.nan


def instrument_settings(cfg: ScopeSettingsConfig, extra_channels: tuple[int, ...] = (),
                        slope: str = "rise") -> ScopeSettings:
    return ScopeSettings(
        extra_channels=extra_channels,
        channel=cfg.channel,
        volts_per_div=cfg.volts_per_div,
        position_div=cfg.position_div,
        time_per_div=cfg.time_per_div,
        record_length=cfg.record_length,
        trigger_level_v=cfg.trigger_level,
        trigger_slope=slope,  # type: ignore[arg-type]
        trigger_position_pct=cfg.trigger_position_pct,
        acquire_timeout_s=cfg.timeout,
        segments=cfg.segments if cfg.capture == "segmented" else 1,
        measurement=cfg.capture == "measurement",
    )


# after a dropped session, before opening a new one (a rebooting switch, a LAN glitch)
RECONNECT_DELAY_S = 1.0


def _dropped(exc: ScopeError) -> bool:
    """A session that failed (I/O error, timeout), not an instrument that answered with an error
    or a reply that cannot be used: only the former can a new session mend."""
    return not isinstance(exc, ScopeDataError) and not exc.instrument_text


def _configured(cfg: ScopeSettingsConfig, resource: str, extra_channels: tuple[int, ...],
                slope: str) -> tuple[Scope, str]:
    scope = open_scope(resource, dialect=cfg.dialect, timeout_s=cfg.timeout)
    try:
        idn = scope.identify()
        scope.reset()
        scope.configure(instrument_settings(cfg, extra_channels, slope))
        scope.check_errors()
    except BaseException:
        scope.close()
        raise
    return scope, idn


def delays_of(waveforms: dict[int, Waveform], stimulus_channel: int, response_channel: int,
              window_s: float, stimulus_edge: str, response_edge: str, same_direction: bool,
              threshold_v: float | None) -> Delays:
    """One two-channel acquisition's stimulus edges, each paired with its response."""
    return measure_delays(
        waveforms[stimulus_channel], waveforms[response_channel], window_s=window_s,
        stimulus_edge=stimulus_edge, response_edge=response_edge,  # type: ignore[arg-type]
        stimulus_threshold=threshold_v, response_threshold=threshold_v,
        same_direction=same_direction)


@dataclass
class ScopeSession:
    scope: Scope
    idn: str
    resource: str
    threshold_v: float | None
    # what a new session after a dropped one is configured with (None: no reconnecting)
    cfg: ScopeSettingsConfig | None = None
    extra_channels: tuple[int, ...] = ()
    slope: str = "rise"

    @classmethod
    def open(cls, cfg: ScopeSettingsConfig, resource: str, extra_channels: tuple[int, ...] = (),
             slope: str = "rise") -> ScopeSession:
        """Configured for `cfg`; `extra_channels` recorded beside cfg.channel, which triggers on
        `slope`."""
        scope, idn = _configured(cfg, resource, extra_channels, slope)
        threshold = None if cfg.threshold == "auto" else float(cfg.threshold)
        return cls(scope, idn, resource, threshold, cfg, extra_channels, slope)

    def __post_init__(self) -> None:
        # one conversation at a time: a capture cancelled by its run keeps going in its thread
        # until the scope answers, and the next caller must not interleave with it
        self._lock = threading.Lock()
        self.reconnects = 0  # sessions reopened after a drop, since this one was opened
        # a drop that a new session did not mend: the session is gone
        self.lost: ScopeError | None = None

    def _call(self, acquire: Callable[[Scope], T]) -> T:
        """`acquire(scope)` under the lock; after a dropped session, one new session (configured
        as this one was) and one more try, then the error says both."""
        with self._lock:
            try:
                return acquire(self.scope)
            except ScopeError as exc:
                if self.cfg is None or not _dropped(exc):
                    raise
                first = exc
            with contextlib.suppress(Exception):
                self.scope.close()
            time.sleep(RECONNECT_DELAY_S)
            try:
                self.scope, self.idn = _configured(self.cfg, self.resource, self.extra_channels,
                                                   self.slope)
                self.reconnects += 1
                return acquire(self.scope)
            except ScopeError as again:
                self.lost = ScopeError(first.command, first.instrument_text,
                                       resource=first.resource or self.resource,
                                       detail=f"{first.detail or 'session lost'}; one new session "
                                       f"after {RECONNECT_DELAY_S:g} s failed too: {again}")
                raise self.lost from None

    def acquire_pulses(self) -> tuple[np.ndarray, np.ndarray]:
        capture = self.capture()
        return capture.start_s, capture.width_s

    def capture(self) -> Capture:
        """One acquisition as configured: a single record, or a segmented one (one pulse a
        frame)."""
        return self.pulses_of(self.acquire_record())

    def capture_detailed(self) -> DetailedCapture:
        """`capture()` with each pulse's 10–90 % rise time (from the record, which capture() does
        not keep) and the wall clock just before the scope was armed and once its record was in."""
        armed = time.time()
        record = self.acquire_record()
        done = time.time()
        got = self.pulses_of(record)
        rise = rise_times(record, got.start_s, got.frame if isinstance(record, Frames) else None)
        return DetailedCapture(**{f.name: getattr(got, f.name) for f in fields(got)}, rise_s=rise,
                               armed_host_s=armed, done_host_s=done)

    def acquire_record(self) -> Waveform | Frames:
        """One acquisition's record as transferred (`pulses_of` extracts it: a run extracts one
        record while the scope acquires the next)."""
        def acquire(scope: Scope) -> Waveform | Frames:
            segmented = scope.applied is not None and scope.applied.segments > 1
            return scope.acquire_frames() if segmented else scope.acquire_single()

        return self._call(acquire)

    def pulses_of(self, record: Waveform | Frames) -> Capture:
        if isinstance(record, Frames):
            fp = extract_frame_pulses(record, threshold=self.threshold_v)
            empty = len(record) - len(np.unique(fp.frame))
            return Capture(fp.start_s, fp.width_s, fp.frame, record.live_s(), len(record), empty)
        pulses = extract_pulses(record, threshold=self.threshold_v)
        return Capture(pulses.start_s, pulses.width_s, np.zeros(len(pulses), np.int64),
                       len(record) * record.dt_s)

    def measure(self, cross_check: bool = False) -> tuple[WidthMeasurement, np.ndarray | None]:
        """One acquisition measured by the scope itself; with `cross_check`, its record is
        transferred too and the widths the host extracts from it come beside (else None)."""
        def measure(scope: Scope) -> tuple[WidthMeasurement, Waveform | None]:
            return scope.acquire_measurement(), scope.fetch() if cross_check else None

        measured, waveform = self._call(measure)
        host = None if waveform is None else extract_pulses(waveform,
                                                            threshold=self.threshold_v).width_s
        return measured, host

    def acquire_delays(self, response_channel: int, window_s: float, stimulus_edge: str,
                       response_edge: str, same_direction: bool = False) -> Delays:
        """One acquisition of both channels; each stimulus edge paired with its response
        (`same_direction`: an echo responder, rises answered by rises, falls by falls)."""
        waveforms = self._call(lambda scope: scope.acquire_channels())
        applied = self.scope.applied
        assert applied is not None
        return delays_of(waveforms, applied.channel, response_channel, window_s, stimulus_edge,
                         response_edge, same_direction, self.threshold_v)

    @property
    def record_span_s(self) -> float:
        """The time one record covers (ten divisions); 0 before configure()."""
        applied = self.scope.applied
        return 0.0 if applied is None else 10.0 * applied.time_per_div

    @property
    def sample_interval_s(self) -> float | None:
        applied = self.scope.applied
        return None if applied is None else applied.sample_interval_s

    def not_answering(self) -> str | None:
        """None if the scope answers *IDN? (after the acquisition in flight, if any); else why
        not."""
        with self._lock:
            if self.lost is not None:
                return str(self.lost)
            try:
                self.scope.identify()
            except Exception as exc:  # noqa: BLE001 - any failure means the same: the scope is gone
                return str(exc) or type(exc).__name__
        return None

    def close(self) -> None:
        self.scope.close()
