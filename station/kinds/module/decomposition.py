"""Where each microsecond of t_SW went: a traced module run's events split into stages.

The module stamps t_write just before its bus write and t_irq first thing in its handler, both
with ktime_get (CLOCK_MONOTONIC); the station's tracefs instance records the measured CPU's
interrupt, softirq, timer and scheduler tracepoints on clock `mono`, the same clock. For every
record of the module's own IRQ:

    delivery   t_write → the kernel's irq_handler_entry for the module's line: the bus and the
               interrupt controller, whatever ran first with the IRQ pending (the rest of the
               timer interrupt that wrote, another handler, a softirq, an IRQ-off region, an NMI),
               and what no tracepoint shows (firmware, SMI, a hypervisor)
    dispatch   that entry → t_irq: the generic IRQ code and the handler's prologue; for a threaded
               handler also the thread's wake-up and whatever ran before it

The two end points are the record's own, so delivery + dispatch = t_SW exactly; the boundary is
the trace's (nanoseconds where its raw form was read, else the printed microsecond). Each stage's
time is credited to what was running on the CPU, innermost first (an hrtimer callback inside the
timer interrupt is the callback's), NMIs over everything; time when only a task was current is
"nothing traced (<task> running)" in delivery (the IRQ was pending and not taken) and the task's in
dispatch. docs/decomposition.md says what each stage means and when an event is not decomposed."""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from station.parsers import tracefs
from station.parsers.irqtrace import VECTOR_LABELS, stats_overrun
from station.parsers.records import Flag
from station.store.manifest import read_manifest
from station.store.run_store import write_parquet

# of decomposition.parquet/.json: a run sealed with another is decomposed again on report
VERSION = 3
STAGES = ("delivery", "dispatch")
STAGE_TEXT = {"delivery": "write → kernel IRQ entry",
              "dispatch": "kernel IRQ entry → module timestamp"}
LOST_LABEL = "(events lost by the trace)"
_ARG = re.compile(r"(\w+)=(\S+)")
_NMI = re.compile(r"delta_ns:\s*(\d+)")
_SWITCH = re.compile(r"==> next_comm=(?P<next>.*?) next_pid=(?P<next_pid>-?\d+)")
_SOFTIRQ_ACTION = re.compile(r"action=(\w+)")
# why an event has no stages (the report counts each)
REASON_BEFORE = "before the trace's oldest event (the buffer overflowed, or the trace started late)"
REASON_AFTER = "after the trace's last event"
REASON_LOST = "the trace lost events in its window"
REASON_OFF_CPU = "taken on another CPU than the traced one (the module flagged it OFF_CPU)"
REASON_CLOCK = ("clock mismatch: the kernel entry of its IRQ is traced outside its write → "
                "timestamp window (the trace's clock and the module's disagree)")
#: a run's clocks agree when at least this share of the events checked have their entry in their
#window
CLOCK_AGREE_SHARE = 0.9
REASON_NO_ENTRY = "no kernel entry of the module's IRQ traced between its write and its timestamp"
REASON_UNTRACED = "in an unrecorded block (module.trace_overhead's reference)"
OPEN_END = np.iinfo(np.int64).max  # where a last unrecorded block ends: with the run
REASON_TRANSITION = "while module.trace_overhead switched the recording off or on"
MARKER = "irq-station:"  # station.target.irqtrace.MARKER: the toggler's marks


@dataclass
class Timeline:
    """What ran on the CPU: segment i is [starts[i], starts[i+1]) under labels[i]; NMIs on top."""

    starts: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    # the segment is a task's (nothing traced above it)
    tasks: list[bool] = field(default_factory=list)
    end_ns: int = 0
    nmis: list[tuple[int, int, str]] = field(default_factory=list)
    lost: list[tuple[int, int]] = field(default_factory=list)  # spans where events were lost
    own_entries: list[int] = field(default_factory=list)  # irq_handler_entry of the module's line

    def mark(self, ts: int, label: str, task: bool) -> None:
        if self.labels and self.labels[-1] == label and self.tasks[-1] == task:
            return
        if self.starts and self.starts[-1] == ts:  # zero-length: the later one holds from ts
            self.labels[-1], self.tasks[-1] = label, task
            return
        self.starts.append(ts)
        self.labels.append(label)
        self.tasks.append(task)

    def credits(self, a: int, b: int, task_label: str) -> dict[str, int]:
        """[a, b) by what ran: each label's nanoseconds (task time under task_label.format(task));
        an NMI takes its time from whatever it interrupted."""
        out = self._segments(a, b, task_label)
        for start, end, label in self.nmis:
            lo, hi = max(a, start), min(b, end)
            if hi <= lo:
                continue
            for under, ns in self._segments(lo, hi, task_label).items():
                out[under] -= ns
                if out[under] <= 0:
                    del out[under]
            out[label] = out.get(label, 0) + hi - lo
        return out

    def _segments(self, a: int, b: int, task_label: str) -> dict[str, int]:
        out: dict[str, int] = {}
        i = max(bisect.bisect_right(self.starts, a) - 1, 0)
        while i < len(self.starts) and self.starts[i] < b:
            end = self.starts[i + 1] if i + 1 < len(self.starts) else self.end_ns
            lo, hi = max(a, self.starts[i]), min(b, end)
            if hi > lo:
                label = task_label.format(self.labels[i]) if self.tasks[i] else self.labels[i]
                out[label] = out.get(label, 0) + hi - lo
            i += 1
        return out

    def loses_events_in(self, a: int, b: int) -> bool:
        return any(lo < b and a < hi for lo, hi in self.lost)


# an event in no IRQ context ends every IRQ context; in a softirq, the hard ones
_ENDS = {".": {"irq", "vector", "hrtimer", "softirq"}, "s": {"irq", "vector", "hrtimer"}}


def _task(comm: str, pid: int) -> str:
    return "idle" if pid == 0 else comm  # by name: a load's processes come and go


def timeline(trace: tracefs.TraceEvents, own_name: str) -> Timeline:
    """The CPU's contexts, one sweep over its events."""
    tl = Timeline()
    stack: list[tuple[str, str, str]] = []  # (kind, key, label)
    lost_at = dict(trace.lost)
    base = ""
    prev_ts: int | None = None

    def innermost() -> tuple[str, bool]:
        return (stack[-1][2], False) if stack else (base, True)

    def push(ts: int, kind: str, key: str, label: str) -> None:
        stack.append((kind, key, label))
        tl.mark(ts, label, False)

    def pop(ts: int, kind: str, key: str, label: str) -> None:
        for depth in range(len(stack) - 1, -1, -1):
            if stack[depth][:2] == (kind, key):
                del stack[depth:]
                break
        else:  # entered before the trace began (or before lost events): it ran up to here
            last = len(tl.starts) - 1
            if last >= 0 and tl.starts[last] == ts:
                last -= 1
            if last >= 0:
                tl.labels[last], tl.tasks[last] = label, False
        tl.mark(ts, *innermost())

    for index, ev in enumerate(trace.events):
        ts = ev.ts_ns
        if index in lost_at and prev_ts is not None:
            tl.lost.append((prev_ts, ts))
            stack.clear()
            tl.mark(prev_ts, LOST_LABEL, False)
        prev_ts = ts
        if ev.context in _ENDS and any(c[0] in _ENDS[ev.context] for c in stack):
            # the event's own context says these ended (their exits untraced: enabled late, or lost)
            stack[:] = [c for c in stack if c[0] not in _ENDS[ev.context]]
            tl.mark(ts, *innermost())
        # the task an event names is the one current (a hard IRQ's: the interrupted one)
        if not stack:
            base = _task(ev.comm, ev.pid)
            tl.mark(ts, base, True)
        name, args = ev.name, ev.args
        values = dict(_ARG.findall(args))
        if name == "irq_handler_entry":
            irq, handler = values.get("irq", "?"), values.get("name", "?")
            if handler == own_name:
                tl.own_entries.append(ts)
            push(ts, "irq", irq, f"IRQ {irq} {handler}")
        elif name == "irq_handler_exit":
            irq = values.get("irq", "?")
            pop(ts, "irq", irq, f"IRQ {irq}")
        elif name in ("softirq_entry", "softirq_exit"):
            action = m.group(1) if (m := _SOFTIRQ_ACTION.search(args)) else values.get("vec", "?")
            (push if name == "softirq_entry" else pop)(ts, "softirq", values.get("vec", "?"),
                                                       f"softirq {action}")
        elif name == "hrtimer_expire_entry":
            push(ts, "hrtimer", values.get("hrtimer", "?"),
                 f"hrtimer {values.get('function', '?')}")
        elif name == "hrtimer_expire_exit":
            pop(ts, "hrtimer", values.get("hrtimer", "?"), "hrtimer callback")
        elif name in ("irq_disable", "irq_enable"):
            caller = values.get("caller", "?")
            (push if name == "irq_disable" else pop)(ts, "irqoff", "", f"IRQs off ({caller})")
        elif name == "nmi_handler" and (d := _NMI.search(args)):
            tl.nmis.append((ts - int(d.group(1)), ts,
                            f"NMI {args.split(' ', 1)[0].removeprefix('handler=')}"))
        elif name == "sched_switch" and (s := _SWITCH.search(args)):
            base = _task(s["next"], int(s["next_pid"]))
            if not stack:
                tl.mark(ts, base, True)
        elif name.endswith("_entry") and name[: -len("_entry")] in VECTOR_LABELS:
            vector = name[: -len("_entry")]
            push(ts, "vector", vector, f"{vector} interrupt ({VECTOR_LABELS[vector]})")
        elif name.endswith("_exit") and name[: -len("_exit")] in VECTOR_LABELS:
            vector = name[: -len("_exit")]
            pop(ts, "vector", vector, f"{vector} interrupt ({VECTOR_LABELS[vector]})")
    if trace.events:
        tl.end_ns = trace.events[-1].ts_ns
    return tl


def blocks(trace: tracefs.TraceEvents) -> tuple[list[tuple[int, int]], list[tuple[int,
                                                                                  int]]] | None:
    """module.trace_overhead's blocks from its marks: (recorded, unrecorded) spans, None without
    marks. A recorded block runs from a `traced` mark to the next `untracing`; an unrecorded one
    from `untracing` to the next `traced` (recording stops just after the first and starts again
    just before the second: decompose() tells the events in between by the trace having none).
    A last `untracing` block is open: the toggler is stopped before the trace is read, and if it
    stopped with the recording off, the run's last events lie beyond the trace's last event."""
    marks = [(e.ts_ns, e.args.strip()[len(MARKER):]) for e in trace.events
             if e.name == tracefs.MARKER_EVENT and e.args.strip().startswith(MARKER)]
    if not marks:
        return None
    end = trace.events[-1].ts_ns
    traced: list[tuple[int, int]] = []
    untraced: list[tuple[int, int]] = []
    for k, (ts, word) in enumerate(marks):
        last = k + 1 == len(marks)
        following = end if last and word == "traced" else OPEN_END if last else marks[k + 1][0]
        if word == "traced":
            traced.append((ts, following))
        elif word == "untracing":
            untraced.append((ts, following))
    return traced, untraced


def _within(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    k = bisect.bisect_right([s for s, _ in spans], a) - 1
    return k >= 0 and spans[k][0] <= a and b <= spans[k][1]


def overhead(t_sw: np.ndarray, traced: np.ndarray, untraced: np.ndarray,
             block_s: float | None) -> dict[str, Any]:
    """t_SW in the traced and the untraced blocks, side by side."""
    def stats(ns: np.ndarray) -> dict[str, Any]:
        if not len(ns):
            return {"count": 0, "median_ns": None, "p99_ns": None}
        return {"count": int(len(ns)), "median_ns": float(np.median(ns)),
                "p99_ns": float(np.percentile(ns, 99))}

    a, b = stats(t_sw[traced]), stats(t_sw[untraced])
    diff = (a["median_ns"] - b["median_ns"]) if a["count"] and b["count"] else None
    p99 = (a["p99_ns"] - b["p99_ns"]) if a["count"] and b["count"] else None
    return {"block_s": block_s, "traced": a, "untraced": b, "median_added_ns": diff,
            "p99_added_ns": p99}


@dataclass
class Decomposition:
    events: pd.DataFrame  # one row per decomposed event (columns: EVENT_COLUMNS)
    not_decomposed: dict[str, int]  # reason -> events
    resolution_ns: int
    note: str | None
    lost_events: int
    overrun: int
    first_ns: int | None
    last_ns: int | None
    overhead: dict[str, Any] | None = None
    # clock_check(): does the trace's clock agree with the module's?
    clock: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        return {"version": VERSION, "overhead": self.overhead, "clock_check": self.clock,
                "decomposed": len(self.events),
                "not_decomposed": self.not_decomposed,
                "resolution_ns": self.resolution_ns, "resolution_note": self.note,
                "trace_lost_events": self.lost_events, "trace_overrun": self.overrun,
                "trace_first_ns": self.first_ns, "trace_last_ns": self.last_ns}


EVENT_COLUMNS = ("seq", "t_write_ns", "t_sw_ns", "delivery_ns", "dispatch_ns", "delivery_culprit",
                 "delivery_culprit_ns", "dispatch_culprit", "dispatch_culprit_ns", "credits")


def decompose(records: pd.DataFrame, trace: tracefs.TraceEvents, own_name: str, overrun: int = 0,
              block_s: float | None = None) -> Decomposition:
    """Every own record of a run (sw.parquet's columns) against the trace of the measured CPU;
    with module.trace_overhead's marks, the untraced blocks' events are its reference instead."""
    own = (
        records[(records["flags"].to_numpy() & int(Flag.NOT_OURS)) == 0]
        if "flags" in records
        else records
    )
    seqs = own["seq"].to_numpy(np.int64)
    t_write = own["t_write_ns"].to_numpy(np.int64)
    t_sw = own["latency_ns"].to_numpy(np.int64)
    off_cpu = (
        (own["flags"].to_numpy().astype(np.int64) & int(Flag.OFF_CPU)) != 0
        if "flags" in own
        else np.zeros(len(own), bool)
    )
    tl = timeline(trace, own_name)
    first = trace.events[0].ts_ns if trace.events else None
    last = trace.events[-1].ts_ns if trace.events else None
    reasons: dict[str, int] = {}
    rows: list[tuple] = []
    spans = blocks(trace)
    recorded = (
        [e.ts_ns for e in trace.events if e.name != tracefs.MARKER_EVENT]
        if spans is not None
        else []
    )
    in_traced = np.zeros(len(seqs), bool)
    in_untraced = np.zeros(len(seqs), bool)
    # pass 1: why an event cannot be decomposed whatever the entries say; the rest are candidates
    why_not: list[str | None] = []
    for k, (tw, lat) in enumerate(zip(t_write.tolist(), t_sw.tolist(), strict=True)):
        t_irq = tw + lat
        if spans is not None and first is not None and first <= tw:
            in_traced[k] = t_irq <= last and _within(spans[0], tw, t_irq)
            # unrecorded: inside an unrecorded block, and the trace holds nothing of its window
            in_untraced[k] = _within(spans[1], tw, t_irq) and \
                bisect.bisect_left(recorded, tw) == bisect.bisect_right(recorded, t_irq)
        if first is None or tw < first:
            why = REASON_BEFORE
        elif off_cpu[k]:  # the trace holds the measured CPU only
            why = REASON_OFF_CPU
        elif in_untraced[k]:
            why = REASON_UNTRACED
        elif t_irq > last:
            why = REASON_AFTER
        elif spans is not None and not in_traced[k]:
            why = REASON_TRANSITION
        elif tl.loses_events_in(tw, t_irq):
            why = REASON_LOST
        else:
            why = None
        why_not.append(why)
    candidate = np.asarray([w is None for w in why_not], bool)
    clock = clock_check(tl.own_entries, t_write[candidate], (t_write + t_sw)[candidate])
    # pass 2: the candidates' entries, once the run's clocks are known to agree
    for k, (seq, tw, lat) in enumerate(zip(seqs.tolist(), t_write.tolist(), t_sw.tolist(),
                                           strict=True)):
        t_irq = tw + lat
        entry = None
        why = why_not[k]
        if why is None and not clock["agrees"]:  # no entry can be trusted to bound a stage
            why = REASON_CLOCK
        elif why is None:
            entry = _own_entry(tl.own_entries, tw, t_irq)
            why = None if entry is not None else REASON_CLOCK if _displaced(tl.own_entries, tw,
                                                                            t_irq, clock) \
                else REASON_NO_ENTRY
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
            continue
        assert entry is not None
        credits = {"delivery": tl.credits(tw, entry, "nothing traced ({} running)"),
                   "dispatch": tl.credits(entry, t_irq, "task {}")}
        tops = []
        for stage in STAGES:
            label, ns = max(credits[stage].items(), key=lambda kv: kv[1], default=("", 0))
            tops += [label, ns]
        rows.append((seq, tw, lat, entry - tw, t_irq - entry, *tops, json.dumps(credits,
                                                                                sort_keys=True)))
    frame = pd.DataFrame(rows, columns=list(EVENT_COLUMNS))
    if frame.empty:
        frame = frame.astype({"seq": "int64", "t_write_ns": "int64", "t_sw_ns": "int64",
                              "delivery_ns": "int64",
                              "dispatch_ns": "int64", "delivery_culprit_ns": "int64",
                              "dispatch_culprit_ns": "int64", "delivery_culprit": "string",
                              "dispatch_culprit": "string", "credits": "string"})
    cost = overhead(t_sw, in_traced, in_untraced, block_s) if spans is not None else None
    return Decomposition(frame, reasons, trace.resolution_ns, trace.note, trace.lost_events,
                         overrun, first, last,
                         cost, clock)


def _own_entry(entries: list[int], tw: int, t_irq: int) -> int | None:
    """The kernel entry that belongs to the event written at tw: the first of its line at or after
    the write, if it comes before the timestamp. A later one before the timestamp (a threaded
    handler's line raised again while its thread waits) is not this event's: taking the last would
    move the wait from dispatch to delivery."""
    k = bisect.bisect_left(entries, tw)
    return entries[k] if k < len(entries) and entries[k] <= t_irq else None


def _displacement(entries: list[int], tw: int, t_irq: int, radius: int) -> int | None:
    """How far outside [tw, t_irq] the nearest entry of the line lies (0 inside; negative before
    the write), None with no entry within `radius` of the window."""
    k = bisect.bisect_left(entries, tw)
    if k < len(entries) and entries[k] <= t_irq:
        return 0
    before = tw - entries[k - 1] if k > 0 else None
    after = entries[k] - t_irq if k < len(entries) else None
    nearest = min((d for d in (before, after) if d is not None and d <= radius), default=None)
    if nearest is None:
        return None
    return -nearest if nearest == before else nearest


def _displaced(entries: list[int], tw: int, t_irq: int, clock: dict[str, Any]) -> bool:
    return _displacement(entries, tw, t_irq, clock["radius_ns"]) not in (None, 0)


def clock_check(entries: list[int], t_write: np.ndarray, t_irq: np.ndarray) -> dict[str, Any]:
    """Does the trace's clock agree with the module's? Each event whose line has a kernel entry
    near its window (within half the line's usual spacing of entries, so most likely its own) is
    checked: the entry must lie between its write and its timestamp. `agrees`: at least
    CLOCK_AGREE_SHARE of them do; `offset_within_ns`: how far the trace's clock could be off the
    module's and still put every in-window entry in its window ([−smallest dispatch, +smallest
    delivery]); `median_displacement_ns`: where the others' entries lie (a shifted clock moves them
    all one way)."""
    gaps = np.diff(np.asarray(entries, np.int64))
    radius = int(np.median(gaps) // 2) if len(gaps) else 0
    shifts, early, late = [], [], []
    for tw, ti in zip(t_write.tolist(), t_irq.tolist(), strict=True):
        d = _displacement(entries, tw, ti, radius)
        if d is None:
            continue
        shifts.append(d)
        if d == 0:
            e = _own_entry(entries, tw, ti)
            early.append(e - tw)  # the delivery: how much later the trace's clock could be
            late.append(ti - e)  # the dispatch: how much earlier
    checked, inside = len(shifts), len(early)
    agrees = checked == 0 or inside >= CLOCK_AGREE_SHARE * checked
    outside = [d for d in shifts if d]
    return {"checked": checked, "in_window": inside, "agrees": bool(agrees), "radius_ns": radius,
            "offset_within_ns": [-min(late), min(early)] if inside else None,
            "median_displacement_ns": float(np.median(outside)) if outside else None}


# ---- a run directory's files -------------------------------------------------------------
TRACE_FILES = {"text": "trace.txt", "raw": "trace_raw.txt", "ids": "trace_ids.txt",
               "stats": "trace.stats"}


def decompose_run(run_dir: Path, records: pd.DataFrame, own_name: str,
                  block_s: float | None = None) -> dict[str, Any]:
    """decomposition.parquet (per event) and its summary, from the run's trace files."""
    read = {k: (run_dir / f).read_text(errors="replace") if (run_dir / f).exists() else ""
            for k, f in TRACE_FILES.items()}
    trace = tracefs.parse(read["text"], read["raw"], read["ids"])
    result = decompose(records, trace, own_name, stats_overrun(read["stats"]), block_s)
    write_parquet(result.events, run_dir / "decomposition.parquet")
    summary = result.summary()
    (run_dir / "decomposition.json").write_text(json.dumps(summary, indent=1))
    return summary


# ---- the report's view of a run ---------------------------------------------------------------
LARGEST = 10  # events in the largest-events table, per run
# t_SW percentile bands
BANDS = ((0.0, 50.0), (50.0, 90.0), (90.0, 99.0), (99.0, 99.9), (99.9, 100.0))
CULPRITS = 8  # what ran, per stage, in the credited table
NAMED_SHARE = 0.1  # a culprit is named for an event when it holds this share of its stage


def _stage_stats(ns: np.ndarray) -> dict[str, float | None]:
    if not len(ns):
        return {"median_ns": None, "p99_ns": None, "max_ns": None, "mean_ns": None}
    return {"median_ns": float(np.median(ns)), "p99_ns": float(np.percentile(ns, 99)),
            "max_ns": float(ns.max()), "mean_ns": float(ns.mean())}


def _named(credits: dict[str, int], stage_ns: int) -> list[tuple[str, int]]:
    """What ran in a stage, largest first: what holds NAMED_SHARE of it (the largest always)."""
    ranked = sorted(credits.items(), key=lambda kv: (-kv[1], kv[0]))
    return [
        (label, ns)
        for i, (label, ns) in enumerate(ranked)
        if i == 0 or ns >= NAMED_SHARE * stage_ns
    ][:3]


def explain(stages: dict[str, int], credits: dict[str, dict[str, int]], medians: dict[str, float],
            cpu: int | None) -> str:
    """One event in words: the stage that grew most over its median, and what ran in it."""
    grown = max(STAGES, key=lambda s: (stages[s] - medians.get(s, 0.0), s == "delivery"))
    named = _named(credits.get(grown, {}), stages[grown])
    where = f" on CPU {cpu}" if cpu is not None else ""
    head = (
        f"{stages[grown] / 1e3:.1f} µs in {grown} ({STAGE_TEXT[grown]}; median "
        f"{medians.get(grown, 0) / 1e3:.1f})"
    )
    if not named:
        return head
    label, ns = named[0]
    if label.startswith("nothing traced"):
        what = (f"{ns / 1e3:.1f} µs before the IRQ reached the kernel with no handler, softirq or "
                f"NMI traced{where}: firmware, SMI, a hypervisor or IRQs off in untraced code")
    else:
        what = f"{label} ran {ns / 1e3:.1f} µs"
    more = "".join(f"; {lab} {n / 1e3:.1f} µs" for lab, n in named[1:])
    return f"{head}: {what}{more}"


def summarise(run_dir: Path, sw_threshold_ns: float | None, cpu: int | None) -> dict[str,
                                                                                     Any] | None:
    """report["runs"][i]["decomposition"] of a traced run (None if it was not traced)."""
    summary_file = run_dir / "decomposition.json"
    if not summary_file.exists():
        return None
    summary = json.loads(summary_file.read_text())
    if (
        summary.get("version") != VERSION
        and (run_dir / "sw.parquet").exists()
        and (run_dir / "trace.txt").exists()
    ):
        trace = read_manifest(run_dir).section("trace")
        summary = decompose_run(run_dir, pd.read_parquet(run_dir / "sw.parquet"), trace["handler"],
                                trace.get("overhead_block_s"))
    summary.pop("version", None)
    frame = (
        pd.read_parquet(run_dir / "decomposition.parquet")
        if (run_dir / "decomposition.parquet").exists()
        else pd.DataFrame(columns=list(EVENT_COLUMNS))
    )
    stages = {s: frame[f"{s}_ns"].to_numpy(np.int64) for s in STAGES}
    t_sw = frame["t_sw_ns"].to_numpy(np.int64)
    medians = {s: float(np.median(v)) if len(v) else 0.0 for s, v in stages.items()}
    credits = [json.loads(c) for c in frame["credits"]]
    totals: dict[str, dict[str, list[int]]] = {s: {} for s in STAGES}  # label -> [ns, events, top]
    for row, c in zip(frame.itertuples(index=False), credits, strict=True):
        for s in STAGES:
            top = getattr(row, f"{s}_culprit")
            for label, ns in c.get(s, {}).items():
                t = totals[s].setdefault(label, [0, 0, 0])
                t[0] += ns
                t[1] += 1
                t[2] += label == top
    credited = {s: [{"label": label, "total_ns": t[0], "events": t[1], "largest_in": t[2]}
                    for label, t in sorted(totals[s].items(), key=lambda kv: -kv[1][0])[:CULPRITS]]
                for s in STAGES}

    def event(i: int) -> dict[str, Any]:
        row = frame.iloc[i]
        st = {s: int(row[f"{s}_ns"]) for s in STAGES}
        return {"seq": int(row["seq"]), "t_sw_ns": int(row["t_sw_ns"]),
                **{f"{s}_ns": st[s] for s in STAGES},
                "culprits": [{"stage": s, "label": label, "ns": ns} for s in STAGES
                             for label, ns in _named(credits[i].get(s, {}), st[s])],
                "explanation": explain(st, credits[i], medians, cpu)}

    order = np.argsort(-t_sw, kind="stable")
    bands = []
    ranked = order[::-1]  # ascending t_SW
    for lo, hi in BANDS:
        members = ranked[int(len(ranked) * lo / 100):int(len(ranked) * hi / 100)]  # a partition
        if len(members):
            bands.append({"from_pct": lo, "to_pct": hi, "events": int(len(members)),
                          "t_sw_mean_ns": float(t_sw[members].mean()),
                          **{f"{s}_mean_ns": float(stages[s][members].mean()) for s in STAGES}})
    outliers = None
    if sw_threshold_ns is not None:
        above = np.flatnonzero(t_sw > sw_threshold_ns)
        by: dict[tuple[str, str], int] = {}
        for i in above.tolist():
            e = event(i)
            grown = max(STAGES, key=lambda s: (e[f"{s}_ns"] - medians[s], s == "delivery"))
            first = next((c["label"] for c in e["culprits"] if c["stage"] == grown), "")
            by[(grown, first)] = by.get((grown, first), 0) + 1
        outliers = {"threshold_ns": float(sw_threshold_ns), "count": int(len(above)),
                    "by_stage": [{"stage": s, "label": label, "events": n}
                                 for (s, label), n in sorted(by.items(), key=lambda kv: -kv[1])]}
    return {
        **summary,
        "events": int(summary["decomposed"] + sum(summary["not_decomposed"].values())),
        "clock": "mono",
        "stages": [{"stage": s, "text": STAGE_TEXT[s], **_stage_stats(stages[s])} for s in STAGES],
        "credited": credited,
        "largest": [event(i) for i in order[:LARGEST].tolist()],
        "bands": bands,
        "outliers": outliers,
    }
