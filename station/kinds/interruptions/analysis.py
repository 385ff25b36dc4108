"""The interruption detector's analysis (seed 003): a run's gaps attributed (attribution.py), the
kernel's throttling named (throttling.py), their patterns (patterns.py), and the run's finding in
one sentence, its summary and the report section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from station.analysis.campaign import AnalysisInput, KindReport, entry_identity, section_report
from station.common.formatting import duration_us
from station.kinds.interruptions.attribution import (
    CAUSES,
    Attributed,
    RunOutputs,
    attribute,
    line_costs,
    line_label,
    read_outputs,
    uncosted,
)
from station.kinds.interruptions.patterns import clusters, groups, periodicity
from station.kinds.interruptions.throttling import Throttling, mark_throttled, throttled_blind_spans
from station.parsers import rtla
from station.parsers.irqgap import IrqgapOutputError
from station.store.manifest import MANIFEST, read_manifest
from station.target import virtualization

CAUSE_WORDS = {"interrupt": "an interrupt", "throttled": "the kernel's throttling",
               "preempted": "another task",
               "smi": "an SMI", "unexplained": "unexplained"}


# what takes a CPU from the kernel unseen, by architecture (irqgap's `arch`): x86's SMIs, which a
# counter may show; on arm64 the secure monitor (TrustZone) and SDEI events, which none does
FIRMWARE_WORDS = {
    "": {"unseen": "an SMI the counter does not see", "short": "SMI", "none": "firmware or SMIs",
         "stall": "SMI"},
    "aarch64": {"unseen": "TrustZone's secure monitor or an SDEI event: arm64 has no SMI, and "
                          "nothing counts firmware's time", "short": "TrustZone, SDEI",
                "none": "firmware (TrustZone, SDEI)", "stall": "firmware stall"},
}


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
    head += f" (worst {duration_us(summary['max_us'])}" + (
        f", {_cause_words(worst)})" if worst else ")"
    )
    by_cause = summary["by_cause"]
    parts = []
    if by_cause.get("interrupt"):
        top = [r for r in rows if r["cause"] == "interrupt"][:3]
        parts.append(
            f"{by_cause['interrupt']} interrupts ("
            + ", ".join(f"{r['source']} {r['count']}" for r in top)
            + ")"
        )
    if by_cause.get("throttled"):
        n_thr = by_cause["throttled"]
        worst = max((r["max_us"] for r in rows if r["cause"] == "throttled"), default=None)
        in_blind = summary.get("throttled_blind_spans") or 0
        by = next((_cause_words(r) for r in rows if r["cause"] == "throttled"), "RT throttling")
        parts.append(
            f"{n_thr} stop{'s' if n_thr != 1 else ''} by {by}"
            + (f" and {in_blind} more while the detector wrote its records" if in_blind else "")
            + f" (up to {duration_us(worst)}: "
            f"{summary['throttling']}; to measure without it, {summary['throttling_advice']})"
        )
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
        firmware = FIRMWARE_WORDS.get(summary.get("arch") or "", FIRMWARE_WORDS[""])
        who = {True: "the hypervisor (this target is a virtual machine) or firmware took the CPU",
               False: f"firmware ({firmware['unseen']}) took the CPU: the target shows no sign of "
                      "a hypervisor"}.get(summary.get("virtual_machine"),
                                          f"firmware ({firmware['short']}) or a hypervisor took "
                                          "the CPU")
        text += (f"; {suspects['count']} not explained by any interrupt "
                 f"({duration_us(suspects['median_us'])} median{shape}): {who}")
    else:
        firmware = FIRMWARE_WORDS.get(summary.get("arch") or "", FIRMWARE_WORDS[""])
        text += (f"; none unexplained: no sign of {firmware['none']}" if summary.get("trace") else
                 f"; none unexplained by the counts (no trace: a short {firmware['stall']} next "
                 "to a counted interrupt would pass for it)")
    if summary.get("uncosted_gaps"):
        text += (f" ({summary['uncosted_gaps']} of them with interrupts counted on lines whose "
                 "usual cost no trace or calibration gave: counts alone cannot tell an interrupt "
                 "from a stall it followed)")
    if summary.get("blind_spans"):
        text += (f"; and {summary['blind_spans']} times the CPU was taken while the detector wrote "
                 f"its records (up to {duration_us(summary['blind_span_max_us'])}, not attributed)")
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
        "cpu": out.cpu, "clock": out.clock, "arch": out.arch,
        "threshold_us": out.threshold_ns / 1e3,
        "priority": out.priority,
        "measured_s": None if measured_s is None else round(measured_s, 3), "gaps": len(gaps),
        "max_us": round(max(durations) / 1e3, 3) if durations else None,
        "lost_ms": round(sum(durations) / 1e6, 3),
        "blind_ms": round(end["blind_ns"] / 1e6, 3) if end.get("blind_ns") is not None else None,
        # bookkeeping the CPU was taken from: what the detector saw only as lost watching time
        "blind_spans": len(out.blind),
        "blind_span_max_us": round(max(d for _, d in out.blind) / 1e3, 3) if out.blind else None,
        "min_loop_ns": end.get("min_loop_ns"), "iterations": end.get("iterations"),
        "end_reason": end.get("reason"), "smi_counter": out.smi_available,
        "smi_reason": out.smi_reason,
        "trace": run.trace is not None,
        "trace_lost_events": (run.trace_overrun + run.trace.lost_events)
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
    spoilers = read_manifest(run_dir).spoilers if (run_dir / MANIFEST).is_file() else None
    facts = spoilers.facts if spoilers else {}
    throttling = Throttling.from_facts(facts, run.gaps.cpu)
    # the span the throttling rule's coverage counts periods over: to the last tick where the end
    # record is missing (a cut output), never none (which let two gaps a period apart pass)
    mark_throttled(gaps, throttling, run.gaps.priority, measured_span_ns(run.gaps), run.gaps.blind)
    summary = summarise(run, gaps)
    summary["calibrated"] = run.calibration is not None
    summary["line_costs"] = [{"line": line_label(run.gaps, i), "cost_us": round(c.ns / 1e3, 3),
                              "basis": c.basis,
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


def analyse_runs(run_dirs: list[Path], campaign: dict[str, Any]) -> tuple[dict[str, Any], dict,
                                                                          list[str]]:
    """(report["interruptions"], samples by run id, notes) for a campaign's detector runs."""
    notes: list[str] = []
    entries = []
    for run_dir in run_dirs:
        manifest = read_manifest(run_dir)
        entry: dict[str, Any] = {
            **entry_identity(manifest),
            "spoilers": manifest.spoilers.flags if manifest.spoilers else [],
            "osnoise_note": manifest.section("interruptions").get("rtla_note"),
        }
        if entry["status"] != "complete":
            notes.append(f"Run {entry['id']} is {entry['status']}: "
                         f"{entry['error'] or 'see its manifest'}")
        try:
            summary, gaps = analyse_run_dir(run_dir)
        except (OSError, IrqgapOutputError, ValueError) as exc:
            notes.append(f"Run {entry['id']}: its detector output cannot be read: {exc}")
            entries.append(entry)
            continue
        notes.extend(f"Run {entry['id']}: {p}" for p in summary.pop("problems"))
        if entry["osnoise_note"]:
            notes.append(f"Run {entry['id']}: {entry['osnoise_note']}")
        if cal_note := manifest.section("interruptions").get("calibration_note"):
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
