"""The interruption detector's tables (seed 003): one summary row per run, then per run its
conclusion, the spoiler flags of the measured CPU and the gaps grouped by cause and source.
Display-ready like tables.py; html.py and markdown.py render them with the same Table/Cell
machinery.

The section's numbers are already in µs, ms and s (report["interruptions"], written by
station/kinds/interruptions/analysis.py), so they are shown as they are (``plain_us``: at most three
decimals), not converted from ns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from station.common.formatting import MISSING, count_text, is_number, plain_us, slug, unique_names
from station.report.tables import Cell, Table

CAUSES = ("interrupt", "throttled", "preempted", "smi", "unexplained")  # the analysis's order
CAUSE_LABEL = {"interrupt": "interrupt", "throttled": "throttled", "preempted": "preempted",
               "smi": "SMI",
               "unexplained": "unexplained"}
SUSPECT_FLAG = "suspect"  # a cell counting gaps nothing explains: the finding to look at
CAUSES_NOTE = (
    "Causes: interrupt — the handlers that ran in the gap account for at least half of it; "
    "throttled — the kernel stopped the real-time loop once a period for other work: RT throttling "
    "(its sched_rt_runtime_us budget ran out; the gap ends where the sched_rt_period_us period "
    "gives it back) or, from Linux 6.12, the fair deadline server (a starved CFS task on the CPU "
    "got its runtime of the period); preempted — another task ran (the loop's context switches "
    "moved); SMI — the CPU's SMI counter moved; unexplained — none of these: firmware, an SMI the "
    "counter does not see, a hypervisor.")


@dataclass(frozen=True)
class RunSection:
    """One run's part of the section, in reading order."""

    id: str
    anchor: str  # HTML id of the run's heading, unique in the page
    heading: str
    conclusion: str | None  # the analysis's one-sentence finding; None: nothing was analysed
    # why there is no analysis (its output could not be read), or the run's error
    problem: str | None
    spoilers: list[str]  # what on the measured CPU may disturb the measurement
    groups: Table | None  # None: no gaps, or no analysis
    families: Table | None = None  # families of unexplained gaps of about one length
    comparison: Table | None = None  # the detector beside rtla osnoise (interruptions.compare)


@dataclass(frozen=True)
class InterruptionsTables:
    summary: Table
    runs: list[RunSection]


def analysed(entry: Mapping[str, Any]) -> bool:
    """Whether the run's detector output was read (an unreadable run has only its first keys)."""
    return "conclusion" in entry or "gaps" in entry


def _ms(value: Any) -> str:
    return plain_us(value)  # the same shape: at most three decimals, whole numbers bare


def _yes_no(value: Any) -> str:
    return MISSING if value is None else ("yes" if value else "no")


def _heading(entry: Mapping[str, Any]) -> str:
    where = " · ".join(str(entry[k]) for k in ("target", "load") if entry.get(k) not in (None, ""))
    return f"{entry.get('id')}: {where}" if where else str(entry.get("id"))


def _cause_counts(entry: Mapping[str, Any]) -> Cell:
    by = entry.get("by_cause") or {}
    if not by:
        return Cell(MISSING, numeric=True)
    text = " / ".join(count_text(by.get(c, 0)) for c in CAUSES)
    suspects = by.get("unexplained") or 0
    if suspects:
        return Cell(text, numeric=True, flags=(SUSPECT_FLAG,),
                    title=f"{suspects} gap{'s' if suspects != 1 else ''} not explained by any "
                          "interrupt, task or counted SMI")
    return Cell(text, numeric=True)


def summary_table(runs: Sequence[Mapping[str, Any]]) -> Table:
    rows = []
    footnotes: list[str] = []

    def footnote(text: str) -> str:
        footnotes.append(f"[{len(footnotes) + 1}] {text}")
        return f"[{len(footnotes)}]"

    for r in runs:
        status = str(r.get("status", MISSING))
        spoilers = [str(s) for s in r.get("spoilers") or []]
        spoiler_cell = Cell(str(len(spoilers)), numeric=True,
                            flags=("problem",) if spoilers else (),
                            title="; ".join(spoilers) or None)
        head = [Cell(str(r.get("id"))), Cell(str(r.get("target") or MISSING)),
                Cell(str(r.get("load") or MISSING)), Cell(status, status=status)]
        if not analysed(r):
            why = f"its detector output could not be read (run {status}"
            why += f": {r['error']})" if r.get("error") else ")"
            head[0] = Cell(str(r.get("id")), mark=footnote(f"{r.get('id')}: {why}."),
                           flags=("problem",), title=why)
            rows.append([*head, *(Cell(MISSING, numeric=True) for _ in range(8)),
                         Cell(MISSING), Cell(MISSING), spoiler_cell])
            continue
        lost = r.get("trace_lost_events")
        trace = Cell(_yes_no(r.get("trace")))
        if r.get("trace") and is_number(lost) and lost:
            why = (f"the trace lost {int(lost)} events: gaps in those stretches are judged by "
                   "the interrupt counts alone")
            trace = Cell("yes", mark=footnote(f"{r.get('id')}: {why}."), flags=("problem",),
                         title=why)
        smi = r.get("smi_counter")
        rows.append(
            [
                *head,
                Cell(MISSING if r.get("cpu") is None else str(r["cpu"]), numeric=True),
                Cell(plain_us(r.get("threshold_us")), numeric=True),
                Cell(plain_us(r.get("measured_s")), numeric=True),
                Cell(count_text(r.get("gaps")), numeric=True),
                Cell(plain_us(r.get("max_us")), numeric=True),
                Cell(_ms(r.get("lost_ms")), numeric=True),
                Cell(_ms(r.get("blind_ms")), numeric=True),
                _cause_counts(r),
                trace,
                Cell(
                    _yes_no(smi),
                    flags=("problem",) if smi is False else (),
                    title="no SMI counter: SMIs show up as unexplained gaps"
                    if smi is False
                    else None,
                ),
                spoiler_cell,
            ]
        )
    notes = [
        "Gaps: loop iterations longer than the threshold; Worst: the longest; Time lost: all gaps "
        "together; Blind: the detector's own bookkeeping windows (writing its output), not "
        f"watched. By cause: interrupt / throttled / preempted / SMI / unexplained. {MISSING}: not "
        "known.",
        "Trace: the kernel's interrupt tracepoints were recorded, so each handler's time inside a "
        "gap is measured; without them a gap is judged by the interrupt counts and each line's "
        "usual cost. SMI counter: the CPU's SMI count (MSR 0x34) was read after every gap; "
        "without it an SMI shows up as unexplained.",
        "Spoilers: settings of the measured CPU that may disturb the measurement (listed under "
        "each run).",
        *footnotes,
    ]
    return Table("interruptions-summary", "Interruption detector runs", [
        "Run", "Target", "Load", "Status", "CPU", "Threshold (µs)", "Measured (s)",
        "Gaps", "Worst (µs)", "Time lost (ms)", "Blind (ms)",
        "By cause", "Trace", "SMI counter", "Spoilers"], rows, notes)


def groups_table(entry: Mapping[str, Any], anchor: str) -> Table | None:
    groups = entry.get("groups") or []
    if not groups:
        return None
    rows = []
    for g in groups:
        cause = str(g.get("cause") or MISSING)
        suspect = cause == "unexplained"
        rows.append([
            Cell(CAUSE_LABEL.get(cause, cause), flags=(SUSPECT_FLAG,) if suspect else ()),
            Cell(str(g.get("source") or MISSING), wrap=True),
            Cell(count_text(g.get("count")), numeric=True),
            Cell(plain_us(g.get("median_us")), numeric=True),
            Cell(plain_us(g.get("p99_us")), numeric=True),
            Cell(plain_us(g.get("max_us")), numeric=True),
            Cell(_ms(g.get("total_ms")), numeric=True),
            *_period_cells(g, suspect),
        ])
    notes = [CAUSES_NOTE,
             "Source: the interrupt line (or softirq) that took most of the gap, the task(s) that "
             "ran, or — for unexplained gaps — nothing. Period: the median time between the "
             "group's gaps (three or more needed); periodic: at least two thirds of them within "
             "10% of it, the mark of a timer (the kernel's, a device's, firmware's); a family: the "
             "group keeps no period, but its gaps of one length do (count and length given), as "
             "when a timer shares its line with other work."]
    return Table(f"{anchor}-groups", f"Gaps by cause and source: {entry.get('id')}", [
        "Cause", "Source", "Count", "Median (µs)", "p99 (µs)", "Max (µs)", "Total (ms)",
        "Period (ms)", "Periodic"], rows, notes)


def _period_cells(g: Mapping[str, Any], suspect: bool) -> list[Cell]:
    """The group's period and whether it keeps it; a group that does not, but holds a periodic
    family of gaps of one length (a timer sharing a line with other work), shows the family's."""
    periodic = g.get("periodic")
    family = next((f for f in g.get("families") or [] if f.get("periodic")), None)
    if not periodic and family is not None:
        return [Cell(f"{_ms(family.get('period_ms'))} ({count_text(family.get('count'))} of "
                     f"~{plain_us(family.get('median_us'))} µs)", numeric=True),
                Cell("a family", flags=(SUSPECT_FLAG,) if suspect else ())]
    return [Cell(_ms(g.get("period_ms")), numeric=True),
            Cell("yes" if periodic else ("no" if g.get("period_ms") is not None else MISSING),
                 flags=(SUSPECT_FLAG,) if suspect and periodic else ())]


def families_table(entry: Mapping[str, Any], anchor: str) -> Table | None:
    """The unexplained gaps grouped by length: a family with a fixed period is firmware's mark."""
    families = (entry.get("unexplained") or {}).get("clusters") or []
    if not families:
        return None
    rows = [[
        Cell(count_text(f.get("count")), numeric=True),
        Cell(plain_us(f.get("median_us")), numeric=True),
        Cell(f"{plain_us(f.get('min_us'))} – {plain_us(f.get('max_us'))}", numeric=True),
        Cell(_ms(f.get("period_ms")), numeric=True),
        Cell("yes" if f.get("periodic") else "no", flags=(SUSPECT_FLAG,
                                                          ) if f.get("periodic") else ()),
    ] for f in families]
    note = ("Unexplained gaps whose lengths lie within 10% of their neighbours', three or more: "
            "a family that keeps a fixed period (at least six gaps, two thirds of the intervals "
            "within 10% of the median) points at a timer outside the OS — an SMI handler, a "
            "hypervisor's tick.")
    return Table(f"{anchor}-families", f"Families of unexplained gaps: {entry.get('id')}",
                 ["Gaps", "Median (µs)", "Range (µs)", "Period (ms)", "Periodic"], rows, [note])


def comparison_table(entry: Mapping[str, Any], anchor: str) -> Table | None:
    """The detector beside the kernel's osnoise tracer, run after it on the same CPU."""
    o = entry.get("osnoise")
    if not o:
        return None
    by = entry.get("by_cause") or {}
    events = sum(o.get(k) or 0 for k in ("hw", "nmi", "irq", "softirq", "thread"))

    def num(value: Any) -> Cell:
        return Cell(count_text(value) if value is not None else MISSING, numeric=True)

    rows = [
        [Cell("irq-station detector (irqgap)"), Cell(f"{entry.get('measured_s', MISSING)}",
                                                     numeric=True),
         num(entry.get("gaps")), Cell(plain_us(entry.get("max_us")), numeric=True),
         num((by.get("unexplained") or 0) + (by.get("smi") or 0)), num(by.get("interrupt")),
         num((by.get("preempted") or 0) + (by.get("throttled") or 0)), Cell(MISSING)],
        [Cell("rtla osnoise (the kernel's tracer)"), Cell(f"{o.get('duration_s', MISSING)}",
                                                          numeric=True),
         num(events), Cell(plain_us(o.get("max_single_us")), numeric=True), num(o.get("hw")),
         num((o.get("irq") or 0) + (o.get("softirq") or 0)), num(o.get("thread")),
         num(o.get("nmi"))],
    ]
    note = ("rtla ran after the detector, on the same CPU, as long, under the same loads, with the "
            "detector's threshold (-T). Not explained: the detector's unexplained gaps and counted "
            "SMIs; osnoise's HW noise (none of its IRQ, softirq, NMI or thread noise overlapped "
            "it). osnoise counts each noise occurrence; the detector counts gaps, and several "
            "interrupts in one gap make one gap.")
    return Table(f"{anchor}-osnoise", f"Side by side with rtla osnoise: {entry.get('id')}",
                 ["Tool", "Ran (s)", "Noise events", "Longest single (µs)", "Not explained",
                  "Interrupts", "Other tasks", "NMI"], rows, [note])


def run_anchors(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """A page-unique id per run, from its id (suffixed when two ids give one slug)."""
    return unique_names(f"interruptions-{slug(str(r.get('id')))}" for r in runs)


def run_section(entry: Mapping[str, Any], anchor: str) -> RunSection:
    ok = analysed(entry)
    status = entry.get("status")
    problem = None
    if not ok:
        problem = (f"The detector's output could not be read (run {status or 'status unknown'}"
                   + (f": {entry['error']}" if entry.get("error") else "") + "); see the warnings.")
    elif entry.get("error"):
        problem = f"Run {status}: {entry['error']}"
    conclusion = entry.get("conclusion") if ok else None
    return RunSection(str(entry.get("id")), anchor, _heading(entry),
                      str(conclusion) if conclusion else None, problem,
                      [str(s) for s in entry.get("spoilers") or []],
                      groups_table(entry, anchor) if ok else None,
                      families_table(entry, anchor) if ok else None,
                      comparison_table(entry, anchor) if ok else None)


def interruptions_tables(report: Mapping[str, Any]) -> InterruptionsTables | None:
    """The section's tables, or None for a campaign without interruption detector runs."""
    section = report.get("interruptions")
    if not section:
        return None
    runs = section.get("runs") or []
    return InterruptionsTables(summary_table(runs),
                               [run_section(r, a) for r, a in zip(runs, run_anchors(runs),
                                                                  strict=True)])

