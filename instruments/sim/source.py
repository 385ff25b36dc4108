"""Edge sources: where the simulated scope's probe signal comes from.

The sim knows nothing else about what it measures: the twin hands it its event
model, tests and demos hand it a `PeriodicEdgeSource`.
"""

from __future__ import annotations

import math
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

    `jitter_s` > 0 delays each pulse by a uniform draw in [0, jitter_s) (a
    table slot per pulse, like the widths), so the pulse train never locks to
    another periodic process.

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
        jitter_s: float = 0.0,
    ) -> None:
        self.period_ns = int(round(period_s * 1e9))
        if isinstance(width_s, tuple):
            rng = np.random.default_rng(seed)
            table = rng.uniform(width_s[0], width_s[1], table_size)
        else:
            table = np.array([width_s])
        self._widths_ns = np.rint(table * 1e9).astype(np.int64)
        # pulse k leads at k·period + a delay drawn once per table slot in [0, jitter)
        self.jitter_ns = int(round(jitter_s * 1e9))
        jitter_rng = np.random.default_rng([seed, 1])
        self._delays_ns = np.floor(jitter_rng.uniform(0.0, self.jitter_ns,
                                                      table_size)).astype(np.int64)
        if not (
            self._widths_ns.min() > 0 and self._widths_ns.max() + self.jitter_ns < self.period_ns
        ):
            raise ValueError("pulse widths (plus the jitter) must lie strictly between 0 and the "
                             "period")
        self._origin = time.monotonic_ns()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._origin

    def width_ns(self, k: np.ndarray | int) -> np.ndarray:
        return self._widths_ns[np.asarray(k) % len(self._widths_ns)]

    def lead_ns(self, k: np.ndarray | int) -> np.ndarray:
        """When pulse k starts: its period slot plus its jitter."""
        k = np.asarray(k, dtype=np.int64)
        return k * self.period_ns + self._delays_ns[k % len(self._delays_ns)]

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        longest = int(self._widths_ns.max()) + self.jitter_ns
        first = max((t0_ns - longest) // self.period_ns, 0)
        last = (t1_ns - 1) // self.period_ns
        k = np.arange(first, last + 1, dtype=np.int64)
        lead = self.lead_ns(k)
        trail = lead + self.width_ns(k)
        keep = (trail > t0_ns) & (lead < t1_ns)
        return np.stack([lead[keep], trail[keep]], axis=1)


def unit_hash(values: np.ndarray, salt: int) -> np.ndarray:
    """A uniform [0, 1) number per int64 value, the same every time (splitmix64 finaliser)."""
    with np.errstate(over="ignore"):
        x = values.astype(np.uint64) ^ np.uint64(salt & 0xFFFF_FFFF_FFFF_FFFF)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


class ResponseSource:
    """A device answering each pulse of `stimulus` with a delayed copy of it (an echo responder).

    Each stimulus pulse's delay is drawn from `delay_s` (a constant or a
    uniform (low, high) range) by a hash of its lead time, so it is the same
    whenever asked and `delays_ns` can give the ground truth for any pulse; a
    share `miss_probability` of the pulses gets no answer (decided the same
    way). Both edges of a pulse are delayed alike. The clock is the stimulus's.
    """

    def __init__(
        self,
        stimulus: EdgeSource,
        delay_s: float | tuple[float, float] = 5e-6,
        miss_probability: float = 0.0,
        seed: int = 0,
    ) -> None:
        low, high = delay_s if isinstance(delay_s, tuple) else (delay_s, delay_s)
        if not 0.0 <= low <= high:
            raise ValueError(f"delay range must satisfy 0 <= low <= high, got {delay_s!r}")
        if not 0.0 <= miss_probability < 1.0:
            raise ValueError(f"miss_probability must be in [0, 1), got {miss_probability!r}")
        self.stimulus = stimulus
        self.delay_range_ns = (low * 1e9, high * 1e9)
        self.miss_probability = miss_probability
        self.seed = seed

    def now_ns(self) -> int:
        return self.stimulus.now_ns()

    def delays_ns(self, lead_ns: np.ndarray) -> np.ndarray:
        """The delay (ns, whole) of the answer to the pulse leading at each `lead_ns`; NaN if
        missed."""
        lead = np.asarray(lead_ns, dtype=np.int64)
        low, high = self.delay_range_ns
        delay = np.rint(low + (high - low) * unit_hash(lead, self.seed)).astype(np.float64)
        missed = unit_hash(lead, self.seed + 0x9E3779B9) < self.miss_probability
        delay[missed] = np.nan
        return delay

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        latest = int(math.ceil(self.delay_range_ns[1]))
        pulses = np.asarray(self.stimulus.edges(t0_ns - latest, t1_ns), dtype=np.int64).reshape(-1,
                                                                                                2)
        delay = self.delays_ns(pulses[:, 0])
        answered = ~np.isnan(delay)
        shifted = pulses[answered] + delay[answered].astype(np.int64)[:, None]
        keep = (shifted[:, 1] > t0_ns) & (shifted[:, 0] < t1_ns)
        return shifted[keep]
