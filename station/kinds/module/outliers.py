"""Outliers within a run, and the seed's cross-interface criterion: samples of
one interface above the other interface's software maximum, and whether the
scope (and the board, where it timestamps every event) saw them too."""

from __future__ import annotations

import numpy as np
import pandas as pd

from station.analysis.distribution import Distribution
from station.kinds.module.correlation import bulk

ROBUST_Z = 8.0


Sample = np.ndarray | Distribution  # a sample, or its distribution (values and counts)


def _dist(values: Sample) -> Distribution:
    return values if isinstance(values, Distribution) else Distribution.of(np.asarray(values))


def robust_threshold(values: Sample, z: float = ROBUST_Z) -> float:
    d = _dist(values)
    med = d.median()
    mad = d.robust_sigma(med)
    # more than half the sample on one value (coarse quantisation): fall back to the std
    if mad == 0:
        # (the outliers' own spread widens it: fewer are called; run_outliers says so)
        mad = d.std(0)
    return float(med + z * mad) if mad > 0 else float("inf")


def threshold_basis(values: Sample) -> str:
    """What robust_threshold's spread was: the MAD, or the std where the MAD is 0."""
    d = _dist(values)
    return (
        "mad"
        if d.count and d.mad(d.median()) > 0
        else "std (the MAD is 0: over half the sample on one value)"
    )


def run_outliers(sw_ns: Sample, hw_ns: Sample | None) -> dict:
    sw = _dist(sw_ns)
    sw_thr = robust_threshold(sw)
    out = {
        "method": f"robust z-score: above median + {ROBUST_Z:g}·1.4826·MAD of the same sample",
        "sw_threshold_ns": sw_thr,
        "sw_count": sw.count_above(sw_thr),
        "sw_threshold_basis": threshold_basis(sw) if sw.count else None,
        "hw_threshold_ns": None,
        "hw_count": None,  # no scope, or too few pulses for a threshold: not measured, never 0
    }
    if hw_ns is not None and len(hw_ns) > 10:
        hw = _dist(hw_ns)
        hw_thr = robust_threshold(hw)
        out["hw_threshold_ns"] = hw_thr
        out["hw_count"] = hw.count_above(hw_thr)
    return out


def cross_interface_counts(interface: str, reference: str, threshold_ns: float, *, sw_above: int,
                           sw_total: int,
                           hw_above: int | None, hw_total: int | None, board_above: int | None,
                           board_total: int | None,
                           board_max_of_sw_outliers_ns: float | None,
                           scope_caught: pd.DataFrame | None = None) -> dict:
    """The seed's criterion from counts: software samples of `interface` above `threshold_ns` (the
    `reference` interface's software maximum), pulses above it, the board's widths, and the
    paired events among them (`scope_caught`: run, seq, sw_ns, hw_ns). Without a scope (hw None) the
    scope's figures are null, never 0: not measured. `side` is the one reading the headline and
    the verdict's text both take."""
    frac = sw_above / sw_total if sw_total else 0.0
    scoped = hw_total is not None and hw_above is not None
    result = {
        "interface": interface,
        "reference_interface": reference,
        "threshold_ns": float(threshold_ns),
        "sw_count_above": sw_above,
        "sw_total": sw_total,
        "sw_fraction": frac,
        "hw_count_above": hw_above,
        "hw_total": hw_total,
        "hw_expected_if_real": frac * hw_total if scoped else None,
        "seen_by_scope": hw_above > 0 if scoped else None,
        "board_count_above": board_above,
        "board_total": board_total,
        "board_max_of_sw_outliers_ns": board_max_of_sw_outliers_ns,
    }
    result["scope_caught"] = (
        [] if scope_caught is None else
        [{"run": r.run, "seq": int(r.seq), "sw_ns": float(r.sw_ns), "hw_ns": float(r.hw_ns)}
         for r in scope_caught.itertuples()]
    )
    result["side"] = _cross_side(result)
    result["verdict"] = _verdict(result)
    return result


#: what the scope says of the software samples above the reference maximum (cross_interface_counts)
CROSS_SIDES = ("none above", "no scope", "seen by the scope", "software-side", "cannot tell",
               "board: software-side", "board: on the wire")


def _cross_side(r: dict) -> str:
    if r["sw_count_above"] == 0:
        return "none above"
    # no scope: the board's own widths of those events, where it has them
    if r["seen_by_scope"] is None:
        if r["board_max_of_sw_outliers_ns"] is None:
            return "no scope"
        return "board: software-side" if r["board_max_of_sw_outliers_ns"] <= r["threshold_ns"] \
            else "board: on the wire"
    if r["seen_by_scope"]:
        return "seen by the scope"
    return "software-side" if r["hw_expected_if_real"] >= 3 else "cannot tell"


def _verdict(r: dict) -> str:
    ref, iface = r["reference_interface"].upper(), r["interface"].upper()
    if r["sw_count_above"] == 0:
        return f"No {iface} software sample exceeded the {ref} maximum."
    parts = [
        f"{r['sw_count_above']} of {r['sw_total']} {iface} software samples "
        f"({r['sw_fraction']:.1e}) exceeded the {ref} maximum."
    ]
    if r["side"] == "no scope":
        parts.append("No scope measured these runs: whether the delay is on the wire cannot be "
                     "told.")
    elif r["side"].startswith("board"):
        parts.append("No scope measured these runs; the board timed the pulses itself.")
    elif r["side"] == "seen by the scope":
        parts.append(f"The scope saw {r['hw_count_above']} pulse(s) above it too: the delay is on "
                     "the wire.")
    elif r["side"] == "software-side":
        parts.append(
            f"The scope saw none in {r['hw_total']} pulses where {r['hw_expected_if_real']:.1f} "
            "were expected if they were real: they are software-side (between timestamp and "
            "write)."
        )
    else:
        parts.append(
            f"The scope saw none, but its {r['hw_total']} pulses would hold only "
            f"{r['hw_expected_if_real']:.2f} such events: the scope alone cannot tell."
        )
    if r["scope_caught"]:
        widths = ", ".join(f"{c['hw_ns'] / 1000:.2f}" for c in r["scope_caught"])
        above = sum(c["hw_ns"] > r["threshold_ns"] for c in r["scope_caught"])
        parts.append(
            f"Event pairing found {len(r['scope_caught'])} of those very events in the scope's "
            f"records, with pulse widths {widths} µs: {above} above the threshold"
            + (
                " — the scope saw a normal pulse where software saw a late one."
                if above == 0
                else "."
            )
        )
    if r["board_max_of_sw_outliers_ns"] is not None:
        verdict = "below" if r["board_max_of_sw_outliers_ns"] <= r["threshold_ns"] else "above"
        parts.append(
            f"The board's own timestamps for those same events give widths up to "
            f"{r['board_max_of_sw_outliers_ns'] / 1000:.2f} µs, {verdict} the threshold"
            + (
                ": the pulse itself was normal, the delay is software-side."
                if verdict == "below"
                else "."
            )
        )
    return " ".join(parts)


# an outlier kind is called present with this many paired events of it, and a run's verdict
# needs this many paired outlier events in all: one event alone may be a natural late handler
MIN_KIND_EVENTS = 2
MIN_PAIRED_OUTLIERS = 3


def outlier_verdict(sw_ns: Sample, hw_ns: Sample | None, pairs: pd.DataFrame | None,
                    in_bulk: np.ndarray | None = None) -> dict:
    """Which side delayed a run's outlier events, from the events the scope and software both saw.

    An outlier event has t_SW or t_HW above its run's robust threshold (`run_outliers`). Its paired
    HW−SW difference says which side the extra time is on: below the run's bulk (`correlation.bulk`)
    software saw more than the pulse (a delay between timestamp and write: `sw_only`); above it the
    pulse outlasted the software's view (a stretched clearing access on the bus: `hw_only`); within
    it both saw the same late event (a late handler: `both_sides`). The scope sees the last two,
    so `hardware_side` = hw_only + both_sides. `in_bulk`: `correlation.bulk` of the pairs'
    differences, when the caller has it.
    """
    sw, hw, sw_thr, hw_thr = _thresholds(sw_ns, hw_ns)
    counts = {"sw_only": 0, "hw_only": 0, "both_sides": 0, "paired_events": 0}
    if pairs is not None and len(pairs) > 1:
        diff = pairs["hw_ns"].to_numpy(np.float64) - pairs["sw_ns"].to_numpy(np.float64)
        median = float(np.median(diff))
        counts = classify_paired(
            pairs, sw_thr, hw_thr, median, bulk(diff, median) if in_bulk is None else in_bulk,
            len(pairs)
        )
    return _decide(counts, sw.count_above(sw_thr), None if hw is None else hw.count_above(hw_thr),
                   paired=pairs is not None and len(pairs) > 1)


def verdict_thresholds(sw_ns: Sample, hw_ns: Sample | None) -> tuple[float, float]:
    """The robust thresholds above which a software sample or a pulse is an outlier event."""
    return _thresholds(sw_ns, hw_ns)[2:]


def _thresholds(sw_ns: Sample, hw_ns: Sample | None) -> tuple[Distribution, Distribution | None,
                                                              float, float]:
    sw = _dist(sw_ns)
    hw = None if hw_ns is None else _dist(hw_ns)
    sw_thr = robust_threshold(sw) if sw.count else float("inf")
    hw_thr = robust_threshold(hw) if hw is not None and hw.count > 10 else float("inf")
    return sw, hw, sw_thr, hw_thr


def outlier_verdict_of_candidates(sw_ns: Sample, hw_ns: Sample | None, candidates: pd.DataFrame,
                                  median: float,
                                  in_bulk: np.ndarray, paired_events: int) -> dict:
    """outlier_verdict from a run's paired events that can be outliers alone (every pair with t_SW
    or t_HW above its threshold, `verdict_thresholds`), with the median of all pairs' HW−SW and
    whether each candidate's difference lies in the run's bulk: what a run read in batches keeps."""
    sw, hw, sw_thr, hw_thr = _thresholds(sw_ns, hw_ns)
    counts = classify_paired(candidates, sw_thr, hw_thr, median, in_bulk, paired_events)
    return _decide(counts, sw.count_above(sw_thr), None if hw is None else hw.count_above(hw_thr),
                   paired=paired_events > 1)


def classify_paired(pairs: pd.DataFrame, sw_thr: float, hw_thr: float, median: float,
                    in_bulk: np.ndarray,
                    paired_events: int) -> dict[str, int]:
    """Count the paired outlier events by side: software only (HW−SW below the bulk), scope only
    (above it), both (within it, or late on both)."""
    p_sw, p_hw = pairs["sw_ns"].to_numpy(np.float64), pairs["hw_ns"].to_numpy(np.float64)
    diff = p_hw - p_sw
    sw_out, hw_out = p_sw > sw_thr, p_hw > hw_thr
    off = ~np.asarray(in_bulk, bool)
    low, high = off & (diff < median), off & (diff > median)
    sw_only = sw_out & ~hw_out & low
    hw_only = hw_out & ~sw_out & high
    both = (sw_out | hw_out) & ~sw_only & ~hw_only
    return {"sw_only": int(sw_only.sum()), "hw_only": int(hw_only.sum()),
            "both_sides": int(both.sum()),
            "paired_events": int(paired_events)}


def pooled_verdict(verdicts: list[dict | None]) -> dict | None:
    """One verdict over several runs (a cross-interface comparison's): their counts summed."""
    have = [v for v in verdicts if v is not None]
    if not have:
        return None
    keys = ("sw_only", "hw_only", "both_sides", "paired_events", "sw_outliers")
    total = {k: sum(v[k] for v in have) for k in keys}
    scoped = [v["hw_outliers"] for v in have if v.get("hw_outliers") is not None]
    return _decide(total, total.pop("sw_outliers"), sum(scoped) if scoped else None,
                   paired=any(v["paired_events"] > 1 for v in have))


def _decide(c: dict[str, int], run_sw: int, run_hw: int | None, paired: bool) -> dict:
    """The verdict from the paired outliers' sides; run_hw None: no scope measured the run."""
    software, hardware = c["sw_only"], c["hw_only"] + c["both_sides"]
    total = software + hardware
    if run_sw == 0 and not run_hw:
        verdict = "none"
    elif total < MIN_PAIRED_OUTLIERS:
        verdict = "cannot tell"
    elif software >= MIN_KIND_EVENTS and hardware >= MIN_KIND_EVENTS:
        verdict = "both"
    else:
        verdict = "software-side" if software > hardware else "hardware-side"
    result = {
        "verdict": verdict,
        "software_side": software,
        "hardware_side": hardware,
        **{k: c[k] for k in ("sw_only", "hw_only", "both_sides")},
        "paired_outliers": total,
        "paired_events": c["paired_events"],
        "sw_outliers": run_sw,
        "hw_outliers": run_hw,
        "method": f"events above median + {ROBUST_Z:g}·1.4826·MAD of t_SW or t_HW, sided by their "
                  "paired HW−SW "
        f"against the run's bulk; a kind needs {MIN_KIND_EVENTS} paired events, a verdict "
        f"{MIN_PAIRED_OUTLIERS} in all",
    }
    result["sentence"] = _verdict_sentence(result, paired)
    return result


def _verdict_sentence(r: dict, paired: bool) -> str:
    if r["hw_outliers"] is None:
        if r["verdict"] == "none":
            return (
                "No outliers: no software sample above its robust threshold (no scope measured "
                "the run)."
            )
        return (f"{r['sw_outliers']} software outlier(s); no scope measured the run: which side "
                "delayed them cannot be told.")
    seen = f"{r['sw_outliers']} software and {r['hw_outliers']} scope outlier(s)"
    if r["verdict"] == "none":
        return "No outliers: no software sample and no pulse above its robust threshold."
    if not paired:
        return (
            f"{seen}, but no event could be paired with its pulse: which side delayed them "
            "cannot be told."
        )
    detail = (
        f"{r['paired_outliers']} of the {r['paired_events']} paired events are outliers: "
        f"{r['sw_only']} late in software only (normal pulse: a delay between timestamp and "
        f"write), {r['hw_only']} late on the scope only (normal t_SW: a stretched bus access), "
        f"{r['both_sides']} late on both (a late handler)"
    )
    if r["verdict"] == "cannot tell":
        return (f"{seen}; {detail}: too few paired outlier events to tell the side "
                f"(needs {MIN_PAIRED_OUTLIERS}).")
    conclusion = {
        "software-side": "the outliers are software-side; the scope saw normal pulses",
        "hardware-side": "the outliers are hardware-side; the scope saw them",
        "both": "the run has both software-side and hardware-side outliers",
    }[r["verdict"]]
    return f"{detail}: {conclusion}."
