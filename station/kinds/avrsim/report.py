"""The avrsim part of the report page: its findings (one sentence each) and its runs table, then
its figures. Both are its answer (band summary): an avrsim campaign opens with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.kinds.avrsim.figures import KIND, build_avrsim_figures
from station.kinds.avrsim.tables import runs_table
from station.report.export import csv_bool, to_jsonable
from station.report.figures import RenderedFigure
from station.report.page import Block, Figures, KindPage, Section, Sentence, Sentences


def sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    table = runs_table(report)
    if table is None:
        return []
    found = (report.get("avrsim") or {}).get("findings") or []
    blocks: list[Block] = [Sentences([Sentence(f["text"],
                                               f["kind"]) for f in found])] if found else []
    blocks.append(table)
    out = [Section("avrsim", "Simulated microcontroller response", blocks, "summary",
                   "Microcontroller",
                   "Simulated delays are in µs at 16 MHz; avrsim.csv holds one row per run.")]
    plots = [f for f in figures if f.kind == KIND]
    if plots:
        out.append(Section("avrsim-plots", "Simulated response plots", [Figures(plots)], "summary",
                           "Microcontroller plots"))
    return out


#: Columns of avrsim.csv: one row per run.
COLUMNS = ["run_id", "target", "case", "load", "repetition", "status", "firmware", "timer0", "seed",
           "sha256",
           "clock_hz", "stimuli", "answered", "missed", "min_cycles", "p50_cycles", "max_cycles",
           "min_us", "p50_us",
           "mean_us", "max_us", "spread_us", "timer0_runs", "timer0_rate_hz", "timer0_mean_cycles",
           "outlier_threshold_cycles", "outlier_count", "outlier_fraction",
           "outlier_expected_fraction",
           "outlier_as_predicted", "outlier_unexplained"]


def rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    out = []
    for r in (report.get("avrsim") or {}).get("runs") or []:
        c, d = r.get("delay_cycles") or {}, r.get("delay_us") or {}
        t0, o = r.get("timer0_handler") or {}, r.get("outliers") or {}
        row = {"run_id": r.get("id"), **{k: r.get(k) for k in COLUMNS[1:14]},
               **{f"{k}_cycles": c.get(k) for k in ("min", "p50", "max")},
               **{f"{k}_us": d.get(k) for k in ("min", "p50", "mean", "max", "spread")},
               "timer0_runs": t0.get("runs"), "timer0_rate_hz": t0.get("rate_hz"),
               "timer0_mean_cycles": t0.get("mean_cycles"),
               "outlier_threshold_cycles": o.get("threshold_cycles"),
               "outlier_count": o.get("count"), "outlier_fraction": o.get("fraction"),
               "outlier_expected_fraction": o.get("expected_fraction"),
               "outlier_as_predicted": o.get("as_predicted"),
               "outlier_unexplained": o.get("unexplained")}
        out.append({k: csv_bool(to_jsonable(row.get(k))) for k in COLUMNS})
    return list(COLUMNS), out


PAGE = KindPage(sections, build_avrsim_figures, (("avrsim.csv", rows),))
