"""The module kind's keys in a run's manifest.json (station.store.manifest): what the run loaded
(run.py's `manifest`) and what it counted at its seal (`seal_extra`); an import writes some."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ModuleManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    period_ns: int | None = Field(None,
                                  description="the module's period (an import: as given, or null)")
    format: str | None = Field(None, description="the record stream's format (v1, v2, legacy)")
    module: dict[str, Any] | None = Field(None,
                                          description="the module's path on the target and its "
                                                      "parameters")
    device: str | None = Field(None, description="the character device the records were read from")
    scope: bool | None = Field(None, description="whether an oscilloscope captured t_HW")
    losses: dict[str, Any] | None = Field(None,
                                          description="records lost, dropped, torn, restarts (at "
                                                      "the seal)")
    strays: int | None = Field(None,
                               description="NOT_OURS records (null: the format cannot flag them)")
    interrupts: dict[str, Any] | None = Field(None,
                                              description="the line's /proc/interrupts row before "
                                                          "and after")
    acquisitions: int | None = Field(None, description="scope acquisitions")
    capture: dict[str, Any] | None = Field(None,
                                           description="the capture's accounting "
                                                       "(capture_accounting.py)")
    scope_measurement: dict[str, Any] | None = Field(
        None, description="the scope's own width measurement"
    )
    unit: dict[str, Any] | None = Field(
        None, description="the run as one unit of a stop rule: its t_SW events' count and "
        "percentiles (station/analysis/run_unit.py)")
    scope_reconnects: int | None = Field(None,
                                         description="times the scope's session was opened again")
    trace: dict[str, Any] | None = Field(None,
                                         description="the kernel trace taken beside the run (null: "
                                                     "none)")
