"""GPIO response delays' figures for budgets (station/analysis/budgets.py): the mean delay with
its dependence-aware interval, the largest as measured; the report keeps no interval of a delay
percentile, so a percentile's budget stays undecided (said so)."""

from __future__ import annotations

from typing import Any

from station.analysis.budgets import Estimate, percentile_key
from station.config.budgets import Budget


def figures(report: dict[str, Any], budget: Budget, runs: list[dict[str, Any]]) -> list[Estimate]:
    f = budget.figure
    out = []
    for run in runs:
        label, delay = str(run["id"]), run.get("delay_us") or {}

        def s(us: Any) -> float | None:
            return None if us is None else float(us) * 1e-6

        if f.name == "max":
            out.append(Estimate(label, s(delay.get("max")), observed=True))
        elif f.name == "mean":
            low, high = delay.get("mean_ci") or (None, None)
            out.append(Estimate(label, s(delay.get("mean")), s(low), s(high),
                                method=delay.get("mean_ci_method"),
                                why=delay.get("mean_ci_withheld")))
        elif f.level is not None:
            key = percentile_key(f.level).replace(".", "")  # p99.9 is kept as p999
            out.append(Estimate(label, s(delay.get(key)),
                                why="the report keeps no interval of a GPIO delay percentile"))
        else:
            out.append(Estimate(label, None, why=f"a GPIO run has no {f.name}"))
    return out
