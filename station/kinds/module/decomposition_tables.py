"""The traced module runs' tables: each run's stages, what ran in them, and its largest events
with what made them large (report["runs"][i]["decomposition"],
station/kinds/module/decomposition.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.common.formatting import MISSING, count_text, us
from station.report.tables import Cell, Table, _n, _t


def _traced(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in report.get("runs") or [] if isinstance(r.get("decomposition"), Mapping)]


def _not_decomposed(d: Mapping[str, Any]) -> str:
    reasons = d.get("not_decomposed") or {}
    return "; ".join(f"{count_text(n)}: {why}" for why, n in reasons.items()) or "none"


def stages_table(report: Mapping[str, Any]) -> Table | None:
    runs = _traced(report)
    if not runs:
        return None
    rows = []
    for r in runs:
        d = r["decomposition"]
        stages = {s["stage"]: s for s in d.get("stages") or []}
        cells = []
        for name in ("delivery", "dispatch"):
            s = stages.get(name) or {}
            cells.append(_n(" / ".join(us(s.get(k)) for k in ("median_ns", "p99_ns", "max_ns"))))
        rows.append(
            [
                _t(r.get("id")),
                _n(f"{count_text(d.get('decomposed'))} / {count_text(d.get('events'))}"),
                *cells,
                Cell(_not_decomposed(d), wrap=True),
                _n(
                    "1 ns" if d.get("resolution_ns") == 1 else f"{us(d.get('resolution_ns'), 0)} µs"
                ),
            ]
        )
    notes = [
        "Each event of the module's own IRQ split at the kernel's irq_handler_entry for its line, "
        "read from the station's trace of the measured CPU (clock mono, the module's own "
        "CLOCK_MONOTONIC): delivery = the bus write → that entry (the bus, the interrupt "
        "controller, and whatever ran first with the IRQ pending); dispatch = that entry → the "
        "handler's timestamp (the generic IRQ code; for a threaded handler the thread's wake-up "
        "too). delivery + dispatch = t_SW exactly, for every decomposed event.",
        "Resolution: where the boundary between the stages comes from (the trace's raw "
        "nanoseconds, or the microsecond tracefs prints when the raw form could not be matched).",
    ]
    notes += [f"{r.get('id')}: {r['decomposition']['resolution_note']}" for r in runs
              if r["decomposition"].get("resolution_note")]
    return Table("decomposition", "Where t_SW went: stages per traced run", [
        "Run", "Decomposed / events", "Delivery median / p99 / max (µs)",
        "Dispatch median / p99 / max (µs)",
        "Not decomposed", "Resolution"], rows, notes)


def credited_table(report: Mapping[str, Any]) -> Table | None:
    runs = _traced(report)
    rows = []
    for r in runs:
        for stage, items in (r["decomposition"].get("credited") or {}).items():
            for c in items:
                rows.append([_t(r.get("id")), _t(stage), Cell(str(c.get("label") or MISSING),
                                                              wrap=True),
                             _n(us(c.get("total_ns"))), _n(count_text(c.get("events"))),
                             _n(count_text(c.get("largest_in")))])
    if not rows:
        return None
    return Table("decomposition_credited", "What ran in each stage (traced runs)", [
        "Run", "Stage", "What ran", "Total (µs)", "Events it ran in", "Largest share in"], rows, [
        "Each stage's time credited to what ran on the measured CPU, innermost first (an hrtimer "
        "callback inside the timer interrupt is the callback's; NMIs over everything). \"nothing "
        "traced (X running)\": in delivery, the IRQ was raised but not yet taken while task X ran "
        "and no handler, softirq, timer or NMI was traced: the bus and interrupt controller, IRQs "
        "off in untraced code, firmware (SMI) or a hypervisor. The largest contributors per stage; "
        "\"Largest share in\": the events where it held the largest part of that stage."])


def largest_table(report: Mapping[str, Any]) -> Table | None:
    runs = _traced(report)
    rows = []
    for r in runs:
        for e in r["decomposition"].get("largest") or []:
            rows.append([_t(r.get("id")), _n(str(e.get("seq"))), _n(us(e.get("t_sw_ns"))),
                         _n(us(e.get("delivery_ns"))), _n(us(e.get("dispatch_ns"))),
                         Cell(str(e.get("explanation") or MISSING), wrap=True)])
    if not rows:
        return None
    notes = ["The largest t_SW of each traced run, each with the stage that grew most over its "
             "median and what ran in it (everything that held at least a tenth of that stage)."]
    for r in runs:
        o = r["decomposition"].get("outliers")
        if o and o.get("count"):
            parts = ", ".join(f"{count_text(b['events'])} {b['stage']} ({b['label']})"
                              for b in (o.get("by_stage") or [])[:5])
            notes.append(f"{r.get('id')}: {count_text(o['count'])} decomposed events above the "
                         f"robust outlier threshold {us(o.get('threshold_ns'))} µs; the stage that "
                         f"grew and what ran most in it: {parts}.")
    return Table("decomposition_largest", "Largest events and where their time went (traced runs)",
                 [
        "Run", "Event (seq)", "t_SW (µs)", "Delivery (µs)", "Dispatch (µs)", "What made it large"],
        rows, notes)


def overhead_table(report: Mapping[str, Any]) -> Table | None:
    rows = []
    for r in _traced(report):
        o = r["decomposition"].get("overhead")
        if not isinstance(o, Mapping):
            continue
        sides = [o.get("traced") or {}, o.get("untraced") or {}]
        rows.append([_t(r.get("id")), _n(f"{o['block_s']:g}" if o.get("block_s") else MISSING),
                     *(_n(f"{count_text(x.get('count'))}: {us(x.get('median_ns'))} / "
                          f"{us(x.get('p99_ns'))}")
                       for x in sides),
                     _n(f"{us(o.get('median_added_ns'))} / {us(o.get('p99_added_ns'))}")])
    if not rows:
        return None
    return Table("decomposition_overhead", "What tracing cost (module.trace_overhead)", [
        "Run", "Block (s)", "Traced: events: median / p99 (µs)",
        "Untraced: events: median / p99 (µs)",
        "Added by tracing: median / p99 (µs)"], rows, [
        "The same run alternated recorded and unrecorded blocks (the trace's recording switched "
        "off and on, each switch marked in the trace): t_SW of the events wholly inside each kind "
        "of block, same target, same load, interleaved in time. The difference is what recording "
        "the trace added to the path measured (the tracepoints stay enabled in both: their call "
        "without a record is not in it); events caught while the recording was switched are in "
        "neither."])
