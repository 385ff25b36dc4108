"""The module kind's tables (runs, statistics, t_rw, outliers, worst case, pairing, capture,
the scope's own measurement) as display-ready text for both renderers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.common.formatting import (
    MISSING,
    WEAK_PERCENTILE_NOTE,
    count_text,
    interface_label,
    is_number,
    ordered,
    percentile_is_reliable,
    percentile_keys,
    probability_interval,
    readable,
    us,
    us_interval,
)
from station.kinds.module.decomposition_tables import (
    credited_table,
    largest_table,
    overhead_table,
    stages_table,
)
from station.report.tables import Cell, Table, _n, _t


def runs_table(report: Mapping[str, Any]) -> Table | None:
    runs = report.get("runs") or []
    if not runs:
        return None
    periods = {r.get("period_ns") for r in runs}
    # One period for every run (the usual case) is a note, not a column.
    common_period = periods.pop() if len(periods) == 1 else None
    rows = []
    for r in runs:
        losses = r.get("losses") or {}
        shift = r.get("shift") or {}
        outliers = r.get("outliers") or None
        rows.append([
            _t(r.get("id")),
            _t(interface_label(str(r.get("interface", "")))),
            _t(r.get("variant")),
            _t(r.get("load")),
            _n(str(r.get("repetition", MISSING))),
            Cell(str(r.get("status", MISSING)), status=str(r.get("status"))),
            _n(f"{r['duration_s']:.1f}" if is_number(r.get("duration_s")) else MISSING),
            *([] if common_period is not None else [_n(us(r.get("period_ns"), 1))]),
            _n(f"{count_text((r.get('sw') or {}).get('count'))} / "
               f"{count_text((r.get('hw') or {}).get('count'))}"),
            _n(_irq_count(r.get("interrupts"))),
            _n(_strays_text(r.get("strays"))),
            _n(" / ".join(count_text(losses.get(k))
                          for k in ("sw_lost", "sw_dropped_by_target", "gaps"))
               + (f" ({losses['format']})" if losses.get("format") else "")),
            _n(us(shift.get("hw_minus_sw_mean_ns"))),
            _n(us_interval(shift.get("ci95_ns"))),
            _n(f"{count_text(outliers.get('sw_count'))} / {count_text(outliers.get('hw_count'))}"
               f" > {us(outliers.get('sw_threshold_ns'))}" if outliers else MISSING),
        ])
    notes = [f"{r.get('id')} ({r.get('status')}): {r['error']}" for r in runs if r.get("error")]
    if common_period is not None:
        notes.append(f"Period of the RT task: {us(common_period, 1)} µs in every run.")
    notes += ["Samples: software records / scope pulses. Losses: records lost in transit / "
              "dropped by the target / sequence gaps, and the stream format (legacy streams "
              "cannot reveal gaps).",
              "HW − SW: mean scope pulse width minus mean software latency, with its 95% CI; "
              "≈ t_rw when the handler does an extra bus read (inb), ≈ 0 otherwise."]
    if any(_irq_count(r.get("interrupts")) != MISSING for r in runs):
        lines = sorted({str(r["interrupts"]["row"]) for r in runs
                        if isinstance(r.get("interrupts"), Mapping) and r["interrupts"].get("row")})
        notes.append("IRQs: interrupts the target counted on the echoer's line"
                     + (f" ({', '.join(lines)})" if lines else "")
                     + " in /proc/interrupts during the run; " + _irq_surplus_text(runs))
    if any(r.get("strays") for r in runs):
        notes.append("Stray IRQs: records the module flagged NOT_OURS (a foreign interrupt on its "
                     "line: a shared or noisy line), with their share of the records; not "
                     "latencies of the module, so left out of t_SW and of the event pairing. n/a: "
                     "the record format cannot flag them.")
    if any(r.get("outliers") for r in runs):
        notes.append(ROBUST_OUTLIERS_NOTE)
    return Table("runs", "Run status", [
        "Run", "Interface", "Variant", "Load", "Rep.", "Status", "Duration (s)",
        *([] if common_period is not None else ["Period (µs)"]), "Samples SW / HW", "IRQs",
        "Stray IRQs",
        "Lost / dropped / gaps", "HW − SW (µs)", "95% CI (µs)",
        "Robust outliers software / scope (> threshold, µs)",
    ], rows, notes)


def _strays_text(strays: Mapping[str, Any] | None) -> str:
    if not strays:
        return MISSING
    if strays.get("count") is None:
        return "n/a"
    return (
        f"{count_text(strays['count'])} ({100 * strays['share']:.2g} %)" if strays["count"] else "0"
    )


ROBUST_OUTLIERS_NOTE = (
    "Robust outliers (> median + 8·MAD): a run's own software latencies, and its own scope pulse "
    "widths, above that run's median + 8 × 1.4826 × MAD (the threshold shown is the software one); "
    "a test within one run, needing no other interface. Not the same as \"above the LPT maximum\" "
    "(the seed's criterion, in the comparisons).")


def _irq_surplus(run: Mapping[str, Any]) -> int | None:
    """IRQs counted minus the records the stream delivered (the module's own and its strays')."""
    irq = run.get("interrupts")
    if not isinstance(irq, Mapping) or not (
        is_number(irq.get("before")) and is_number(irq.get("after"))
    ):
        return None
    records = ((run.get("sw") or {}).get("count") or 0) + (
        (run.get("strays") or {}).get("count") or 0
    )
    return int(irq["after"] - irq["before"] - records)


def _irq_surplus_text(runs: list[Mapping[str, Any]]) -> str:
    """The IRQ count against the records, as these runs have it (never a fixed sentence)."""
    surplus = {str(r.get("id")): s for r in runs if (s := _irq_surplus(r)) is not None}
    more = {k: v for k, v in surplus.items() if v > 0}
    fewer = {k: v for k, v in surplus.items() if v < 0}
    parts = []
    if len(more) + len(fewer) < len(surplus):
        equal = len(surplus) - len(more) - len(fewer)
        parts.append(
            "equal to the software records (own and stray)"
            + (
                " in every run"
                if not more and not fewer
                else f" in {equal} run{'s' if equal != 1 else ''}"
            )
        )
    if more:
        worst = max(more, key=lambda k: more[k])
        parts.append(f"more than the records in {len(more)} run{'s' if len(more) != 1 else ''} (up "
                     f"to {count_text(more[worst])}, {worst}): events the stream had not delivered "
                     "when the count was read, or records lost in transit")
    if fewer:
        worst = min(fewer, key=lambda k: fewer[k])
        parts.append(f"fewer than the records in {len(fewer)} run{'s' if len(fewer) != 1 else ''} "
                     f"(by up to {count_text(-fewer[worst])}, {worst}): records without a counted "
                     "interrupt, to look into")
    return "; ".join(parts) + "."


def _irq_count(interrupts: Any) -> str:
    """IRQs the target counted during the run (manifest: /proc/interrupts before and after)."""
    if not isinstance(interrupts, Mapping):
        return MISSING
    before, after = interrupts.get("before"), interrupts.get("after")
    return count_text(after - before) if is_number(before) and is_number(after) else MISSING


def stats_table(report: Mapping[str, Any]) -> Table | None:
    runs = report.get("runs") or []
    all_stats = [r.get(src) for r in runs for src in ("sw", "hw")]
    if not any(all_stats):
        return None
    pkeys = percentile_keys(all_stats)
    rows = []
    any_weak = False
    for r in runs:
        for source in ("sw", "hw"):
            stats = r.get(source)
            if not stats:
                continue
            count = stats.get("count")
            percentiles = stats.get("percentiles_ns") or {}
            cells = [_t(r.get("id")), _t("SW" if source == "sw" else "HW (scope)"),
                     _n(count_text(count)), _n(us(stats.get("min_ns"))),
                     _n(us(stats.get("mean_ns"))), _n(us(stats.get("std_ns")))]
            for key in pkeys:
                value = percentiles.get(key)
                weak = is_number(value) and not percentile_is_reliable(key, count)
                any_weak |= weak
                cells.append(Cell(us(value), numeric=True, weak=weak))
            cells.append(_n(us(stats.get("max_ns"))))
            rows.append(cells)
    headers = ["Run", "Source", "Count", "Min", "Mean", "Std", *pkeys, "Max"]
    return Table("stats", "Latency statistics (µs)", headers, rows,
                 [WEAK_PERCENTILE_NOTE] if any_weak else [])


def _comparisons(report: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    return (report.get("comparisons") or {}).get(key) or []


def _label(c: Mapping[str, Any]) -> str:
    """Interface, and the load when comparisons are made per load."""
    label = interface_label(str(c.get("interface", "")))
    return f"{label} · {c['load']}" if c.get("load") else label


def trw_table(report: Mapping[str, Any]) -> Table | None:
    items = _comparisons(report, "t_rw")
    if not items:
        return None
    has_truth = any(is_number(c.get("truth_ns")) for c in items)
    has_paired = any(is_number(c.get("paired_estimate_ns")) for c in items)
    rows = []
    for c in items:
        row = [_t(_label(c)), _n(us(c.get("estimate_ns"))),
               _n(us_interval(c.get("ci95_ns")))]
        if has_truth:
            truth, est = c.get("truth_ns"), c.get("estimate_ns")
            row += [_n(us(truth)),
                    _n(us(est - truth) if is_number(truth) and is_number(est) else MISSING)]
        if has_paired:
            row += [_n(us(c.get("paired_estimate_ns"))), _n(us_interval(c.get("paired_ci95_ns")))]
        row += [_t(c.get("inb_run")), _t(c.get("no_inb_run"))]
        rows.append(row)
    headers = ["Interface", "t_rw (µs)", "95% CI (µs)"]
    if has_truth:
        headers += ["Injected (µs)", "Error (µs)"]
    if has_paired:
        headers += ["Paired t_rw (µs)", "Paired 95% CI (µs)"]
    headers += ["inb run", "no-inb run"]
    return Table("t_rw", "Bus read/write time t_rw", headers, rows,
                 ["t_rw: shift of the scope pulse width when the IRQ handler does one more bus "
                  "read (inb) before clearing the line — the seed found ≈ 2 µs on LPT."])


def outliers_table(report: Mapping[str, Any]) -> Table | None:
    items = _comparisons(report, "cross_interface_outliers")
    if not items:
        return None
    rows = []
    for c in items:
        fraction = c.get("sw_fraction")
        seen = c.get("seen_by_scope")
        rows.append([
            _t(_label(c)),
            _t(interface_label(str(c.get("reference_interface", "")))),
            _n(us(c.get("threshold_ns"))),
            _n(f"{count_text(c.get('sw_count_above'))} / {count_text(c.get('sw_total'))}"),
            _n(f"{fraction:.2e}" if is_number(fraction) else MISSING),
            _n(f"{count_text(c.get('hw_count_above'))} / {count_text(c.get('hw_total'))}"),
            _t(MISSING if seen is None else ("yes" if seen else "no")),
            Cell(readable(str(c.get("verdict") or MISSING)), wrap=True),
        ])
    references = ordered(interface_label(str(c.get("reference_interface", ""))) for c in items)
    return Table("cross_interface_outliers",
                 f"Outliers above the {' / '.join(references)} maximum (the seed's criterion)", [
                     "Interface", "Reference", "Threshold (µs)", "SW above / total",
                     "SW fraction", "HW above / total", "Seen by scope", "Verdict"], rows,
                 ["Above the reference maximum (the seed's criterion): samples of one interface "
                  "above the largest software latency of the other (the reference) under the same "
                  "load. The seed saw ≈ 10⁻⁵ of PCIe samples above the LPT maximum in software but "
                  "not on the scope; a delay before the bus write (an SMI, say) would do exactly "
                  "that. Not the same as the runs' robust outliers (> median + 8·MAD of the run "
                  "itself)."])


def worst_case_table(report: Mapping[str, Any]) -> Table | None:
    items = _comparisons(report, "worst_case")
    if not items:
        return None
    counts = {r.get("id"): (r.get("sw") or {}).get("count") for r in report.get("runs") or []}
    deadline = next((c["deadline"]["deadline_ns"] for c in items if isinstance(c.get("deadline"),
                                                                               Mapping)), None)
    exceedance = next((e for c in items for e in (c.get("exceedance"),
                                                  (c.get("quantile_ns") or {}).get("exceedance"))
                       if is_number(e)), None)
    rows = []
    any_weak = False
    for c in items:
        p = c.get("p99_999_ns")
        # Judged by the named run's SW count; unknown run → shown unmarked.
        count = counts.get(c.get("run"))
        weak = is_number(p) and is_number(count) and not percentile_is_reliable("p99.999", count)
        any_weak |= weak
        q = c.get("quantile_ns") if isinstance(c.get("quantile_ns"), Mapping) else {}
        fit = (
            "reliable"
            if c.get("reliable")
            else "unreliable: " + "; ".join(c.get("reasons") or ["no fit"])
        )
        row = [_t(_label(c)), _n(us(c.get("observed_max_ns"))), Cell(us(p), numeric=True,
                                                                     weak=weak),
               _n(f"{us(q.get('estimate'))} [{us(q.get('ci_low'))}, {us(q.get('ci_high'))}]"
                  if q and c.get("reliable") else "–"),
               _t(fit)]
        if deadline is not None:
            d = c.get("deadline") or {}
            # the observed fraction with its exact interval (worst_case._deadline_block)
            row.append(
                _n(
                    f"{d['p_exceed']:.2g} {probability_interval(d)}"
                    if is_number(d.get("p_exceed"))
                    else "–"
                )
            )
        b = c.get("bound") if isinstance(c.get("bound"), Mapping) else {}
        row.append(_n(f"{us(b['bound_ns'])} (1 in {b['one_in']:,.0f})"
                      if is_number(b.get("bound_ns")) and is_number(b.get("one_in")) else "–"))
        rows.append([*row, _t(c.get("run"))])
    header = ["Interface", "Observed max (µs)", "p99.999 (µs)",
              f"Exceeded w.p. {exceedance or 1e-9:g}/event (µs) [95 %]", "Tail fit"]
    if deadline is not None:
        header.append(f"P(> {us(deadline)} µs) per event [95 %]")
    header.append("Distribution-free bound (µs, 95 %)")
    notes = [WEAK_PERCENTILE_NOTE] if any_weak else []
    notes.append("Tail fit: peaks over a threshold fitted with a generalised Pareto distribution, "
                 "profile likelihood intervals; threshold chosen where the shape is stable, "
                 "checked by an Anderson-Darling test and for clustered extremes (extremal index). "
                 "Where the sample resolves the probability (10 events expected beyond it) the "
                 "latency is the empirical quantile with an exact order-statistic interval, and a "
                 "deadline's probability is always the observed fraction with its exact "
                 "(Clopper-Pearson) interval: the fit's own intervals held the twin's true "
                 "quantiles less often than stated even inside the data. An unreliable fit gives "
                 "no number here, only the reason (report.json keeps its estimates, and the fit's "
                 "deadline figure); so does a probability rarer than 10 in the sample's size (an "
                 "extrapolation beyond the data). The distribution-free bound holds for any "
                 "distribution: with 95 % confidence, at most 1 event in the number given exceeds "
                 "the sample's maximum. The observed maximum is one draw: it ranks nothing by "
                 "itself.")
    return Table("worst_case", "Worst case", [*header, "Run"], rows, notes)


def pairing_table(report: Mapping[str, Any]) -> Table | None:
    rows = []
    for r in report.get("runs") or []:
        p = r.get("pairing")
        if not p:
            continue
        rows.append(
            [
                _t(r.get("id")),
                _n(
                    f"{count_text(p.get('acquisitions_paired'))} / "
                    f"{count_text(p.get('acquisitions'))}"
                ),
                _n(f"{count_text(p.get('pulses_paired'))} / {count_text(p.get('pulses'))}"),
                _n(
                    f"{p['expected_false_pairs']:.1g}"
                    if is_number(p.get("expected_false_pairs"))
                    else MISSING
                ),
                _n(us(p.get("hw_minus_sw_paired_mean_ns"))),
                _n(us(p.get("hw_minus_sw_paired_median_ns"))),
                _n(us(p.get("hw_minus_sw_paired_std_ns"))),
            ]
        )
    if not rows:
        return None
    return Table("pairing", "Event pairing: each scope pulse matched to its software record", [
        "Run", "Acquisitions paired", "Pulses paired", "Expected false pairs (acquisitions)",
        "HW − SW mean (µs)",
        "HW − SW median (µs)", "HW − SW std (µs)"], rows,
        ["The same events seen twice: the spread of HW − SW per event is the measurement's own "
         "noise (bus access jitter, scope resolution), not the latency's.",
         "An acquisition is paired only where no wrong alignment among the candidates searched "
         "could fit its pulses as well with probability above 1e-4; expected false pairs: the sum "
         "of those probabilities over the acquisitions paired (an upper bound). Acquisitions of "
         "too few pulses stay unpaired: the notes say why."])


def capture_table(report: Mapping[str, Any]) -> Table | None:
    """What the scope saw of each run: its capture strategy, capture ratio and dead time."""
    rows = []
    for r in report.get("runs") or []:
        c = r.get("capture")
        if not c or not c.get("acquisitions"):
            continue
        ratio, dead, fraction = (
            c.get("capture_ratio"), c.get("dead_time_per_acquisition_s"), c.get("dead_fraction")
        )
        rows.append(
            [
                _t(r.get("id")),
                _t(c.get("strategy")),
                _t(c.get("bus") or MISSING),
                _n(count_text(c.get("acquisitions"))),
                _n(count_text(c.get("frames"))),
                _n(
                    count_text(c.get("frames_without_pulse"))
                    if c.get("strategy") == "segmented"
                    else MISSING
                ),
                _n(count_text(c.get("pulses"))),
                _n(count_text(c.get("events_emitted"))),
                _n(f"{100 * ratio:.1f} %" if is_number(ratio) else MISSING),
                _n(f"{1e3 * dead:.2f}" if is_number(dead) else MISSING),
                _n(f"{100 * fraction:.1f} %" if is_number(fraction) else MISSING),
            ]
        )
    if not rows:
        return None
    return Table("capture", "Scope capture: how many of the events the scope saw", [
        "Run", "Strategy", "Bus", "Acquisitions", "Frames", "Frames cut", "Pulses",
        "Events in window", "Capture ratio",
        "Dead time per acquisition (ms)", "Dead share of the window"], rows,
        ["Capture ratio: pulses captured ÷ events the target emitted between the first "
         "acquisition's arming and the last one's transfer (counted from the record stream's "
         "sequence numbers). Dead time: that window less the time the records (or the frames) "
         "cover: re-arming, waiting for a trigger and transfer (the host extracts one record while "
         "the scope acquires the next). waveform: single long records; segmented: FastFrame / "
         "segmented memory, one pulse a frame placed by the scope's time tags; frames cut: frames "
         "that held no whole pulse (a pulse outlasting the frame: its width is lost, and those are "
         "the longest). Bus: how the data reached the station; on the twin, the simulated bus that "
         "holds each reply back (instruments/sim/bus.py)."])


def scope_measurement_table(report: Mapping[str, Any]) -> Table | None:
    """capture: measurement: the scope's own width statistics, and the host's cross-check."""
    rows = []
    for r in report.get("runs") or []:
        m = r.get("scope_measurement")
        if not m:
            continue
        diff = m.get("largest_difference_s")
        rows.append([
            _t(r.get("id")),
            _t({"all": "every pulse of each record", "first": "the first pulse of each record"}.get(
                m.get("scope_measures"), MISSING)),
            _n(f"{count_text(m.get('valid'))} / {count_text(m.get('acquisitions'))}"),
            _n(count_text(m.get("pulses"))),
            *(_n(us(1e9 * m[k]) if is_number(m.get(k)) else MISSING) for k in ("mean_s", "min_s",
                                                                               "max_s")),
            _n(count_text(m.get("cross_checked"))),
            _n(f"{1e9 * diff:.1f}" if is_number(diff) else MISSING),
        ])
    if not rows:
        return None
    return Table("scope_measurement", "The scope's own pulse-width measurement", [
        "Run", "The scope measures", "Acquisitions with a value / all", "Pulses measured",
        "Mean (µs)",
        "Min (µs)", "Max (µs)", "Cross-checked acquisitions", "Largest |scope − host| (ns)"], rows,
        ["capture: measurement: the scope measures each acquisition itself (TDS MEASUrement:IMMed, "
         "MSO measurement results, InfiniiVision :MEASure:PWIDth) and no waveform crosses the bus; "
         "9.9E37 (no valid measurement) counts as no value. Cross-checked acquisitions had their "
         "record transferred too: the host's extraction of the same pulses differs from the "
         "scope's numbers by at most the last column."])


def all_tables(report: Mapping[str, Any]) -> dict[str, Table]:
    """Tables in reading order, keyed by Table.key; absent parts are left out."""
    tables = [worst_case_table(report), trw_table(report), outliers_table(report),
              runs_table(report), capture_table(report), scope_measurement_table(report),
              pairing_table(report),
              stats_table(report), stages_table(report), overhead_table(report),
              credited_table(report),
              largest_table(report)]
    return {t.key: t for t in tables if t is not None}
