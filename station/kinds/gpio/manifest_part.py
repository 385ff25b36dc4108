"""The gpio kind's keys in a run's manifest.json (station.store.manifest)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GpioManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpio: dict[str,
               Any] = Field(description="the case, the lines, the stimulus and the channels as run")
    gpio_counts: dict[str, int] | None = Field(None,
                                               description="stimuli, answered, missed, … (at the "
                                                           "seal)")
    unit: dict[str, Any] | None = Field(
        None, description="the run as one unit of a stop rule: its response delays' count, "
        "percentiles and misses (beyond every value; station/analysis/run_unit.py)")
