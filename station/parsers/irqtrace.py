"""The kernel's interrupt tracepoints on one CPU, as tracefs prints them (`per_cpu/cpuN/trace`
of an instance with trace_clock mono): every hard interrupt, softirq and NMI as an interval,
and every context switch. The interruption detector's analysis uses them to know how much of
a gap the interrupts that ran in it account for.

A line looks like
    `          <idle>-0       [001] d.h1.   123.456789: local_timer_entry: vector=236`
(the flags column and a `(tgid)` column come and go with trace options). Lines this parser
does not know are skipped: tracefs output is the kernel's, and a kernel may add events."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from station.parsers.tracefs import LINE, LOST, printed_ns

# x86 vector tracepoints (irq_vectors:<name>_entry/_exit) -> their /proc/interrupts row
VECTOR_LABELS = {
    "local_timer": "LOC",
    "reschedule": "RES",
    "call_function": "CAL",
    "call_function_single": "CAL",
    "irq_work": "IWI",
    "thermal_apic": "TRM",
    "threshold_apic": "THR",
    "deferred_error_apic": "DFR",
    "error_apic": "ERR",
    "spurious_apic": "SPU",
    "x86_platform_ipi": "PLT",
    "reboot": "RES",
}

_ARG = re.compile(r"(\w+)=(\S+)")
_NMI = re.compile(r"delta_ns:\s*(\d+)")
_SWITCH = re.compile(r"prev_comm=(?P<prev>.*?) prev_pid=(?P<prev_pid>-?\d+) .*==> "
                     r"next_comm=(?P<next>.*?) "
                     r"next_pid=(?P<next_pid>-?\d+)")


@dataclass(frozen=True)
class Interval:
    """Something that ran instead of the task: a hard IRQ handler, a vector, a softirq, an NMI."""

    start_ns: int
    end_ns: int
    label: str  # the /proc/interrupts row ("LOC", "11") or "softirq TIMER", "NMI"
    name: str = ""  # the handler's name for device IRQs ("edu", "eth0")


@dataclass(frozen=True)
class Switch:
    ts_ns: int
    prev_comm: str
    prev_pid: int
    next_comm: str
    next_pid: int


@dataclass
class IrqTrace:
    intervals: list[Interval] = field(default_factory=list)  # sorted by start
    switches: list[Switch] = field(default_factory=list)
    lost_events: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    unpaired: int = 0  # entries with no exit (cut by the trace's end) or exits with no entry


def parse(text: str) -> IrqTrace:
    """Intervals and switches from a tracefs per-CPU `trace` file."""
    trace = IrqTrace()
    # (category, key) -> stack of (start, name)
    open_: dict[tuple[str, str], list[tuple[int, str]]] = {}

    def begin(category: str, key: str, ts: int, name: str = "") -> None:
        open_.setdefault((category, key), []).append((ts, name))

    def end(category: str, key: str, label: str, ts: int) -> None:
        stack = open_.get((category, key))
        if not stack:
            trace.unpaired += 1
            return
        start, name = stack.pop()
        if ts >= start:
            trace.intervals.append(Interval(start, ts, label, name))

    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if lost := LOST.search(line):
            trace.lost_events += int(lost.group(1))
            continue
        m = LINE.match(line)
        if not m:
            continue
        ts, event, args = printed_ns(m["sec"], m["frac"]), m["event"], m["args"]
        trace.first_ns = ts if trace.first_ns is None else min(trace.first_ns, ts)
        trace.last_ns = ts if trace.last_ns is None else max(trace.last_ns, ts)
        values = dict(_ARG.findall(args))
        if event == "irq_handler_entry" and "irq" in values:
            begin("irq", values["irq"], ts, values.get("name", ""))
        elif event == "irq_handler_exit" and "irq" in values:
            end("irq", values["irq"], values["irq"], ts)
        elif event in ("softirq_entry", "softirq_exit") and "vec" in values:
            action = values.get("action", values["vec"]).rstrip("]")
            if event == "softirq_entry":
                begin("softirq", values["vec"], ts)
            else:
                end("softirq", values["vec"], f"softirq {action}", ts)
        elif event == "nmi_handler" and (d := _NMI.search(args)):
            trace.intervals.append(Interval(ts - int(d.group(1)), ts, "NMI", args.split(" ", 1)[0]))
        elif event == "sched_switch" and (s := _SWITCH.search(args)):
            trace.switches.append(Switch(ts, s["prev"], int(s["prev_pid"]), s["next"],
                                         int(s["next_pid"])))
        elif event.endswith("_entry") and event[: -len("_entry")] in VECTOR_LABELS:
            begin("vector", event[: -len("_entry")], ts)
        elif event.endswith("_exit") and event[: -len("_exit")] in VECTOR_LABELS:
            vector = event[: -len("_exit")]
            end("vector", vector, VECTOR_LABELS[vector], ts)
    trace.unpaired += sum(len(stack) for stack in open_.values())
    trace.intervals.sort(key=lambda i: (i.start_ns, i.end_ns))
    return trace


def stats_overrun(stats: str) -> int:
    """Events the ring buffer overwrote or dropped (per_cpu/cpuN/stats)."""
    total = 0
    for line in stats.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("overrun", "dropped events") and value.strip().isdigit():
            total += int(value.strip())
    return total
