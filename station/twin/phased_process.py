"""A latency process with a load's time structure, for coverage studies of intervals taken from a
histogram's slices (tests/test_cyclictest_slices.py, benchmarks/bench_slice_coverage.py): phases
that cycle (a dd loop's write, sync, checksum), each with its own log-normal level, their durations
jittered cycle to cycle, and carry-over from one cycle to the next (an AR(1) on the log scale).

Its truth comes from its parameters, never from a sample: given its phase, a cycle's latency is
log-normal(mu, sigma) (the AR component is stationary with that spread), and over the long run the
phases hold shares proportional to their mean durations, so the long-run distribution is that
mixture (`cdf`, `quantile`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from station.common.lazy_import import lazy_module

signal = lazy_module("scipy.signal")
special = lazy_module("scipy.special")


@dataclass(frozen=True)
class PhasedProcess:
    """Latencies in µs: phase r lasts about durations[r] cycles (log-normal jitter `jitter`, mean
    preserved), at median medians_us[r] with log-spread `sigma`; `carry` is the AR(1) coefficient
    between consecutive cycles."""

    medians_us: tuple[float, ...] = (40.0, 60.0, 100.0)
    durations: tuple[float, ...] = (3000.0, 1500.0, 2500.0)
    sigma: float = 0.35
    jitter: float = 0.25
    carry: float = 0.9

    @property
    def shares(self) -> np.ndarray:
        d = np.asarray(self.durations, np.float64)
        return d / d.sum()

    def cdf(self, x_us: float) -> float:
        """The long-run probability that a cycle's latency is ≤ x_us."""
        if x_us <= 0:
            return 0.0
        z = (math.log(x_us) - np.log(self.medians_us)) / self.sigma
        return float(np.dot(self.shares, special.ndtr(z)))

    def quantile(self, p: float) -> float:
        """The long-run p-quantile, µs (bisection on the mixture's CDF)."""
        lo, hi = (
            min(self.medians_us) * math.exp(-8 * self.sigma),
            max(self.medians_us) * math.exp(8 * self.sigma),
        )
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if self.cdf(mid) < p else (lo, mid)
        return math.sqrt(lo * hi)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n consecutive cycles' latencies (µs), starting at a random point of a random phase."""
        k = len(self.durations)
        levels = np.empty(n)
        phase = int(rng.choice(k, p=self.shares))
        at = -int(rng.uniform(0, self.durations[phase]))  # already this far into the first phase
        while at < n:
            length = max(1,
                         round(self.durations[phase] * math.exp(self.jitter * rng.standard_normal()
                                                                  - self.jitter**2 / 2)))
            levels[max(at, 0):max(at + length, 0)] = math.log(self.medians_us[phase])
            at += length
            phase = (phase + 1) % k
        shocks = rng.standard_normal(n) * math.sqrt(1 - self.carry**2)
        first = rng.standard_normal()  # the AR component starts from its stationary law
        ar = signal.lfilter([1.0], [1.0, -self.carry], shocks, zi=[self.carry * first])[0]
        return np.exp(levels + self.sigma * ar)
