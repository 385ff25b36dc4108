"""The scope's part of `station bench check`: while the target makes its pulses, does the
configured channel see them, at the target's rate and of a plausible width? When it does not,
a first look at every channel at a wide setting, its trigger on AUTO (so a bench not wired right
still shows what each channel carries), says why: the pulses on another channel, a ×10 probe
with the channel at ×1, an active-low line, a trigger above the pulse, a record shorter than
the period, or no pulses anywhere (an unplugged probe).

Blocking (PyVISA): the caller runs it in a thread while the target makes its pulses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, NoReturn

import numpy as np

from instruments.pulses import extract_pulses
from instruments.scope import Scope, ScopeError, ScopeTimeout, Waveform, open_scope
from station.bench.check import Checklist, StopCheck
from station.bench.proposal import one_two_five_above, propose
from station.bench.scope_session import instrument_settings
from station.common.units import format_duration, format_voltage
from station.config import ScopeSettingsConfig

# a line swinging less than this from its idle level carries noise only: 3.75 codes at the first
# look's 1 V/div, below the tenth of a 1.8 V line (a x10 probe on a x1 channel)
MIN_SWING_V = 0.15
NOISE_SIGMAS = 8.0  # … or less than this many of its own noise (a noisier scope or channel)
LOGIC_V = (1.5, 5.5)  # where a logic line's high level lies (1.8 V to 5 V families, with margin)
LOOK_VOLTS_PER_DIV = 1.0  # the first look's vertical: -2 V to +8 V with the trace 3 div low
LOOK_POSITION_DIV = -3.0
LOOK_POINTS = 10_000  # enough samples to time a µs pulse over five periods
LOOK_PERIODS = 5  # periods a first-look record spans
CONFIGURED_WAIT_S = 1.5  # how long the configured acquisition waits for its trigger
PULSES_A_RECORD = 2.0  # a waveform capture's record must span at least this many periods
SPACING_TOLERANCE = 0.2  # the pulses' spacing against the period


@dataclass(frozen=True)
class LineView:
    """What one channel's record shows: its two levels, which one it idles at, and its active
    pulses (complete ones: their count, median width and lead-to-lead spacing)."""

    channel: int
    low_v: float
    high_v: float
    idle: Literal["low", "high"]
    pulses: int
    width_s: float
    spacing_s: float
    narrowest_s: float = math.nan
    starts_s: tuple[float, ...] = ()  # each pulse's leading edge, from the trigger

    @property
    def swing_v(self) -> float:
        return self.high_v - self.low_v

    @property
    def has_pulses(self) -> bool:
        return self.pulses > 0 and self.swing_v >= MIN_SWING_V

    def describe(self) -> str:
        if not self.has_pulses:
            return f"CH{self.channel}: no pulses (swing {volts_text(self.swing_v)})"
        return (f"CH{self.channel}: {self.pulses} pulses from {volts_text(self.low_v)} to "
                f"{volts_text(self.high_v)}, idle {self.idle}, every "
                f"{duration_text(self.spacing_s)}, {duration_text(self.width_s)} wide")


def duration_text(seconds: float) -> str:
    """Three figures, in the campaign file's units (pasteable)."""
    return "?" if not math.isfinite(seconds) else format_duration(float(f"{seconds:.3g}"))


def volts_text(volts: float) -> str:
    if not math.isfinite(volts):
        return "?"
    rounded = float(f"{volts:.3g}")
    return "0V" if abs(rounded) < 1e-3 else format_voltage(rounded)


def view_line(waveform: Waveform, channel: int) -> LineView:
    """The channel's two levels and its pulses, active on the side it does not idle at.

    The idle side is the record's median's (a line is active less than half the time: a
    latency pulse well under half the period, a GPIO stimulus under half its period). The noise
    is the robust spread of consecutive samples' differences (MAD × 1.4826 / √2, at least half a
    digitizer step): edges are a few of them, so neither the pulses nor their duty inflate it,
    as they do the spread around the median (a 40 % duty at a digitizer step near the noise put
    the median a step off the idle level). The line carries pulses when its farthest excursion
    from the median exceeds both MIN_SWING_V and NOISE_SIGMAS of that noise, on the side of
    that excursion: so a pulse of any duty, however narrow, is seen if the record holds it. Each
    level is then the median of the samples on its side of the excursion's middle (the noise
    averaged out, as a scope's own high/low measurement does)."""
    volts = waveform.volts
    none = LineView(channel, math.nan, math.nan, "low", 0, math.nan, math.nan)
    if not len(volts) or not np.isfinite(volts).all():
        return none
    middle_v = float(np.median(volts))
    up, down = float(volts.max()) - middle_v, middle_v - float(volts.min())
    excursion = max(up, down)
    steps = np.abs(np.diff(volts))
    noise = max(1.4826 * float(np.median(steps)) / math.sqrt(2) if len(steps) else 0.0,
                waveform.resolution_v / 2)
    idle: Literal["low", "high"] = "low" if up >= down else "high"
    if excursion < max(MIN_SWING_V, NOISE_SIGMAS * noise):
        return LineView(channel, middle_v, middle_v, idle, 0, math.nan, math.nan)
    sign = 1.0 if idle == "low" else -1.0
    past = (volts - (middle_v + sign * excursion / 2)) * sign > 0
    active_v, idle_v = float(np.median(volts[past])), float(np.median(volts[~past]))
    low, high = (idle_v, active_v) if idle == "low" else (active_v, idle_v)
    pulses = extract_pulses(waveform, threshold=(low + high) / 2, hysteresis=0.2 * (high - low),
                            polarity="high" if idle == "low" else "low")
    width = float(np.median(pulses.width_s)) if len(pulses) else math.nan
    narrowest = float(np.min(pulses.width_s)) if len(pulses) else math.nan
    spacing = float(np.median(np.diff(pulses.start_s))) if len(pulses) > 1 else math.nan
    return LineView(channel, low, high, idle, len(pulses), width, spacing, narrowest,
                    tuple(float(t) for t in pulses.start_s))


@dataclass
class _Look:
    answered: bool = False  # the scope identified itself
    views: dict[int, LineView] | None = None  # the first look's, once taken


def check_scope(cfg: ScopeSettingsConfig, resource: str, period_s: float,
                checklist: Checklist, propose: bool = False) -> None:
    """The scope answers, takes the campaign's settings, and its configured channel sees the
    target's pulses; else the first look's diagnosis. Adds findings (a failed one raises
    StopCheck). `propose`: then, whatever the findings, the scope block for the pulses a first
    look sees (checklist.proposal; station/bench/proposal.py)."""
    try:
        scope = open_scope(resource, dialect=cfg.dialect, timeout_s=cfg.timeout)
    except ScopeError as exc:
        checklist.fail("scope", str(exc), _scope_fix(cfg, resource), resource=resource)
    look = _Look()
    try:
        stopped = None
        try:
            _check_scope(scope, cfg, resource, period_s, checklist, look)
        except StopCheck as exc:
            if not (propose and look.answered):
                raise
            stopped = exc
        if propose:
            _propose(scope, cfg, period_s, checklist, look)
        if stopped is not None:
            raise stopped
    finally:
        scope.close()


def _propose(scope: Scope, cfg: ScopeSettingsConfig, period_s: float, checklist: Checklist,
             look: _Look) -> None:
    try:
        views = look.views if look.views is not None else take_first_look(scope, cfg, period_s)
    except ScopeError as exc:
        checklist.proposal_note = f"no proposal: the first look failed: {exc}"
        return
    seen = [v for v in views.values() if v.has_pulses]
    if not seen:
        checklist.proposal_note = "no proposal: no channel sees pulses"
        return
    if any(f.step == "probe" and not f.ok for f in checklist.findings):
        checklist.proposal_note = ("no proposal: the probe factor first (settings for a tenth of "
                                   "the line would keep the mismatch)")
        return
    view = views[cfg.channel] if views[cfg.channel].has_pulses else max(seen,
                                                                        key=lambda v: v.pulses)
    if view.idle == "high":
        checklist.proposal_note = (f"no proposal: CH{view.channel}'s line is active-low, which "
                                   "the station does not time")
        return
    try:
        proposal = propose(scope, cfg, view.channel, view.low_v, view.high_v, view.width_s,
                           view.narrowest_s, period_s)
    except ScopeError as exc:
        checklist.proposal_note = f"no proposal: {exc}"
        return
    checklist.proposal = proposal.as_dict()


def _scope_fix(cfg: ScopeSettingsConfig, resource: str) -> str:
    return (f"check that the scope is on and reachable as {resource} (bench.scope.resource), and "
            f"that it speaks {cfg.dialect} (bench.scope.dialect); `station scope check "
            f"{resource}` asks it alone")


def _check_scope(scope: Scope, cfg: ScopeSettingsConfig, resource: str, period_s: float,
                 checklist: Checklist, look: _Look) -> None:
    try:
        idn = scope.identify()
        scope.reset()
        scope.check_errors()
    except ScopeError as exc:
        checklist.fail("scope", str(exc), _scope_fix(cfg, resource), resource=resource)
    look.answered = True
    checklist.ok("scope", idn, resource=resource)
    # long enough for a record and two periods (a slow module's), never past the campaign's own
    wait = max(CONFIGURED_WAIT_S, 10 * cfg.time_per_div + 2 * period_s + 0.5)
    asked = replace(instrument_settings(cfg), segments=1, measurement=False,
                    acquire_timeout_s=min(cfg.timeout, wait))
    try:
        applied = scope.configure(asked)
        scope.check_errors()
    except ScopeError as exc:
        checklist.fail("scope_settings", f"the scope refused the campaign's settings: {exc}",
                       "change the bench.scope setting the command names to one this scope "
                       "offers (docs/scopes/)")
    span = 10 * applied.time_per_div
    if cfg.capture == "waveform" and span < PULSES_A_RECORD * period_s:
        short_record(checklist, cfg, applied.time_per_div, period_s)
    try:
        waveform = scope.acquire_single()
    except ScopeTimeout:
        waveform = None
    except ScopeError as exc:
        checklist.fail("scope", str(exc), _scope_fix(cfg, resource))
    if waveform is not None:
        seen = _judge_configured(waveform, cfg, period_s, span)
        if seen is not None:
            checklist.ok("pulses", seen, channel=cfg.channel)
            return
    try:
        look.views = take_first_look(scope, cfg, period_s)
    except ScopeError as exc:
        checklist.fail("scope", f"the first look (all channels, trigger on AUTO) failed: {exc}",
                       "the message names the command and the scope's reply")
    evidence = {f"ch{c}": v.describe() for c, v in look.views.items()}
    _diagnose(look.views, cfg, period_s, checklist, waveform is not None, evidence)


def _judge_configured(waveform: Waveform, cfg: ScopeSettingsConfig, period_s: float,
                      span_s: float) -> str | None:
    """What the configured acquisition saw, if it is the target's pulses: enough of them for
    the record's span, each narrower than half the period (a wider one is the gap between
    pulses of an inverted line). None: it is not."""
    threshold = None if cfg.threshold == "auto" else float(cfg.threshold)
    pulses = extract_pulses(waveform, threshold=threshold)
    expected = span_s / period_s
    if cfg.capture == "waveform":
        enough = max(1, math.floor(expected / 2)) <= len(pulses) <= expected * 1.5 + 1
    else:  # a frame of a segmented capture holds the pulse that triggered it
        enough = len(pulses) >= 1
    if not enough or not 0 < float(np.median(pulses.width_s)) < period_s / 2:
        return None
    return (f"CH{cfg.channel}: {len(pulses)} pulses in a {duration_text(span_s)} record (about "
            f"{expected:.0f} expected at {duration_text(period_s)}), median width "
            f"{duration_text(float(np.median(pulses.width_s)))}")


def short_record(checklist: Checklist, cfg: ScopeSettingsConfig, applied_tdiv: float,
                 period_s: float, segmented: bool = True) -> None:
    """A failed record_span finding; `segmented`: the kind can capture a pulse a frame instead."""
    wanted = one_two_five_above(PULSES_A_RECORD * 2 * period_s / 10)
    limited = applied_tdiv < cfg.time_per_div * 0.99
    said = (f"a record spans {duration_text(10 * applied_tdiv)} (the scope applied "
            f"{duration_text(applied_tdiv)}/div"
            + (f" where {duration_text(cfg.time_per_div)}/div was asked" if limited else "")
            + f"): under {PULSES_A_RECORD:g} periods of {duration_text(period_s)}, so a record "
            "holds one pulse at most and the pairing has none to place")
    fix = (f"bench.scope.time_per_div: {duration_text(wanted)} or more (ten divisions hold "
           f"{10 * wanted / period_s:.0f} periods)")
    if limited:
        fix += ("; this scope would not go slower than it applied: check its record length "
                "and horizontal mode"
                + (", or use capture: segmented (one pulse a frame)" if segmented else ""))
    checklist.fail("record_span", said, fix, applied_time_per_div_s=applied_tdiv,
                   asked_time_per_div_s=cfg.time_per_div, period_s=period_s)


def trigger_outside(checklist: Checklist, line: str, view: LineView, level: float,
                    evidence: dict[str, str]) -> NoReturn:
    """The failed `trigger` finding: the level outside what `line` (its view) swings through."""
    middle = round((view.low_v + view.high_v) / 2, 2)
    checklist.fail("trigger", f"the trigger level {volts_text(level)} is outside {line} "
                   f"(from {volts_text(view.low_v)} to {volts_text(view.high_v)}): the scope "
                   "never triggers",
                   f"bench.scope.trigger_level: {middle:g} V (the middle of the edge)",
                   low_v=view.low_v, high_v=view.high_v, **evidence)


def take_first_look(scope: Scope, cfg: ScopeSettingsConfig, period_s: float
                     ) -> dict[int, LineView]:
    """Every channel, wide, trigger on AUTO: what each one carries."""
    others = tuple(c for c in (1, 2, 3, 4) if c != cfg.channel)
    look = replace(instrument_settings(cfg), extra_channels=others, segments=1,
                   measurement=False, volts_per_div=LOOK_VOLTS_PER_DIV,
                   position_div=LOOK_POSITION_DIV,
                   time_per_div=one_two_five_above(LOOK_PERIODS * period_s / 10),
                   record_length=LOOK_POINTS, trigger_position_pct=10.0, trigger_mode="auto",
                   acquire_timeout_s=max(cfg.timeout, 2.0))
    scope.configure(look)
    records = scope.acquire_channels()
    return {c: view_line(w, c) for c, w in records.items()}


def _diagnose(views: dict[int, LineView], cfg: ScopeSettingsConfig, period_s: float,
              checklist: Checklist, triggered: bool, evidence: dict[str, str]) -> None:
    c = cfg.channel
    with_pulses = [v for v in views.values() if v.has_pulses]
    if not with_pulses:
        largest = max((v.swing_v for v in views.values() if math.isfinite(v.swing_v)),
                      default=0.0)
        checklist.fail("pulses", "no channel sees pulses while the target makes them: every "
                       "channel shows noise only (the largest swing "
                       f"{volts_text(largest)})",
                       f"connect the probe (and its ground clip) to the module's line — the "
                       f"LPT port's ACK pin or the FPGA's irqflagtap GPIO — on CH{c}", **evidence)
    view = views[c]
    if not view.has_pulses:
        best = max(with_pulses, key=lambda v: v.pulses)
        checklist.fail("channel", f"CH{c} sees no pulses; {best.describe()}: the probe is on "
                       f"CH{best.channel}",
                       f"move the probe to CH{c}, or set bench.scope.channel: {best.channel}",
                       found_on=best.channel, **evidence)
    if view.idle == "high":
        checklist.fail("polarity", f"CH{c}'s line idles high ({volts_text(view.high_v)}) and "
                       f"pulses low ({volts_text(view.low_v)}): an active-low line, where the "
                       "station times high pulses from their rising edge",
                       "probe the line where the module drives it active-high (before an "
                       "inverting buffer or the port's inverted pin), or invert it with a buffer",
                       idle_v=view.high_v, active_v=view.low_v, **evidence)
    level = cfg.trigger_level
    if not view.low_v < level < view.high_v:
        line_v = view.swing_v * 10
        if view.swing_v <= 0.6 and LOGIC_V[0] <= line_v <= LOGIC_V[1]:
            checklist.fail("probe", f"the pulses on CH{c} swing {volts_text(view.swing_v)}: a "
                           f"{volts_text(line_v)} logic line seen through a ×10 probe with "
                           "the channel set to ×1 (and the trigger level, "
                           f"{volts_text(level)}, is above them)",
                           f"set CH{c}'s probe factor to ×10 on the scope (the station leaves it "
                           "as it finds it), or use a ×1 probe", swing_v=view.swing_v, **evidence)
        trigger_outside(checklist, f"the pulses on CH{c}", view, level, evidence)
    top = (5 - cfg.position_div) * cfg.volts_per_div
    bottom = (-5 - cfg.position_div) * cfg.volts_per_div
    if not (bottom <= view.low_v and view.high_v <= top):
        checklist.fail("vertical", f"the pulses on CH{c} ({volts_text(view.low_v)} to "
                       f"{volts_text(view.high_v)}) leave the screen, which shows "
                       f"{volts_text(bottom)} to {volts_text(top)} at "
                       f"{volts_text(cfg.volts_per_div)}/div",
                       "set bench.scope.volts_per_div and position_div so both levels are on "
                       "screen", **evidence)
    if not (math.isfinite(view.spacing_s)
            and abs(view.spacing_s - period_s) <= SPACING_TOLERANCE * period_s):
        checklist.fail("rate", f"CH{c} has pulses every {duration_text(view.spacing_s)}, but the "
                       f"module's period is {duration_text(period_s)}: is this the module's line?",
                       "probe the module's line (the ACK pin, the irqflagtap GPIO)", **evidence)
    checklist.fail("pulses", f"{view.describe()}, yet the campaign's own settings "
                   + ("gave no trigger" if not triggered else "did not show them as pulses")
                   + f" ({cfg.volts_per_div:g} V/div, trigger {volts_text(level)})",
                   "compare bench.scope's settings with what the first look saw", **evidence)
