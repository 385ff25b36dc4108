"""A throw-away run kind, whole in this package: its settings (a `loadavg:` section), its
measurement (run.py), its analysis (analysis.py), its report part (report.py) and its part of report.json's schema
(report_model.py). Nothing of the
station names it; `kind_registry.register(KIND)` is the one line that makes campaigns take it."""

from __future__ import annotations

from station.config import Campaign, LocatedError
from station.kind_registry import Kind
from throwaway_kind.settings import LoadavgSettings


def _check(campaign: Campaign) -> None:
    if campaign.matrix.samples is None:
        raise LocatedError(("matrix", "samples"), "the load average probe counts samples: give matrix.samples")


KIND = Kind(
    name="loadavg",
    summary="the target's /proc/loadavg while the loads run (a test's throw-away kind)",
    settings=LoadavgSettings,
    check=_check,
    measurement="throwaway_kind.run:LoadavgProbe",
    analysis="throwaway_kind.analysis:analyse",
    report="throwaway_kind.report:PAGE",
    report_model="throwaway_kind.report_model:LoadavgSection",
)
