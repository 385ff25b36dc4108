"""Analysis of cyclictest runs (seed 004): per-thread figures as cyclictest reported
them (its min/avg/max are exact), histogram statistics per thread and for all threads
together (station/analysis/histogram.py), and the seed's maximum-latency table
(rows: targets, columns: cases = the campaign's loads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from station.analysis import slices as ct_slices
from station.analysis.campaign import AnalysisInput, KindReport, entry_identity, section_report
from station.analysis.histogram import Histogram, combine, from_cyclictest
from station.analysis.samples import RunSamples, ThreadHistogram
from station.common.units import decimal_int
from station.kinds.cyclictest.on_target import SLICE_MARK
from station.kinds.cyclictest.timerlat_companion import (
    timerlat_entry,
    timerlat_findings,
    timerlat_notes,
    timerlat_table,
)
from station.parsers.cyclictest import (
    CyclictestOutputError,
    CyclictestReport,
    CyclictestThread,
    HistogramOutput,
    parse_histogram,
    parse_json,
)
from station.store.manifest import Manifest, read_manifest
from station.target.virtualization import Verdict

SINGLE_TARGET = "target"  # the row name of a campaign with one unnamed bench.target
EMULATED_KINDS = ("vm", "twin")


@dataclass(frozen=True)
class RunOutput:
    """What one cyclictest run printed: its stdout histogram and its --json file; a sliced run
    (cyclictest.slices) printed one histogram per slice (`slices`, in time order) and `text` is
    their sum."""

    text: HistogramOutput | None
    json: CyclictestReport | None
    # an output that could not be read while the other could; a cut last slice
    problems: tuple[str, ...] = ()
    slices: tuple[HistogramOutput, ...] = ()

    @property
    def threads(self) -> tuple[CyclictestThread, ...]:
        # JSON first: it has each thread's CPU and an average to two decimals (the text's is
        # truncated)
        source = self.json or self.text
        return source.threads if source is not None else ()

    @property
    def histogram_range(self) -> int | None:
        for source in (self.json, self.text):
            if source is not None and source.histogram_range is not None:
                return source.histogram_range
        return None

    def overflows(self, index: int) -> int | None:
        """The overflow count cyclictest printed for a thread (the JSON has none)."""
        if self.text is not None:
            for t in self.text.threads:
                if t.index == index:
                    return t.overflows
        return None


def read_outputs(run_dir: Path, nsecs: bool = False) -> RunOutput:
    """Parse a run directory's cyclictest.out and cyclictest.json (either may be absent);
    raises CyclictestOutputError on output that cannot be read."""
    parsed: dict[str, Any] = {}
    problems: list[str] = []
    slices: tuple[HistogramOutput, ...] = ()
    stdout = _read(run_dir / "cyclictest.out")
    if SLICE_MARK in stdout:
        slices = _read_slices(stdout, nsecs, problems)
    def text(t: str) -> HistogramOutput:
        return merge_slices(slices) if slices else parse_histogram(t, nsecs=nsecs)

    for name, parse in (("cyclictest.out", text), ("cyclictest.json", parse_json)):
        content = stdout if name == "cyclictest.out" else _read(run_dir / name)
        try:
            parsed[name] = parse(content) if content.strip() else None
        # a truncated file: the other one may still hold the results
        except CyclictestOutputError as exc:
            parsed[name] = None
            problems.append(f"{name}: {exc}")
    out = RunOutput(parsed["cyclictest.out"], parsed["cyclictest.json"], tuple(problems), slices)
    if not out.threads:
        raise CyclictestOutputError("; ".join(problems) or "cyclictest printed no results")
    return out


def _read_slices(stdout: str, nsecs: bool, problems: list[str]) -> tuple[HistogramOutput, ...]:
    """A sliced run's stdout: the histogram each slice printed, in order. A slice that printed
    nothing (the run stopped between two) is no slice; the last one cut short while it printed (the
    run stopped then) is left out, said in `problems`, and the slices before it stand; any other
    that cannot be read is an error with its number (its lines count from its own mark)."""
    parts = [p for p in stdout.split(SLICE_MARK)[1:] if p.partition("\n")[2].strip()]
    out = []
    for n, part in enumerate(parts, 1):
        head, _, body = part.partition("\n")
        try:
            out.append(parse_histogram(body, nsecs=nsecs))
        except CyclictestOutputError as exc:
            if n == len(parts) and out:
                problems.append(f"slice {head.strip()} cannot be read ({exc}): cut short? The "
                                f"run's figures are those of the {len(out)} slices before it")
                break
            raise CyclictestOutputError(f"slice {head.strip()}: {exc}") from None
    return tuple(out)


def merge_slices(slices: tuple[HistogramOutput, ...]) -> HistogramOutput:
    """The whole run from its slices: per thread, buckets and overflows summed, the least minimum
    and greatest maximum, the average weighted by cycles (truncated where any slice's was); the
    overflow cycles counted from the run's start."""
    if not slices:
        raise CyclictestOutputError("cyclictest printed no slice")
    first = slices[0]
    if any(s.unit_ns != first.unit_ns or len(s.threads) != len(first.threads) for s in slices):
        raise CyclictestOutputError("the slices differ in unit or in their threads")
    threads = []
    for i, t0 in enumerate(first.threads):
        parts = [s.threads[i] for s in slices]
        counts: dict[int, int] = {}
        for t in parts:
            for b, c in zip(t.buckets.tolist(), t.counts.tolist(), strict=True):
                counts[b] = counts.get(b, 0) + c
        cycles = sum(t.cycles for t in parts)
        measured = [t for t in parts if t.cycles and t.avg is not None]
        done, where = 0, []
        for t in parts:
            where += [done + c for c in (t.overflow_cycles or ())]
            done += t.cycles
        keys = sorted(counts)
        threads.append(
            CyclictestThread(
                index=t0.index,
                cycles=cycles,
                unit_ns=t0.unit_ns,
                has_histogram=all(t.has_histogram for t in parts),
                min=min((t.min for t in parts if t.min is not None and t.cycles), default=None),
                max=max((t.max for t in parts if t.max is not None and t.cycles), default=None),
                avg=(sum(t.avg * t.cycles for t in measured) / sum(t.cycles for t in measured))
                if measured
                else None,
                avg_truncated=any(t.avg_truncated for t in parts),
                buckets=np.asarray(keys, np.int64),
                counts=np.asarray([counts[k] for k in keys], np.int64),
                overflows=None
                if any(t.overflows is None for t in parts)
                else sum(t.overflows for t in parts),
                overflow_cycles=tuple(where)
                if all(t.overflow_cycles is not None for t in parts)
                else None,
                cpu=t0.cpu,
                node=t0.node,
            )
        )
    totals = _summed([s.totals for s in slices])
    smis = _summed([s.smis for s in slices])
    ranges = {s.histogram_range for s in slices}
    return HistogramOutput(threads=tuple(threads), unit_ns=first.unit_ns, histofall=first.histofall,
                           totals=totals,
                           histogram_range=ranges.pop() if len(ranges) == 1 else None, smis=smis,
                           dma_latency_us=first.dma_latency_us)


def _summed(rows: list[tuple[int, ...] | None]) -> tuple[int, ...] | None:
    """Per-thread figures summed over the slices; None if any slice has none."""
    if any(r is None for r in rows):
        return None
    return tuple(sum(col) for col in zip(*rows, strict=True))  # type: ignore[misc]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def histogram(out: RunOutput, thread: CyclictestThread) -> Histogram | None:
    if not thread.has_histogram:
        return None
    h = from_cyclictest(thread, range_us=out.histogram_range)
    printed = out.overflows(thread.index)
    if printed is not None and printed != h.overflows:
        raise CyclictestOutputError(f"thread {thread.index}: {printed} overflows printed but the "
                                    f"JSON's cycles and histogram leave {h.overflows}")
    return h


def histograms(out: RunOutput) -> list[Histogram | None]:
    """Each thread's histogram (None without -h), in the order of out.threads."""
    return [histogram(out, t) for t in out.threads]


def thread_rows(out: RunOutput, hists: list[Histogram | None],
                with_stats: bool = True) -> list[dict[str, Any]]:
    """Per thread: cyclictest's own cycles/min/avg/max (in its unit, µs unless -N), the CPU,
    the overflows and (with_stats) the histogram statistics (ns)."""
    rows = []
    for t, h in zip(out.threads, hists, strict=True):
        row = {
            "thread": t.index, "cpu": t.cpu, "cycles": t.cycles,
            "min_us": t.min, "avg_us": t.avg, "max_us": t.max,
            "overflows": h.overflows if h is not None else out.overflows(t.index),
        }
        if with_stats:
            row["stats"] = without_event_intervals(h.describe()) if h is not None else None
        rows.append(row)
    return rows


#: why a cyclictest histogram's percentiles carry no interval (issue 46)
NO_TIME_ORDER = ("a histogram keeps no time order, so how much its events depend on each other (a "
                 "load's phases, carry-over) cannot be seen, and an interval that takes them as "
                 "independent held the truth in 16–41 % of dependent twin runs "
                 "(docs/statistics.md); compare runs as units (`station compare`, repetitions ≥ 2)")


def without_event_intervals(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """A histogram's statistics without the percentile intervals that would take its events as
    independent: `percentile_ci_withheld` says why."""
    if stats is None:
        return None
    return {**stats, "percentile_ci95_ns": {}, "percentile_ci_withheld": NO_TIME_ORDER}


def summary(out: RunOutput) -> dict[str, Any]:
    """What a run's manifest records: per-thread figures, the worst case, a break trace hit."""
    threads = thread_rows(out, histograms(out), with_stats=False)
    maxima = [t["max_us"] for t in threads if t["max_us"] is not None]
    text = out.text
    hit = text is not None and text.break_thread is not None
    return {
        "threads": threads,
        "max_us": max(maxima) if maxima else None,
        "samples": sum(t["cycles"] for t in threads),
        "break": {"thread": text.break_thread, "value_us": text.break_value} if hit else None,
        "cpu_dma_latency_us": text.dma_latency_us if text is not None else None,
        "kernel": None if out.json is None else {"release": out.json.sysinfo.release,
                                                 "version": out.json.sysinfo.version,
                                                 "realtime": out.json.sysinfo.realtime},
    }


def histogram_table(out: RunOutput) -> pd.DataFrame:
    """One row per non-empty bucket per thread: thread, cpu, latency_us (bucket), count."""
    parts = []
    for t in out.threads:
        parts.append(pd.DataFrame({
            "thread": np.full(t.buckets.size, t.index, dtype=np.int64),
            "cpu": np.full(t.buckets.size, -1 if t.cpu is None else t.cpu, dtype=np.int64),
            "latency_us": np.asarray(t.buckets, dtype=np.int64),
            "count": np.asarray(t.counts, dtype=np.int64),
        }))
    return pd.concat(parts, ignore_index=True)


# ---- the campaign --------------------------------------------------------------------------------
def analyse_runs(
    run_dirs: list[Path], campaign: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, RunSamples], list[str]]:
    """(report["cyclictest"], samples by run id, notes) for a campaign's cyclictest runs."""
    config = campaign.get("config") or {}
    notes: list[str] = []
    entries, samples = [], {}
    # run id -> its threads' histograms and its slices (the deadline view)
    measured: dict[str, Measured] = {}
    for run_dir in run_dirs:
        manifest = read_manifest(run_dir)
        entry, hists, thread_hists = _run_entry(run_dir, manifest, notes)
        if entry["status"] == "complete":
            measured[entry["id"]] = thread_hists
        entries.append(entry)
        if hists:
            samples[entry["id"]] = RunSamples(np.empty(0, dtype=np.int64), None, tuple(hists))
    notes += timerlat_notes(entries)
    targets = _target_names(campaign, entries)
    cases = list(
        (config.get("matrix") or {}).get("loads") or dict.fromkeys(e["load"] for e in entries)
    )
    deadline = (config.get("cyclictest") or {}).get("deadline")
    if deadline is None and (config.get("report") or {}).get("deadline") is not None:
        deadline = config["report"]["deadline"]
    section = {
        "table": _max_table(entries, targets, cases),
        **({"timerlat_table": timerlat_table(entries, targets,
                                              cases)} if any("timerlat" in e for e in entries)
           else {}),
        "deadline_view": (_deadline_view(entries, measured, round(deadline * 1e9) / 1000)
                          if deadline is not None else []),
        "targets": {t: _target_facts(t, campaign) for t in targets},
        "runs": entries,
        "deadline_us": None if deadline is None else round(deadline * 1e6, 3),
    }
    for name, why in (campaign.get("unavailable") or {}).items():
        notes.append(f"Target {name} was unavailable in the last session: {why}")
        section["targets"].setdefault(name, {})["unavailable"] = why
    section["findings"] = findings(section) + timerlat_findings(section)
    for name, f in section["targets"].items():
        if f.get("virtual_machine") and not f.get("emulated"):
            notes.append(f"Target {name} is a virtual machine ({f['virtual_evidence']}): its "
                         "latencies include the hypervisor's (the host can deschedule a vCPU at "
                         "any moment), not bare-metal figures.")
    if any(f.get("emulated") for f in section["targets"].values()):
        notes.append("Emulated targets (QEMU/TCG): their latencies are the emulator's, not "
                     "hardware numbers; compare them with each other (regular vs PREEMPT_RT), "
                     "never with a board.")
    return section, samples, notes


@dataclass(frozen=True)
class Measured:
    """A run's threads' histograms, and (cyclictest.slices) its slices' all-threads histograms in
    time order."""

    threads: list[Histogram]
    slices: list[Histogram]


def slice_histograms(out: RunOutput) -> tuple[list[list[Histogram]], str | None]:
    """Per thread (in out.threads' order), its histogram in each slice, and None; empty lists
    without slices, or with why, when some slice has no histogram of one of the run's threads (the
    slices' time order would then be another for that thread than for the others)."""
    per_thread: list[list[Histogram]] = [[] for _ in out.threads]
    for n, part in enumerate(out.slices, 1):
        got = {t.index: t for t in part.threads if t.has_histogram}
        if missing := [t.index for t in out.threads if t.index not in got]:
            return [[] for _ in out.threads], (f"slice {n} of {len(out.slices)} has no histogram "
                                               f"of thread(s) {', '.join(map(str, missing))}: no "
                                               "interval from the slices")
        for i, t in enumerate(out.threads):
            per_thread[i].append(from_cyclictest(got[t.index], range_us=part.histogram_range))
    return per_thread, None


def with_slice_intervals(stats: dict[str, Any] | None, parts: list[Histogram]) -> dict[str,
                                                                                       Any] | None:
    """A histogram's statistics with the percentile intervals its slices' time order gives
    (station/analysis/slices.py): `percentile_ci_method` per percentile, `percentile_ci_withheld`
    where some percentile has none."""
    if stats is None:
        return None
    if not parts:
        return without_event_intervals(stats)
    got = ct_slices.percentile_intervals(parts)
    reasons = sorted(
        {e["withheld"] for e in got.values() if e["withheld"] and e["withheld"] != ct_slices.BEYOND}
    )
    return {**stats, "percentile_ci95_ns": {k: e["ci95_ns"]
                                            for k, e in got.items() if e["withheld"] is None},
            "percentile_ci_method": {k: e["method"] for k, e in got.items() if e["method"]},
            "percentile_ci_withheld": "; ".join(reasons) or None}


def _run_entry(run_dir: Path, manifest: Manifest, notes: list[str]) -> tuple[
        dict[str, Any], list[ThreadHistogram], Measured]:
    """The run's report entry, its figure curves, and its histograms (empty when unreadable)."""
    ct = manifest.section("cyclictest")
    entry: dict[str, Any] = {
        **entry_identity(manifest),
        "target": (manifest.run and manifest.run.target) or SINGLE_TARGET,
        "cyclictest_version": ct.get("version"),
        "arguments": manifest.section("probe").get("arguments"), "duration_s": manifest.duration_s,
        "threads": [], "combined": None, "break": ct.get("break"),
    }
    if entry["status"] != "complete":
        notes.append(f"Run {entry['id']} is {entry['status']}: "
                     f"{entry['error'] or 'see its manifest'}")
    if manifest.extra("timerlat") is not None:
        entry["timerlat"] = timerlat_entry(run_dir, manifest.section("timerlat"), entry["id"],
                                           notes)
    try:
        out = read_outputs(run_dir)
        per_thread = histograms(out)
        rows = thread_rows(out, per_thread)
        hists = [h for h in per_thread if h is not None]
    except (CyclictestOutputError, ValueError) as exc:
        if entry["status"] == "complete":
            notes.append(f"Run {entry['id']}: its cyclictest output cannot be read: {exc}")
        return entry, [], Measured([], [])
    notes.extend(f"Run {entry['id']}: {problem}" + (" (its figures come from the other output)"
                                                   if problem.startswith("cyclictest.") else "")
                 for problem in out.problems)
    if out.json is not None and out.json.repairs:
        notes.append(f"Run {entry['id']}: cyclictest wrote invalid JSON, read after repairs: "
                     + "; ".join(out.json.repairs))
    by_slice, unaligned = slice_histograms(out)
    if unaligned:
        notes.append(f"Run {entry['id']}: {unaligned}")
    for row, parts in zip(rows, by_slice, strict=True):
        row["stats"] = with_slice_intervals(row["stats"], parts) if parts else row["stats"]
    # each slice's threads together: the all-threads histogram's time order
    slices = [combine(hs) for hs in zip(*by_slice,
                                        strict=True)] if out.slices and not unaligned else []
    entry["threads"] = rows
    entry["slices"] = len(out.slices) or None
    entry["combined"] = with_slice_intervals(combine(hists).describe(), slices) if hists else None
    curves = [
        ThreadHistogram(
            _label(t), np.asarray(t.buckets), np.asarray(t.counts), t.max,
            int(t.overflows if t.overflows is not None else out.overflows(t.index) or 0)
        )
        for t in out.threads
        if t.has_histogram
    ]
    return entry, curves, Measured(hists, slices)


def _label(t: CyclictestThread) -> str:
    return f"thread {t.index}" + ("" if t.cpu is None else f" (CPU {t.cpu})")


def _target_names(campaign: dict[str, Any], entries: list[dict[str, Any]]) -> list[str]:
    """The targets in the campaign file's order (campaign.json's target_order; before it was kept,
    the config's, which campaign.json sorts), then any other a run names."""
    config = campaign.get("config") or {}
    named = [t for t in campaign.get("target_order") or [] if t] or list(
        (config.get("bench") or {}).get("targets") or {})
    seen = list(dict.fromkeys(e["target"] for e in entries))
    return named + [t for t in seen if t not in named] if named else seen


def _kernel_words(facts: Mapping[str, Any]) -> str:
    what = {True: "PREEMPT_RT", False: "regular kernel"}.get(facts.get("preempt_rt"), "")
    if facts.get("emulated"):
        what += (", " if what else "") + "emulated: not hardware numbers"
    elif facts.get("virtual_machine"):
        what += (", " if what else "") + "a virtual machine"
    return f" ({what})" if what else ""


def findings(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The campaign's answer, first on the page (report["findings"]): per target its largest
    latency in any case, and with a deadline how many cells reached it. A maximum is one draw:
    no finding ranks targets by their maxima (`station compare` tests the difference)."""
    table = section.get("table") or {}
    out: list[dict[str, Any]] = []
    for target in table.get("targets") or []:
        cells = {case: v
                 for case, v in ((table.get("max_latency_us") or {}).get(target) or {}).items()
                 if v is not None}
        if not cells:
            continue
        case = max(cells, key=lambda c: cells[c])
        facts = (section.get("targets") or {}).get(target) or {}
        out.append({
            "kind": "cyclictest_max", "target": target, "load": case, "max_us": cells[case],
            "headline": f"On {target}{_kernel_words(facts)}, the largest latency of {len(cells)} "
                        "case(s)",
            "figure": f"{cells[case]:g} µs under {case}", "see": "table-cyclictest-max",
            "text": f"On {target}{_kernel_words(facts)}, the largest latency cyclictest measured "
                    "is "
                    f"{cells[case]:g} µs, under {case}; per case: "
                    + ", ".join(f"{c} {v:g} µs" for c, v in cells.items())
                    + ". A maximum is one draw: it ranks nothing by itself.",
        })
    view = section.get("deadline_view") or []
    if view and section.get("deadline_us") is not None:
        reached = [v for v in view if v["above"]]
        deadline = f"{section['deadline_us']:g} µs"
        worst = max(view, key=lambda v: v["p_exceed"])
        out.append({
            "kind": "cyclictest_deadline", "deadline_us": section["deadline_us"],
            "reached": len(reached),
            "cells": len(view),
            "headline": f"The {deadline} deadline was reached in",
            "figure": f"{len(reached)} of {len(view)} target × case cells",
            "see": "table-cyclictest-deadline",
            "text": f"The {deadline} deadline was reached in {len(reached)} of {len(view)} target "
                    "× case cells"
                    + (f"; most often on {worst['target']} under {worst['load']}: {worst['above']} "
                       f"of {worst['cycles']} cycles ({worst['p_exceed']:.2g} "
                       f"[{worst['ci_low']:.2g}, {worst['ci_high']:.2g}] per cycle, 95 "
                       "%)" if reached else "") + ".",
        })
    return out


def _deadline_view(entries: list[dict[str, Any]], measured: dict[str, Measured],
                   deadline_us: float) -> list[dict[str, Any]]:
    """Per target × case, the complete runs' threads pooled: how often a cycle's latency reached
    the deadline, with an exact (Clopper–Pearson) 95 % interval. Buckets are whole µs, so a cycle
    in the deadline's own bucket counts as reaching it; cycles beyond the histogram's range
    (overflows) count as above it: the probability is an upper bound where there are any. Where
    every run of the cell was sliced, the interval is over the effective cycles its slices show
    (station/analysis/slices.py, the runs' slices one after another); else the cycles are taken as
    independent, and `method` says so."""
    from station.analysis.worst_case import binomial_interval

    cells: dict[tuple[str, str], list[Measured]] = {}
    for e in entries:
        if (m := measured.get(e["id"])) is not None and m.threads:
            cells.setdefault((e["target"], e["load"]), []).append(m)
    view = []
    # in whole ns: a deadline read from seconds is a hair below its µs (30us is 29.999999999999996)
    deadline_ns = round(deadline_us * 1000)
    for (target, load), runs in cells.items():
        hists = [h for m in runs for h in m.threads]
        cycles = sum(int(h.counts.sum()) + h.overflows for h in hists)
        above = sum(
            int(h.counts[h.bucket_us >= deadline_ns // int(h.bucket_ns)].sum()) + h.overflows
            for h in hists
        )
        if not cycles:
            continue
        if all(m.slices for m in runs):
            got = ct_slices.exceedance([h for m in runs for h in m.slices], deadline_ns)
            lo, hi, n_eff, method = (
                got["ci_low"], got["ci_high"], float(got["effective_n"]), got["method"]
            )
        else:
            (lo, hi), n_eff = binomial_interval(above, cycles), float(cycles)
            method = (
                "cycles taken as independent (a histogram keeps no time order: "
                "cyclictest.slices gives one)"
            )
        view.append({"target": target, "load": load, "deadline_us": deadline_us, "cycles": cycles,
                     "above": above,
                     "overflows": sum(h.overflows for h in hists), "p_exceed": above / cycles,
                     "ci_low": lo, "ci_high": hi, "effective_n": n_eff, "method": method})
    return view


def _max_table(entries: list[dict[str, Any]], targets: list[str], cases: list[str]) -> dict[str,
                                                                                            Any]:
    """The seed's table: the largest latency any thread of any complete run saw, per cell."""
    table: dict[str, dict[str, int | float | None]] = {t: dict.fromkeys(cases) for t in targets}
    problems: dict[str, dict[str, str]] = {}
    for e in entries:
        cell = table.setdefault(e["target"], {})
        if e["status"] != "complete" or not e["threads"]:
            why = f"{e['status']}: {e['error']}" if e["error"] else str(e["status"])
            problems.setdefault(e["target"], {})[e["load"]] = why
            cell.setdefault(e["load"], None)
            continue
        worst = max((t["max_us"] for t in e["threads"] if t["max_us"] is not None), default=None)
        if worst is not None:
            cell[e["load"]] = worst if cell.get(e["load"]) is None else max(cell[e["load"]], worst)
    return {"targets": targets, "cases": cases, "max_latency_us": table, "problems": problems}


def machine_arch(audit: dict[str, Any]) -> str | None:
    """The target's architecture as the kernel names it (`uname -m`: x86_64, aarch64); from
    `uname -a`'s machine word for campaigns audited before `uname -m` was."""
    machine = str(audit.get("machine") or "")
    if machine and not machine.startswith("unavailable"):
        return machine
    words = str(audit.get("uname") or "").split()
    if words and words[-1] == "GNU/Linux":
        words = words[:-1]
    return words[-1] if len(words) > 3 and not words[-1][:1].isdigit() else None


def _target_facts(name: str, campaign: dict[str, Any]) -> dict[str, Any]:
    described = (campaign.get("targets") or {}).get("" if name == SINGLE_TARGET else name) or {}
    audit = described.get("audit") or {}
    uname = str(audit.get("uname") or "")
    words = uname.split()
    if not described:  # never reached: nothing is known of its kernel
        return {"kind": None, "kernel_release": None, "preempt_rt": None, "emulated": None,
                "arch": None, "cpus": None,
                "uname": None, "virtual_machine": None, "virtual_evidence": None}
    verdict = Verdict.from_text(audit.get("virtual_machine"))
    if described.get("kind") == "vm":  # the station's own QEMU guest, whatever the guest can read
        verdict = Verdict(True, "the station's QEMU guest")
    return {
        "kind": described.get("kind"),
        "kernel_release": words[2] if len(words) > 2 else None,
        "preempt_rt": audit.get("realtime") == "1" or "PREEMPT_RT" in uname,
        "emulated": described.get("kind") in EMULATED_KINDS,
        "arch": machine_arch(audit),
        "virtual_machine": verdict.virtual, "virtual_evidence": verdict.evidence or None,
        "cpus": decimal_int(str(audit.get("nproc", ""))),
        "uname": uname or None,
    }


def analyse(given: AnalysisInput) -> KindReport:
    campaign = given.campaign
    if given.deadline_given:  # `station report --deadline` wins over cyclictest.deadline too
        config = dict(campaign.get("config") or {})
        config["cyclictest"] = {**(config.get("cyclictest") or {}),
                                "deadline": (given.deadline_ns or 0) / 1e9}
        campaign = {**campaign, "config": config}
    return section_report("cyclictest", *analyse_runs(given.run_dirs, campaign))
