"""The twin's clocks, no kinder than a bench's: the target's CLOCK_MONOTONIC runs off the host's by
a fixed rate error (its crystal) and may be slewed for a while (NTP steering its frequency; a
monotonic clock is slewed, never stepped); the scope's timebase has its own rate error. The host's
monotonic clock is the reference: the station notes arm and arrival times on it.

Defaults (assumptions, documented in docs/twin.md): a PC's crystal within ±50 ppm, so 35 ppm; a
scope timebase within ±25 ppm (InfiniiVision 3000 X's published accuracy), so 10 ppm."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

DEFAULT_DRIFT_PPM = 35.0
DEFAULT_SCOPE_TIMEBASE_PPM = 10.0


@dataclass(frozen=True)
class Slew:
    """From `at_s` after the clock's start, for `duration_s`, the rate moves by `ppm` more."""

    at_s: float
    ppm: float
    duration_s: float


@dataclass
class DriftingClock:
    """A clock whose time is the host's monotonic time, shifted and running `drift_ppm` fast (slow
    if negative), plus its slews. `start_ns`: the host time it is referred to (its offset there)."""

    drift_ppm: float = DEFAULT_DRIFT_PPM
    slews: tuple[Slew, ...] = ()
    offset_ns: int = 0
    start_ns: int = 0

    def __post_init__(self) -> None:
        if not self.start_ns:
            self.start_ns = time.monotonic_ns()

    def gain_ns(self, host_ns: np.ndarray | int) -> np.ndarray | int:
        """How far this clock is ahead of the host at host time `host_ns` (beyond the offset)."""
        dt = np.asarray(host_ns, np.float64) - self.start_ns
        gain = dt * self.drift_ppm * 1e-6
        for s in self.slews:
            gain = gain + np.clip(dt - s.at_s * 1e9, 0.0, s.duration_s * 1e9) * s.ppm * 1e-6
        return gain

    def from_host(self, host_ns: np.ndarray | int) -> np.ndarray | int:
        """This clock's reading at host time `host_ns` (ns, int64)."""
        out = (
            np.asarray(host_ns, np.int64)
            + self.offset_ns
            + np.round(self.gain_ns(host_ns)).astype(np.int64)
        )
        return int(out) if out.ndim == 0 else out

    def to_host(self, clock_ns: np.ndarray | int) -> np.ndarray | int:
        """The host time at which this clock reads `clock_ns`: the inverse of from_host (the rate is
        within 1e-3 of the host's, so a few fixed-point steps reach the nanosecond)."""
        target = np.asarray(clock_ns, np.int64) - self.offset_ns
        host = target.astype(np.float64)
        for _ in range(4):
            host = target - self.gain_ns(host)
        out = np.round(host).astype(np.int64)
        return int(out) if out.ndim == 0 else out

    def now_ns(self) -> int:
        return int(self.from_host(time.monotonic_ns()))


class ScopeView:
    """What the twin's scope sees of the target's pin: the target's edges (on the target's clock)
    placed on the scope's own timebase (the host's clock running `timebase_ppm` off)."""

    def __init__(self, source, target_clock: DriftingClock,
                 scope_clock: DriftingClock) -> None:  # noqa: ANN001
        self.source = source  # an EdgeSource on the target's clock (instruments/sim/source.py)
        self.target_clock = target_clock
        self.scope_clock = scope_clock

    def now_ns(self) -> int:
        return self.scope_clock.now_ns()

    def _to_target(self, scope_ns: int) -> int:
        return int(self.target_clock.from_host(self.scope_clock.to_host(scope_ns)))

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        edges = self.source.edges(self._to_target(t0_ns), self._to_target(t1_ns) + 1)
        if not len(edges):
            return edges
        on_scope = self.scope_clock.from_host(self.target_clock.to_host(edges.reshape(-1)))
        return np.asarray(on_scope, np.int64).reshape(edges.shape)
