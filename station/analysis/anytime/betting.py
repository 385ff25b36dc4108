"""A confidence sequence for the mean of values in [0, 1] by betting (Waudby-Smith & Ramdas,
"Estimating means of bounded random variables by betting", JRSS-B 2024, arXiv:2010.09686): the
hedged capital process with predictable plug-in bets.

For each candidate mean m, a gambler bets that the values lie above m (capital K⁺) and another
that they lie below (K⁻), each stake predictable (from the values before it) and small enough
that no value in [0, 1] ruins them. If m is the true mean (E[X_t | the past] = m: independence is
not needed, only a constant conditional mean), both capitals are nonnegative martingales
starting at 1, so the hedge max(½K⁺, ½K⁻) ever reaching 1/α has probability at most α (Ville).
The confidence sequence at time t is every m whose hedge has not reached 1/α.

The candidates are a fixed grid (linear over [0, 1], and geometric near 0 and 1 where miss rates
live), each updated in O(1) per value; the interval reported runs from the last refused
candidate below the accepted ones to the first refused above (so it contains the exact set).

What it costs: a rate near 0 is quick to bound from below but slow from above — every value can
move a bet on "the mean is at least ε" by a factor of at most 1 + ε/(1 − ε)·c, so an upper bound
under ε needs about log(2/α)/(c·ε) values (c = ½: twice log(2/α)/ε) even when all of them are 0
(`values_to_bound_below`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

TRUNCATION = 0.5  # c: a stake is at most c/m (or c/(1 − m)), so one value costs at most half


def grid() -> np.ndarray:
    """The candidate means: 2001 evenly spaced, and 401 geometric from 1e-9 near each end."""
    tail = np.geomspace(1e-9, 1e-3, 401)
    return np.unique(np.concatenate([np.linspace(0.0, 1.0, 2001), tail, 1.0 - tail]))


def values_to_bound_below(epsilon: float, alpha: float) -> int:
    """The fewest values, all 0, after which the upper end can fall under `epsilon`."""
    per_value = math.log1p(TRUNCATION * epsilon / (1 - epsilon))
    return math.ceil(math.log(2 / alpha) / per_value)


@dataclass
class MeanSequence:
    """The mean's interval after each value, all of them together at 1 − alpha."""

    alpha: float
    means: np.ndarray = field(default_factory=grid)
    t: int = 0
    lower: float = 0.0  # the running intersection
    upper: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be inside (0, 1), got {self.alpha!r}")
        m = self.means
        self._log_up = np.zeros_like(m)  # log K⁺(m)
        self._log_down = np.zeros_like(m)  # log K⁻(m)
        self._cap_up = np.where(m > 0, TRUNCATION / np.maximum(m, 1e-300), np.inf)
        self._cap_down = np.where(m < 1, TRUNCATION / np.maximum(1 - m, 1e-300), np.inf)
        self._sum = 0.0  # Σ x
        self._spread = 0.0  # Σ (x_i − μ̂_{i−1})²
        self._level = math.log(1 / self.alpha) + math.log(2)  # the hedge: ½·K ≥ 1/α

    def _stake(self) -> float:
        """The predictable plug-in stake (before its truncation), from the values so far."""
        t = self.t + 1
        variance = (0.25 + self._spread) / t
        return math.sqrt(2 * math.log(2 / self.alpha) / (variance * t * math.log1p(t)))

    def add(self, x: float) -> tuple[float, float]:
        """One more value in [0, 1]; the interval now."""
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"a value must lie in [0, 1], got {x!r}")
        stake = self._stake()
        m = self.means
        with np.errstate(invalid="ignore"):
            self._log_up += np.log1p(np.minimum(stake, self._cap_up) * (x - m))
            self._log_down += np.log1p(-np.minimum(stake, self._cap_down) * (x - m))
        mean_before = (0.5 + self._sum) / (self.t + 1)
        self._sum += x
        self._spread += (x - mean_before) ** 2
        self.t += 1
        refused = np.maximum(self._log_up, self._log_down) >= self._level
        accepted = np.flatnonzero(~refused)
        if not len(accepted):  # no candidate left: the values contradict a constant mean
            self.lower, self.upper = math.inf, -math.inf
            return self.interval
        first, last = accepted[0], accepted[-1]
        low = float(m[first - 1]) if first > 0 else 0.0
        high = float(m[last + 1]) if last + 1 < len(m) else 1.0
        self.lower, self.upper = max(self.lower, low), min(self.upper, high)
        return self.interval

    @property
    def interval(self) -> tuple[float, float]:
        return self.lower, self.upper
