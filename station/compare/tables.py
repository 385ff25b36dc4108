"""The comparison's tables (`station compare`) as display-ready text, shared by its HTML and
Markdown pages: the campaigns, then each kind's (its ComparePart.tables), with the helpers they
share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.common.formatting import (
    MISSING,
    is_number,
    us,
)
from station.compare.part import ComparePart
from station.report.tables import Cell, Table


def numeric(text: str, **kw: Any) -> Cell:
    return Cell(text, numeric=True, **kw)


def interval_text(ci: Any) -> str:
    """'lo – hi' µs, an unbounded end shown as such (the sample is too small to bound it)."""
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return MISSING
    lo = us(ci[0]) if is_number(ci[0]) else "−∞"
    hi = us(ci[1]) if is_number(ci[1]) else "> max"
    return f"{lo} – {hi}"


def campaigns_table(result: Mapping[str, Any]) -> Table:
    rows = [[Cell(c["label"]), Cell(c.get("dir") or MISSING),
             Cell(str(c.get("description") or MISSING), wrap=True),
             numeric(str(c.get("runs", MISSING))), Cell(str(c.get("station_version") or MISSING))]
            for c in result["campaigns"]]
    return Table("compare-campaigns", "Campaigns (the first is the baseline)",
                 ["Campaign", "Directory", "Description", "Runs", "Station"], rows)


def all_compare_tables(result: Mapping[str, Any], parts: Sequence[ComparePart]) -> list[Table]:
    """The campaigns, then each kind's tables in the registry's order."""
    return [campaigns_table(result), *(t for part in parts for t in part.tables(result))]


