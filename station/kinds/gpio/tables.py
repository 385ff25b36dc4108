"""The GPIO response section's tables (seed 002): the findings (one sentence each, the answer
first), then one row per run with its delay distribution, the outliers and what they collide
with, and the analysis's pairwise comparisons. Display-ready like tables.py; html.py and
markdown.py render them with the same Table/Cell machinery.

The section's times are already in µs (report["gpio"], written by station/kinds/gpio/analysis.py).
The scope samples every ~20 ns, so a kernel responder's few-µs delays get three decimals (1 ns)
and user-space delays of hundreds of µs fewer: see ``delay_text``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from station.common.formatting import (
    MISSING,
    WEAK_PERCENTILE_NOTE,
    count_text,
    is_number,
    percentile_is_reliable,
    plain_us,
)
from station.report.tables import Cell, Table

#: A run missing at least this share of its stimuli is flagged: a responder that drops edges
#: is a finding of its own, and its delays describe only the edges it did answer.
MISS_FLAG_FRACTION = 0.01
PERIOD_FLAG = "suspect"  # outliers at a fixed period: a periodic interrupt collides with the answer
#: the delay_us keys that are percentiles, with the display key percentile_is_reliable reads
PERCENTILES = {"p99": "p99", "p999": "p99.9"}


@dataclass(frozen=True)
class Finding:
    kind: str  # "ranking" | "ratio" | "load" | "outliers" (the analysis's)
    load: str | None
    text: str


@dataclass(frozen=True)
class GpioTables:
    findings: list[Finding]  # in the analysis's order; may be empty
    runs: Table
    outliers: Table | None  # None: no run has delays to look at
    comparisons: Table | None  # None: fewer than two measured runs to compare


def delay_text(value: Any) -> str:
    """A delay in µs: three decimals (1 ns) below 100 µs, two below 1000 µs, one above. The
    scope resolves ~20 ns, so more digits on a slow user-space answer would be noise."""
    if not is_number(value):
        return MISSING
    size = abs(float(value))
    return plain_us(value, 3 if size < 100 else 2 if size < 1000 else 1)


def fraction_text(value: Any) -> str:
    """A share as a percentage with up to three significant digits: 0.002 → '0.2%'."""
    if not is_number(value):
        return MISSING
    return "0%" if value == 0 else f"{float(value) * 100:.3g}%"


def p_value_text(value: Any) -> str:
    if not is_number(value):
        return MISSING
    if value == 0:
        return "< 1e-300"  # below what a float holds: the test could not tell how small
    return f"{value:.3g}" if value >= 1e-3 else f"{value:.1e}"


def responder_text(entry: Mapping[str, Any]) -> str:
    """'kernel, echo, threaded' or 'sysfs, toggle, SCHED_FIFO 50': what answered and how."""
    parts = [str(entry[k]) for k in ("responder", "mode") if entry.get(k) not in (None, "")]
    if entry.get("threaded"):
        parts.append("threaded")
    if is_number(entry.get("priority")) and entry["priority"]:
        parts.append(f"SCHED_FIFO {int(entry['priority'])}")
    return ", ".join(parts) or MISSING


def _text(value: Any) -> Cell:
    return Cell(MISSING if value is None or value == "" else str(value))


def _delay(value: Any) -> Cell:
    return Cell(delay_text(value), numeric=True)


def _interval(ci: Any) -> str:
    if not isinstance(ci, list | tuple) or len(ci) != 2 or not all(is_number(v) for v in ci):
        return MISSING
    return f"{delay_text(ci[0])} – {delay_text(ci[1])}"


def _missed_cell(entry: Mapping[str, Any]) -> Cell:
    missed, stimuli = entry.get("missed"), entry.get("stimuli")
    if not is_number(missed):
        return Cell(MISSING, numeric=True)
    fraction = entry.get("miss_fraction")
    text = count_text(missed) + (f" ({fraction_text(fraction)})" if is_number(fraction) else "")
    title = (f"{count_text(missed)} of {count_text(stimuli)} stimuli had no answer; "
             f"{count_text(entry.get('censored'))} censored (the record ended inside their answer "
             f"window: neither answered nor missed); {count_text(entry.get('ambiguous'))} "
             "ambiguous (two response edges or more in their window); "
             f"{count_text(entry.get('unanswering'))} response edges answered no stimulus")
    flagged = is_number(fraction) and fraction >= MISS_FLAG_FRACTION
    return Cell(text, numeric=True, flags=("problem",) if flagged else (), title=title)


def runs_table(runs: Sequence[Mapping[str, Any]]) -> Table:
    with_target = any(r.get("target") not in (None, "") for r in runs)
    footnotes: list[str] = []
    weak_seen = False
    rows = []
    for r in runs:
        status = str(r.get("status") or MISSING)
        delay = r.get("delay_us") or {}
        run_cell = Cell(str(r.get("id")))
        if r.get("error") or not delay:
            why = (f"run {status}" + (f": {r['error']}" if r.get("error") else "")
                   + ("" if delay else "; no stimulus was answered, so no delay was measured"))
            footnotes.append(f"[{len(footnotes) + 1}] {r.get('id')}: {why}.")
            run_cell = Cell(str(r.get("id")), mark=f"[{len(footnotes)}]", flags=("problem",),
                            title=why)
        percentiles = []
        for key, display_key in PERCENTILES.items():
            weak = is_number(delay.get(key)) and not percentile_is_reliable(display_key,
                                                                            r.get("answered"))
            weak_seen |= weak
            percentiles.append(Cell(delay_text(delay.get(key)), numeric=True, weak=weak))
        resolution = r.get("resolution_ns")
        rows.append([
            run_cell,
            *([_text(r.get("target"))] if with_target else []),
            _text(r.get("case")), _text(r.get("load")), _text(r.get("governor")),
            Cell(responder_text(r)),
            Cell(status, status=status),
            Cell(count_text(r.get("stimuli")), numeric=True),
            _missed_cell(r),
            _delay(delay.get("min")), _delay(delay.get("p50")), _delay(delay.get("mean")),
            Cell(_interval(delay.get("mean_ci")), numeric=True),
            *percentiles,
            _delay(delay.get("max")), _delay(delay.get("spread")),
            Cell(plain_us(resolution), numeric=True),
        ])
    notes = [
        "Delay: from each stimulus edge to the device's answering edge, as the scope saw both; "
        "times in µs (three decimals below 100 µs, two below 1000 µs). Missed: stimuli with no "
        "answer (share of all), flagged from "
        f"{fraction_text(MISS_FLAG_FRACTION)}; the cell's tooltip counts the censored ones too. "
        "Mean CI: the analysis's confidence interval of the mean. Spread: max − min. "
        "Resolution: the scope's sample interval, the finest step a single delay can show.",
        *([WEAK_PERCENTILE_NOTE] if weak_seen else []),
        *footnotes,
    ]
    headers = ["Run", *(["Target"] if with_target else []), "Case", "Load", "Governor", "Responder",
               "Status", "Stimuli", "Missed", "Min (µs)", "Median (µs)", "Mean (µs)",
               "Mean CI (µs)",
               "p99 (µs)", "p99.9 (µs)", "Max (µs)", "Spread (µs)", "Resolution (ns)"]
    return Table("gpio-runs", "Response delay per run", headers, rows, notes)


def outliers_table(runs: Sequence[Mapping[str, Any]]) -> Table | None:
    rows = []
    for r in runs:
        o = r.get("outliers")
        if not o:
            continue
        period = o.get("period_us")
        periodic = is_number(period)
        rows.append(
            [
                Cell(str(r.get("id"))),
                Cell(
                    " · ".join(str(r[k]) for k in ("case", "load") if r.get(k) not in (None, ""))
                    or MISSING
                ),
                _delay(o.get("threshold_us")),
                Cell(count_text(o.get("count")), numeric=True),
                Cell(fraction_text(o.get("fraction")), numeric=True),
                _delay(o.get("excess_max_us")),
                Cell(delay_text(period), numeric=True, flags=(PERIOD_FLAG,) if periodic else ()),
                Cell(fraction_text(o.get("period_share")), numeric=True),
                _delay(o.get("window_us")),
                Cell(fraction_text(o.get("expected_fraction")), numeric=True),
                Cell(str(o.get("explanation") or MISSING), wrap=True),
            ]
        )
    if not rows:
        return None
    notes = [
        "Outliers: delays above the threshold the analysis set over the run's bulk. Excess max: "
        "the largest outlier's delay beyond the median. Period: the spacing most outliers keep "
        "(Share: of their pairwise spacings that fit it) — the mark of a periodic interrupt on the "
        "device whose handler holds the CPU when a stimulus arrives.",
        "Collision window: how long that handler must hold the CPU for the observed share of "
        "stimuli to land on it (observed × period); Expected: window / period, the share of "
        "stimuli a handler that long delays. An excess max about as long as the window says one "
        f"collision explains even the worst outlier. {MISSING}: no period found.",
    ]
    return Table("gpio-outliers", "Outliers and what they collide with", [
        "Run", "Case · load", "Threshold (µs)", "Outliers", "Observed", "Excess max (µs)",
        "Period (µs)", "Share", "Collision window (µs)", "Expected", "Explanation"], rows, notes)


def comparisons_table(comparisons: Sequence[Mapping[str, Any]]) -> Table | None:
    if not comparisons:
        return None
    rows = []
    for c in comparisons:
        significant = c.get("significant")
        ratio = c.get("ratio")
        counts = f"{len(c.get('runs_a') or [])} / {len(c.get('runs_b') or [])}"
        rows.append([
            Cell(str(c.get("a"))), Cell(str(c.get("b"))), Cell(str(c.get("differs") or MISSING)),
            Cell(counts, numeric=True), _delay(c.get("mean_a_us")), _delay(c.get("mean_b_us")),
            Cell(f"{ratio:.3g}×" if is_number(ratio) else MISSING, numeric=True),
            Cell(p_value_text(c.get("p_holm")), numeric=True),
            Cell("not tested" if significant is None else ("yes" if significant else "no")),
            Cell(p_value_text(c.get("events_p_value")), numeric=True),
        ])
    note = ("Pairs of conditions (case under load) that differ in one thing. Runs: each side's "
            "repetitions. Means: the mean of the runs' mean delays. p (runs): Welch's test on the "
            "runs' means, Holm-adjusted over the pairs tested — two runs never meet the same "
            "machine state, so a difference is judged against the spread between runs; with one "
            "run on a side it is not tested (run-to-run variation is not estimated). p (events): "
            "Mann–Whitney on the pooled delays, every delay taken as independent — whether these "
            "runs differ, not whether the conditions do.")
    return Table("gpio-comparisons", "Comparisons", [
        "A", "B", "Differs in", "Runs", "Mean A (µs)", "Mean B (µs)", "Ratio", "p (runs)",
        "Significant",
        "p (events)"], rows, [note])


def findings(section: Mapping[str, Any]) -> list[Finding]:
    return [Finding(str(f.get("kind") or ""), f.get("load"), str(f["text"]))
            for f in section.get("findings") or [] if f.get("text")]


def gpio_tables(report: Mapping[str, Any]) -> GpioTables | None:
    """The section's tables, or None for a campaign without gpio runs."""
    section = report.get("gpio")
    if not section:
        return None
    runs = section.get("runs") or []
    return GpioTables(findings(section), runs_table(runs), outliers_table(runs),
                      comparisons_table(section.get("comparisons") or []))

