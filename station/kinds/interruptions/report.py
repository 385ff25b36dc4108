"""The interruption detector's part of the report page: its summary table (the answer), then each
run under its own heading: its conclusion, its spoilers, its gap tables and histograms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.kinds.interruptions.figures import build_interruptions_figures, run_figures
from station.kinds.interruptions.tables import RunSection, interruptions_tables
from station.report.export import csv_bool, to_jsonable
from station.report.figures import RenderedFigure
from station.report.page import Block, Callout, Figures, KindPage, Section, Subsection, Verdict

SPOILERS_TITLE = "Spoilers: the measured CPU's settings may disturb the measurement"


def _run(run: RunSection, figures: Sequence[RenderedFigure]) -> Subsection:
    blocks: list[Block] = []
    if run.conclusion:
        blocks.append(Verdict(run.conclusion, "Conclusion"))
    if run.problem:
        blocks.append(Verdict(run.problem, problem=True))
    if run.spoilers:
        blocks.append(Callout(SPOILERS_TITLE, run.spoilers, "spoilers"))
    blocks += [t for t in (run.groups, run.families, run.comparison) if t]
    mine = run_figures(figures, run.anchor)
    if mine:
        blocks.append(Figures(mine))
    return Subsection(run.anchor, run.heading, blocks, "irq-run")


def interruptions_sections(report: Mapping[str, Any],
                           figures: Sequence[RenderedFigure]) -> list[Section]:
    it = interruptions_tables(report)
    if not it:
        return []
    return [
        Section("interruptions", "Interruptions", [it.summary], "summary", "Interruptions",
                "The interruption detector's numbers are in µs, ms and s as its columns say; "
                "interruptions.csv holds its gap groups."),
        Section("interruption-runs", "Interruptions, per run", [_run(run,
                                                                     figures) for run in it.runs],
                nav="Interruptions per run"),
    ]


#: Columns of interruptions.csv: the run, then one of its gap groups (µs, ms and s as in the
#: report's "interruptions" section).
INTERRUPTIONS_CSV_COLUMNS = ["run_id", "target", "load", "repetition", "status", "cpu",
                             "threshold_us", "measured_s", "run_gaps", "run_max_us", "trace",
                             "smi_counter", "cause", "source", "count", "median_us", "p99_us",
                             "max_us", "total_ms", "period_ms", "periodic"]


def interruptions_rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one row per interruption detector run per gap group (cause, source). A run
    analysed with no gaps has one row with an empty cause and a count of 0; a run whose output
    could not be read has none."""
    runs = (report.get("interruptions") or {}).get("runs") or []
    rows = []
    for r in runs:
        if "gaps" not in r and "conclusion" not in r:
            continue
        run = {"run_id": r.get("id"), "target": r.get("target"), "load": r.get("load"),
               "repetition": r.get("repetition"), "status": r.get("status"), "cpu": r.get("cpu"),
               "threshold_us": r.get("threshold_us"), "measured_s": r.get("measured_s"),
               "run_gaps": r.get("gaps"), "run_max_us": r.get("max_us"), "trace": r.get("trace"),
               "smi_counter": r.get("smi_counter")}
        for g in r.get("groups") or [{"count": 0}]:
            row = {**run, **{k: g.get(k) for k in ("cause", "source", "count", "median_us",
                                                   "p99_us", "max_us", "total_ms", "period_ms",
                                                   "periodic")}}
            rows.append({k: csv_bool(to_jsonable(row.get(k))) for k in INTERRUPTIONS_CSV_COLUMNS})
    return list(INTERRUPTIONS_CSV_COLUMNS), rows


PAGE = KindPage(interruptions_sections, build_interruptions_figures, (("interruptions.csv",
                                                                       interruptions_rows),))
