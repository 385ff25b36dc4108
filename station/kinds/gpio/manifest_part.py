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
