"""The cyclictest tables (seed 004): maximum latency per target × case, the targets,
and per-thread statistics. Display-ready like tables.py; html.py and markdown.py
render them with the same Table/Cell machinery.

cyclictest reports whole microseconds, so these tables show µs as cyclictest
prints them (``plain_us``), not the module runs' 3-decimal ns resolution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from station.common.formatting import (
    MISSING,
    WEAK_PERCENTILE_NOTE,
    count_text,
    is_number,
    ordered,
    percentile_is_reliable,
    percentile_keys,
    plain_us,
    slug,
)
from station.report.tables import Cell, Table

OVER_DEADLINE_MARK = "▲"
AVG_DECIMALS = 2  # cyclictest's JSON gives averages to 2 decimals and more
BEYOND_RANGE = "> range"
EMULATED_BADGE = ("emulated", "emulated (QEMU/TCG): not hardware numbers")
EMULATED_NOTE = (
    "emulated (QEMU/TCG): the target is a virtual machine whose CPU is emulated in software; "
    "its latencies are the emulator's, not a kernel's on hardware. Compare its rows with each "
    "other, never with numbers measured on a real machine.")
BEYOND_RANGE_NOTE = (
    f"{BEYOND_RANGE}: the percentile lies beyond the histogram's range (cyclictest -h), where "
    "samples are only counted (Overflows); cyclictest's own Max still holds.")


@dataclass(frozen=True)
class CyclictestTables:
    """The tables of report["cyclictest"], in reading order."""

    max_latency: Table
    targets: Table | None
    threads: list[Table]  # one per target
    deadline: Table | None = None
    timerlat: Table | None = None  # rtla timerlat's maxima (cyclictest.companion)


def _ns_to_us(value_ns: Any) -> Any:
    return value_ns / 1000 if is_number(value_ns) else None


def _names(values: Iterable[Any]) -> list[str]:
    return [str(v) for v in values if v is not None]


def target_badges(description: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The architecture and kernel (PREEMPT_RT or regular), when known, and the emulation
    warning."""
    description = description or {}
    badges = []
    if description.get("arch"):
        badges.append(("arch", str(description["arch"])))
    rt = description.get("preempt_rt")
    if rt is not None:
        badges.append(("rt", "PREEMPT_RT") if rt else ("regular", "regular"))
    if description.get("emulated"):
        badges.append(EMULATED_BADGE)
    return tuple(badges)


def _row_order(section: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    table = section.get("table") or {}
    runs = section.get("runs") or []
    # The analysis's row/column order first, keeping rows it lists with nothing measured.
    targets = ordered(_names(r.get("target") for r in runs), _names(table.get("targets") or ()),
                      keep_unseen=True)
    cases = ordered(_names(r.get("load") for r in runs), _names(table.get("cases") or ()),
                    keep_unseen=True)
    return targets, cases


def max_latency_table(section: Mapping[str, Any]) -> Table:
    table = section.get("table") or {}
    values = table.get("max_latency_us") or {}
    problems = table.get("problems") or {}
    descriptions = section.get("targets") or {}
    deadline = section.get("deadline_us")
    deadline = deadline if is_number(deadline) else None
    targets, cases = _row_order(section)
    footnotes: list[str] = []
    over = 0
    rows = []
    for target in targets:
        row = [Cell(target, badges=target_badges(descriptions.get(target)))]
        for case in cases:
            value = (values.get(target) or {}).get(case)
            problem = (problems.get(target) or {}).get(case)
            marks, flags, why = [], [], []
            if deadline is not None and is_number(value) and value > deadline:
                over += 1
                marks.append(OVER_DEADLINE_MARK)
                flags.append("over-deadline")
                why.append(f"above the {plain_us(deadline)} µs deadline")
            if problem:
                footnotes.append(f"[{len(footnotes) + 1}] {target} · {case}: {problem}")
                marks.append(f"[{len(footnotes)}]")
                flags.append("problem")
                why.append(str(problem))
            row.append(Cell(plain_us(value), numeric=True, mark=" ".join(marks),
                            flags=tuple(flags), title="; ".join(why) or None))
        rows.append(row)
    notes = ["Largest latency cyclictest measured in each target × case, over every thread of "
             "its complete runs, in whole µs as cyclictest reports them. "
             f"{MISSING}: no complete run measured that cell."]
    if deadline is not None:
        notes.append(f"{OVER_DEADLINE_MARK} above the deadline of {plain_us(deadline)} µs "
                     f"({over} of {len(targets) * len(cases)} cells).")
    if any((descriptions.get(t) or {}).get("emulated") for t in targets):
        notes.append(EMULATED_NOTE)
    notes += footnotes
    return Table("cyclictest-max", "Maximum latency (µs): targets × cases",
                 ["Target", *cases], rows, notes, row_headers=True)


def timerlat_table(section: Mapping[str, Any]) -> Table | None:
    """rtla timerlat's maxima beside cyclictest's: "IRQ / thread" µs per target × case."""
    tl = section.get("timerlat_table")
    if not tl:
        return None
    values, why = tl.get("max_us") or {}, tl.get("notes") or {}
    targets, cases = _row_order(section)
    # one footnote per distinct reason (a kernel without the tracer says the same for every cell)
    where: dict[str, list[tuple[str, str]]] = {}
    for target in targets:
        for case in cases:
            if note := (why.get(target) or {}).get(case):
                where.setdefault(note, []).append((target, case))
    number = {note: i + 1 for i, note in enumerate(where)}
    rows = []
    for target in targets:
        row = [Cell(target, badges=target_badges((section.get("targets") or {}).get(target)))]
        for case in cases:
            cell = (values.get(target) or {}).get(case) or {}
            irq, thread = cell.get("irq_max_us"), cell.get("thread_max_us")
            text = (
                MISSING
                if irq is None and thread is None
                else f"{plain_us(irq)} / {plain_us(thread)}"
            )
            note = (why.get(target) or {}).get(case)
            row.append(Cell(text, numeric=True, mark=f"[{number[note]}]" if note else "",
                            title=note))
        rows.append(row)
    footnotes = []
    for note, cells in where.items():
        by_target: dict[str, list[str]] = {}
        for target, case in cells:
            by_target.setdefault(target, []).append(case)
        places = "; ".join(f"{t} (every case)" if len(cs) == len(cases) else f"{t} · "
                                                                             f"{', '.join(cs)}"
                           for t, cs in by_target.items())
        footnotes.append(f"[{number[note]}] {places}: {note}")
    notes = ["The kernel's own timer latency (rtla timerlat hist, run after cyclictest on the "
             "same CPUs, period and priority, under the same load): the largest timer IRQ latency "
             "/ timerlat thread latency of any CPU in the cell's complete runs, µs. The thread's "
             f"is the one to set beside cyclictest's. {MISSING}: not measured.", *footnotes]
    return Table("timerlat-max",
                 "rtla timerlat maximum latency (µs, IRQ / thread): targets × cases",
                 ["Target", *cases], rows, notes, row_headers=True)


def targets_table(section: Mapping[str, Any]) -> Table | None:
    descriptions = section.get("targets") or {}
    if not descriptions:
        return None
    targets, _ = _row_order(section)
    rows = []
    for name in ordered(_names(descriptions), targets):
        d = descriptions.get(name) or {}
        rt = d.get("preempt_rt")
        rows.append([
            Cell(name),
            Cell(MISSING if rt is None else ("PREEMPT_RT" if rt else "regular")),
            Cell(str(d.get("kernel_release") or MISSING)),
            Cell(str(d.get("kind") or MISSING)),
            Cell(count_text(d.get("cpus")), numeric=True),
            _virtual_cell(d),
            Cell(str(d.get("uname") or MISSING), wrap=True),
        ])
    return Table("cyclictest-targets", "Targets", [
        "Target", "Kernel", "Release", "Kind", "CPUs", "Virtual machine", "uname"], rows,
        ["Virtual machine: emulated — a QEMU/TCG guest whose CPU is emulated in software; yes — a "
         "guest on a hypervisor (the evidence the target gave), its latencies include the "
         f"hypervisor's; no — the target shows no sign of one; {MISSING} — it could not tell."],
        row_headers=True)


def _virtual_cell(d: Mapping[str, Any]) -> Cell:
    if d.get("emulated"):
        return Cell("emulated (the twin)" if d.get("kind") == "twin" else "emulated (QEMU/TCG)",
                    flags=("problem",), title=EMULATED_NOTE)
    virtual = d.get("virtual_machine")
    if virtual is None:
        return Cell(MISSING)
    if not virtual:
        return Cell("no", title=d.get("virtual_evidence") or None)
    return Cell("yes", flags=("problem",), title=d.get("virtual_evidence") or None)


def _percentile_cells(stats: Mapping[str, Any] | None, pkeys: Sequence[str],
                      seen: dict[str, bool]) -> list[Cell]:
    """One cell per percentile: µs, '> range' beyond the histogram, † when from too few samples."""
    stats = stats or {}
    percentiles = stats.get("percentiles_ns") or {}
    ci = stats.get("percentile_ci95_ns") or {}
    count = stats.get("count")
    cells = []
    for key in pkeys:
        value = percentiles.get(key)
        if key in percentiles and value is None:
            seen["beyond"] = True
            cells.append(Cell(BEYOND_RANGE, numeric=True))
            continue
        weak = is_number(value) and not percentile_is_reliable(key, count)
        seen["weak"] |= weak
        interval = ci.get(key)
        title = None
        if isinstance(interval, list | tuple) and len(interval) == 2:
            lo, hi = (BEYOND_RANGE if v is None else f"{plain_us(_ns_to_us(v))} µs"
                      for v in interval)
            method = (stats.get("percentile_ci_method") or {}).get(key)
            title = f"95% CI {lo} – {hi}" + (f" (from the run's {method})" if method else "")
        elif stats.get("percentile_ci_withheld"):
            title = f"no interval: {stats['percentile_ci_withheld']}"
        cells.append(Cell(plain_us(_ns_to_us(value)), numeric=True, weak=weak, title=title))
    return cells


def _run_notes(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    notes = [f"{r.get('id')} ({r.get('status')}): {r['error']}" for r in runs if r.get("error")]
    for r in runs:
        brk = r.get("break")
        if brk:
            notes.append(f"{r.get('id')}: cyclictest stopped itself (--breaktrace) when thread "
                         f"{brk.get('thread', MISSING)} measured {plain_us(brk.get('value_us'))} "
                         "µs.")
    by_invocation: dict[str, list[str]] = {}
    for r in runs:
        if r.get("cyclictest_version") or r.get("arguments"):
            text = (f"cyclictest {r.get('cyclictest_version') or '(version unknown)'} "
                    + " ".join(str(a) for a in r.get("arguments") or []))
            by_invocation.setdefault(text.strip(), []).append(str(r.get("id")))
    for text, ids in by_invocation.items():
        notes.append(f"{text} — {'every run' if len(ids) == len(runs) else ', '.join(ids)}.")
    return notes


def thread_tables(section: Mapping[str, Any]) -> list[Table]:
    runs = section.get("runs") or []
    targets, cases = _row_order(section)
    pkeys = percentile_keys([t.get("stats") for r in runs for t in r.get("threads") or []]
                            + [r.get("combined") for r in runs])
    tables = []
    for target in targets:
        mine = sorted((r for r in runs if str(r.get("target")) == target),
                      key=lambda r: (cases.index(str(r.get("load"))) if r.get("load") in cases
                                     else len(cases), r.get("repetition") or 0))
        if not mine:
            continue
        seen = {"weak": False, "beyond": False}
        rows = []
        for r in mine:
            head = [Cell(str(r.get("id"))), Cell(str(r.get("load") or MISSING)),
                    Cell(str(r.get("repetition", MISSING)), numeric=True),
                    Cell(str(r.get("status", MISSING)), status=str(r.get("status")))]
            threads = r.get("threads") or []
            for t in threads:
                rows.append([*head, Cell(str(t.get("thread", MISSING))),
                             Cell(MISSING if t.get("cpu") is None else str(t["cpu"]), numeric=True),
                             Cell(count_text(t.get("cycles")), numeric=True),
                             Cell(plain_us(t.get("min_us")), numeric=True),
                             Cell(plain_us(t.get("avg_us"), AVG_DECIMALS), numeric=True),
                             Cell(plain_us(t.get("max_us")), numeric=True),
                             *_percentile_cells(t.get("stats"), pkeys, seen),
                             Cell(count_text(t.get("overflows")), numeric=True)])
            combined = r.get("combined")
            if combined and len(threads) != 1:
                # Extremes from cyclictest's own per-thread values: the pooled histogram's
                # max stops at its range, and the all row must not contradict a thread row.
                mins = [t.get("min_us") for t in threads]
                maxes = [t.get("max_us") for t in threads]
                low = (min(mins) if mins and all(map(is_number, mins))
                       else _ns_to_us(combined.get("min_ns")))
                high = (max(maxes) if maxes and all(map(is_number, maxes))
                        else _ns_to_us(combined.get("max_ns")))
                rows.append([*head, Cell("all"), Cell(MISSING),
                             Cell(count_text(combined.get("count")), numeric=True),
                             Cell(plain_us(low), numeric=True),
                             Cell(plain_us(_ns_to_us(combined.get("mean_ns")), AVG_DECIMALS),
                                  numeric=True),
                             Cell(plain_us(high), numeric=True),
                             *_percentile_cells(combined, pkeys, seen),
                             Cell(count_text(combined.get("overflows")), numeric=True)])
            if not threads and not combined:
                rows.append([*head, *(Cell(MISSING) for _ in range(6 + len(pkeys) + 1))])
        notes = ["Cycles, Min, Avg, Max: cyclictest's own summary per thread; percentiles: "
                 "from its 1 µs histogram. Overflows: cycles beyond the histogram's range. "
                 "all: the run's threads together (Min, Max: over the threads; the rest from "
                 "their pooled histogram)."]
        if seen["beyond"]:
            notes.append(BEYOND_RANGE_NOTE)
        if seen["weak"]:
            notes.append(WEAK_PERCENTILE_NOTE)
        notes += _run_notes(mine)
        tables.append(Table(f"cyclictest-threads-{slug(target)}", f"Per thread: {target} (µs)", [
            "Run", "Case", "Rep.", "Status", "Thread", "CPU", "Cycles", "Min", "Avg", "Max",
            *pkeys, "Overflows"], rows, notes))
    return tables


INDEPENDENT_CYCLES = "cycles taken as independent"  # analysis.py's and slices.py's method, unsliced


def deadline_table(section: Mapping[str, Any]) -> Table | None:
    """How often each target × case reached the deadline, with its interval (seed 004's question:
    not only whether the maximum is above it, but how often)."""
    view = section.get("deadline_view") or []
    if not view:
        return None
    deadline = plain_us(view[0].get("deadline_us"))
    rows = [[Cell(str(v.get("target"))), Cell(str(v.get("load"))), Cell(count_text(v.get("cycles")),
                                                                        numeric=True),
             Cell(count_text(v.get("above")), numeric=True),
             Cell(f"{v.get('p_exceed', 0):.2g} [{v.get('ci_low', 0):.2g}, "
                  f"{v.get('ci_high', 0):.2g}]", numeric=True,
                  flags=("over-deadline",) if v.get("above") else (), title=v.get("method"))]
            for v in view]
    sliced = [
        v
        for v in view
        if not str(v.get("method") or INDEPENDENT_CYCLES).startswith(INDEPENDENT_CYCLES)
    ]
    notes = [f"Cycles whose latency reached the {deadline} µs deadline, over every thread of the "
             "complete runs of each target × case; 95 % Clopper–Pearson interval. Buckets are "
             "whole µs: a cycle in the deadline's own bucket counts as reaching it."]
    if len(sliced) < len(view):
        notes.append("Where the runs were not sliced the interval takes the cycles as independent: "
                     "a histogram keeps no time order to see them come in clusters, so under a "
                     "load's phases it is too narrow (cyclictest.slices gives the time order).")
    if sliced:
        notes.append("Where every run was sliced (cyclictest.slices) the interval is over the "
                     "effective cycles the slices show (batch means of the slices, or the extremal "
                     "index where the cycles that reached it are few); the cell's tooltip says "
                     "which.")
    if any(v.get("overflows") for v in view):
        notes.append("Cycles beyond the histogram's range (overflows) count as above the deadline: "
                     "there the probability is an upper bound.")
    return Table("cyclictest-deadline", f"Deadline {deadline} µs: how often it was reached",
                 ["Target", "Case", "Cycles", f"≥ {deadline} µs", "Probability per cycle [95 %]"],
                 rows, notes)


def cyclictest_tables(report: Mapping[str, Any]) -> CyclictestTables | None:
    """The cyclictest tables, or None for a campaign without a cyclictest section."""
    section = report.get("cyclictest")
    if not section:
        return None
    return CyclictestTables(max_latency_table(section), targets_table(section),
                            thread_tables(section), deadline_table(section),
                            timerlat_table(section))
