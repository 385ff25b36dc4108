"""The interruption detector's analysis (seed 003): every gap the spin loop saw, tied to what
took the CPU away.

A gap is judged by how much of it the interrupts that ran in it account for, never by a count
alone: a timer tick that was due while firmware held the CPU fires right after, and is counted
in that gap. With the kernel's tracepoints (the run's irqtrace.txt) the time each handler ran
inside the gap is known; without them, the counted interrupts explain a gap only up to about
their lines' usual costs. A line's usual cost never comes from the gaps being judged (where
stalls outnumber a line's own gaps, their median is a stall, and every stall would pass for that
line): it comes from the handlers' durations in a trace (the run's own, or a calibration phase's
before the loads), else from a quiet calibration phase's gaps; a line without one explains
nothing.

Causes, in order: `smi` (the CPU's SMI counter moved), `interrupt` (the handlers explain at
least half of the gap), `throttled` (the kernel's guard against real-time starvation stopped the
SCHED_FIFO loop once a period: RT throttling, when the sched_rt_runtime_us budget ran out, the gap
ending on the sched_rt_period_us grid, where the budget is given back; or, from Linux 6.12, the fair
deadline server running a starved CFS task for its runtime of each period), `preempted` (another
task ran: the loop's context switches moved),
`unexplained` (neither: firmware, an SMI the counter does not see, a hypervisor)."""

from __future__ import annotations

import bisect
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from station.analysis.campaign import AnalysisInput, KindReport, section_report
from station.common.formatting import duration_us
from station.parsers import irqgap, irqtrace, rtla
from station.parsers.irqgap import Gap, IrqgapOutput, IrqgapOutputError
from station.parsers.irqtrace import IrqTrace
from station.target import rt_bandwidth, virtualization
from station.target.rt_bandwidth import Guard

CAUSES = ("interrupt", "throttled", "preempted", "smi", "unexplained")
IDLE = "idle"  # the trace's swapper/N (pid 0)
EXPLAINED_SHARE = 0.5  # the handlers must account for this much of a gap
TRACE_MARGIN_NS = 5_000  # the gap's end is read just after it; trace stamps are whole µs
COST_SAMPLES = 3  # handler runs (or quiet single-line gaps) needed before a line's usual cost is trusted
# a traced handler and the softirqs that follow it are one stretch of interrupt work when the next
# starts within this of the last one's end (trace stamps are whole µs)
BURST_JOIN_NS = 5_000
COST_BASES = ("trace", "calibration trace", "calibration counts")  # in order of preference
COST_FACTOR = 2.0  # a gap up to this many times its interrupts' usual cost is theirs
USUAL_SPREAD = 1.25  # "about as long": within a factor of this
USUAL_MIN = 3  # a source must have run about this long this many times for the length to be usual
CLUSTER_SPREAD = 1.1  # neighbours in a family of gaps differ by less than this factor
MAX_CLUSTERS = 5
PERIODIC_SHARE = 2 / 3  # this share of inter-arrivals within PERIOD_TOLERANCE of the median
PERIODIC_MIN = 5  # inter-arrivals: fewer cannot show a period
PERIOD_TOLERANCE = 0.1
MAX_MISSED = 2  # occurrences in a row a periodic source may go unseen and still count as periodic
# RT throttling: a throttled gap ends where the period timer fires and gives the budget back, late
# by the timer's own latency; it lasts at most the period's unbudgeted rest plus that lateness.
# Tolerance: this share of the rest (at least THROTTLE_GRID_MIN_NS); on a virtual machine, whose
# vCPU the host deschedules, the guest share (7 ms late seen on a loaded KVM guest, 10.2 ms on a
# QEMU/TCG guest: 1 stop in 8 runs of 5 s); two such gaps on one grid make the family
THROTTLE_GRID_SHARE = 0.2
THROTTLE_GRID_SHARE_GUEST = 0.4
THROTTLE_GRID_MIN_NS = 1_000_000
THROTTLE_MIN = 2
THROTTLE_MIN_SHARE = 0.5  # a throttled gap is at least this share of the rest
THROTTLE_SHORTENED_SHARE = 0.2  # … or this, when earlier stops in its period took the rest of it
THROTTLE_COVERAGE = 0.5  # of the run's whole periods (but the first) the family must cover


@dataclass(frozen=True)
class Throttling:
    """What stops the detector's never-sleeping SCHED_FIFO loop once a period: the kernel's guard
    (RT throttling, or the fair deadline server from 6.12: station/target/rt_bandwidth.py), with
    the analysis's tolerances."""

    guard: Guard
    cpu: int | None = None
    guest: bool = False  # the target is a virtual machine: its timers fire later

    @classmethod
    def rt(cls, runtime_us: int, period_us: int) -> Throttling:
        """RT throttling with sched_rt_runtime_us of sched_rt_period_us."""
        return cls(Guard("rt-throttling", (period_us - runtime_us) * 1000, period_us * 1000))

    @property
    def mechanism(self) -> str:
        return self.guard.mechanism

    @property
    def rest_ns(self) -> int:
        return self.guard.stop_ns

    @property
    def period_ns(self) -> int:
        return self.guard.period_ns

    @property
    def shortest_ns(self) -> float:
        """The shortest a throttled stop can be: the rest, less what higher-priority work took of it
        (the grid tolerance is about where it ends, not how long it is: a rest under 1 ms is a rest)."""
        return THROTTLE_MIN_SHARE * self.rest_ns

    @property
    def grid_ns(self) -> float:
        """How far from the period grid a throttled stop may end (the timer's lateness)."""
        share = THROTTLE_GRID_SHARE_GUEST if self.guest else THROTTLE_GRID_SHARE
        return max(share * self.rest_ns, THROTTLE_GRID_MIN_NS)

    @classmethod
    def from_facts(cls, facts: dict[str, str], cpu: int | None = None) -> Throttling | None:
        """From a run's spoiler facts: the harshest guard the kernel has; None when none stops the
        loop (throttling off, a fair server with runtime 0) or nothing is known."""
        found = rt_bandwidth.guards(facts)
        return cls(found[0], cpu, virtualization.judge(facts).virtual is True) if found else None

    def sentence(self) -> str:
        return self.guard.sentence(self.cpu)

    def advice(self) -> str:
        return self.guard.advice(self.cpu)


@dataclass
class Attributed:
    start_ns: int
    end_ns: int
    duration_ns: int
    cause: str
    source: str  # the line ("LOC", "24 edu", "softirq TIMER"), "other tasks", "SMI×n", or "" when unexplained
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
            problems.append(f"the trace lost {overrun + trace.lost_events} events: gaps in those stretches "
                            "are judged by counts")
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


def _label(out: IrqgapOutput, idx: int) -> str:
    label, desc = out.irq_lines.get(idx, (str(idx), ""))
    if label.isdigit() and desc:
        return f"{label} {desc.split()[-1]}"  # the device name ends the description
    return label


def _counted(out: IrqgapOutput, gap: Gap) -> str:
    parts = [f"{_label(out, i)}×{n}" for i, n in sorted(gap.irqs.items(), key=lambda kv: -kv[1]) if n > 0]
    parts += [f"softirq {out.softirq_names.get(i, i)}×{n}" for i, n in gap.softirqs.items() if n > 0]
    return ", ".join(parts)


def _alone_lengths(out: IrqgapOutput) -> dict[str, list[int]]:
    """Per line label, the gaps in which that line alone moved, by one (a quiet phase's)."""
    alone: dict[str, list[int]] = {}
    for g in out.gaps:
        moved = {i: n for i, n in g.irqs.items() if n > 0}
        if len(moved) == 1 and next(iter(moved.values())) == 1 and g.ctxsw == 0 and not g.smi:
            alone.setdefault(out.irq_lines.get(next(iter(moved)), (str(next(iter(moved))), ""))[0], []).append(
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
        return t.first_ns is not None and t.last_ns is not None and t.first_ns <= start and end <= t.last_ns

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
    return _label(out, max(moved, key=lambda i: costs[i].ns))


def uncosted(run: RunOutputs, gaps: list[Attributed], costs: dict[int, LineCost]) -> int:
    """Gaps judged by counts, left unexplained, in which a line without a usual cost moved: the
    counts alone could not weigh them."""
    by_start = {g.start_ns: g for g in run.gaps.gaps}
    return sum(1 for a in gaps if a.basis == "counts" and a.cause == "unexplained" and a.start_ns in by_start
               and any(n > 0 and i not in costs for i, n in by_start[a.start_ns].irqs.items()))


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
        result.append(Attributed(start, end, length, cause, source, _counted(out, g), traced, g.ctxsw, g.smi,
                                 basis, tasks))
    return result


def mark_throttled(gaps: list[Attributed], throttling: Throttling | None, priority: int | None,
                   span_ns: int | None = None, blind: list[tuple[int, int]] | None = None) -> int:
    """Re-attribute to the kernel's throttling the gaps it explains, in place; returns how many.
    Only for a real-time loop (priority > 0) with throttling on: gaps not taken by interrupts or
    counted SMIs, no longer than the stop the mechanism allows, one a period: on one grid of the
    period for RT throttling (its period timer gives the budget back there; the phase is the ends'
    own, as the timer starts when the first RT task runs), a chain a period apart for the fair
    server (see `_family`). `blind`: the detector's blind spans, (end, length); a stop that fell in
    one counts towards the coverage."""
    if throttling is None or not priority or priority <= 0 or throttling.rest_ns <= 0:
        return 0
    period = throttling.period_ns
    longest = throttling.rest_ns + throttling.grid_ns
    shortest = throttling.shortest_ns
    candidates = sorted((g for g in gaps if g.cause in ("preempted", "unexplained")
                         and shortest <= g.duration_ns <= longest), key=lambda g: g.end_ns)
    if not candidates:
        return 0
    best = _family(candidates, throttling)
    # a loop that never sleeps is stopped every period: the family (and the stops that fell in the
    # detector's bookkeeping) must cover most of the run's whole periods, which two host stalls that
    # happen to end a whole period apart do not
    if span_ns is None:  # how long the loop ran is unknown: a family cannot be shown to cover it
        return 0
    periods = span_ns / period - 1
    in_blind = _blind_stops([g.end_ns for g in best], blind or [], throttling)
    if len(best) + in_blind < max(THROTTLE_MIN, THROTTLE_COVERAGE * periods):
        return 0
    # a period in which something else stopped the loop first leaves it budget to spare: its throttle
    # comes later and is shorter by as much (the rest, less what the others took), so a gap on the
    # family's grid below `shortest` is that period's throttle when the period's earlier stops
    # make up the difference (not a short gap: THROTTLE_SHORTENED_SHARE of the rest at least)
    family = {id(g) for g in best}
    ends = [g.end_ns for g in best]
    for g in gaps:
        if (id(g) in family or g.cause not in ("preempted", "unexplained")
                or not THROTTLE_SHORTENED_SHARE * throttling.rest_ns <= g.duration_ns < shortest
                or not _fits(g.end_ns, ends, throttling)):
            continue
        earlier = sum(o.duration_ns for o in gaps
                      if o is not g and g.end_ns - period < o.start_ns and o.end_ns <= g.start_ns)
        if g.duration_ns + earlier >= shortest:
            best.append(g)
    for g in best:
        g.cause, g.source = "throttled", THROTTLE_SOURCE[throttling.mechanism]
    return len(best)


def _family(candidates: list[Attributed], throttling: Throttling) -> list[Attributed]:
    """The largest set of candidates (sorted by end) one a period. RT throttling: ends on one grid
    of the period (the timer is exact). The fair server: a chain whose ends are a whole number of
    periods apart, give or take the tolerance per period: the server's runtime is charged at
    ticks, so a stop overruns by up to a tick, and its next period starts at its replenishment
    (Linux 6.18, HZ=250: 51-54 ms stops, 1004-1008 ms apart); a fixed grid would lose them."""
    period, grid = throttling.period_ns, throttling.grid_ns
    if throttling.mechanism != "fair-server":
        phases = np.asarray([g.end_ns % period for g in candidates], dtype=np.float64)
        best: list[Attributed] = []
        for ref in phases:  # the grid through each candidate's end: the one most ends fall on
            off = (phases - ref + period / 2) % period - period / 2
            members = [g for g, o in zip(candidates, off, strict=True) if abs(o) <= grid]
            if len(members) > len(best):
                best = members
        return best
    length, before = [1] * len(candidates), [-1] * len(candidates)
    for i, g in enumerate(candidates):  # the longest chain ending at each candidate
        for j in range(i):
            if length[j] + 1 > length[i] and _fits(g.end_ns, [candidates[j].end_ns], throttling):
                length[i], before[i] = length[j] + 1, j
    i = max(range(len(candidates)), key=length.__getitem__)
    chain = []
    while i >= 0:
        chain.append(candidates[i])
        i = before[i]
    return chain[::-1]


def _fits(end_ns: int, ends: list[int], throttling: Throttling) -> bool:
    """Whether `end_ns` lies a whole number of periods (≥ 1) from one of `ends`, within the grid
    tolerance (per period passed, for the fair server's drifting periods)."""
    period, grid = throttling.period_ns, throttling.grid_ns
    for other in ends:
        apart = abs(end_ns - other)
        k = round(apart / period)
        tolerance = grid * k if throttling.mechanism == "fair-server" else grid
        if k >= 1 and abs(apart - k * period) <= tolerance:
            return True
    return False


def _blind_stops(ends: list[int], blind: list[tuple[int, int]], throttling: Throttling) -> int:
    """How many blind spans ((end, length)) are as long as a stop and end a whole number of
    periods from one of `ends`."""
    longest = throttling.rest_ns + throttling.grid_ns
    return sum(1 for end, length in blind
               if throttling.shortest_ns <= length <= longest and _fits(end, ends, throttling))


def throttled_blind_spans(gaps: list[Attributed], blind: list[tuple[int, int]], throttling: Throttling | None) -> int:
    """How many of the detector's blind spans (bookkeeping the CPU was taken from: (end, length))
    are the kernel's throttling stops: as long as one, ending where the throttled gaps' family
    would end. A stop that falls while the detector writes its records is seen only as such a span."""
    ends = [g.end_ns for g in gaps if g.cause == "throttled"]
    if throttling is None or not ends:
        return 0
    return _blind_stops(ends, blind, throttling)


def periodicity(starts_ns: list[int]) -> dict[str, Any]:
    """The period of the arrivals and whether they keep to it (a fixed period points at a timer:
    firmware's, the kernel's, a device's). An occurrence the detector did not see on its own (in
    its blind bookkeeping, or merged into a longer gap of another cause) leaves an inter-arrival
    of two or three periods: each inter-arrival counts as the whole number of periods nearest to
    it (at most MAX_MISSED + 1), so misses do not stretch the period, and a timer seen only most
    of the time is still periodic."""
    if len(starts_ns) < 3:
        return {"period_ms": None, "periodic": False, "inter_arrival_ms": []}
    dt = np.diff(np.sort(np.asarray(starts_ns, dtype=np.int64))) / 1e6
    period = float(np.median(dt))
    for _ in range(2):  # from the plain median, refined once with the multiples it implies
        if period <= 0:
            break
        k = np.rint(dt / period)
        whole = (k >= 1) & (k <= MAX_MISSED + 1)
        period = float(np.median(dt[whole] / k[whole])) if whole.any() else period
    k = np.clip(np.rint(dt / period), 1, MAX_MISSED + 1) if period > 0 else np.ones_like(dt)
    regular = float(np.mean(np.abs(dt - k * period) <= PERIOD_TOLERANCE * period)) if period > 0 else 0.0
    return {"period_ms": round(period, 6), "periodic": regular >= PERIODIC_SHARE and len(dt) >= PERIODIC_MIN,
            "regular_share": round(regular, 4), "inter_arrival_ms": [round(float(x), 6) for x in dt]}


def groups(gaps: list[Attributed]) -> list[dict[str, Any]]:
    """One row per (cause, source): how many, how long, how often."""
    by: dict[tuple[str, str], list[Attributed]] = {}
    for g in gaps:
        by.setdefault((g.cause, g.source), []).append(g)
    rows = []
    for (cause, source), members in by.items():
        d = np.asarray([g.duration_ns for g in members], dtype=np.float64) / 1e3
        p = periodicity([g.start_ns for g in members])
        if cause == "preempted":  # which tasks took the CPU, most frequent first
            names = Counter(n for g in members for n in g.tasks.split(", ") if n)
            source = ", ".join(n for n, _ in names.most_common(4)) or source
        rows.append({
            "cause": cause, "source": source, "count": len(members),
            "median_us": round(float(np.median(d)), 3), "p99_us": round(float(np.percentile(d, 99)), 3),
            "max_us": round(float(d.max()), 3), "total_ms": round(float(d.sum()) / 1e3, 3),
            "period_ms": p["period_ms"], "periodic": p["periodic"],
            # a line shared by a timer and other work (LOC: the tick and a periodic hold) keeps
            # the timer's period in a family of gaps of one length, not in the group's median
            "families": clusters(members),
        })
    rows.sort(key=lambda r: (CAUSES.index(r["cause"]), -r["total_ms"]))
    return rows


def clusters(gaps: list[Attributed]) -> list[dict[str, Any]]:
    """Families of gaps of about the same length (neighbours within CLUSTER_SPREAD when sorted
    by length), three or more each, with their periodicity; most gaps first. Firmware that
    steals the CPU on a timer shows as one family with a fixed period, however much irregular
    noise surrounds it."""
    ordered = sorted(gaps, key=lambda g: g.duration_ns)
    families: list[list[Attributed]] = []
    for g in ordered:
        if families and g.duration_ns <= families[-1][-1].duration_ns * CLUSTER_SPREAD:
            families[-1].append(g)
        else:
            families.append([g])
    rows = []
    for fam in families:
        if len(fam) < 3:
            continue
        d = [g.duration_ns / 1e3 for g in fam]
        p = periodicity([g.start_ns for g in fam])
        rows.append({"count": len(fam), "median_us": round(float(np.median(d)), 3), "min_us": round(min(d), 3),
                     "max_us": round(max(d), 3), "period_ms": p["period_ms"], "periodic": p["periodic"]})
    return sorted(rows, key=lambda r: (not r["periodic"], -r["count"]))[:MAX_CLUSTERS]


THROTTLE_SOURCE = {"rt-throttling": "RT throttling", "fair-server": "fair server"}
CAUSE_WORDS = {"interrupt": "an interrupt", "throttled": "the kernel's throttling", "preempted": "another task",
               "smi": "an SMI", "unexplained": "unexplained"}


def _cause_words(row: dict[str, Any]) -> str:
    """A group's cause in words: the throttling by its mechanism's name."""
    if row["cause"] == "throttled":
        return "the fair deadline server" if row.get("source") == "fair server" else "RT throttling"
    return CAUSE_WORDS[row["cause"]]


def conclusion(summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The run's finding in one sentence."""
    n = summary["gaps"]
    ran = summary["measured_s"]
    head = (f"{n} gaps above {duration_us(summary['threshold_us'])} on CPU {summary['cpu']} in "
            + (f"{ran:.3g} s" if ran is not None else "a time the detector's output does not say"))
    if not n:
        return head + ": the CPU was never taken from the loop for longer."
    worst = max(rows, key=lambda r: r["max_us"], default=None)
    head += f" (worst {duration_us(summary['max_us'])}" + (f", {_cause_words(worst)})" if worst else ")")
    by_cause = summary["by_cause"]
    parts = []
    if by_cause.get("interrupt"):
        top = [r for r in rows if r["cause"] == "interrupt"][:3]
        parts.append(f"{by_cause['interrupt']} interrupts (" + ", ".join(f"{r['source']} {r['count']}" for r in top)
                     + ")")
    if by_cause.get("throttled"):
        n_thr = by_cause["throttled"]
        worst = max((r["max_us"] for r in rows if r["cause"] == "throttled"), default=None)
        in_blind = summary.get("throttled_blind_spans") or 0
        by = next((_cause_words(r) for r in rows if r["cause"] == "throttled"), "RT throttling")
        parts.append(f"{n_thr} stop{'s' if n_thr != 1 else ''} by {by}"
                     + (f" and {in_blind} more while the detector wrote its records" if in_blind else "")
                     + f" (up to {duration_us(worst)}: "
                     f"{summary['throttling']}; to measure without it, {summary['throttling_advice']})")
    if by_cause.get("preempted"):
        n_pre = by_cause["preempted"]
        parts.append(f"{n_pre} preemption{'s' if n_pre != 1 else ''} by other tasks")
    if by_cause.get("smi"):
        parts.append(f"{by_cause['smi']} counted SMI{'s' if by_cause['smi'] != 1 else ''}")
    text = head + ": " + (", ".join(parts) if parts else "none explained by interrupts")
    suspects = summary["unexplained"]
    if suspects["count"]:
        period = suspects["period_ms"]
        shape = (f", periodic every {period:.4g} ms" if suspects["periodic"] and period else "")
        regular = [c for c in suspects.get("clusters", []) if c["periodic"]]
        if not shape and regular:  # a regular family among irregular noise: the firmware's mark
            c = regular[0]
            shape = (f"; among them {c['count']} of about {duration_us(c['median_us'])} every "
                     f"{c['period_ms']:.4g} ms")
        who = {True: "the hypervisor (this target is a virtual machine) or firmware took the CPU",
               False: "firmware (an SMI the counter does not see) took the CPU: the target shows no sign of "
                      "a hypervisor"}.get(summary.get("virtual_machine"), "firmware (SMI) or a hypervisor took the CPU")
        text += (f"; {suspects['count']} not explained by any interrupt ({duration_us(suspects['median_us'])} median"
                 f"{shape}): {who}")
    else:
        text += ("; none unexplained: no sign of firmware or SMIs" if summary.get("trace") else
                 "; none unexplained by the counts (no trace: a short SMI next to a counted interrupt "
                 "would pass for it)")
    if summary.get("uncosted_gaps"):
        text += (f" ({summary['uncosted_gaps']} of them with interrupts counted on lines whose usual cost no trace "
                 "or calibration gave: counts alone cannot tell an interrupt from a stall it followed)")
    if summary.get("blind_spans"):
        text += (f"; and {summary['blind_spans']} times the CPU was taken while the detector wrote its "
                 f"records (up to {duration_us(summary['blind_span_max_us'])}, not attributed)")
    return text + "."


def measured_span_ns(out: Any) -> int | None:  # noqa: ANN401 - the detector's parsed output
    """How long the detector watched: to its end record, else (output cut) to its last tick; None
    when neither says (never 0: not measured)."""
    end = out.end or {}
    start_ns = out.start_ns
    if end.get("mono_ns") and start_ns:
        return int(end["mono_ns"] - start_ns)
    if out.ticks and start_ns:
        return int(out.ticks[-1][0] - start_ns)
    return None


def summarise(run: RunOutputs, gaps: list[Attributed]) -> dict[str, Any]:
    out = run.gaps
    end = out.end or {}
    measured_ns = measured_span_ns(out)
    measured_s = None if measured_ns is None else measured_ns / 1e9
    durations = [g.duration_ns for g in gaps]
    suspects = [g for g in gaps if g.cause == "unexplained"]
    sp = periodicity([g.start_ns for g in suspects])
    sd = np.asarray([g.duration_ns for g in suspects], dtype=np.float64) / 1e3
    return {
        "cpu": out.cpu, "clock": out.clock, "threshold_us": out.threshold_ns / 1e3, "priority": out.priority,
        "measured_s": None if measured_s is None else round(measured_s, 3), "gaps": len(gaps),
        "max_us": round(max(durations) / 1e3, 3) if durations else None,
        "lost_ms": round(sum(durations) / 1e6, 3),
        "blind_ms": round(end["blind_ns"] / 1e6, 3) if end.get("blind_ns") is not None else None,
        # bookkeeping the CPU was taken from: disturbances the detector saw only as lost watching time
        "blind_spans": len(out.blind), "blind_span_max_us": round(max(d for _, d in out.blind) / 1e3, 3)
        if out.blind else None,
        "min_loop_ns": end.get("min_loop_ns"), "iterations": end.get("iterations"),
        "end_reason": end.get("reason"), "smi_counter": out.smi_available, "smi_reason": out.smi_reason,
        "trace": run.trace is not None, "trace_lost_events": (run.trace_overrun + run.trace.lost_events)
        if run.trace is not None else None,
        "by_cause": {c: sum(1 for g in gaps if g.cause == c) for c in CAUSES},
        "unexplained": {"count": len(suspects),
                        "median_us": round(float(np.median(sd)), 3) if len(sd) else None,
                        "max_us": round(float(sd.max()), 3) if len(sd) else None,
                        "period_ms": sp["period_ms"], "periodic": sp["periodic"],
                        "clusters": clusters(suspects)},
        "suspect_inter_arrival_ms": sp["inter_arrival_ms"][:10_000],
    }


def osnoise_side(run_dir: Path, cpu: int, problems: list[str]) -> dict[str, Any] | None:
    """rtla osnoise's summary row for the measured CPU (interruptions.compare), or None."""
    path = run_dir / "rtla.out"
    if not path.is_file() or not path.stat().st_size:
        return None
    try:
        top = rtla.parse_osnoise_top(path.read_text(errors="replace"))
    except rtla.RtlaOutputError as exc:
        problems.append(f"rtla osnoise: {exc}")
        return None
    row = next((r for r in top.rows if r.cpu == cpu), None)
    if row is None:
        problems.append(f"rtla osnoise printed no row for CPU {cpu}")
        return None
    return {"duration_s": top.duration_s, **row.__dict__}


def analyse_run_dir(run_dir: Path) -> tuple[dict[str, Any], list[Attributed]]:
    """(the run's summary, groups and conclusion; its attributed gaps)."""
    run = read_outputs(run_dir)
    costs = line_costs(run)
    gaps = attribute(run, costs)
    manifest_path = run_dir / "manifest.json"
    facts = ((json.loads(manifest_path.read_text()).get("spoilers") or {}).get("facts") or {}
             if manifest_path.is_file() else {})
    throttling = Throttling.from_facts(facts, run.gaps.cpu)
    # the span the throttling rule's coverage counts periods over: to the last tick where the end
    # record is missing (a cut output), never none (which let two gaps a period apart pass)
    mark_throttled(gaps, throttling, run.gaps.priority, measured_span_ns(run.gaps), run.gaps.blind)
    summary = summarise(run, gaps)
    summary["calibrated"] = run.calibration is not None
    summary["line_costs"] = [{"line": _label(run.gaps, i), "cost_us": round(c.ns / 1e3, 3), "basis": c.basis,
                              "samples": c.samples} for i, c in sorted(costs.items())]
    summary["uncosted_gaps"] = uncosted(run, gaps, costs)
    summary["throttled_blind_spans"] = throttled_blind_spans(gaps, run.gaps.blind, throttling)
    summary["throttling"] = throttling.sentence() if throttling is not None else None
    summary["throttling_advice"] = throttling.advice() if throttling is not None else None
    summary["virtual_machine"] = virtualization.judge(facts).virtual
    summary["osnoise"] = osnoise_side(run_dir, run.gaps.cpu, run.problems)
    rows = groups(gaps)
    summary["groups"] = rows
    summary["conclusion"] = conclusion(summary, rows)
    summary["problems"] = run.problems
    return summary, gaps


def histogram(gaps: list[Attributed], bins_per_decade: int = 10) -> dict[str, Any]:
    """Gap durations per cause on shared log-spaced bins (µs): the report's figure."""
    if not gaps:
        return {"edges_us": [], "counts": {}}
    d = np.asarray([g.duration_ns for g in gaps], dtype=np.float64) / 1e3
    lo, hi = np.log10(max(d.min(), 1e-3)), np.log10(d.max())
    n = max(1, int(np.ceil((hi - lo) * bins_per_decade)))
    edges = np.logspace(lo, hi + 1e-9, n + 1)
    counts = {}
    for c in CAUSES:
        sel = np.asarray([g.duration_ns for g in gaps if g.cause == c], dtype=np.float64) / 1e3
        if len(sel):
            counts[c] = np.histogram(sel, bins=edges)[0].astype(int).tolist()
    return {"edges_us": [round(float(e), 4) for e in edges], "counts": counts}


def gap_table(gaps: list[Attributed]):  # noqa: ANN201 - pandas.DataFrame
    import pandas as pd

    columns = list(Attributed.__dataclass_fields__)
    frame = pd.DataFrame([g.row() for g in gaps], columns=columns)
    # nullable integers, never Parquet's null type (a run without SMI counter or trace): Spark and
    # DuckDB then merge such a run's file with one that has the counts
    for name in ("start_ns", "end_ns", "duration_ns", "ctxsw"):  # typed even without a gap
        frame[name] = frame[name].astype("int64")
    for name in ("traced_ns", "smi"):
        frame[name] = frame[name].astype("Int64")
    for name in ("cause", "source", "counted", "basis", "tasks"):
        frame[name] = frame[name].astype("string")
    return frame


def analyse_runs(run_dirs: list[Path], campaign: dict[str, Any]) -> tuple[dict[str, Any], dict, list[str]]:
    """(report["interruptions"], samples by run id, notes) for a campaign's detector runs."""
    notes: list[str] = []
    entries = []
    for run_dir in run_dirs:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        run = manifest.get("run") or {}
        entry: dict[str, Any] = {
            "id": manifest.get("run_id", run_dir.name), "target": run.get("target"), "load": run.get("load"),
            "repetition": run.get("repetition"), "status": manifest.get("status"), "error": manifest.get("error"),
            "spoilers": (manifest.get("spoilers") or {}).get("flags", []),
            "osnoise_note": (manifest.get("interruptions") or {}).get("rtla_note"),
        }
        if entry["status"] != "complete":
            notes.append(f"Run {entry['id']} is {entry['status']}: {entry['error'] or 'see its manifest'}")
        try:
            summary, gaps = analyse_run_dir(run_dir)
        except (OSError, IrqgapOutputError, ValueError) as exc:
            notes.append(f"Run {entry['id']}: its detector output cannot be read: {exc}")
            entries.append(entry)
            continue
        notes.extend(f"Run {entry['id']}: {p}" for p in summary.pop("problems"))
        if entry["osnoise_note"]:
            notes.append(f"Run {entry['id']}: {entry['osnoise_note']}")
        if cal_note := (manifest.get("interruptions") or {}).get("calibration_note"):
            notes.append(f"Run {entry['id']}: {cal_note}")
        entry |= summary
        entry["histogram"] = histogram(gaps)
        entries.append(entry)
    return {"runs": entries, "findings": [f for e in entries if (f := finding(e))]}, {}, notes


def finding(entry: dict[str, Any]) -> dict[str, Any] | None:
    """A run's conclusion as the first page shows it: its longest gap and what took the CPU
    (report["findings"]); None for a run whose output could not be read."""
    if "conclusion" not in entry:
        return None
    where = f"{entry['id']} (CPU {entry['cpu']})"
    if not entry["gaps"]:
        headline, figure = f"{where}: the CPU was never taken from the loop", "no gap"
    else:
        worst = max(entry.get("groups") or [], key=lambda r: r["max_us"], default=None)
        headline = f"{where}: the longest the CPU was taken from the loop"
        figure = (f"{duration_us(entry['max_us'])}" + (f" ({_cause_words(worst)})" if worst else "")
                  + f", {entry['gaps']} gaps above {duration_us(entry['threshold_us'])}")
    return {"kind": "interruptions", "run": entry["id"], "headline": headline, "figure": figure,
            "see": "interruption-runs", "text": entry["conclusion"]}


def analyse(given: AnalysisInput) -> KindReport:
    campaign = given.campaign
    return section_report("interruptions", *analyse_runs(given.run_dirs, campaign))
