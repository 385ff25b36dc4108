"""The interruptions kind's keys in a run's manifest.json (station.store.manifest)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class InterruptionsManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probe: dict[str, Any] = Field(description="the detector and its settings")
    interruptions: dict[str, Any] | None = Field(None,
                                                 description="its summary, CPU, notes and exit "
                                                             "status")
