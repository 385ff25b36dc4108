"""The module kind's analysis: each run's t_SW, t_HW, pairing and outliers (run_analysis), then
what the seed compares across runs — t_rw per interface and load, PCIe events above the LPT
maximum, the worst case — and the findings that answer it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from station.analysis import run_pool, worst_case
from station.analysis.campaign import AnalysisInput, KindReport
from station.analysis.samples import RunSamples
from station.analysis.worst_case import TailSample
from station.kinds.module import correlation, decomposition, findings, outliers
from station.kinds.module.data import iter_table
from station.kinds.module.run_analysis import RunAnalysis, analyse_run
from station.parsers import records
from station.store.manifest import MANIFEST, read_manifest

# records in all above which the runs are analysed in worker processes (run_pool.py): a fork and the
# analyses' pickling cost a few tens of ms, a run of a million records takes ~0.2 s
LARGE_RECORDS = 2_000_000


def analyse(given: AnalysisInput) -> KindReport:
    """report["runs"] and report["comparisons"], the figures' samples, notes and findings."""
    notes: list[str] = []
    samples: dict[str, RunSamples] = {}
    run_entries = []
    runs: list[RunAnalysis] = []
    # a few runs at a time (worker processes for a large campaign, else threads: run_pool.py), each
    # a batch at a time: memory grows with the workers, not with the runs' length.
    # one BLAS thread while they run, whoever imported numpy first (station/__init__.py's default
    # only acts before that): BLAS workers spinning between small calls take the other run's core
    def meanwhile() -> None:  # while worker processes analyse the runs: what comes after, imported
        worst_case.optimize.load()  # the tail fits' (scipy.optimize, ~0.15 s)
        if given.meanwhile is not None:
            given.meanwhile()

    with threadpool_limits(limits=1, user_api="blas"):
        analysed = run_pool.analysed(analyse_run, given.run_dirs,
                                     _records(given.run_dirs) >= LARGE_RECORDS,
                                     meanwhile)
    for run_dir, run in zip(given.run_dirs, analysed, strict=True):
        entry = run.entry
        runs.append(run)
        run_entries.append(entry)
        samples[entry["id"]] = run.samples
        if entry["status"] != "complete":
            notes.append(f"Run {entry['id']} is {entry['status']}: "
                         f"{entry['error'] or 'see its manifest'}")
        losses = entry["losses"] or {}
        if restarts := losses.get("restarts"):
            where = "; ".join(f"at record {r['record']:,}, seq {r['seq_before']:,} → "
                              f"{r['seq_after']:,}"
                              for r in restarts[:3]) + (" …" if len(restarts) > 3 else "")
            part = losses.get("paired_part") or {}
            notes.append(
                f"Run {entry['id']}: the record stream restarted {len(restarts)} time(s) "
                f"({where}): the module reloaded, or a reader re-read its ring? No record "
                "is lost or joined across it: the station numbers the parts on "
                "(sw.parquet keeps the module's numbers as module_seq), t_SW statistics "
                "take every part"
                + (
                    f", the event pairing only the longest ({part['records']:,} records)"
                    if part
                    else ""
                )
                + "."
            )
        if losses.get("sw_lost"):
            notes.append(f"Run {entry['id']} lost {losses['sw_lost']} software samples (sequence "
                         "gaps).")
        if note := _strays_note(entry):
            notes.append(note)
        if entry.get("test_held"):
            notes.append(f"Run {entry['id']}: {entry['test_held']} events were held on purpose: "
                         "the module's test_hold_us made its handler wait before the timestamp (a "
                         "test's injection; these t_SW are not the target's).")
        if str((entry.get("outliers") or {}).get("sw_threshold_basis") or "mad") != "mad":
            notes.append(f"Run {entry['id']}: over half its software samples share one value, so "
                         "the robust outlier threshold uses the std instead of the MAD (0): the "
                         "outliers widen their own threshold, and fewer are counted than a MAD "
                         "would call.")
        if entry.get("off_cpu"):
            notes.append(f"Run {entry['id']}: {entry['off_cpu']} events were taken on another CPU "
                         "than the one the module pinned its IRQ to (x86's IO-APIC moves an IRQ "
                         "at its next interrupt, so the first after loading can still arrive "
                         "where it was); their t_SW, kept in the statistics, measured that CPU's "
                         "path.")
        if (fallback := (entry.get("pairing") or {}).get("clock_ratio_unmeasured")) and fallback[
            "pairs"
        ]:
            bound = fallback.get("max_error_ns")
            notes.append(f"Run {entry['id']}: {fallback['pairs']:,} of {fallback['of']:,} paired "
                         "pulses came from acquisitions whose scope/target clock ratio could not "
                         "be fitted (fewer than 3 pulses, writes spanning under 1 ms, or a fit "
                         "beyond ±5000 ppm): their HW−SW takes the clocks as equal, "
                         + (f"off by at most {bound:.3g} ns at the ratio the other acquisitions "
                            "measured."
                            if bound is not None else "by an amount no acquisition measured."))
        if (pairing := entry.get("pairing") or {}).get("note"):
            notes.append(f"Run {entry['id']}: event pairing: {pairing['note']}.")
        if (dec := _decomposition(run_dir, entry)) is not None:
            entry["decomposition"] = dec
            if lost := sum(dec["not_decomposed"].values()):
                notes.append(f"Run {entry['id']}: {lost} of {dec['events']} traced events not "
                             f"decomposed ({'; '.join(dec['not_decomposed'])}).")
            if (clock := dec.get("clock_check") or {}) and not clock.get("agrees", True):
                notes.append(f"Run {entry['id']}: the trace's clock disagrees with the module's: "
                             f"of {clock['checked']} events with their IRQ's kernel entry nearby, "
                             f"{clock['in_window']} have it between their write and their "
                             "timestamp, the others lie a median "
                             f"{(clock.get('median_displacement_ns') or 0) / 1000:+.1f} µs off; no "
                             "event is decomposed (a trace clock other than mono, or a module "
                             "stamping another clock?).")
        cut = (entry.get("capture") or {}).get("frames_without_pulse") or 0
        if cut:
            notes.append(_cut_frames_note(entry["id"], entry["capture"]))
    entries: dict[str, Any] = {
        "runs": run_entries,
        "comparisons": {
            "t_rw": _t_rw(runs),
            "cross_interface_outliers": _cross_interface(runs),
            "worst_case": _worst_case(runs, given.exceedance, given.deadline_ns),
        },
    }
    return KindReport(entries, samples, notes, findings.campaign_findings(entries, samples))


def _records(run_dirs: list[Path]) -> int:
    """The software records the runs' manifests count (0 where one does not say)."""
    total = 0
    for run_dir in run_dirs:
        try:
            total += int(read_manifest(run_dir).counts.get("sw_records") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # its analysis says what is wrong with it
    return total


def _decomposition(run_dir: Path, entry: dict[str, Any]) -> dict[str, Any] | None:
    """A traced run's stages (None for a run that was not traced)."""
    trace = read_manifest(run_dir).extra("trace") if (run_dir / MANIFEST).exists() else None
    if not isinstance(trace, dict):
        return None
    threshold = (entry.get("outliers") or {}).get("sw_threshold_ns")
    return decomposition.summarise(run_dir, threshold, trace.get("cpu"))


def _t_rw(runs: list[RunAnalysis]) -> list[dict]:
    """One estimate per (target, interface, load, repetition): the inb run against the no-inb run
    measured under the same load on the same target, never against another load's or target's."""
    result = []
    cells: dict[tuple, dict[str, RunAnalysis]] = {}
    seen: dict[tuple, int] = {}
    for r in runs:
        e = r.entry
        if e["shift"] is not None:
            # one cell per target too: an inb run is never set against another target's no-inb run;
            # two runs alike (imports under one load and repetition) pair in their order, none
            # dropped
            key = (str(e.get("target") or ""), e["interface"], e["load"], e["repetition"])
            nth = seen[(*key, e["variant"])] = seen.get((*key, e["variant"]), -1) + 1
            cells.setdefault((*key, nth), {})[e["variant"]] = r
    # target, interface, load, then repetitions in number order
    def order(kv: tuple[tuple, dict]) -> tuple:
        target, iface, load, rep, nth = kv[0]
        return target, str(iface), str(load), rep or 0, nth

    for (_target, iface, load, _rep, _nth), cell in sorted(cells.items(), key=order):
        if "inb" not in cell or "no-inb" not in cell:
            continue
        ra, rb = cell["inb"], cell["no-inb"]
        a, b = ra.entry, rb.entry
        est = correlation.t_rw(a["shift"], b["shift"])
        unrelated = [e["id"] for e in (a, b) if (e.get("pairing") or {}).get("unmatched")]
        # the scope watched something else: its widths say nothing of this target's t_rw
        if unrelated:
            est = {**{k: None for k in est},
                   "withheld": f"{', '.join(unrelated)}: the scope's pulses match "
                   "none of the target's events"}
        truths = [e["truth"]["t_rw_mean_ns"] for e in (a, b) if e.get("truth")]
        paired: dict = {}
        withheld = [
            f"{e['id']}: {(e.get('pairing') or {}).get('note') or 'not paired'}"
            for e in (a, b)
            if not (e.get("pairing") or {}).get("estimates")
        ]
        if withheld:
            paired = {"paired_estimate_ns": None, "paired_withheld": "; ".join(withheld)}
        elif ra.diffs is not None and rb.diffs is not None and ra.diffs.moments.count > 1 and \
                rb.diffs.moments.count > 1:
            paired = correlation.paired_t_rw_of(ra.diffs.bulk_mean_se(), rb.diffs.bulk_mean_se())
        result.append(
            {
                "interface": iface,
                "load": load,
                **est,
                **paired,
                "inb_run": a["id"],
                "no_inb_run": b["id"],
                "truth_ns": float(np.mean(truths)) if truths else None,
            }
        )
    return result


def _cross_interface(runs: list[RunAnalysis]) -> list[dict]:
    """The seed's criterion, per load: PCIe software samples above the LPT software maximum
    measured under the same load, and whether the scope and the board saw them. Scope widths
    are compared after removing their run's HW−SW shift (the inb check's extra t_rw)."""
    result = []
    for load in sorted({r.entry["load"] for r in runs}):
        lpt = [
            r
            for r in runs
            if r.entry["load"] == load and r.entry["interface"] == "lpt" and r.entry["sw"]
        ]
        pcie = [
            r
            for r in runs
            if r.entry["load"] == load and r.entry["interface"] == "pcie" and r.entry["sw"]
        ]
        if not lpt or not pcie:
            continue
        ref_max = max(r.entry["sw"]["max_ns"] for r in lpt)
        hw_above = hw_total = 0
        scoped = any(r.hw is not None for r in pcie)
        for r in pcie:
            if r.hw is not None:
                shift = r.entry["shift"]["hw_minus_sw_median_ns"] if r.entry["shift"] else 0.0
                hw_above += r.hw.count_above(ref_max + shift)
                hw_total += r.hw.count
        boards = [r.board for r in pcie]
        has_board = any(b is not None for b in boards)
        caught = [r.candidates[r.candidates["sw_ns"].to_numpy() > ref_max].assign(run=r.run_id)
                  for r in pcie if r.candidates is not None]
        entry = outliers.cross_interface_counts(
            "pcie",
            "lpt",
            ref_max,
            sw_above=sum(r.sw.count_above(ref_max) for r in pcie),
            sw_total=sum(r.sw.count for r in pcie),
            hw_above=hw_above if scoped else None,
            hw_total=hw_total if scoped else None,
            board_above=sum(b.count_above(ref_max) for b in boards if b is not None)
            if has_board
            else None,
            board_total=sum(b.count for b in boards if b is not None) if has_board else None,
            board_max_of_sw_outliers_ns=_board_max_above(pcie, ref_max) if has_board else None,
            scope_caught=pd.concat(caught) if caught else None,
        )
        if any(ref_max < r.candidate_floor_ns and r.candidates is not None for r in pcie):
            entry["scope_caught_note"] = ("the LPT maximum lies below the PCIe runs' kept tail: "
                                          "the events listed "
                                          "are those at or above the tail kept per run")
        entry["outlier_verdict"] = outliers.pooled_verdict(
            [r.entry.get("outlier_verdict") for r in pcie]
        )
        result.append({"load": load, **entry})
    return result


def _board_max_above(runs: list[RunAnalysis], threshold: float) -> float | None:
    """The largest board-measured width among the events whose t_SW exceeds `threshold`: from the
    kept tail when it reaches that low, else by reading the run's records again."""
    best = None
    for r in runs:
        # every value at or above the tail's smallest is in the tail
        if r.tail.values.size == r.sw.count or (
            r.tail.values.size and threshold >= float(r.tail.values.min())
        ):
            widths = r.tail_board_ns[(r.tail.values > threshold) & ~np.isnan(r.tail_board_ns)]
        else:
            widths = _board_widths_above(r, threshold)
        if widths.size:
            best = max(best or -np.inf, float(widths.max()))
    return best


def _board_widths_above(run: RunAnalysis, threshold: float) -> np.ndarray:
    parts = []
    for batch in iter_table(run.dir, "sw", ("latency_ns", "flags", "hw_width_ns")):
        if "hw_width_ns" not in batch:
            break
        has = (batch["flags"] & int(records.Flag.HW_WIDTH)) != 0
        parts.append(batch["hw_width_ns"][has & (batch["latency_ns"] > threshold)])
    return np.concatenate(parts).astype(np.float64) if parts else np.empty(0)


def _worst_case(runs: list[RunAnalysis], exceedance: float,
                deadline_ns: float | None) -> list[dict]:
    """Per interface and load: the largest software latency seen, the p99.999 of all that
    interface's samples under that load pooled, and the tail fit (station/analysis/worst_case/):
    the latency exceeded with probability `exceedance` per event, with its interval and checks,
    and the probability of exceeding the deadline when there is one."""
    result = []
    for iface, load in sorted({(r.entry["interface"],
                                r.entry["load"]) for r in runs if r.entry["sw"]}):
        mine = [
            r
            for r in runs
            if r.entry["interface"] == iface and r.entry["load"] == load and r.entry["sw"]
        ]
        worst = max(mine, key=lambda r: r.entry["sw"]["max_ns"])
        # in run order: the independence check looks at which events follow which
        pooled = TailSample.pooled([r.tail for r in mine], [r.sw.count for r in mine])
        fit = worst_case.worst_case(pooled, exceedance=exceedance, deadline_ns=deadline_ns)
        quantile = fit.get("quantile_ns") or {}
        result.append(
            {
                "interface": iface,
                "load": load,
                "observed_max_ns": worst.entry["sw"]["max_ns"],
                "p99_999_ns": float(pooled.distribution.percentiles([99.999])[0]),
                "run": worst.run_id,
                "samples": int(pooled.distribution.count),
                "exceedance": exceedance,  # asked of the estimate, whether or not it could give one
                # what `station compare` tabulates: only a reliable fit's, at the default
                # probability
                "worst_case_1e9_ns": (
                    quantile.get("estimate")
                    if exceedance == worst_case.EXCEEDANCE and fit.get("reliable")
                    else None
                ),
                **{
                    k: fit.get(k)
                    for k in (
                        "quantile_ns", "reliable", "fit_reliable", "reasons", "deadline", "bound"
                    )
                },
                # all of it: threshold diagnostics, fit, goodness of fit, independence
                "tail_fit": fit,
            }
        )
    return result


def _strays_note(entry: dict[str, Any]) -> str | None:
    """A finding about the module's IRQ line, not about its latency."""
    strays = entry.get("strays") or {}
    if strays.get("count") is None:
        return f"Run {entry['id']}: {strays['note']}." if strays.get("note") else None
    if not strays["count"]:
        return None
    first = strays.get("first_s")
    return (f"Run {entry['id']}: {strays['count']} stray IRQs ({100 * strays['share']:.2g} % of "
            "the records"
            + (f", the first {first:.3g} s into the run" if first is not None else "")
            + ") on the module's line, flagged NOT_OURS by the module: a shared or noisy line, not "
            "latencies; left out of t_SW, the worst case and the event pairing. Check "
            "/proc/interrupts for what shares it.")


def _cut_frames_note(run_id: str, capture: dict) -> str:
    """Segmented frames that held no whole pulse: the widths lost are the longest, so say so."""
    cut, frames = capture["frames_without_pulse"], capture.get("frames") or 0
    after = capture.get("frame_after_trigger_s")
    share = f" ({100 * cut / frames:.1f} % of {frames})" if frames else ""
    span = (
        f"the {after * 1e6:.3g} µs a frame records after its trigger"
        if isinstance(after, (int, float))
        else "its frame"
    )
    return (f"Run {run_id}: {cut} segmented frames{share} held no whole pulse. Most often the "
            f"pulse outlasted {span}: its width is lost, and those are the longest pulses, so the "
            "scope's distribution and worst case are biased low; lengthen the frames "
            "(record_length × sample interval) or trigger earlier in the frame (a smaller "
            "trigger_position_pct, keeping a few samples before the edge). A pulse shorter than "
            "the sample interval leaves none either.")

