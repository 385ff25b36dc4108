"""GPIO response delays' figures for budgets (station/analysis/budgets.py): the mean delay with
its dependence-aware interval, the largest as measured; the report keeps no interval of a delay
percentile, so a percentile's budget stays undecided (said so). A run with stimuli that got no
response within the window leaves every budget undecided: their delays are unknown."""

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

        unknown = int(run.get("missed") or 0)
        if unknown:
            # a stimulus with no response in its window has a delay the run does not know (above
            # the window, or never): the delays measured are not all of them
            out.append(Estimate(label, None, why=f"{unknown} of {run.get('stimuli')} stimuli got "
                                "no response within the window: their delays are unknown"))
            continue
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
