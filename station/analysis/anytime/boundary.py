"""The beta-binomial mixture boundary for a quantile (Howard & Ramdas, Bernoulli 28(3), 2022;
the mixture from Howard, Ramdas, McAuliffe & Sekhon, Ann. Statist. 49(2), 2021).

For values X_1, X_2, … drawn independently from one law F, and its p-quantile q, the count
S_t(x) = #{i ≤ t : X_i ≤ x} is binomial. Against "each indicator is Bernoulli(p)", the likelihood
ratio of Bernoulli(π), averaged over a Beta(a, b) prior on π,

    M_t(S) = B(a + S, b + t − S) / (B(a, b) · p^S · (1 − p)^(t − S)),

is a nonnegative martingale starting at 1, so by Ville's inequality it ever reaches 1/α with
probability at most α, whatever the time the caller stops at. Restricting the prior to one side
(π ≤ p, π ≥ p; divided by that side's mass) gives a supermartingale for every law on that
side, so the two one-sided boundaries at 2/α each hold for any F, ties included (latencies are
whole nanoseconds):

- the lower side, on S_t(q) (its Bernoulli parameter F(q) ≥ p): S_t(q) ≥ k_lo(t), so
  X_(k_lo) ≤ q;
- the upper side, on S_t(q−) (F(q−) ≤ p): S_t(q−) ≤ k_hi(t) − 1, so X_(k_hi) ≥ q.

The prior is centred on p (a = r/(1 − p), b = r/p) with r chosen so the boundary is tightest
near `t_opt` observations (the paper's tuning); any r keeps the guarantee, which
tests/test_anytime_boundary.py checks exactly (dynamic programming over the counts, no
simulation). What it assumes: independent draws from one law (in the station: runs, not the
dependent events inside one; docs/plans/issue-50-stop-rules.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

from station.common.lazy_import import lazy_module

special = lazy_module("scipy.special")


def tuned_r(p: float, alpha: float, t_opt: float) -> float:
    """The prior's strength r for a boundary tightest near `t_opt` observations."""
    log_a = math.log(1 / alpha)
    rho = t_opt * p * (1 - p) / (2 * log_a + math.log(1 + 2 * log_a))
    return max(rho - p * (1 - p), 1e-3 * p * (1 - p))


@dataclass(frozen=True)
class QuantileBoundary:
    """The ranks of the order statistics bounding the p-quantile at every time, together at
    confidence 1 − alpha."""

    p: float
    alpha: float
    t_opt: float = 30.0

    def __post_init__(self) -> None:
        if not 0 < self.p < 1:
            raise ValueError(f"p must be inside (0, 1), got {self.p!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be inside (0, 1), got {self.alpha!r}")
        if not self.t_opt >= 1:
            raise ValueError(f"t_opt must be at least 1, got {self.t_opt!r}")

    @cached_property
    def _prior(self) -> tuple[float, float, float, float]:
        """(a, b, log B(a, b), log mass of the prior below p, log mass above p)."""
        r = tuned_r(self.p, self.alpha, self.t_opt)
        a, b = r / (1 - self.p), r / self.p
        below = float(special.betainc(a, b, self.p))
        return a, b, float(special.betaln(a, b)), math.log(below), math.log1p(-below)

    def log_m(self, t: int, s: int, side: str) -> float:
        """log M_t(S) of the one-sided mixture: side "below" (π ≤ p: large when S is small) or
        "above" (π ≥ p: large when S is large)."""
        a, b, log_beta, log_below, log_above = self._prior
        part = (special.betainc(a + s, b + t - s, self.p) if side == "below"
                else special.betaincc(a + s, b + t - s, self.p))
        if part <= 0:
            return -math.inf
        mass = log_below if side == "below" else log_above
        return (float(special.betaln(a + s, b + t - s)) + math.log(part) - log_beta - mass
                - s * math.log(self.p) - (t - s) * math.log1p(-self.p))

    def ranks(self, t: int) -> tuple[int, int]:
        """(k_lo, k_hi) at time t ≥ 0: the p-quantile lies in [X_(k_lo), X_(k_hi)] of the first
        t values' order statistics (1-based), k_lo = 0 meaning −∞ and k_hi = t + 1 meaning +∞."""
        if t < 0:
            raise ValueError(f"t must be a count, got {t!r}")
        return _ranks(self, t)  # shared: every arm of a search asks the same boundary

    def _ranks(self, t: int) -> tuple[int, int]:
        level = math.log(2 / self.alpha)
        # the lower side refuses small counts: the smallest S it accepts (log M decreasing in S)
        k_lo = _first(0, t, lambda s: self.log_m(t, s, "below") < level)
        # the upper side refuses large counts: one past the largest S it accepts (increasing)
        k_hi = _first(0, t + 1, lambda s: s > t or self.log_m(t, s, "above") >= level)
        return k_lo, k_hi


@lru_cache(maxsize=1 << 16)
def _ranks(boundary: QuantileBoundary, t: int) -> tuple[int, int]:
    return boundary._ranks(t)


def _first(lo: int, hi: int, holds) -> int:  # noqa: ANN001 - a monotone predicate over ints
    """The smallest integer in [lo, hi] where the monotone predicate holds (hi if none before)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
