"""Scope settings proposed from a first look (`station bench check --propose`): the campaign's
`bench.scope` block for the pulses the first look saw, with the capture ratio to expect.

From the line's levels: volts/div so the pulse spans about four divisions, its low level three
divisions below centre, the trigger at the middle of its edge. From its widths and the period:
a sample interval that resolves the narrowest pulse to about 1 %, then one candidate per capture
strategy the dialect offers — `waveform` (the longest record the model holds: the TDS base
model's 30 000 points, 120 000 with Option 1M when the scope takes them; 1 M points on the MSO
and the InfiniiVision) and `segmented` (frames that hold four median widths after the trigger,
1000 of them) — each tried on the scope while the target makes its pulses.

The capture ratio of each is docs/scopes/README.md's arithmetic, pulses an acquisition holds
× T ÷ the acquisition's cycle, with the cycle (a + D + N·b/B: arming, trigger wait, the record,
its transfer) timed on this scope, over this bus, at the candidate's own settings: the mean of
CYCLES acquisitions. What it assumes: the campaign's acquisitions cycle as these did (the station
extracts one record while the scope takes the next, so its own work is not in the cycle), and the
pulses keep the widths the first look saw (a wider tail is cut by a frame: the report counts such
frames).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from instruments.scope import Scope, ScopeError, ScopeSettings
from station.bench.scope_session import instrument_settings
from station.config import ScopeSettingsConfig

CYCLES = 3  # acquisitions timed per candidate
RESOLUTION = 0.01  # the sample interval, as a share of the narrowest pulse
FINEST_DT_S = 1e-9
COARSEST_DT_S = 100e-9  # coarser samples blur the edges the pairing and rise times use
SPAN_DIVISIONS = 4.0  # how many divisions the pulse's swing should span
WAVEFORM_POINTS = {"tektronix_tds": (120_000, 30_000), "tektronix_mso": (1_000_000,),
                   "keysight_infiniivision": (1_000_000,)}  # the longest first, then fallbacks
SEGMENTED = ("tektronix_mso", "keysight_infiniivision")
FRAMES = 1000
FRAME_WIDTHS = 4.0  # median widths a frame holds after its trigger
TRIGGER_PCT = 10.0


@dataclass(frozen=True)
class Candidate:
    """One capture strategy's settings as the scope applied them, and its timed cycle."""

    capture: str
    applied: ScopeSettings
    cycle_s: float
    pulses_per_acquisition: float
    capture_ratio: float

    def block(self, base: dict[str, Any]) -> dict[str, Any]:
        a = self.applied
        out = dict(base, capture=self.capture, time_per_div=_seconds(a.time_per_div),
                   record_length=a.record_length)
        if self.capture == "segmented":
            out["segments"] = a.segments
        return out


@dataclass
class Proposal:
    scope: dict[str, Any]  # the bench.scope block, ready to paste
    capture_ratio: float
    pulses_per_acquisition: float
    cycle_s: float
    tried: list[dict[str, Any]] = field(default_factory=list)  # every candidate, as timed
    assumes: str = ("the campaign's acquisitions cycle as the timed ones did; the pulses keep "
                    "the widths the first look saw")

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "capture_ratio": self.capture_ratio,
                "pulses_per_acquisition": self.pulses_per_acquisition,
                "cycle_s": self.cycle_s, "tried": self.tried, "assumes": self.assumes}


def _seconds(value: float) -> str:
    from station.common.units import format_duration

    return format_duration(float(f"{value:.4g}"))


def one_two_five_below(value: float) -> float:
    """The 1-2-5 step at or below `value` (a scope's time/div and volts/div sequence)."""
    decade = 10 ** math.floor(math.log10(value))
    for step in (5, 2, 1):
        if step * decade <= value * (1 + 1e-9):
            return step * decade
    return decade / 2


def one_two_five_above(value: float) -> float:
    """The 1-2-5 step at or above `value`."""
    decade = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * decade >= value * (1 - 1e-9):
            return step * decade
    return 10 * decade


def vertical(low_v: float, high_v: float) -> tuple[float, float, float]:
    """(volts/div, position in divisions, trigger level) for a pulse from low_v to high_v: the
    swing over about SPAN_DIVISIONS divisions, the low level three below centre, the trigger at
    the middle of the edge."""
    volts_per_div = one_two_five_above((high_v - low_v) / SPAN_DIVISIONS)
    position = round(max(-5.0, min(5.0, -3.0 - low_v / volts_per_div)), 2)
    return volts_per_div, position, round((low_v + high_v) / 2, 2)


def propose(scope: Scope, cfg: ScopeSettingsConfig, channel: int, low_v: float, high_v: float,
            median_width_s: float, narrowest_s: float, period_s: float) -> Proposal:
    """Try each strategy's settings on `scope` (the target making its pulses) and propose the
    one with the higher capture ratio. Blocking."""
    dt = min(max(one_two_five_below(RESOLUTION * narrowest_s), FINEST_DT_S), COARSEST_DT_S)
    volts_per_div, position, level = vertical(low_v, high_v)
    base = {"kind": cfg.kind, **({"resource": cfg.resource} if cfg.resource else {}),
            "dialect": cfg.dialect, "channel": channel, "volts_per_div": f"{volts_per_div:g}V",
            "position_div": position, "trigger_level": f"{level:g}V",
            "trigger_position_pct": TRIGGER_PCT, "threshold": "auto",
            "timeout": _seconds(cfg.timeout),
            # the twin's bus is what its capture ratio was timed over
            **({"bus": cfg.bus} if cfg.kind == "twin" else {}),
            **({"bus_rate": cfg.bus_rate} if cfg.kind == "twin" and cfg.bus_rate else {})}
    configured = replace(instrument_settings(cfg), channel=channel, extra_channels=(),
                         volts_per_div=volts_per_div, position_div=position,
                         trigger_level_v=level, trigger_position_pct=TRIGGER_PCT,
                         measurement=False)
    tried: list[Candidate] = []
    problems: list[str] = []
    for points in WAVEFORM_POINTS[cfg.dialect]:
        settings = replace(configured, record_length=points, time_per_div=points * dt / 10,
                           segments=1)
        try:
            tried.append(_time(scope, "waveform", settings, median_width_s, period_s))
            break
        except ScopeError as exc:  # a model without the option: the next length down
            problems.append(str(exc))
    if cfg.dialect in SEGMENTED:
        frame_s = FRAME_WIDTHS * median_width_s / (1 - TRIGGER_PCT / 100)
        points = max(100, math.ceil(frame_s / dt / 50) * 50)
        settings = replace(configured, record_length=points, time_per_div=points * dt / 10,
                           segments=FRAMES)
        try:
            tried.append(_time(scope, "segmented", settings, median_width_s, period_s))
        except ScopeError as exc:
            problems.append(str(exc))
    if not tried:
        raise ScopeError("", detail="no capture strategy could be set up: " + "; ".join(problems))
    best = max(tried, key=lambda c: c.capture_ratio)
    return Proposal(best.block(base), best.capture_ratio, best.pulses_per_acquisition,
                    best.cycle_s,
                    [{"capture": c.capture, "record_length": c.applied.record_length,
                      "time_per_div_s": c.applied.time_per_div, "segments": c.applied.segments,
                      "cycle_s": c.cycle_s, "pulses_per_acquisition": c.pulses_per_acquisition,
                      "capture_ratio": c.capture_ratio} for c in tried])


def _time(scope: Scope, capture: str, settings: ScopeSettings, width_s: float,
          period_s: float) -> Candidate:
    """The candidate configured, then CYCLES acquisitions timed from arming to record in."""
    applied = scope.configure(settings)
    scope.check_errors()
    acquire = scope.acquire_frames if applied.segments > 1 else scope.acquire_single
    acquire()  # the first after a configure may pay for it
    started = time.monotonic()
    for _ in range(CYCLES):
        acquire()
    cycle = (time.monotonic() - started) / CYCLES
    span = 10 * applied.time_per_div
    if applied.segments > 1:
        # a frame a trigger; a frame plus the re-arm longer than T skips events in between
        pulses = float(applied.segments)
    else:
        pulses = max(span - width_s, 0.0) / period_s
    return Candidate(capture, applied, cycle, pulses, min(1.0, pulses * period_s / cycle))
