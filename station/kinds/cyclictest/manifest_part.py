"""The cyclictest kind's keys in a run's manifest.json (station.store.manifest)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CyclictestManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probe: dict[str, Any] = Field(description="the tool, its settings and its arguments")
    cyclictest: dict[str, Any] | None = Field(None,
                                              description="its version, exit status and summary")
    unit: dict[str, Any] | None = Field(
        None, description="the run as one unit of a stop rule: its threads' pooled histogram's "
        "count and percentiles (station/analysis/run_unit.py)")
    timerlat: dict[str, Any] | None = Field(None,
                                            description="rtla timerlat beside it (its arguments, "
                                                        "note)")
