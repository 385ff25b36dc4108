"""The avrsim kind's keys in a run's manifest.json (station.store.manifest)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AvrsimManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    avrsim: dict[str,
                 Any] = Field(description="the case, the clock, the seed and the harness's "
                                          "arguments")
    firmware: dict[str, str] | None = Field(None,
                                            description="the firmware run: its ELF, SHA-256, "
                                                        "harness")
