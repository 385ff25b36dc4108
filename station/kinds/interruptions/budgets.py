"""The detector's figure for budgets (station/analysis/budgets.py): `max`, its longest gap as
measured; a run without a gap above its threshold had none longer than the threshold."""

from __future__ import annotations

from typing import Any

from station.analysis.budgets import Estimate
from station.config.budgets import Budget


def figures(report: dict[str, Any], budget: Budget, runs: list[dict[str, Any]]) -> list[Estimate]:
    out = []
    for run in runs:
        label = str(run["id"])
        if budget.figure.name != "max":
            out.append(Estimate(label, None, why="the detector's budget is its longest gap: max"))
        elif run.get("max_us") is not None:
            out.append(Estimate(label, run["max_us"] * 1e-6, observed=True))
        else:  # no gap above the threshold: the longest is somewhere below it
            out.append(Estimate(label, None, 0.0, float(run.get("threshold_us") or 0) * 1e-6,
                                method="no gap above the detector's threshold"))
    return out
