"""What target_modules/tools/irqgap prints, parsed.

irqgap spins on one CPU and reports each moment the loop lost the CPU for longer than a threshold
(a *gap*), with what moved meanwhile: the thread's context switches, the SMI counter, and this
CPU's rows of /proc/interrupts and /proc/softirqs. Its output is text, one record per line,
fields separated by one space, every line starting with a keyword::

    irqgap 1                       magic and format version (first line)
    arch <machine>                 as uname -m names it (x86_64, aarch64); older outputs: none
    clock tsc|cntvct|monotonic     a raw counter (x86's TSC, arm64's generic timer), or the clock
    <counter>_hz <float>           a counter only (tsc_hz, cntvct_hz): calibrated before the loop
    cntfrq_hz <float>              cntvct only: the rate the timer's register claims
    cpu <n>
    threshold_ns <int>
    priority <int>                 0: SCHED_OTHER
    smi available | smi unavailable <reason to end of line>
    softirq <idx> <name>
    irq <idx> <label> [<description to end of line>]    also later, before the first gap using idx
    start <mono_ns>
    gap <end_mono_ns> <duration_ns> <ctxsw> <smi|-> <idx:delta,...|-> <idx:delta,...|->
    tick <mono_ns> <iterations> <gaps>
    blind <end_mono_ns> <duration_ns>   bookkeeping (after a gap, at a tick) that itself outlasted
    the
                                        threshold: the CPU was taken while the loop did not watch
    end <mono_ns> <iterations> <gaps> <blind_ns> <min_loop_ns> duration|signal
    <counter>_hz_end <float>       a counter only: calibrated again after the loop

Known lines are checked strictly: anything malformed raises :class:`IrqgapOutputError` naming
the line. Lines with other keywords are ignored (later versions may add some). The program may
be killed while writing: a last line without its newline is dropped and ``torn`` is set.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1
MAGIC = "irqgap"
END_REASONS = ("duration", "signal")

_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
COUNTERS = ("tsc", "cntvct")  # the raw counters irqgap reads (x86, arm64)
_RATES = tuple(f"{c}_hz{end}" for c in COUNTERS for end in ("", "_end"))
_HEADER_ONCE = ("arch", "clock", "cpu", "threshold_ns", "priority", "smi", "start", "end",
                "cntfrq_hz", *_RATES)


class IrqgapOutputError(ValueError):
    """irqgap output that cannot be read: the message names the line and what is wrong."""


@dataclass(frozen=True)
class Gap:
    """One moment the loop did not run. Deltas are since the previous snapshot: the one taken
    after the previous gap, or at the last tick, whichever came later."""

    end_ns: int  # CLOCK_MONOTONIC read right after the gap was seen
    duration_ns: int
    ctxsw: int
    smi: int | None  # None: SMI count unavailable
    irqs: dict[int, int]  # irq idx -> count delta (rows that moved)
    softirqs: dict[int, int]

    @property
    def start_ns(self) -> int:
        """CLOCK_MONOTONIC when the gap began (approximately: end_ns - duration_ns)."""
        return self.end_ns - self.duration_ns


@dataclass
class IrqgapOutput:
    """Everything one irqgap run printed."""

    version: int
    clock: str  # "tsc", "cntvct" or "monotonic"
    arch: str | None  # the loop's architecture (uname -m's word); None: an output before it said
    counter_hz: float | None  # the counter's rate calibrated before the loop (None: monotonic)
    counter_hz_end: float | None  # and after it
    cntfrq_hz: float | None  # arm64: the rate the generic timer's register claims
    cpu: int
    threshold_ns: int
    priority: int
    smi_available: bool
    smi_reason: str | None  # why not, when unavailable
    # idx -> (label, description)
    irq_lines: dict[int, tuple[str, str]] = field(default_factory=dict)
    softirq_names: dict[int, str] = field(default_factory=dict)
    start_ns: int | None = None
    gaps: list[Gap] = field(default_factory=list)
    ticks: list[tuple[int, int, int]] = field(default_factory=list)  # (mono_ns, iterations, gaps)
    # long bookkeeping: (end_mono_ns, duration_ns)
    blind: list[tuple[int, int]] = field(default_factory=list)
    end: dict[str, Any] | None = None  # mono_ns, iterations, gaps, blind_ns, min_loop_ns, reason
    torn: bool = False  # the last line was cut (no newline): dropped


class _Line:
    """One line being read: its number and text, for error messages."""

    def __init__(self, number: int, text: str) -> None:
        self.number = number
        self.text = text

    def error(self, what: str) -> IrqgapOutputError:
        shown = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        return IrqgapOutputError(f"irqgap output line {self.number}: {what}: {shown!r}")

    def fields(self, n: int) -> list[str]:
        parts = self.text.split(" ")
        if len(parts) != n:
            raise self.error(f"expected {n - 1} field(s) after {parts[0]!r}, got {len(parts) - 1}")
        return parts[1:]

    def integer(self, s: str, name: str) -> int:
        if not _INT.fullmatch(s):
            raise self.error(f"{name} is not a non-negative integer ({s!r})")
        return int(s)

    def hz(self, s: str, name: str) -> float:
        v = float(s) if _FLOAT.fullmatch(s) else math.nan
        if not (math.isfinite(v) and v > 0):
            raise self.error(f"{name} is not a positive number ({s!r})")
        return v

    def deltas(self, s: str, name: str, declared: dict[int, Any]) -> dict[int, int]:
        if s == "-":
            return {}
        out: dict[int, int] = {}
        for item in s.split(","):
            idx_s, sep, delta_s = item.partition(":")
            if not sep:
                raise self.error(f"{name}: {item!r} is not idx:delta")
            idx = self.integer(idx_s, f"{name} index")
            if idx not in declared:
                raise self.error(f"{name}: index {idx} was not declared")
            if idx in out:
                raise self.error(f"{name}: index {idx} twice")
            out[idx] = self.integer(delta_s, f"{name} delta")
        return out


def _magic(line: _Line) -> int:
    parts = line.text.split(" ")
    if parts[0] != MAGIC:
        raise line.error("not irqgap output (the first line must be 'irqgap <version>')")
    if len(parts) != 2 or not _INT.fullmatch(parts[1]):
        raise line.error("malformed magic line (want 'irqgap <version>')")
    version = int(parts[1])
    if version != FORMAT_VERSION:
        raise line.error(f"irqgap format version {version} is not supported (this parser reads "
                         f"{FORMAT_VERSION})")
    return version


def parse(text: str) -> IrqgapOutput:
    """Parse irqgap's stdout. Raises IrqgapOutputError on anything malformed."""
    lines = text.split("\n")
    torn = lines[-1] != ""
    lines.pop()  # the torn part, or the empty string after the last newline
    if not lines:
        raise IrqgapOutputError(
            "irqgap output is empty" + (" (cut before the first newline)" if torn else "")
        )

    version = _magic(_Line(1, lines[0]))
    seen: set[str] = set()
    h: dict[str, Any] = {"counter_hz": None, "counter_hz_end": None, "cntfrq_hz": None,
                         "smi_reason": None, "arch": None}
    irq_lines: dict[int, tuple[str, str]] = {}
    softirq_names: dict[int, str] = {}
    gaps: list[Gap] = []
    ticks: list[tuple[int, int, int]] = []
    blind_spans: list[tuple[int, int]] = []
    start_ns: int | None = None
    end: dict[str, Any] | None = None

    def missing_header() -> str:
        missing = [k for k in ("clock", "cpu", "threshold_ns", "priority", "smi") if k not in seen]
        if not missing and h["clock"] in COUNTERS and f"{h['clock']}_hz" not in seen:
            missing = [f"{h['clock']}_hz"]
        return ", ".join(missing)

    for number, text in enumerate(lines[1:], start=2):
        line = _Line(number, text)
        kw = text.split(" ", 1)[0]
        if not kw:
            raise line.error("no keyword at the start of the line")
        if kw in _HEADER_ONCE:
            if kw in seen:
                raise line.error(f"second {kw!r} line")
            seen.add(kw)
        if kw in ("gap", "tick", "end") and start_ns is None:
            raise line.error(f"{kw!r} before 'start'")

        if kw == MAGIC:
            raise line.error("second magic line")
        elif kw == "arch":
            (arch,) = line.fields(2)
            if not re.fullmatch(r"[A-Za-z0-9_]{1,32}", arch):
                raise line.error("arch is not a machine name")
            h["arch"] = arch
        elif kw == "clock":
            (clock,) = line.fields(2)
            if clock not in (*COUNTERS, "monotonic"):
                raise line.error("clock is not tsc, cntvct or monotonic")
            h["clock"] = clock
        elif kw in _RATES:
            (hz,) = line.fields(2)
            if not kw.startswith(f"{h.get('clock')}_"):
                raise line.error(f"{kw} but the clock is {h.get('clock', 'not said yet')}")
            h["counter_hz_end" if kw.endswith("_end") else "counter_hz"] = line.hz(hz, kw)
        elif kw == "cntfrq_hz":
            (hz,) = line.fields(2)
            h[kw] = line.hz(hz, kw)
        elif kw in ("cpu", "threshold_ns", "priority"):
            (v,) = line.fields(2)
            h[kw] = line.integer(v, kw)
        elif kw == "smi":
            rest = text[4:] if text.startswith("smi ") else ""
            if rest == "available":
                h["smi_available"], h["smi_reason"] = True, None
            elif rest == "unavailable" or rest.startswith("unavailable "):
                h["smi_available"], h["smi_reason"] = False, rest[len("unavailable ") :]
            else:
                raise line.error("want 'smi available' or 'smi unavailable <reason>'")
        elif kw == "softirq":
            idx_s, name = line.fields(3)
            idx = line.integer(idx_s, "softirq index")
            if idx in softirq_names:
                raise line.error(f"softirq index {idx} declared twice")
            if not name:
                raise line.error("softirq without a name")
            softirq_names[idx] = name
        elif kw == "irq":
            parts = text.split(" ", 3)
            if len(parts) < 3 or not parts[2]:
                raise line.error("want 'irq <idx> <label> [<description>]'")
            idx = line.integer(parts[1], "irq index")
            if idx in irq_lines:
                raise line.error(f"irq index {idx} declared twice")
            irq_lines[idx] = (parts[2], parts[3] if len(parts) == 4 else "")
        elif kw == "start":
            if missing := missing_header():
                raise line.error(f"start before a complete header (no {missing} line)")
            (v,) = line.fields(2)
            start_ns = line.integer(v, "start")
        elif kw == "gap":
            end_s, dur_s, cs_s, smi_s, irqs_s, soft_s = line.fields(7)
            if smi_s == "-":
                smi = None  # unavailable, or this read failed
            elif h["smi_available"]:
                smi = line.integer(smi_s, "smi")
            else:
                raise line.error("an SMI count although smi is unavailable")
            gaps.append(
                Gap(
                    end_ns=line.integer(end_s, "end_mono_ns"),
                    duration_ns=line.integer(dur_s, "duration_ns"),
                    ctxsw=line.integer(cs_s, "ctxsw"),
                    smi=smi,
                    irqs=line.deltas(irqs_s, "irqs", irq_lines),
                    softirqs=line.deltas(soft_s, "softirqs", softirq_names),
                )
            )
        elif kw == "tick":
            m, it, g = line.fields(4)
            ticks.append((line.integer(m, "mono_ns"), line.integer(it, "iterations"),
                          line.integer(g, "gaps")))
        elif kw == "blind":
            m, d = line.fields(3)
            blind_spans.append((line.integer(m, "end_mono_ns"), line.integer(d, "duration_ns")))
        elif kw == "end":
            m, it, g, blind, mn, reason = line.fields(7)
            if reason not in END_REASONS:
                raise line.error(f"end reason is not one of {', '.join(END_REASONS)}")
            end = {
                "mono_ns": line.integer(m, "mono_ns"),
                "iterations": line.integer(it, "iterations"),
                "gaps": line.integer(g, "gaps"),
                "blind_ns": line.integer(blind, "blind_ns"),
                "min_loop_ns": line.integer(mn, "min_loop_ns"),
                "reason": reason,
            }
        # any other keyword: a later version's, ignored

    if start_ns is None and (missing := missing_header()):
        cut = " (the output was cut)" if torn else ""
        raise IrqgapOutputError(f"irqgap output ends before its header is complete: no {missing} "
                                f"line{cut}")
    return IrqgapOutput(
        version=version,
        clock=h["clock"],
        arch=h["arch"],
        counter_hz=h["counter_hz"],
        counter_hz_end=h["counter_hz_end"],
        cntfrq_hz=h["cntfrq_hz"],
        cpu=h["cpu"],
        threshold_ns=h["threshold_ns"],
        priority=h["priority"],
        smi_available=h["smi_available"],
        smi_reason=h["smi_reason"],
        irq_lines=irq_lines,
        softirq_names=softirq_names,
        start_ns=start_ns,
        gaps=gaps,
        ticks=ticks,
        blind=blind_spans,
        end=end,
        torn=torn,
    )
