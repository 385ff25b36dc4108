"""The gpio kind's part of `station bench check` (station/bench/check.py): the generator and the
scope answer and take the campaign's settings; then, for each responder the campaign's cases use,
the responder is started and the generator's output switched on for one acquisition taken as a
run takes it: stimulus edges on the stimulus channel, and responses to them on the response
channel. When that acquisition shows none, a first look at every channel (trigger on AUTO,
station/bench/first_look.py) says why: no stimulus anywhere (the generator's output reaches
nothing), the stimulus probe on another channel, a ×10 probe with the channel at ×1, a trigger
outside the stimulus, the response probe on another channel, or no response anywhere while the
scope sees the stimulus (the generator's output does not reach the board's input line, or the
responder does not drive its output). The generator's output is off, the responder stopped and
its module unloaded on every exit path."""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import replace
from typing import Any

import numpy as np

from instruments.delays import Delays
from instruments.scope import ScopeError, ScopeTimeout
from station.bench.bench import Bench, BenchError
from station.bench.check import Checklist
from station.bench.first_look import (
    CONFIGURED_WAIT_S,
    PULSES_A_RECORD,
    LineView,
    duration_text,
    short_record,
    take_first_look,
    trigger_outside,
    volts_text,
)
from station.bench.scope_session import delays_of, instrument_settings
from station.kinds.gpio.responder import Responder
from station.kinds.gpio.settings import GpioCase, GpioSettings
from station.target import TargetError

RESPONDER_LIMIT_S = 600  # the responder's own time limit on the target (a station that died)
SETTLE_S = 0.3  # after the responder starts: a user-space one requests its lines first
X10_TOLERANCE = 0.25  # a swing this close to a tenth of the generator's is a ×10 probe at ×1


class _Text:
    """The responder's output, kept for the finding that needs it."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str, flush: bool = False) -> None:
        self.parts.append(text)

    def tail(self, chars: int = 400) -> str:
        return "".join(self.parts).strip()[-chars:]


async def check(bench: Bench, checklist: Checklist) -> None:
    gpio: GpioSettings | None = getattr(bench.campaign, "gpio", None)
    assert bench.target is not None and bench.wiring is not None and gpio is not None
    await _open_instruments(bench, checklist)
    try:
        await bench.target.cleanup(within_s=30)  # what a crashed station left
        for name, case in _one_case_per_responder(gpio).items():
            await _check_case(bench, gpio, name, case, checklist)
    finally:
        with contextlib.suppress(TargetError):
            await bench.target.cleanup(within_s=30)


def _one_case_per_responder(gpio: GpioSettings) -> dict[str, GpioCase]:
    """The first case of each responder (the others differ in governor or priority only, which
    a check does not exercise)."""
    first: dict[str, tuple[str, GpioCase]] = {}
    for name, case in gpio.cases.items():
        first.setdefault(case.responder, (name, case))
    return dict(first.values())


async def _open_instruments(bench: Bench, checklist: Checklist) -> None:
    assert bench.wiring is not None
    cfg = bench.campaign.bench
    if bench.uses_generator:
        try:
            await bench.open_generator(bench.wiring.generator)
        except BenchError as exc:
            checklist.fail("generator", str(exc),
                           f"check that the generator is on and reachable as "
                           f"{bench.wiring.generator} (bench.generator.resource) and speaks "
                           f"{cfg.generator.dialect}; the message names the command it refused")
        applied = bench.generator.applied
        checklist.ok("generator", f"{bench.generator.idn}: {applied.frequency_hz:g} Hz pulses "
                     f"{duration_text(applied.width_s)} wide, {volts_text(applied.low_v)} "
                     f"to {volts_text(applied.high_v)}, on channel {cfg.generator.channel}",
                     carrier=applied.carrier)
    else:
        checklist.ok("generator", "no generator on this bench (bench.generator.kind: none): the "
                     "stimulus is the bench's own, and must be running")
    try:
        await bench.open_scope(bench.wiring.scope)
    except BenchError as exc:
        checklist.fail("scope", str(exc),
                       f"check that the scope is on and reachable as {bench.wiring.scope} "
                       f"(bench.scope.resource) and speaks {cfg.scope.dialect}; a refused "
                       "setting is named with the scope's own words")
    checklist.ok("scope", bench.scope.idn, resource=bench.wiring.scope)


async def _check_case(bench: Bench, gpio: GpioSettings, name: str, case: GpioCase,
                      checklist: Checklist) -> None:
    assert bench.target is not None
    loop = asyncio.get_running_loop()
    conn = await bench.target.live_connection()
    log = _Text()
    responder = Responder(bench.target, gpio, case, RESPONDER_LIMIT_S, log)
    generator_on = False
    try:
        try:
            await responder.start(conn)
        except TargetError as exc:
            checklist.fail("responder", f"case {name}: the {case.responder} responder did not "
                           f"start: {exc}", _responder_fix(gpio, case))
        if bench.generator is not None:
            generator_on = True
            await loop.run_in_executor(None, bench.generator.output, True)
        await asyncio.sleep(SETTLE_S)
        delays = await _configured_acquisition(bench, gpio, case, checklist)
        if responder.exit_status is not None:
            checklist.fail("responder", f"case {name}: the {case.responder} responder exited "
                           f"with status {responder.exit_status}: {log.tail() or '(no message)'}",
                           _responder_fix(gpio, case))
        if delays is not None and len(delays.answered):
            checklist.ok("response", _answered(name, case, delays), case=name,
                         stimuli=len(delays), censored=delays.censored,
                         answered=int(len(delays.answered)),
                         median_delay_s=float(np.median(delays.answered)))
            return
        try:
            views = await loop.run_in_executor(None, take_first_look, bench.scope.scope,
                                               bench.campaign.bench.scope, gpio.period)
        except ScopeError as exc:
            checklist.fail("scope", f"the first look (all channels, trigger on AUTO) failed: "
                           f"{exc}", "the message names the command and the scope's reply")
        scope = bench.campaign.bench.scope
        diagnose(views, scope.channel, scope.trigger_level, gpio, name, case, delays, log.tail(),
                 checklist)
    finally:
        if generator_on and bench.generator is not None:
            with contextlib.suppress(Exception):
                await loop.run_in_executor(None, bench.generator.output, False)
        with contextlib.suppress(TargetError):
            await responder.stop(await bench.target.live_connection())


async def _configured_acquisition(bench: Bench, gpio: GpioSettings, case: GpioCase,
                                  checklist: Checklist) -> Delays | None:
    """One acquisition of both channels with the campaign's settings, paired as a run pairs it,
    its trigger wait shortened (a check that waits a whole timeout for a trigger that never comes
    tells no more); None when the scope never triggered. On the session's scope itself: a run's
    reconnect-and-retry would take a missing trigger for a lost session."""
    cfg = bench.campaign.bench.scope
    session = bench.scope
    wait = max(CONFIGURED_WAIT_S, 10 * cfg.time_per_div + 2 * gpio.period + 0.5)
    slope = "fall" if gpio.stimulus_edge == "fall" else "rise"

    def acquire() -> Delays:
        scope = session.scope
        applied = scope.configure(replace(
            instrument_settings(cfg, (gpio.response_channel,), slope),
            acquire_timeout_s=min(cfg.timeout, wait)))
        if 10 * applied.time_per_div < PULSES_A_RECORD * gpio.period:
            # raises StopCheck
            short_record(checklist, cfg, applied.time_per_div, gpio.period, segmented=False)
        return delays_of(scope.acquire_channels(), cfg.channel, gpio.response_channel,
                         gpio.window_s(), gpio.stimulus_edge, gpio.response_edge_for(case),
                         case.mode == "echo", session.threshold_v)

    try:
        return await asyncio.get_running_loop().run_in_executor(None, acquire)
    except ScopeTimeout:
        return None
    except ScopeError as exc:
        checklist.fail("scope", str(exc), "the message names the command and the scope's reply")


def _answered(name: str, case: GpioCase, delays: Delays) -> str:
    return (f"case {name} ({case.responder} responder): {len(delays)} stimulus edges in one "
            f"acquisition, {len(delays.answered)} answered, median delay "
            f"{duration_text(float(np.median(delays.answered)))}")


def _responder_fix(gpio: GpioSettings, case: GpioCase) -> str:
    lines = gpio.lines
    if case.responder == "kernel":
        return (f"dmesg on the target names the parameter: gpio.lines (chip {lines.chip!r}, "
                f"lines {lines.input} and {lines.output}; `gpioinfo` lists them) and that "
                "gpio_responder.ko is built for the running kernel")
    return (f"the responder's words are above: gpio.lines (chip {lines.chip!r}, lines "
            f"{lines.input} and {lines.output}; `gpioinfo` lists them), libgpiod on the target "
            "(the chardev responder), or another program holding the lines")


def leads(first: LineView, second: LineView) -> bool:
    """Whether `first`'s pulses come before `second`'s: the shortest time from one of its
    leading edges to the next of the other's is shorter than the reverse (a response follows
    its stimulus within the window, the next stimulus only a period later; the shortest, not
    the median: a toggling response answers every other stimulus edge with a rise)."""
    def shortest(a: tuple[float, ...], b: tuple[float, ...]) -> float:
        a_, b_ = np.asarray(a), np.asarray(b)
        after = np.searchsorted(b_, a_, side="right")
        ok = after < len(b_)
        return float(np.min(b_[after[ok]] - a_[ok])) if ok.any() else math.inf

    return shortest(first.starts_s, second.starts_s) < shortest(second.starts_s, first.starts_s)


def diagnose(views: dict[int, LineView], stimulus: int, trigger_level: float,
             gpio: GpioSettings, name: str, case: GpioCase, delays: Delays | None,
             responder_log: str, checklist: Checklist) -> None:
    """The first cause the first look shows, as a failed finding (raises StopCheck)."""
    response = gpio.response_channel
    evidence: dict[str, Any] = {f"ch{c}": v.describe() for c, v in views.items()}
    seen = {c: v for c, v in views.items() if v.has_pulses}
    lines = f"{gpio.lines.chip} line {gpio.lines.input}"
    if not seen:
        checklist.fail("pulses", "no channel sees the generator's pulses while its output is on: "
                       "every channel shows noise only",
                       f"connect the generator's output (bench.generator.channel) to the board's "
                       f"input ({lines}) and the stimulus probe to that line on CH{stimulus}; "
                       "check the generator's output and its load setting", **evidence)
    stim = views[stimulus]
    if not stim.has_pulses:
        others = [v for c, v in seen.items() if c != response]
        if others:
            found = others[0] if len(others) == 1 or response not in seen else next(
                (v for v in others if leads(v, seen[response])), others[0])
            checklist.fail("channel", f"CH{stimulus} (the stimulus) sees no pulses; "
                           f"{found.describe()}: the stimulus probe is on CH{found.channel}",
                           f"move the stimulus probe to CH{stimulus}, or set bench.scope.channel: "
                           f"{found.channel}", found_on=found.channel, **evidence)
        checklist.fail("channel", f"CH{stimulus} (the stimulus) sees no pulses; only "
                       f"{seen[response].describe()} (the response channel)",
                       f"connect the stimulus probe to the board's input ({lines}) on "
                       f"CH{stimulus}", **evidence)
    amplitude = gpio.high - gpio.low
    if abs(10 * stim.swing_v - amplitude) <= X10_TOLERANCE * amplitude:
        checklist.fail("probe", f"the stimulus on CH{stimulus} swings "
                       f"{volts_text(stim.swing_v)}, a tenth of the generator's "
                       f"{volts_text(amplitude)}: a ×10 probe with the channel set to ×1",
                       f"set CH{stimulus}'s (and CH{response}'s) probe factor to ×10 on the "
                       "scope (the station leaves it as it finds it), or use ×1 probes",
                       swing_v=stim.swing_v, generator_v=amplitude, **evidence)
    if not stim.low_v < trigger_level < stim.high_v:
        trigger_outside(checklist, f"the stimulus on CH{stimulus}", stim, trigger_level,
                        evidence)
    if response not in seen:
        moved = [v for c, v in seen.items() if c not in (stimulus, response) and leads(stim, v)]
        if moved:
            checklist.fail("response_channel", f"CH{response} (the response) sees no pulses; "
                           f"{moved[0].describe()}, after the stimulus: the response probe is "
                           f"on CH{moved[0].channel}",
                           f"move the response probe to CH{response}, or set "
                           f"gpio.response_channel: {moved[0].channel}",
                           found_on=moved[0].channel, **evidence)
        said = f"; its output: {responder_log}" if responder_log else ""
        checklist.fail("response", f"case {name}: the stimulus reaches CH{stimulus} "
                       f"({stim.describe()}) but nothing answers it on any channel{said}",
                       f"check that the generator's output reaches the board's input ({lines}: "
                       "the scope sees the generator, not necessarily the pin), that the "
                       f"responder drives {gpio.lines.chip} line {gpio.lines.output} and that the "
                       f"response probe is on that line on CH{response}", **evidence)
    checklist.fail("response", f"case {name}: {stim.describe()}; {seen[response].describe()}; "
                   "yet the campaign's acquisition "
                   + ("never triggered" if delays is None else
                      f"paired none of its {len(delays)} stimulus edges with a response"),
                   "compare gpio.window (how long a response may take), gpio.stimulus_edge and "
                   "bench.scope's threshold and trigger with what the first look saw",
                   **evidence)
