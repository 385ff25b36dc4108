"""The throw-away kind's part of report.json: `report["loadavg"]`."""

from __future__ import annotations

from pydantic import Field

from station.report.model import Closed, Finding, Float


class LoadavgRun(Closed):
    """One run's load-average samples."""

    id: str = Field(description="the run id")
    load: str = Field(description="the load")
    samples: int = Field(description="samples read")
    busy: int = Field(description="samples at or above `busy_above`")
    max_load1: Float = Field(description="the largest 1-minute load average; null without samples")


class LoadavgSection(Closed):
    """`loadavg`: the throw-away kind's runs."""

    runs: list[LoadavgRun] = Field(description="one entry per run")
    busy_above: float = Field(description="the load average a sample reads busy from")
    findings: list[Finding] = Field(description="samples that read busy")
