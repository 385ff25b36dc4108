"""The interruption detector's gaps attributed (seed 003): each gap tied to what took the CPU away,
by how much of it the interrupts that ran in it account for, never by a count alone: a timer tick
that was due while firmware held the CPU fires right after, and is counted in that gap. With the
kernel's tracepoints (the run's irqtrace.txt) the time each handler ran inside the gap is known;
without them, the counted interrupts explain a gap only up to about their lines' usual costs. A
line's usual cost never comes from the gaps being judged (where stalls outnumber a line's own gaps,
their median is a stall, and every stall would pass for that line): it comes from the handlers'
durations in a trace (the run's own, or a calibration phase's before the loads), else from a quiet
calibration phase's gaps; a line without one explains nothing.

Causes here: `smi` (the CPU's SMI counter moved), `interrupt` (the handlers explain at least half
of the gap), `preempted` (another task ran: the loop's context switches moved), `unexplained`
(neither: firmware, an SMI the counter does not see, a hypervisor). `throttled` is given afterwards
(throttling.py)."""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from station.parsers import irqgap, irqtrace
from station.parsers.irqgap import Gap, IrqgapOutput, IrqgapOutputError
from station.parsers.irqtrace import IrqTrace

CAUSES = ("interrupt", "throttled", "preempted", "smi", "unexplained")
IDLE = "idle"  # the trace's swapper/N (pid 0)
EXPLAINED_SHARE = 0.5  # the handlers must account for this much of a gap
TRACE_MARGIN_NS = 5_000  # the gap's end is read just after it; trace stamps are whole µs
# handler runs (or quiet single-line gaps) needed before a line's usual cost is trusted
COST_SAMPLES = 3
# a traced handler and the softirqs that follow it are one stretch of interrupt work when the next
# starts within this of the last one's end (trace stamps are whole µs)
BURST_JOIN_NS = 5_000
COST_BASES = ("trace", "calibration trace", "calibration counts")  # in order of preference
COST_FACTOR = 2.0  # a gap up to this many times its interrupts' usual cost is theirs
USUAL_SPREAD = 1.25  # "about as long": within a factor of this
USUAL_MIN = 3  # a source must have run about this long this many times for the length to be usual


@dataclass
class Attributed:
    start_ns: int
    end_ns: int
    duration_ns: int
    cause: str
    # the line ("LOC", "24 edu", "softirq TIMER"), "other tasks", "SMI×n", or "" when unexplained
    source: str
    counted: str  # the lines whose counts moved, "LOC×1, 24×1"
    traced_ns: int | None  # handler time inside the gap (None: no trace for it)
    ctxsw: int
    smi: int | None
    basis: str  # "trace" or "counts"
    tasks: str = ""  # preempted: the tasks the trace shows running in the gap

    def row(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Calibration:
    """The calibration phase (interruptions.calibration): the detector on the same CPU before the
    loads, traced where tracefs was."""

    gaps: IrqgapOutput | None
    trace: IrqTrace | None


@dataclass(frozen=True)
class LineCost:
    """A line's usual cost and the evidence it comes from (one of COST_BASES)."""

    ns: float
    basis: str
    samples: int


@dataclass
class RunOutputs:
    gaps: IrqgapOutput
    trace: IrqTrace | None
    trace_overrun: int = 0
    problems: list[str] = field(default_factory=list)
    calibration: Calibration | None = None


def read_outputs(run_dir: Path) -> RunOutputs:
    out = irqgap.parse((run_dir / "irqgap.out").read_text(errors="replace"))
    problems = []
    if out.torn:
        problems.append("the detector's output ends mid-line (killed?): the last line was dropped")
    trace = None
    overrun = 0
    path = run_dir / "irqtrace.txt"
    if path.is_file() and path.stat().st_size:
        trace = irqtrace.parse(path.read_text(errors="replace"))
        stats = run_dir / "irqtrace.stats"
        if stats.is_file():
            overrun = irqtrace.stats_overrun(stats.read_text(errors="replace"))
        if overrun or trace.lost_events:
            problems.append(f"the trace lost {overrun + trace.lost_events} events: gaps in those "
                            "stretches are judged by counts")
    return RunOutputs(out, trace, overrun, problems, _read_calibration(run_dir, problems))


def _read_calibration(run_dir: Path, problems: list[str]) -> Calibration | None:
    gaps_path, trace_path = run_dir / "calibration_irqgap.out", run_dir / "calibration_irqtrace.txt"
    gaps = trace = None
    if gaps_path.is_file() and gaps_path.stat().st_size:
        try:
            gaps = irqgap.parse(gaps_path.read_text(errors="replace"))
        except IrqgapOutputError as exc:  # the measured run stands; its costs lose this evidence
            problems.append(f"the calibration's output cannot be read ({exc}): no costs from it")
    if trace_path.is_file() and trace_path.stat().st_size:
        trace = irqtrace.parse(trace_path.read_text(errors="replace"))
    return Calibration(gaps, trace) if gaps is not None or trace is not None else None


def line_label(out: IrqgapOutput, idx: int) -> str:
    """A counted line as the report names it: "LOC", "24 eth0" (the device ends the description)."""
    label, desc = out.irq_lines.get(idx, (str(idx), ""))
    if label.isdigit() and desc:
        return f"{label} {desc.split()[-1]}"  # the device name ends the description
    return label


def _counted(out: IrqgapOutput, gap: Gap) -> str:
    parts = [f"{line_label(out, i)}×{n}" for i, n in sorted(gap.irqs.items(),
                                                            key=lambda kv: -kv[1]) if n > 0]
    parts += [f"softirq {out.softirq_names.get(i, i)}×{n}"
              for i, n in gap.softirqs.items() if n > 0]
    return ", ".join(parts)


def _alone_lengths(out: IrqgapOutput) -> dict[str, list[int]]:
    """Per line label, the gaps in which that line alone moved, by one (a quiet phase's)."""
    alone: dict[str, list[int]] = {}
    for g in out.gaps:
        moved = {i: n for i, n in g.irqs.items() if n > 0}
        if len(moved) == 1 and next(iter(moved.values())) == 1 and g.ctxsw == 0 and not g.smi:
            alone.setdefault(out.irq_lines.get(next(iter(moved)), (str(next(iter(moved))), ""))[0],
                             []).append(
                g.duration_ns)
    return alone


def _burst_lengths(trace: IrqTrace) -> dict[str, list[int]]:
    """Per line label, how long the CPU did interrupt work for one run of that line's handler:
    the handler and the softirqs that followed it (the time a gap it caused would last), over
    the stretches of interrupt work in which that line's handler alone ran."""
    lengths: dict[str, list[int]] = {}
    start = end = None
    lines: set[str] = set()
    for iv in sorted(trace.intervals, key=lambda i: i.start_ns):
        if end is not None and iv.start_ns > end + BURST_JOIN_NS:
            if len(lines) == 1:
                lengths.setdefault(next(iter(lines)), []).append(end - start)
            start, end, lines = None, None, set()
        start = iv.start_ns if start is None else start
        end = iv.end_ns if end is None else max(end, iv.end_ns)
        if not iv.label.startswith("softirq"):
            lines.add(iv.label)
    if end is not None and len(lines) == 1:
        lengths.setdefault(next(iter(lines)), []).append(end - start)
    return lengths


def line_costs(run: RunOutputs) -> dict[int, LineCost]:
    """Each counted line's usual cost (by the run's line index), from evidence independent of the
    gaps being judged, in order: the handlers' durations in the run's own trace, in the calibration
    phase's trace, the calibration phase's gaps in which that line alone moved once (a quiet phase:
    no loads; a stall that persists without them passes into it). A line with fewer than
    COST_SAMPLES of them has no cost."""
    evidence: list[tuple[str, dict[str, list[int]]]] = []
    if run.trace is not None:
        evidence.append(("trace", _burst_lengths(run.trace)))
    cal = run.calibration
    if cal is not None and cal.trace is not None:
        evidence.append(("calibration trace", _burst_lengths(cal.trace)))
    if cal is not None and cal.gaps is not None:
        evidence.append(("calibration counts", _alone_lengths(cal.gaps)))
    costs = {}
    for idx, (label, _) in run.gaps.irq_lines.items():
        for basis, lengths in evidence:
            if len(found := lengths.get(label, [])) >= COST_SAMPLES:
                costs[idx] = LineCost(float(statistics.median(found)), basis, len(found))
                break
    return costs


class _TraceIndex:
    """The trace's intervals: interrupt handlers, each credited with at most its usual length
    (a tick handler that "ran" 80 ms was itself stretched by time the OS did not see: firmware,
    a hypervisor taking the CPU while it ran), and the runs of other tasks on the CPU, credited
    in full (a task may run long; the OS accounted that time to it)."""

    def __init__(self, trace: IrqTrace, own_pid: int | None) -> None:
        self.trace = trace
        self.own_pid = own_pid
        spans = [(i.start_ns, i.end_ns, _key(i), "irq") for i in trace.intervals]
        spans += [(s, e, f"task {comm}", "task") for s, e, comm in _task_runs(trace, own_pid)]
        by_key: dict[str, list[int]] = {}
        for s, e, key, kind in spans:
            if kind == "irq":
                by_key.setdefault(key, []).append(e - s)
        self.lengths = {k: sorted(v) for k, v in by_key.items()}
        self.spans = sorted(spans)
        self.starts = [sp[0] for sp in self.spans]
        self.longest = max((e - s for s, e, _, _ in spans), default=0)
        self.switch_ts = [s.ts_ns for s in trace.switches]

    def usual(self, key: str, length: int) -> int:
        """length if that handler often runs about this long, else its median length."""
        lengths = self.lengths[key]
        similar = (bisect.bisect_right(lengths, length * USUAL_SPREAD)
                   - bisect.bisect_left(lengths, length / USUAL_SPREAD))
        return length if similar >= USUAL_MIN else lengths[len(lengths) // 2]

    def covers(self, start: int, end: int) -> bool:
        t = self.trace
        return (
            t.first_ns is not None
            and t.last_ns is not None
            and t.first_ns <= start
            and end <= t.last_ns
        )

    def inside(self, start: int, end: int) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """Within [start, end]: (the credited time by kind, "irq" and "task", as unions; the
        credited time per source; the handlers overlapping it that ran far longer than usual)."""
        lo = bisect.bisect_left(self.starts, start - self.longest)
        hi = bisect.bisect_right(self.starts, end)
        per: dict[str, int] = {}
        spans: dict[str, list[tuple[int, int]]] = {"irq": [], "task": []}
        stretched = []
        for s0, e0, key, kind in self.spans[lo:hi]:
            if e0 <= start:  # over before the gap began
                continue
            credit = self.usual(key, e0 - s0) if kind == "irq" else e0 - s0
            if credit < e0 - s0:
                stretched.append(key)
            s, e = max(s0, start), min(s0 + credit, end)
            if e > s:
                per[key] = per.get(key, 0) + (e - s)
                spans[kind].append((s, e))
        return {kind: _union(v) for kind, v in spans.items()}, per, list(dict.fromkeys(stretched))

    def switched_out(self, start: int, end: int) -> bool:
        """The detector was switched out in [start, end]: blocked, stopped, throttled, preempted
        (the switch back to it is not always traced, so its leaving is what counts)."""
        lo = bisect.bisect_left(self.switch_ts, start)
        hi = bisect.bisect_right(self.switch_ts, end)
        return any(s.prev_pid == self.own_pid for s in self.trace.switches[lo:hi])

    def tasks(self, start: int, end: int) -> list[str]:
        lo = bisect.bisect_left(self.switch_ts, start)
        hi = bisect.bisect_right(self.switch_ts, end)
        names = [IDLE if s.next_pid == 0 else s.next_comm for s in self.trace.switches[lo:hi]
                 if s.next_pid != self.own_pid]
        return list(dict.fromkeys(names))


def _key(iv: irqtrace.Interval) -> str:
    return f"{iv.label} {iv.name}" if iv.name and iv.label.isdigit() else iv.label


def _union(spans: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for s, e in sorted(spans):
        s = s if reach is None else max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total


def _task_runs(trace: IrqTrace, own_pid: int | None) -> list[tuple[int, int, str]]:
    """(start, end, comm) of every stretch another task (not the detector, not idle) had the
    CPU, from one switch to the next."""
    runs = []
    for a, b in zip(trace.switches, trace.switches[1:], strict=False):
        if a.next_pid not in (own_pid, 0) and b.ts_ns >= a.ts_ns:
            runs.append((a.ts_ns, b.ts_ns, a.next_comm))
    return runs


def _spinner_pid(trace: IrqTrace) -> int | None:
    """The detector's pid: the task the trace switches to most (it owns the CPU)."""
    counts: dict[int, int] = {}
    for s in trace.switches:
        if s.next_comm.startswith("irqgap"):
            counts[s.next_pid] = counts.get(s.next_pid, 0) + 1
    return max(counts, key=lambda p: counts[p]) if counts else None


def _by_counts(out: IrqgapOutput, g: Gap, costs: dict[int, LineCost]) -> str | None:
    """The line that explains the gap by its usual cost, or None. A gap's counts cover the time
    since the previous gap or tick, not the gap alone: each line that moved is assumed to have
    fired once inside it, and a line without a usual cost explains nothing."""
    moved = [i for i, n in g.irqs.items() if n > 0 and i in costs]
    if not moved:
        return None
    if g.duration_ns > COST_FACTOR * sum(costs[i].ns for i in moved) + out.threshold_ns:
        return None
    return line_label(out, max(moved, key=lambda i: costs[i].ns))


def uncosted(run: RunOutputs, gaps: list[Attributed], costs: dict[int, LineCost]) -> int:
    """Gaps judged by counts, left unexplained, in which a line without a usual cost moved: the
    counts alone could not weigh them. `gaps`: attribute's, one per detector gap, in its order."""
    return sum(1 for g, a in zip(run.gaps.gaps, gaps,
                                 strict=True) if a.basis == "counts" and a.cause == "unexplained"
               and any(n > 0 and i not in costs for i, n in g.irqs.items()))


def attribute(run: RunOutputs, costs: dict[int, LineCost] | None = None) -> list[Attributed]:
    out = run.gaps
    costs = line_costs(run) if costs is None else costs
    own = _spinner_pid(run.trace) if run.trace is not None else None
    index = _TraceIndex(run.trace, own) if run.trace is not None and run.trace.intervals else None
    result = []
    for g in out.gaps:
        start, end, length = g.start_ns, g.end_ns, g.duration_ns
        cause, source, traced, basis, tasks = "unexplained", "", None, "counts", ""
        if index is not None and index.covers(start, end):
            basis = "trace"
            window = (start - TRACE_MARGIN_NS, end + TRACE_MARGIN_NS)
            kinds, per, stretched = index.inside(*window)
            traced = min(kinds["irq"], length)
            handlers = {k: v for k, v in per.items() if not k.startswith("task ")}
            if traced >= EXPLAINED_SHARE * length:
                cause, source = "interrupt", max(handlers, key=lambda k: handlers[k])
            elif index.switched_out(*window) or (g.ctxsw > 0 and kinds["irq"] + kinds["task"]
                                                 >= EXPLAINED_SHARE * length):
                cause, source, tasks = "preempted", "other tasks", ", ".join(index.tasks(*window))
            elif stretched:  # the CPU went away while this handler ran: say where it was
                source = "inside " + ", ".join(stretched)
        elif g.ctxsw > 0:  # counts cannot tell what ran; the loop was switched out
            cause, source = "preempted", "other tasks"
        elif (line := _by_counts(out, g, costs)) is not None:
            cause, source = "interrupt", line
        if g.smi and cause == "unexplained":  # the counter moved since the last gap or tick
            cause, source = "smi", f"SMI×{g.smi}"
        result.append(Attributed(start, end, length, cause, source, _counted(out, g), traced,
                                 g.ctxsw, g.smi,
                                 basis, tasks))
    return result


