"""The detector's figure for budgets (station/analysis/budgets.py): `max`, its longest gap as
measured, up to its longest blind span (the CPU taken while it wrote its records: a gap there is
not seen, so the longest gap lies between the two); a run without a gap above its threshold had
none longer than the threshold. A run whose summary is not in the report gives no figure."""

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
            continue
        if run.get("gaps") is None or run.get("threshold_us") is None:
            out.append(Estimate(label, None, why="the report has no summary of this run's gaps "
                                "(its output was not read)"))
            continue
        longest = run["max_us"] if run.get("max_us") is not None else None
        blind = run.get("blind_span_max_us")
        low = 0.0 if longest is None else longest * 1e-6
        high = max(float(run["threshold_us"]) if longest is None else longest,
                   float(blind or 0.0)) * 1e-6
        if longest is not None and high == low:
            out.append(Estimate(label, low, observed=True))
        else:
            why = "no gap above the detector's threshold" if longest is None else ""
            if blind and blind * 1e-6 > low:
                why = (why + "; " if why else "") + f"a blind span of {blind:.3g} µs may hide one"
            out.append(Estimate(label, None if longest is None else low, low, high, method=why))
    return out
