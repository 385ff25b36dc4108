"""The throw-away kind's report part: a table of its runs, and loadavg.csv."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.report.figures import RenderedFigure
from station.report.page import KindPage, Section
from station.report.tables import Cell, Table

COLUMNS = ["run", "load", "samples", "busy", "max_load1"]


def sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    runs = (report.get("loadavg") or {}).get("runs") or []
    if not runs:
        return []
    rows = [[Cell(r["id"]), Cell(str(r["load"])), Cell(str(r["samples"]), numeric=True),
             Cell(str(r["busy"]), numeric=True), Cell(f"{r['max_load1']:.2f}", numeric=True)] for r in runs]
    table = Table("loadavg-runs", "Load average per run", ["Run", "Load", "Samples", "Busy", "Max load1"], rows)
    return [Section("loadavg", "Load average", [table], "summary", "Load average")]


def rows(report: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    return COLUMNS, [{"run": r["id"], **{k: r[k] for k in COLUMNS[1:]}} for r in report["loadavg"]["runs"]]


PAGE = KindPage(sections, csv=(("loadavg.csv", rows),))
