"""A stop rule's room to answer (matrix.until, docs/stopping.md), checked by the kinds whose runs
carry units (their Kind.check): the config layer checks the rule's shape, this its arithmetic,
which is the analysis's (station/analysis/anytime/boundary.py)."""

from __future__ import annotations

import math
from typing import Any

from station.config import LocatedError


def check_rounds(campaign: Any, cells: int) -> None:
    """`repetitions` leaves room for an answer: at least the first round at which one of the
    rule's confidence sequences can have both ends (`cells`: the kind's cells)."""
    m, rule = campaign.matrix, campaign.matrix.until
    if rule is None:
        return
    samples = getattr(m, "samples", None)
    if samples is not None and samples * rule.tail < 1:
        need = math.ceil(round(1 / rule.tail, 6))
        raise LocatedError(("matrix", "samples"),
                           f"gives each run {samples} events: its own p{100 * rule.level:g} is "
                           f"then its largest value, not a percentile; the stop rule needs at "
                           f"least {need} events a run (ten times that to see past the largest)")
    # several targets share the rule's error (campaign/stopping.py TargetsJudge)
    needed = rounds_to_bound(rule, cells, len(m.loads), len(campaign.bench.named_targets()))
    if m.repetitions < needed:
        raise LocatedError(("matrix", "repetitions"),
                           f"is the most rounds the stop rule may take ({m.repetitions}), but at "
                           f"its confidence over its groups no interval has both ends before "
                           f"round {needed}: give at least {needed} (docs/stopping.md)")


def rounds_to_bound(rule: Any, cells: int, loads: int, targets: int = 1) -> int:
    """The first round at which one of the rule's confidence sequences can have both ends (the
    median of its values, at its share of the rule's error); `cells`: the kind's cells (interface
    × variant, or one), each measured under every one of `loads`, on each of `targets`."""
    from station.analysis.anytime.boundary import QuantileBoundary
    from station.analysis.anytime.elimination import per_arm_alpha

    alpha = 1 - rule.confidence
    if rule.compare is not None:
        each = alpha / (cells * loads // 2) / targets
    elif rule.worst is not None:  # a search per cell, its loads its arms
        each = per_arm_alpha(alpha / cells / targets, loads)
    else:
        each = alpha / (cells * loads) / targets
    boundary = QuantileBoundary(0.5, each, rule.t_opt)
    for t in range(1, 100_000):
        lo, hi = boundary.ranks(t)
        if lo >= 1 and hi <= t:
            return t
    return 100_000
