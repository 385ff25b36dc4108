"""The module campaign's answer, one sentence per finding (report["findings"]).

What the seed asks, in its order: which interface is faster (at the median and in the tail,
per load), whether t_rw explains what the inb check adds, what the outliers are, and the
worst case. Each finding is a dict ``{"kind", "text", ...numbers}``: the sentence
for people, the numbers it quotes for programs and tests.

Everything comes from the report dict, except the percentile intervals: they are order
statistics of the pooled samples, which the report does not keep, so the samples
analyse_campaign already holds are passed in. Nothing is read from disk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from station.analysis import dependence
from station.analysis.dependence import t_ppf
from station.analysis.distribution import Distribution
from station.analysis.histogram import Histogram
from station.analysis.run_level import run_level, runs_needed, welch_differs
from station.analysis.samples import RunSamples
from station.analysis.stats import PERCENTILES
from station.common.formatting import (
    count_text,
    interface_label,
    is_number,
    ordered,
    percentile_is_reliable,
    probability_interval,
    readable,
    us,
)
from station.kinds.module.correlation import Z95

#: The percentiles the interfaces are ranked at: the typical event and the tail the
#: samples still resolve (p99.99 needs 10⁵ samples for 10 above it).
RANKED = (("p50", "the median"), ("p99.99", "p99.99"))
#: t_rw "explains" the inb difference when what it leaves over (the t_SW difference) is within
#: noise or under this share of it: a run-to-run drift of a few ns is not a finding.
NEGLIGIBLE_SHARE = 0.1
#: Exceedance probability a GPD worst-case estimate is quoted at, when it names none.
WORST_CASE_PROBABILITY = 1e-9


def campaign_findings(report: Mapping[str, Any], samples: Mapping[str, RunSamples]) -> list[dict]:
    """The findings of the module runs, in reading order; [] without module runs."""
    runs = [r for r in report.get("runs") or [] if r.get("sw")]
    if not runs:
        return []
    comparisons = report.get("comparisons") or {}
    out: list[dict] = []
    for load in ordered(str(r.get("load")) for r in runs):
        mine = [r for r in runs if str(r.get("load")) == load]
        for key, words in RANKED:
            finding = _faster(mine, samples, load, key, words)
            if finding:
                out.append(finding)
    out += [f for c in comparisons.get("t_rw") or [] if (f := _t_rw(c, runs))]
    out += [_cross_outliers(c) for c in comparisons.get("cross_interface_outliers") or []]
    out += _run_outliers([r for r in runs if isinstance(r.get("outlier_verdict"), Mapping)
                          and r["outlier_verdict"].get("sentence")])
    worst = comparisons.get("worst_case") or []
    for load in ordered(str(c.get("load")) for c in worst):
        out.append(_worst_case([c for c in worst if str(c.get("load")) == load], load))
    return out


# --- which interface is faster ------------------------------------------------------------------


def quantile_with_ci(values: np.ndarray | Distribution, *,
                     independent: bool = False) -> dict[str, tuple[float, float | None,
                                                                   float | None]]:
    """Each PERCENTILES entry of a sample as (estimate, lo, hi) ns: the order statistic and its 95 %
    interval. `values` in time order: the interval accounts for the dependence between events
    (station/analysis/dependence.py: batch means, effective sample sizes; None where the sample is
    too short for its own dependence). `independent=True`, or a Distribution (no time order left):
    the distribution-free interval for independent events, by the histogram module's rule with 1 ns
    buckets (an upper bound lies at most 1 ns above the order statistic it stands for)."""
    if not independent and not isinstance(values, Distribution):
        return _dependent_quantiles(np.asarray(values, dtype=np.float64))
    d = (
        values
        if isinstance(values, Distribution)
        else Distribution.of(np.asarray(values, dtype=np.float64))
    )
    # whole ns (rint: half to even, as before), merged where rounding joins values
    d = Distribution.weighted(np.rint(d.values).astype(np.int64), d.counts)
    # bucket indices must not be negative; widths and latencies are positive anyway
    offset = int(d.values[0])
    h = Histogram(d.values - offset, d.counts, bucket_ns=1)
    stats = h.describe() or {}
    out = {}
    for key, (lo, hi) in h.percentile_ci95_ns().items():
        est = (stats.get("percentiles_ns") or {}).get(key)
        out[key] = (float(est) + offset, None if lo is None else lo + offset,
                    None if hi is None else hi + offset)
    return out


def _dependent_quantiles(x: np.ndarray) -> dict[str, tuple[float, float | None, float | None]]:
    whole = np.rint(x).astype(np.int64)
    d = Distribution.of(whole)
    # the order statistics
    estimates = {k: v[0] for k, v in quantile_with_ci(d, independent=True).items()}
    blocks = dependence.blocks_of(whole, [estimates[k] for k in PERCENTILES])
    return {
        key: (estimates[key], *q["ci95_ns"])
        for key, q in dependence.quantile_intervals(d, blocks).items()
    }


def _pooled(runs: Sequence[Mapping[str, Any]], samples: Mapping[str, RunSamples],
            source: str) -> Distribution:
    return Distribution.pooled(d for r in runs if r.get("id") in samples
                               and (d := getattr(samples[r["id"]], source)) is not None)


def _headline(headline: str, figure: str, see: str) -> dict[str, str]:
    """What the first page shows of a finding: one short sentence, the figure that backs it (bold on
    the page) and the id of the table or figure section holding the rest; `text` says it in full."""
    return {"headline": headline, "figure": figure, "see": see}


def _interval(lo: float | None, hi: float | None) -> str:
    return f"[{us(lo) if lo is not None else '—'}, {us(hi) if hi is not None else '—'}]"


def _run_estimates(runs: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [
        float(v)
        for r in runs
        if is_number(v := ((r.get("sw") or {}).get("percentiles_ns") or {}).get(key))
    ]


def _within_sd(runs: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """The largest standard deviation a run's own dependence-aware interval implies for its
    estimate: a floor under the run-to-run spread (two runs differ by at least their sampling
    noise)."""
    sds = []
    for r in runs:
        dep = ((r.get("dependence") or {}).get("percentiles") or {}).get(key) or {}
        lo, hi = (dep.get("ci95_ns") or [None, None])
        if is_number(lo) and is_number(hi):
            sds.append((hi - lo) / (2 * Z95))
    return max(sds) if sds else None


def _faster(runs: Sequence[Mapping[str, Any]], samples: Mapping[str, RunSamples], load: str,
            key: str, words: str) -> dict | None:
    """t_SW of each interface's runs (the inb check comes after the timestamp, so both variants
    measure the same latency) compared with the runs as units: each run's percentile is one
    observation of the interface's, and the difference is judged against their run-to-run spread
    (Welch). One run for an interface: that spread is not estimated, and the finding says so."""
    interfaces = ordered((str(r.get("interface")) for r in runs), ("lpt", "pcie"))
    if len(interfaces) < 2:
        return None
    values: dict[str, dict[str, Any]] = {}
    for iface in interfaces:
        mine = [r for r in runs if r.get("interface") == iface]
        pooled = _pooled(mine, samples, "sw")
        if not pooled.count:
            return None
        est = quantile_with_ci(pooled, independent=True)[key][0]
        per_run = _run_estimates(mine, key)
        values[iface] = {"estimate_ns": est, "ci95_ns": [None, None], "count": pooled.count,
                         "reliable": percentile_is_reliable(key, pooled.count),
                         "runs": len(per_run),
                         "run_estimates_ns": per_run}
        if len(per_run) >= 2:
            m, se, n = run_level(per_run)
            t = t_ppf(0.975, n - 1)
            values[iface]["ci95_ns"] = [m - t * se, m + t * se]
    ranked = sorted(interfaces, key=lambda i: values[i]["estimate_ns"])
    best, rest = ranked[0], ranked[1:]
    replicated = all(values[i]["runs"] >= 2 for i in interfaces)
    separated = replicated and all(
        welch_differs(
            run_level(values[best]["run_estimates_ns"]), run_level(values[i]["run_estimates_ns"])
        )[0]
        and run_level(values[best]["run_estimates_ns"])[0]
        < run_level(values[i]["run_estimates_ns"])[0]
        for i in rest
    )
    quoted = " vs ".join(
        f"{interface_label(i)} {us(values[i]['estimate_ns'])} µs"
        + (f" {_interval(*values[i]['ci95_ns'])}" if replicated else "")
        for i in ranked
    )
    runs_text = " and ".join(
        f"{values[i]['runs']} run{'s' if values[i]['runs'] != 1 else ''}" for i in ranked
    )
    if separated:
        head = (f"Under load {load}, {interface_label(best)} is faster than "
                f"{', '.join(interface_label(i) for i in rest)} at {words}")
    else:
        head = (f"Under load {load}, {' and '.join(interface_label(i) for i in ranked)} cannot be "
                f"told apart at {words}")
    if replicated:
        how = (f"95 % intervals with the runs as units ({runs_text}): the difference is judged "
               "against the spread between "
               f"runs{'' if separated else ', which it does not exceed'}")
    else:
        gap = values[rest[0]]["estimate_ns"] - values[best]["estimate_ns"]
        needed = runs_needed(gap, _within_sd(runs, key))
        how = (
            f"{runs_text}: with one run of an interface, run-to-run variation is not estimated, "
            "so no difference can be told from it"
            + (
                f"; at least {needed} runs of each would tell a difference of this size"
                if needed
                else "; repetitions: 2 or more per interface"
            )
        )
    text = f"{head}: software latency t_SW {quoted} ({how})."
    if not all(v["reliable"] for v in values.values()):
        text += f" Fewer than 10 samples lie above {key}: read it as a lower bound."
    figure = " vs ".join(f"{interface_label(i)} {us(values[i]['estimate_ns'])} µs" for i in ranked)
    note = "" if separated else (", the runs' spread covers the gap" if replicated else
                                 ", run-to-run variation not estimated")
    return {"kind": "faster", "load": load, "percentile": key, "source": "sw",
            "runs_as_units": replicated,
            "faster": best if separated else None, "values": values, "text": text,
            **_headline(head, figure + note, "")}  # its figure is beside it


# --- does t_rw explain the inb difference -------------------------------------------------------


def _mean_difference(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                     se_a: float | None = None, se_b: float | None = None) -> tuple[float,
                                                                                    float] | None:
    """Difference of two STATS means and its standard error (given, or std/√n)."""
    if not a or not b or not all(is_number(s.get(k)) for s in (a, b) for k in ("mean_ns", "std_ns",
                                                                               "count")):
        return None
    se_a = a["std_ns"] / math.sqrt(a["count"]) if se_a is None else se_a
    se_b = b["std_ns"] / math.sqrt(b["count"]) if se_b is None else se_b
    return a["mean_ns"] - b["mean_ns"], math.hypot(se_a, se_b)


def _hw_se(run: Mapping[str, Any]) -> float | None:
    """The scope mean's standard error inside the run's shift, which is cluster-robust
    (pulses come in bursts per acquisition): se_shift² = se_hw² + se_sw²."""
    shift, sw = run.get("shift") or {}, run.get("sw") or {}
    if "hw_se_ns" in shift:  # kept apart since the software side's SE holds on dependent events
        return float(shift["hw_se_ns"]) if is_number(shift["hw_se_ns"]) else math.inf
    if not is_number(shift.get("se_ns")) or not is_number(sw.get("std_ns")) or not sw.get("count"):
        return None
    return math.sqrt(max(shift["se_ns"] ** 2 - sw["std_ns"] ** 2 / sw["count"], 0.0))


def _sw_mean_se(run: Mapping[str, Any]) -> float | None:
    """A run's t_SW mean standard error: the dependence-aware one (batch means); inf where the run
    was too short for it; std/√n only for a report made before the station measured dependence."""
    dep = run.get("dependence")
    if isinstance(dep, Mapping):
        se = (dep.get("mean") or {}).get("se_ns")
        return float(se) if is_number(se) else math.inf
    return None


def _variant_means(runs: Sequence[Mapping[str, Any]], iface: Any, load: Any,
                   variant: str) -> list[float]:
    return [
        float(r["sw"]["mean_ns"])
        for r in runs
        if r.get("interface") == iface
        and r.get("load") == load
        and r.get("variant") == variant
        and is_number((r.get("sw") or {}).get("mean_ns"))
    ]


def _t_rw(c: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict | None:
    by_id = {r.get("id"): r for r in runs}
    inb, no_inb = by_id.get(c.get("inb_run")), by_id.get(c.get("no_inb_run"))
    if not inb or not no_inb or not is_number(c.get("estimate_ns")):
        return None
    hw = _mean_difference(inb.get("hw"), no_inb.get("hw"), _hw_se(inb), _hw_se(no_inb))
    sw = _mean_difference(inb.get("sw"), no_inb.get("sw"), _sw_mean_se(inb), _sw_mean_se(no_inb))
    if hw is None or sw is None:
        return None
    (d_hw, se_hw), (_, se_sw) = hw, sw
    est = float(c["estimate_ns"])
    # the software side as t_rw took it: the records of each run's capture window (the shifts'), so
    # Δt_HW − Δt_SW is t_rw exactly; over every record the runs' ends would add a phase's difference
    d_sw = d_hw - est
    # t_rw = Δt_HW − Δt_SW by construction (differences of means): what t_rw leaves of the
    # scope's difference is the software latencies' own difference. Whether that is the inb check's
    # doing is a question about conditions: the runs of each variant are its units (issue 46).
    negligible = abs(d_sw) <= NEGLIGIBLE_SHARE * abs(d_hw)
    within = math.isfinite(se_sw) and abs(d_sw) <= Z95 * se_sw
    a_means = _variant_means(runs, c.get("interface"), c.get("load"), "inb")
    b_means = _variant_means(runs, c.get("interface"), c.get("load"), "no-inb")
    replicated = len(a_means) >= 2 and len(b_means) >= 2
    if replicated:
        differs = welch_differs(run_level(a_means), run_level(b_means))[0]
        explained = negligible or not differs
    else:
        explained = negligible or within
    where = f"On {interface_label(str(c.get('interface')))}" + (
        f" under load {c['load']}" if c.get("load") else ""
    )
    text = (f"{where}, scope pulses t_HW are {us(d_hw)} µs "
            f"{_interval(d_hw - Z95 * se_hw, d_hw + Z95 * se_hw)} longer with the inb check than "
            f"without, software latencies t_SW differ by {us(d_sw)} µs "
            f"{_interval(d_sw - Z95 * se_sw, d_sw + Z95 * se_sw)}, and t_rw is {us(est)} µs "
            f"{_interval(*(c.get('ci95_ns') or [None, None]))}")
    if is_number(c.get("paired_estimate_ns")):
        text += (
            f" (from paired events: {us(c['paired_estimate_ns'])} µs "
            f"{_interval(*c['paired_ci95_ns'])})"
        )
    if explained:
        text += (
            ": t_rw explains the difference — the extra bus read lengthens the pulse, not the "
            "latency."
        )
    elif replicated:
        text += (f": t_rw explains only {us(est)} of the {us(d_hw)} µs; the runs of the two "
                 f"variants differ in latency beyond their run-to-run spread ({len(a_means)} and "
                 f"{len(b_means)} runs): the inb check changes the latency itself.")
    else:
        text += (f": t_rw explains {us(est)} of the {us(d_hw)} µs; the remaining {us(d_sw)} µs is "
                 "a difference in latency between the two runs, which one run per variant cannot "
                 "tell from run-to-run variation (a run's machine state differs from the next "
                 "one's): repeat each variant (repetitions ≥ 2) to know whether the inb check "
                 "changes the latency.")
    if explained:
        headline = f"{where}, the inb check lengthens the scope pulse, not the latency"
    elif replicated:
        headline = f"{where}, the inb check changes the latency itself, beyond the bus read t_rw"
    else:
        headline = (
            f"{where}, the two runs' latencies differ beyond t_rw; one run each cannot say why"
        )
    figure = f"t_rw {us(est)} µs" if explained else f"t_SW {us(d_sw)} µs of t_HW {us(d_hw)} µs"
    return {**_headline(headline, figure, "table-t_rw"), "kind": "t_rw",
            "interface": c.get("interface"),
            "load": c.get("load"), "runs_as_units": replicated,
            "hw_difference_ns": d_hw, "hw_difference_ci95_ns": [d_hw - Z95 * se_hw,
                                                                d_hw + Z95 * se_hw],
            "sw_difference_ns": d_sw, "sw_difference_ci95_ns": [d_sw - Z95 * se_sw,
                                                                d_sw + Z95 * se_sw]
            if math.isfinite(se_sw) else [None, None],
            "t_rw_ns": est, "t_rw_ci95_ns": c.get("ci95_ns"), "explained": explained, "text": text}


# --- outliers -----------------------------------------------------------------------------------


def _cross_outliers(c: Mapping[str, Any]) -> dict:
    ref = interface_label(str(c.get("reference_interface")))
    head = (f"Above the {ref} maximum ({us(c.get('threshold_ns'))} µs, the seed's criterion)"
            + (f" under load {c['load']}" if c.get("load") else "") + ": ")
    side = {
        "no scope": " (no scope: their side cannot be told)",
        "seen by the scope": " (the scope saw them too)",
        "software-side": " (the scope saw none: software-side)",
        "cannot tell": " (the scope alone cannot tell their side)",
        "board: software-side": " (the board's widths were normal: software-side)",
        "board: on the wire": " (the board's widths were long too: on the wire)",
    }.get(str(c.get("side")), "")
    headline = ((f"Under load {c['load']}, " if c.get("load") else "")
                + f"{interface_label(str(c.get('interface')))} software samples above the {ref} "
                  f"maximum{side}")
    return {**_headline(headline,
                        f"{count_text(c.get('sw_count_above'))} of {count_text(c.get('sw_total'))}",
                        "table-cross_interface_outliers"),
            "kind": "outliers", "criterion": "above_reference_max", "load": c.get("load"),
            "interface": c.get("interface"), "sw_count_above": c.get("sw_count_above"),
            "sw_total": c.get("sw_total"), "seen_by_scope": c.get("seen_by_scope"),
            "text": head + readable(str(c.get("verdict") or ""))}


def _run_outliers(runs: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Each run's own verdict on its robust outliers; runs with the same sentence share one."""
    by_sentence: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        by_sentence.setdefault(readable(str(r["outlier_verdict"]["sentence"])), []).append(r)
    return [{**_robust_headline(same), "kind": "outliers", "criterion": "robust",
             "runs": [r.get("id") for r in same],
             "text": "Robust outliers (> median + 8·MAD) in "
                     f"{', '.join(str(r.get('id')) for r in same)}: {sentence}"}
            for sentence, same in by_sentence.items()]


def _robust_headline(same: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The runs sharing one verdict sentence, their outliers counted together (the sentence need not
    hold the counts: two runs with different counts can share it)."""
    ids = ", ".join(str(r.get("id")) for r in same)
    sw = sum(int(r["outlier_verdict"].get("sw_outliers") or 0) for r in same)
    scoped = [int(v) for r in same if (v := r["outlier_verdict"].get("hw_outliers")) is not None]
    hw = f"{count_text(sum(scoped))} scope" if scoped else "no scope"  # not measured is never 0
    figure = f"{count_text(sw)} software, {hw}" if sw or sum(scoped) else "none"
    return _headline(f"Robust outliers (above median + 8·MAD) in {ids}", figure, "table-runs")


# --- worst case ---------------------------------------------------------------------------------


def _deadline_sentence(deadlines: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> str:
    limit = us(deadlines[0][1].get("deadline_ns"))
    parts = [f"{interface_label(str(c.get('interface')))} {d['p_exceed']:.2g} "
             f"{probability_interval(d)} per event (observed fraction, "
             f"{count_text(d.get('observed_exceedances'))} seen)" for c, d in deadlines]
    return f"Probability of exceeding the {limit} µs deadline: " + ", ".join(parts) + "."


def _quantile(c: Mapping[str, Any]) -> Mapping[str, Any] | None:
    q = c.get("quantile_ns")
    return q if isinstance(q, Mapping) and is_number(q.get("estimate")) else None


def _worst_case(items: Sequence[Mapping[str, Any]], load: str) -> dict:
    order = ordered((str(c.get("interface")) for c in items), ("lpt", "pcie"))
    items = sorted(items, key=lambda c: order.index(str(c.get("interface"))))
    observed = ", ".join(f"{interface_label(str(c.get('interface')))} "
                         f"{us(c.get('observed_max_ns'))} µs"
                         for c in items)
    fitted = [c for c in items if _quantile(c) and c.get("reliable")]
    unreliable = [c for c in items if not (_quantile(c) and c.get("reliable")) and c.get("reasons")]
    parts = []
    if fitted:
        p = next(
            (
                q.get("exceedance")
                for c in fitted
                if is_number((q := _quantile(c)).get("exceedance"))
            ),
            WORST_CASE_PROBABILITY,
        )
        parts.append(
            f"the software latency exceeded with probability {p:g} per event is "
            + ", ".join(
                f"{interface_label(str(c.get('interface')))} "
                f"{us(_quantile(c)['estimate'])} µs "
                f"{_interval(_quantile(c).get('ci_low'), _quantile(c).get('ci_high'))}"
                for c in fitted
            )
            + f" (95 % intervals: {_quantile(fitted[0]).get('interval') or 'tail fit'})"
        )
    for c in unreliable:
        parts.append(f"{interface_label(str(c.get('interface')))} has no reliable tail estimate: "
                     + "; ".join(str(r) for r in c["reasons"]))
    if not parts:
        parts.append("no tail estimate with an interval is available")
    bounds = [c for c in items if isinstance(c.get("bound"),
                                             Mapping) and is_number(c["bound"].get("bound_ns"))]
    if bounds:
        parts.append("what the samples support with no model (95 %): " + ", ".join(
            f"{interface_label(str(c.get('interface')))} at most 1 event in "
            f"{c['bound']['one_in']:,.0f} exceeds {us(c['bound']['bound_ns'])} µs" for c in bounds))
    text = (f"Worst case under load {load}: " + "; ".join(parts) + ". The observed maxima "
                                                                   f"({observed}"
            + ", p99.999 " + ", ".join(f"{interface_label(str(c.get('interface')))} "
                                       f"{us(c.get('p99_999_ns'))} µs"
                                       for c in items)
            + ") are one draw each: a maximum ranks nothing by itself.")
    deadlines = [(c, c["deadline"]) for c in items if isinstance(c.get("deadline"), Mapping)
                 and is_number(c["deadline"].get("p_exceed"))]
    if deadlines:
        text += " " + _deadline_sentence(deadlines)
    if fitted:
        headline = f"Under load {load}, the worst case (exceeded with probability {p:g} per event)"
        figure = ", ".join(f"{interface_label(str(c.get('interface')))} "
                           f"{us(_quantile(c)['estimate'])} µs"
                           for c in fitted)
    elif bounds:
        # the probability the campaign asked for, even where no estimate came (an older report: its
        # quantile's, else the default)
        asked = next((e for c in items for e in (c.get("exceedance"),
                                                 (c.get("quantile_ns") or {}).get("exceedance"))
                      if is_number(e)), WORST_CASE_PROBABILITY)
        headline = (f"Under load {load}, no reliable worst case once in {1 / asked:,.0f} events; "
                    "with 95 % confidence the samples bound")
        figure = ", ".join(f"{interface_label(str(c.get('interface')))} "
                           f"{us(c['bound']['bound_ns'])} µs "
                           f"(1 in {c['bound']['one_in']:,.0f})" for c in bounds)
    else:
        headline, figure = f"Under load {load}, no worst case can be stated", "too few samples"
    return {**_headline(headline, figure, "table-worst_case"), "kind": "worst_case", "load": load,
            "interfaces": {str(c.get("interface")): {"observed_max_ns": c.get("observed_max_ns"),
                                                     "p99_999_ns": c.get("p99_999_ns"),
                                                     "quantile_ns": _quantile(c)} for c in items},
            "text": text}
