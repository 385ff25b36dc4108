"""Which condition is the worst — the largest p-quantile of its units (runs) — by successive
elimination on anytime-valid intervals (Even-Dar, Mannor & Mansour, JMLR 2006, on the quantile
confidence sequences of Howard & Ramdas 2022, §5).

Every surviving arm (a load, an interface …) is measured once a round; each arm's quantile has
its confidence sequence. After a round, an arm whose upper end lies under another survivor's
lower end is confidently not the worst and is dropped. The worst arm is never dropped while its
upper end stays above its quantile and every other arm's lower end below theirs (its quantile is
above every other's): K one-sided statements, each given alpha/K, so the arm left alone is the
worst with probability at least 1 − alpha, whenever the search stops; stopped by its budget, the
worst is among the survivors with that probability. Each arm's sequence is therefore two-sided
at 2·alpha/K (alpha/K a side): alone it holds at 1 − 2·alpha/K, all K together at 1 − 2·alpha
(`interval_confidence`). Spent two-sided at alpha/K instead, every interval shown would hold
together at 1 − alpha, but the search would take a fifth more rounds (benchmarks/README.md: a
median 34 against 27.5 over 50 seeded searches of three loads). Two arms whose quantiles are
equal are never told apart: both stay.

What it assumes: each arm's units independent draws from its own law, whatever the order the
rounds measure them in (the station's rounds are seeded permutations, so a drift of the machine
spreads over every arm alike; docs/plans/issue-50-stop-rules.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from station.analysis.anytime.quantile_cs import QuantileSequence


def per_arm_alpha(alpha: float, arms: int) -> float:
    """Each arm's two-sided sequence error in a search at `alpha` over `arms` arms: alpha/arms on
    each side, the only side of each arm the search's guarantee uses."""
    return 2 * alpha / arms


def interval_confidence(alpha: float, arms: int) -> tuple[float, float]:
    """What a search's intervals hold at: each alone, and all of them together."""
    return 1 - per_arm_alpha(alpha, arms), max(1 - 2 * alpha, 0.0)


@dataclass
class WorstArmSearch:
    arms: tuple[str, ...]
    p: float
    alpha: float
    t_opt: float = 30.0
    rounds: int = 0
    eliminated: dict[str, int] = field(default_factory=dict)  # arm -> the round it was dropped in
    # arms whose intervals stopped overlapping (lower above upper): their units are not alike, and
    # the search can no longer name a worst; such an arm drops no other
    contradicted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if len(set(self.arms)) != len(self.arms) or len(self.arms) < 2:
            raise ValueError(f"a search needs two or more distinct arms, got {self.arms!r}")
        each = per_arm_alpha(self.alpha, len(self.arms))
        self.sequences = {a: QuantileSequence(self.p, each, self.t_opt) for a in self.arms}

    @property
    def survivors(self) -> tuple[str, ...]:
        return tuple(a for a in self.arms if a not in self.eliminated)

    @property
    def done(self) -> bool:
        return len(self.survivors) == 1 and not self.contradicted

    def add_round(self, values: dict[str, float]) -> list[str]:
        """One unit of every survivor (exactly those); the arms this round drops."""
        if set(values) != set(self.survivors):
            raise ValueError(f"a round measures every survivor once: {sorted(self.survivors)}, "
                             f"got {sorted(values)}")
        for arm, value in values.items():
            lower, upper = self.sequences[arm].add(value)
            if lower > upper:
                self.contradicted.add(arm)
        self.rounds += 1
        sound = [a for a in self.survivors if a not in self.contradicted]
        if not sound:
            return []
        best_lower = max(self.sequences[a].lower for a in sound)
        dropped = [a for a in sound if self.sequences[a].upper < best_lower]
        for arm in dropped:
            self.eliminated[arm] = self.rounds
        return dropped

    def intervals(self) -> dict[str, tuple[float, float]]:
        return {a: self.sequences[a].interval for a in self.arms}
