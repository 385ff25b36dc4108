"""The companion `rtla timerlat hist` run of a cyclictest run (cyclictest.companion): its figures
per CPU as rtla printed them, its maxima beside the seed's table, and what it found."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from station.parsers import timerlat

# of what rtla printed after its summary (its auto-analysis): the rest stays in timerlat.out
ANALYSIS_CHARS = 4000
STOPPED_NOTE = ("rtla stopped at the first latency above cyclictest.timerlat_stop: its figures end "
                "at that sample (its trace: the run's timerlat_trace.txt; its analysis: "
                "timerlat.out)")


def timerlat_notes(entries: list[dict[str, Any]]) -> list[str]:
    """Each reason the timerlat companion did not run (or failed) once, with the runs it applies
    to."""
    runs: dict[str, list[str]] = {}
    for e in entries:
        if (e.get("timerlat") or {}).get("note"):
            runs.setdefault(e["timerlat"]["note"], []).append(e["id"])
    return [f"Run {ids[0]}: {note}" if len(ids) == 1 else
            f"Runs {', '.join(ids[:4])}{f' and {len(ids) - 4} more' if len(ids) > 4 else ''}: "
            f"{note}"
            for note, ids in runs.items()]


def timerlat_entry(run_dir: Path, sealed: Mapping[str, Any], run_id: str,
                   notes: list[str]) -> dict[str, Any]:
    """The companion rtla timerlat run's figures per CPU (µs), as rtla printed them; its note when
    it did not run or failed."""
    entry: dict[str, Any] = {"arguments": sealed.get("arguments"), "note": sealed.get("note"),
                             "cpus": [],
                             "irq_max_us": None, "thread_max_us": None, "stopped": False,
                             "analysis": None}
    path = run_dir / "timerlat.out"
    text = path.read_text(errors="replace") if path.is_file() else ""
    if not text.strip():
        return entry
    try:
        hist = timerlat.parse_hist(text)
    except timerlat.TimerlatOutputError as exc:
        notes.append(f"Run {run_id}: rtla timerlat's output cannot be read: {exc}")
        return entry

    def us(value: int | None) -> int | float | None:  # rtla's whole µs stay whole
        if value is None or hist.unit_ns == 1000:
            return value
        return value * hist.unit_ns / 1000

    def figures(s: timerlat.Summary | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {"count": s.count, "over": s.over, "min": us(s.min), "avg": us(s.avg),
                "max": us(s.max)}

    for cpu, kinds in sorted(hist.by_cpu().items()):
        entry["cpus"].append({"cpu": cpu, "irq": figures(kinds.get("irq")),
                              "thread": figures(kinds.get("thread"))})
    for kind in ("irq", "thread"):
        maxima = [c[kind]["max"] for c in entry["cpus"] if c[kind] and c[kind]["max"] is not None]
        entry[f"{kind}_max_us"] = max(maxima) if maxima else None
    entry["stopped"] = hist.stopped
    entry["analysis"] = hist.analysis[:ANALYSIS_CHARS] or None
    return entry


def timerlat_findings(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per target with timerlat figures: the kernel's own largest thread latency beside
    cyclictest's."""
    tl, table = section.get("timerlat_table") or {}, section.get("table") or {}
    out = []
    for target in tl.get("targets") or []:
        cells = (tl.get("max_us") or {}).get(target) or {}
        threads = {c: v["thread_max_us"]
                   for c, v in cells.items() if v["thread_max_us"] is not None}
        if not threads:
            continue
        case = max(threads, key=lambda c: threads[c])
        irq = cells[case]["irq_max_us"]
        ct = ((table.get("max_latency_us") or {}).get(target) or {}).get(case)
        out.append(
            {
                "kind": "timerlat_max",
                "target": target,
                "load": case,
                "thread_max_us": threads[case],
                "irq_max_us": irq,
                "cyclictest_max_us": ct,
                "headline": f"On {target}, rtla timerlat's largest thread latency",
                "see": "table-timerlat-max",
                "figure": f"{threads[case]:g} µs under {case}"
                + (f" (cyclictest: {ct:g} µs)" if ct is not None else ""),
                "text": f"On {target}, the kernel's timerlat tracer measured its "
                "largest thread latency, "
                f"{threads[case]:g} µs, under {case}"
                + (f" (its timer IRQ: {irq:g} µs)" if irq is not None else "")
                + (f"; cyclictest's maximum there: {ct:g} µs" if ct is not None else "")
                + ". The two ran one after the other under the same load, not at "
                "once: each maximum is its own "
                "draw.",
            }
        )
    return out


def timerlat_table(entries: list[dict[str, Any]], targets: list[str],
                    cases: list[str]) -> dict[str, Any]:
    """rtla timerlat's maxima beside the seed's table: per target × case, the largest IRQ and
    thread latency of the cell's complete runs (null where timerlat did not measure it)."""
    table: dict[str, dict[str, dict[str, float | None]]] = {
        t: {c: {"irq_max_us": None, "thread_max_us": None} for c in cases} for t in targets}
    notes: dict[str, dict[str, str]] = {}
    for e in entries:
        tl = e.get("timerlat")
        if tl is None:
            continue
        cell = table.setdefault(e["target"], {}).setdefault(e["load"], {"irq_max_us": None,
                                                                        "thread_max_us": None})
        if tl.get("note") or tl.get("stopped"):
            notes.setdefault(e["target"], {})[e["load"]] = tl.get("note") or STOPPED_NOTE
        if e["status"] != "complete":
            continue
        for key in ("irq_max_us", "thread_max_us"):
            if tl.get(key) is not None:
                cell[key] = tl[key] if cell[key] is None else max(cell[key], tl[key])
    return {"targets": targets, "cases": cases, "max_us": table, "notes": notes}
