"""A run as one unit of a campaign's stop rule (station/campaign/stopping.py): its latencies'
percentiles (a module run's t_SW events, counted as the records arrive, every value exactly:
integers in ns, station/analysis/streaming.py; a cyclictest run's histogram), written into the
run's manifest at its seal, so that a stop rule reads one small figure per run instead of its
records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from station.analysis.distribution import Distribution
from station.analysis.streaming import DistributionBuilder

# the percentiles every run carries (a stop rule's own level is added to them)
LEVELS = (0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999)


def level_key(level: float) -> str:
    """How a level is written in the manifest: 0.9999 → "0.9999"."""
    return f"{level:.10g}"


class RunUnit:
    """The run's latency distribution so far (t_SW for a module run), and its percentiles at the
    seal."""

    def __init__(self, levels: Iterable[float] = (), source: str = "t_SW") -> None:
        self.levels = tuple(sorted({*LEVELS, *levels}))
        self.source = source
        self._latency = DistributionBuilder()

    def add(self, latencies_ns: np.ndarray) -> None:
        self._latency.add(np.asarray(latencies_ns))

    def summary(self) -> dict[str, Any]:
        return summary(self._latency.result(), self.levels, self.source)


def summary(dist: Distribution, levels: Iterable[float], source: str) -> dict[str, Any]:
    """{"latency_ns": {"source": …, "count": n, "percentiles": {level: value}}}: numpy's
    percentile (linear between order statistics) of every value; none without values."""
    levels = tuple(levels)
    n = int(dist.count)
    values = dist.percentiles([100 * q for q in levels]) if n else []
    return {"latency_ns": {"source": source, "count": n, "percentiles": {
        level_key(q): float(v) for q, v in zip(levels, values, strict=False)}}}


OVERFLOW_NS = 1e18  # where a histogram's overflows are put: a percentile reaching them is unknown


def histogram_unit(values_ns: np.ndarray, counts: np.ndarray, overflows: int,
                   levels: Iterable[float], source: str) -> dict[str, Any]:
    """The unit of a run known by a histogram (`values_ns` each bucket's value, `counts` its
    count) and the count of values beyond its range: a percentile that falls among those has no
    value (it is left out, and the run is no unit at that level)."""
    levels = sorted({*LEVELS, *levels})  # every run carries these, as RunUnit's do
    values = np.asarray(values_ns, np.float64)
    counts = np.asarray(counts, np.int64)
    if overflows:
        values, counts = np.r_[values, OVERFLOW_NS], np.r_[counts, overflows]
    unit = summary(Distribution.weighted(values, counts), levels, source)
    got = unit["latency_ns"]["percentiles"]
    unit["latency_ns"]["percentiles"] = {k: v for k, v in got.items() if v < OVERFLOW_NS / 2}
    unit["latency_ns"]["overflows"] = int(overflows)
    return unit
