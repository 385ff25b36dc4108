"""A run as one unit of a campaign's stop rule (station/campaign/stopping.py): its t_SW events'
percentiles, accumulated as the records arrive (every value counted: integers in ns are kept
exactly, station/analysis/streaming.py) and written into the run's manifest at its seal, so
that a stop rule reads one small figure per run instead of its records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from station.analysis.streaming import DistributionBuilder

# the percentiles every run carries (a stop rule's own level is added to them)
LEVELS = (0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999)


def level_key(level: float) -> str:
    """How a level is written in the manifest: 0.9999 → "0.9999"."""
    return f"{level:.10g}"


class RunUnit:
    """The run's t_SW distribution so far, and its percentiles at the seal."""

    def __init__(self, levels: Iterable[float] = ()) -> None:
        self.levels = tuple(sorted({*LEVELS, *levels}))
        self._sw = DistributionBuilder()

    def add(self, latencies_ns: np.ndarray) -> None:
        self._sw.add(np.asarray(latencies_ns))

    def summary(self) -> dict[str, Any]:
        """{"sw_ns": {"count": n, "percentiles": {level: value}}}: numpy's percentile (linear
        between order statistics) of every event the run kept; no percentiles when it has none."""
        dist = self._sw.result()
        n = int(dist.count)
        values = dist.percentiles([100 * q for q in self.levels]) if n else []
        return {"sw_ns": {"count": n, "percentiles": {
            level_key(q): float(v) for q, v in zip(self.levels, values, strict=False)}}}
