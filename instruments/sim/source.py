"""Edge sources: where the simulated scope's probe signal comes from.

The sim knows nothing else about what it measures: the twin hands it its event
model, tests and demos hand it a `PeriodicEdgeSource`.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class EdgeSource(Protocol):
    """Pulses on one logic line, on the source's own clock (ns).

    `edges(t0, t1)` returns int64 rows [lead_ns, trail_ns] of the pulses
    overlapping [t0, t1). The sim only asks about times before `now_ns()`, and
    expects answers about the past to be final.
    """

    def now_ns(self) -> int: ...

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray: ...


class PeriodicEdgeSource:
    """A pulse every `period_s` from the source's start; widths known in advance.

    `width_s` is a constant or a (low, high) range: widths are then drawn
    uniformly from a seeded RNG into a table indexed by pulse number modulo
    `table_size`, so `width_ns(k)` is the ground truth for pulse k. The clock
    follows time.monotonic_ns().
    """

    def __init__(
        self,
        period_s: float = 100e-6,
        width_s: float | tuple[float, float] = (1e-6, 20e-6),
        seed: int = 0,
        table_size: int = 4096,
    ) -> None:
        self.period_ns = int(round(period_s * 1e9))
        if isinstance(width_s, tuple):
            rng = np.random.default_rng(seed)
            table = rng.uniform(width_s[0], width_s[1], table_size)
        else:
            table = np.array([width_s])
        self._widths_ns = np.rint(table * 1e9).astype(np.int64)
        if not (self._widths_ns.min() > 0 and self._widths_ns.max() < self.period_ns):
            raise ValueError("pulse widths must lie strictly between 0 and the period")
        self._origin = time.monotonic_ns()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._origin

    def width_ns(self, k: np.ndarray | int) -> np.ndarray:
        return self._widths_ns[np.asarray(k) % len(self._widths_ns)]

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        longest = int(self._widths_ns.max())
        first = max((t0_ns - longest) // self.period_ns, 0)
        last = (t1_ns - 1) // self.period_ns
        k = np.arange(first, last + 1, dtype=np.int64)
        lead = k * self.period_ns
        trail = lead + self.width_ns(k)
        keep = (trail > t0_ns) & (lead < t1_ns)
        return np.stack([lead[keep], trail[keep]], axis=1)
