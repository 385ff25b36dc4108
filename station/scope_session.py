"""The scope side of a campaign: open the instrument named in the campaign,
configure it once, and turn each single acquisition into pulse widths (a module run)
or into stimulus-to-response delays (a gpio run, two channels)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from instruments.delays import Delays, measure_delays
from instruments.pulses import extract_frame_pulses, extract_pulses
from instruments.scope import Scope, ScopeSettings, WidthMeasurement, open_scope
from station.config import ScopeSettingsConfig


@dataclass(frozen=True)
class Capture:
    """What one acquisition gave: its pulses (start from the acquisition's first trigger), the
    frame each lies in (0 for a single record), and how long the scope was looking."""

    start_s: np.ndarray
    width_s: np.ndarray
    frame: np.ndarray
    live_s: float  # the time the record (or the frames together) covers
    frames: int = 1


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


@dataclass
class ScopeSession:
    scope: Scope
    idn: str
    resource: str
    threshold_v: float | None

    @classmethod
    def open(cls, cfg: ScopeSettingsConfig, resource: str, extra_channels: tuple[int, ...] = (),
             slope: str = "rise") -> ScopeSession:
        """Configured for `cfg`; `extra_channels` recorded beside cfg.channel, which triggers on `slope`."""
        scope = open_scope(resource, dialect=cfg.dialect, timeout_s=cfg.timeout)
        try:
            idn = scope.identify()
            scope.reset()
            scope.configure(instrument_settings(cfg, extra_channels, slope))
            scope.check_errors()
        except BaseException:
            scope.close()
            raise
        threshold = None if cfg.threshold == "auto" else float(cfg.threshold)
        return cls(scope, idn, resource, threshold)

    def __post_init__(self) -> None:
        # one conversation at a time: a capture cancelled by its run keeps going in its thread
        # until the scope answers, and the next caller must not interleave with it
        self._lock = threading.Lock()

    def acquire_pulses(self) -> tuple[np.ndarray, np.ndarray]:
        capture = self.capture()
        return capture.start_s, capture.width_s

    def capture(self) -> Capture:
        """One acquisition as configured: a single record, or a segmented one (one pulse a frame)."""
        applied = self.scope.applied
        if applied is not None and applied.segments > 1:
            with self._lock:
                frames = self.scope.acquire_frames()
            fp = extract_frame_pulses(frames, threshold=self.threshold_v)
            return Capture(fp.start_s, fp.width_s, fp.frame, frames.live_s(), len(frames))
        with self._lock:
            wf = self.scope.acquire_single()
        pulses = extract_pulses(wf, threshold=self.threshold_v)
        return Capture(pulses.start_s, pulses.width_s, np.zeros(len(pulses), np.int64), len(wf) * wf.dt_s)

    def measure(self, cross_check: bool = False) -> tuple[WidthMeasurement, np.ndarray | None]:
        """One acquisition measured by the scope itself; with `cross_check`, its record is
        transferred too and the widths the host extracts from it come beside (else None)."""
        with self._lock:
            measured = self.scope.acquire_measurement()
            waveform = self.scope.fetch() if cross_check else None
        host = None if waveform is None else extract_pulses(waveform, threshold=self.threshold_v).width_s
        return measured, host

    def acquire_delays(self, response_channel: int, window_s: float, stimulus_edge: str,
                       response_edge: str, same_direction: bool = False) -> Delays:
        """One acquisition of both channels; each stimulus edge paired with its response
        (`same_direction`: an echo responder, rises answered by rises, falls by falls)."""
        with self._lock:
            waveforms = self.scope.acquire_channels()
        applied = self.scope.applied
        assert applied is not None
        return measure_delays(
            waveforms[applied.channel], waveforms[response_channel], window_s=window_s,
            stimulus_edge=stimulus_edge, response_edge=response_edge,  # type: ignore[arg-type]
            stimulus_threshold=self.threshold_v, response_threshold=self.threshold_v, same_direction=same_direction,
        )

    @property
    def sample_interval_s(self) -> float | None:
        applied = self.scope.applied
        return None if applied is None else applied.sample_interval_s

    def answers(self) -> None:
        """Raises if the scope no longer answers *IDN? (after the acquisition in flight, if any)."""
        with self._lock:
            self.scope.identify()

    def close(self) -> None:
        self.scope.close()
