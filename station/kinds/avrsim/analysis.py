"""Analysis of avrsim runs (seed 002): each edge paired with the output change that answered it,
the slow answers (outliers) tied to the interrupt handler run the harness logged around them, their
rate against what timer0's rate × its handler's length predicts, and the masked builds beside the
seed's published figures.

Outliers. A delay is an outlier above the masked case of the same firmware (its largest delay:
masking removes the collisions, so what remains is the firmware's own spread); without a masked
case, or for a masked case itself, above the run's fastest + QUIET_SLACK_CYCLES[firmware] (the
longest instruction an edge can wait out in that firmware's main loop). Each outlier is explained
when it arrived while another handler held the CPU, from the handler's logged entry to its exit
plus the instructions simavr runs after RETI (station/kinds/avrsim/simulator.py)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from station.analysis.campaign import AnalysisInput, KindReport, entry_identity, section_report
from station.kinds.avrsim import simulator as avr_sim
from station.store.manifest import read_manifest

# seed 002 (a Uno with the Arduino IDE of April 2016, a scope; shared/reference/seed-figures.yaml):
# with timer0's interrupt masked, every response within these, µs
SEED_MASKED_US = (8.9485, 9.1986)
SEED_SOURCE = "seed 002: a Uno, the Arduino core, timer0 masked (a scope's figures)"
# the longest wait an edge can have for the instruction under way, in each firmware's main loop:
# the bare responder's idle `rjmp` (2 cycles) and the core's loop (call 4, ret 4), with slack
QUIET_SLACK_CYCLES = {"responder": 3, "sketch": 8}
# cycles simavr runs after RETI before it takes a pending interrupt, in each firmware's main loop
AFTER_RETI_CYCLES = {"responder": avr_sim.AFTER_RETI_CYCLES_SIM,
                     "sketch": max(avr_sim.CORE_AFTER_RETI_CYCLES_SIM)}
# what a real ATmega328P adds to every delay and simavr does not model: the 4-cycle interrupt entry
# and 1-2 cycles of the pin synchroniser (docs/avr-responder.md)
HARDWARE_EXTRA_CYCLES = (avr_sim.ENTRY_CYCLES_HW + 1, avr_sim.ENTRY_CYCLES_HW + 2)
CONFIDENCE = 0.99  # of the outlier fraction's Clopper-Pearson interval


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact binomial interval of k successes in n trials."""
    from scipy.stats import beta  # only an avrsim report pays for scipy.stats here

    alpha = 1 - confidence
    lo = float(beta.ppf(alpha / 2, k, n - k + 1)) if k else 0.0
    hi = float(beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def _us(cycles: float, freq_hz: int) -> float:
    return round(cycles * 1e6 / freq_hz, 6)


def _read(run_dir: Path) -> tuple[dict[str, Any], avr_sim.AvrSimOutput | None, list[int],
                                  str | None]:
    """(the run's entry so far, the harness's output or None, its answered delays in cycles, why
    no output)."""
    manifest = read_manifest(run_dir)
    settings = manifest.section("avrsim")
    entry: dict[str, Any] = {
        **entry_identity(manifest), "case": settings.get("case"),
        "firmware": settings.get("firmware"),
        "timer0": settings.get("timer0"),
        "seed": settings.get("seed"), "sha256": manifest.section("firmware").get("sha256"),
    }
    try:
        out = avr_sim.parse((run_dir / "harness.log").read_text())
    except (OSError, avr_sim.AvrSimOutputError) as exc:
        return entry, None, [], str(exc)
    return entry, out, [r.delay for r in avr_sim.pair(out) if r.delay is not None], None


def _describe(entry: dict[str, Any], out: avr_sim.AvrSimOutput, threshold: int,
              baseline: str) -> None:
    """Fill a run's entry from its harness output and its outlier threshold (cycles)."""
    firmware = entry["firmware"]
    analysis = avr_sim.analyse(out, baseline_max=threshold,
                               after_reti=AFTER_RETI_CYCLES.get(firmware, 4))
    freq, delays = out.freq_hz, np.asarray(analysis.delays, dtype=np.int64)
    cycles, counts = np.unique(delays, return_counts=True)
    w = analysis.window
    n, k = len(delays), len(analysis.outliers)
    lo, hi = clopper_pearson(k, n)
    expected = w.expected_fraction if w.runs > 1 else 0.0
    entry |= {
        "clock_hz": freq, "stimuli": len(out.stims), "answered": n, "missed": analysis.misses,
        "delay_cycles": {"min": int(delays.min()), "p50": float(np.median(delays)),
                         "max": int(delays.max())},
        "delay_us": {"min": _us(delays.min(), freq), "p50": _us(float(np.median(delays)), freq),
                     "mean": _us(float(delays.mean()), freq), "max": _us(delays.max(), freq),
                     "spread": _us(delays.max() - delays.min(), freq)},
        "hardware_us": [_us(delays.min() + HARDWARE_EXTRA_CYCLES[0], freq),
                        _us(delays.max() + HARDWARE_EXTRA_CYCLES[1], freq)],
        "histogram": {"cycles": cycles.astype(int).tolist(), "counts": counts.astype(int).tolist()},
        "timer0_handler": {"runs": w.runs, "rate_hz": None if w.runs < 2 else round(w.rate_hz, 4),
                   "min_cycles": w.min_cycles if w.runs else None,
                   "max_cycles": w.max_cycles if w.runs else None,
                   "mean_cycles": round(w.mean_cycles, 3) if w.runs else None},
        "outliers": {
            "threshold_cycles": threshold, "baseline": baseline, "count": k,
            "fraction": k / n if n else None,
            "fraction_ci": [lo, hi], "expected_fraction": expected,
            "as_predicted": lo <= expected <= hi,
            "explained": k - len(analysis.unexplained), "unexplained": len(analysis.unexplained),
            "worst_us": _us(max(o.delay for o in analysis.outliers), freq) if k else None,
        },
    }


def analyse(given: AnalysisInput) -> KindReport:
    notes: list[str] = []
    read = [_read(d) for d in given.run_dirs]  # in run order
    # each firmware's masked baseline: the largest delay of its masked runs (pooled)
    masked_max: dict[str, tuple[int, str]] = {}
    for entry, _out, delays, _why in read:
        if entry["timer0"] == "masked" and delays:
            best = masked_max.get(entry["firmware"])
            if best is None or max(delays) > best[0]:
                masked_max[entry["firmware"]] = (max(delays), entry["case"])
    runs = []
    for entry, out, delays, why in read:
        if entry["status"] != "complete":
            notes.append(f"Run {entry['id']} is {entry['status']}: "
                         f"{entry['error'] or 'see its manifest'}")
        if out is None:
            notes.append(f"Run {entry['id']}: its harness output cannot be read: {why}")
            runs.append(entry)
            continue
        if not delays:
            notes.append(f"Run {entry['id']}: no edge was answered")
            runs.append(entry | {"stimuli": len(out.stims), "answered": 0,
                                 "missed": len(out.stims)})
            continue
        firmware = entry["firmware"]
        if entry["timer0"] == "enabled" and firmware in masked_max:
            threshold, source = (
                masked_max[firmware][0],
                f"the masked case {masked_max[firmware][1]}'s largest delay",
            )
        else:
            fastest = min(delays)
            slack = QUIET_SLACK_CYCLES.get(firmware, 3)
            threshold, source = fastest + slack, f"the fastest delay + {slack} cycles"
        _describe(entry, out, threshold, source)
        if entry["outliers"]["unexplained"]:
            notes.append(f"Run {entry['id']}: {entry['outliers']['unexplained']} slow answers "
                         "arrived while no logged handler ran")
        runs.append(entry)
    section = {"runs": runs, "seed": {"masked_us": list(SEED_MASKED_US),
                                      "spread_us": round(SEED_MASKED_US[1] - SEED_MASKED_US[0], 4),
                                      "source": SEED_SOURCE}}
    section["findings"] = findings(runs)
    return section_report("avrsim", section, {}, notes)


def _pooled(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The measured runs by case, in campaign order."""
    by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("delay_us"):
            by_case[r["case"]].append(r)
    return by_case


def _range_us(runs: list[dict[str, Any]]) -> tuple[float, float]:
    return min(r["delay_us"]["min"] for r in runs), max(r["delay_us"]["max"] for r in runs)


def _masked_finding(case: str, rs: list[dict[str, Any]], lo: float, hi: float,
                    cycle_us: float) -> dict[str, Any]:
    """A masked case's delays; the seed's sketch beside the seed's figure (the bare responder has
    no published counterpart: the seed measured the sketch)."""
    firmware, seed_lo, seed_hi = rs[0]["firmware"], *SEED_MASKED_US
    median = statistics.median(r["delay_us"]["p50"] for r in rs)
    hw_lo, hw_hi = min(r["hardware_us"][0] for r in rs), max(r["hardware_us"][1] for r in rs)
    text = (f"{case} ({firmware}, timer0 masked) answered every edge in {lo:.4f}–{hi:.4f} µs "
            f"(spread {hi - lo:.4f} µs, median {median:.4f} µs; about {hw_lo:.3f}–{hw_hi:.3f} µs "
            "on an ATmega, whose interrupt entry and pin synchroniser simavr does not count)")
    values: dict[str, Any] = {"min_us": lo, "max_us": hi, "median_us": median}
    if firmware == "sketch":
        spread_gap = abs((hi - lo) - (seed_hi - seed_lo)) / cycle_us
        middle = (seed_lo + seed_hi) / 2
        text += (
            f"; the seed's Uno: {seed_lo:.4f}–{seed_hi:.4f} µs (spread "
            f"{seed_hi - seed_lo:.4f} µs): the spread "
            + (
                "within one cycle of the seed's"
                if spread_gap <= 1
                else f"{spread_gap:.0f} cycles off the seed's"
            )
            + (
                ", the median inside its range."
                if seed_lo <= median <= seed_hi
                else f", the median {abs(median - middle):.2f} µs "
                f"{'below' if median < middle else 'above'} its "
                "middle (docs/avr-responder.md accounts for the difference cycle by cycle)."
            )
        )
        values["seed_us"] = [seed_lo, seed_hi]
    else:
        text += ": the bare handler, without the core's dispatcher and digitalWrite."
    return {"kind": "seed" if firmware == "sketch" else "masked", "case": case,
            "headline": f"{case} ({firmware}, timer0 masked) answered in",
            "figure": f"{lo:.4f}–{hi:.4f} µs"
            + (f" (the seed: {seed_lo:.4f}–{seed_hi:.4f} µs)" if firmware == "sketch" else ""),
            "see": "table-avrsim-runs", "values": values, "text": text}


def findings(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer, one sentence each: each masked case beside the seed, each timer0-on case's
    outliers against their prediction, and what masking changed for a firmware with both."""
    out = []
    by_case = _pooled(runs)
    seed_lo, seed_hi = SEED_MASKED_US
    for case, rs in by_case.items():
        first, freq = rs[0], rs[0]["clock_hz"]
        lo, hi = _range_us(rs)
        cycle_us = 1e6 / freq
        if first["timer0"] == "masked":
            out.append(_masked_finding(case, rs, lo, hi, cycle_us))
            continue
        count = sum(r["outliers"]["count"] for r in rs)
        answered = sum(r["answered"] for r in rs)
        expected = statistics.fmean(r["outliers"]["expected_fraction"] for r in rs)
        ci = clopper_pearson(count, answered)
        unexplained = sum(r["outliers"]["unexplained"] for r in rs)
        t0 = first["timer0_handler"]
        rate = t0["rate_hz"]
        handler_us = t0["mean_cycles"] / freq * 1e6 if t0["mean_cycles"] else None
        explained = (
            "every one arrived while timer0's handler ran (the harness's log)"
            if not unexplained
            else f"{unexplained} arrived while no logged handler ran"
        )
        agrees = "inside" if ci[0] <= expected <= ci[1] else "outside"
        out.append({
            "kind": "outliers", "case": case,
            "headline": f"{case} ({first['firmware']}, timer0 on): edges that waited for timer0's "
            "handler", "figure": f"{count} of {answered} ({100 * count / answered:.2f} %)",
            "see": "table-avrsim-runs",
            "values": {"count": count, "answered": answered, "expected_fraction": expected,
                       "fraction_ci": list(ci),
                       "unexplained": unexplained},
            "text": f"{case} ({first['firmware']}, timer0 on): {count} of {answered} edges "
            f"({100 * count / answered:.3f} %) answered late, up to {hi:.3f} µs; {explained}. "
            f"Timer0's rate × its handler's length predicts {100 * expected:.3f} %"
            + (f" ({rate:.4f} Hz × {handler_us:.3f} µs)" if rate and handler_us else "")
            + f", {agrees} the observed fraction's {CONFIDENCE:.0%} interval "
              f"({100 * ci[0]:.3f}–{100 * ci[1]:.3f} %).",
        })
    firmwares = {rs[0]["firmware"] for rs in by_case.values()}
    for firmware in sorted(firmwares):
        on = [
            r
            for rs in by_case.values()
            for r in rs
            if r["firmware"] == firmware and r["timer0"] == "enabled"
        ]
        masked = [
            r
            for rs in by_case.values()
            for r in rs
            if r["firmware"] == firmware and r["timer0"] == "masked"
        ]
        if not on or not masked:
            continue
        worst_on, worst_masked = _range_us(on)[1], _range_us(masked)[1]
        handler_runs = sum(r["timer0_handler"]["runs"] for r in masked)
        out.append({
            "kind": "masking", "firmware": firmware,
            "headline": f"{firmware}: masking timer0 cut the worst answer from", "figure":
            f"{worst_on:.3f} to {worst_masked:.3f} µs", "see": "table-avrsim-runs",
            "values": {"worst_on_us": worst_on, "worst_masked_us": worst_masked,
                       "masked_handler_runs": handler_runs},
            "text": f"{firmware}: masking timer0's overflow interrupt cut the worst answer from "
                    f"{worst_on:.3f} to {worst_masked:.3f} µs (timer0's handler ran {handler_runs} "
                    "times in the masked runs), as the seed found: timer0's overflow interrupt "
                    "causes the response outliers.",
        })
    return out
