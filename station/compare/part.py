"""What a run kind brings to `station compare` (its Kind.compare): its comparison across the
campaigns (a section of compare.json under the kind's name), its tables, figures and CSV files.
The compare package loops over the kinds that have one and names none."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from station.report.figures import RenderedFigure
from station.report.page import Rows
from station.report.tables import Table
from station.store.result_store import ResultStore


@dataclass(frozen=True)
class CampaignInfo:
    label: str
    dir: Path
    report: dict[str, Any]
    report_file: bool  # report.json was there (else the campaign was analysed now)


#: (campaigns, each one's result store) -> (its compare.json section or None where the campaigns
#: hold none of its runs, the figures' samples by key, notes for the warnings)
Analyse = Callable[[Sequence["CampaignInfo"], Sequence[ResultStore]],
                   tuple["dict[str, Any] | None", "dict[tuple, Any]", "list[str]"]]


@dataclass(frozen=True)
class ComparePart:
    analyse: Analyse
    tables: Callable[[Mapping[str, Any]], list[Table]] = lambda result: []
    figures: Callable[[Mapping[str, Any], Mapping[tuple, Any]], list[RenderedFigure]] = (
        lambda result, samples: [])
    csv: tuple[tuple[str, Callable[[Mapping[str, Any]], Rows]], ...] = ()  # (file name, its rows)
    # one campaign alone is enough to compare (cyclictest: a campaign of several targets)
    alone: Callable[[Mapping[str, Any]], bool] = lambda report: False
    alone_text: str = ""  # that case in words, for the refusal of a single campaign
