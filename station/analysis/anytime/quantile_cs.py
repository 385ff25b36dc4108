"""A confidence sequence for a quantile, fed one value at a time (a run's own figure, after each
round): the interval of order statistics station/analysis/anytime/boundary.py names, intersected
with every earlier one (an intersection of intervals that all hold at once holds too, and never
widens)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from station.analysis.anytime.boundary import QuantileBoundary


@dataclass
class QuantileSequence:
    """The p-quantile's interval after each value, all of them together at 1 − alpha."""

    p: float
    alpha: float
    t_opt: float = 30.0
    values: list[float] = field(default_factory=list)  # sorted
    lower: float = -math.inf  # the running intersection
    upper: float = math.inf

    def __post_init__(self) -> None:
        self.boundary = QuantileBoundary(self.p, self.alpha, self.t_opt)
        seen, self.values = self.values, []
        for value in seen:
            self.add(value)

    def add(self, value: float) -> tuple[float, float]:
        """One more value (NaN refused: a missing unit is the caller's to count); the interval
        now."""
        if math.isnan(value):
            raise ValueError("a NaN is not a value: count a missing unit where it went missing")
        bisect.insort(self.values, float(value))
        t = len(self.values)
        k_lo, k_hi = self.boundary.ranks(t)
        low = self.values[k_lo - 1] if k_lo >= 1 else -math.inf
        high = self.values[k_hi - 1] if k_hi <= t else math.inf
        self.lower, self.upper = max(self.lower, low), min(self.upper, high)
        return self.interval

    @property
    def t(self) -> int:
        return len(self.values)

    @property
    def interval(self) -> tuple[float, float]:
        """(lower, upper); (−inf, inf) until the values bound it. A lower above the upper means
        the values contradict the assumption (independent draws from one law): say so, do not
        use it."""
        return self.lower, self.upper
