"""The throw-away kind's campaign section, `loadavg:`."""

from __future__ import annotations

from pydantic import Field

from station.config import Float, Seconds, Strict


class LoadavgSettings(Strict):
    period: Seconds((10e-3, 10.0, "10 ms", "10 s")) = Field(0.05, description="time between two samples")
    busy_above: Float = Field(1.0, ge=0.0, description="a sample whose 1-minute load average reaches this is busy")
