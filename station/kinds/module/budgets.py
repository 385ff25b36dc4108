"""The module runs' figures for budgets (station/analysis/budgets.py): t_SW's percentiles and mean
with their dependence-aware intervals (docs/statistics.md), its largest latency as measured, and
the probability of missing a deadline, which the report gives per interface and load with every
run of them pooled (report.deadline). The largest t_SW of a run that lost records is a lower bound
(the lost one may have been the worst): it can miss a `max` budget, never meet it."""

from __future__ import annotations

from typing import Any

from station.analysis.budgets import Estimate, percentile_key, seconds
from station.config.budgets import Budget


def figures(report: dict[str, Any], budget: Budget, runs: list[dict[str, Any]]) -> list[Estimate]:
    f = budget.figure
    if f.is_probability:
        return _misses(report, budget, runs)
    out = []
    for run in runs:
        label, dep = str(run["id"]), run.get("dependence") or {}
        if f.name == "max":
            losses = run.get("losses") or {}
            lost = int(losses.get("sw_lost") or 0) + int(losses.get("sw_dropped_by_target") or 0)
            top = seconds((run.get("sw") or {}).get("max_ns"))
            if lost and top is not None:  # a lost record may have been the worst: a lower bound
                out.append(Estimate(label, top, top, None, method=f"{lost} records lost: the "
                                    "largest measured is a lower bound"))
            else:
                out.append(Estimate(label, top, observed=True))
        elif f.name == "mean" or f.level is not None:
            key = "mean" if f.level is None else percentile_key(f.level)
            entry = dep.get("mean") if f.level is None else (dep.get("percentiles") or {}).get(key)
            if entry is None:
                kept = ", ".join(dep.get("percentiles") or {}) or "none"
                out.append(Estimate(label, None, why=f"the report keeps no {key} of a run "
                                    f"(it keeps {kept})"))
                continue
            low, high = entry.get("ci95_ns") or (None, None)
            out.append(Estimate(label, seconds(entry.get("estimate_ns")), seconds(low),
                                seconds(high), method=entry.get("method"),
                                why=entry.get("withheld")))
        else:
            out.append(Estimate(label, None, why=f"a module run has no {f.name}"))
    return out


def _misses(report: dict[str, Any], budget: Budget, runs: list[dict[str, Any]]) -> list[Estimate]:
    """miss(D): the report's deadline figure of each interface and load the runs belong to."""
    deadline_ns = round(budget.figure.deadline_s * 1e9)  # type: ignore[operator]
    groups = sorted({(str(r.get("interface")), str(r.get("load"))) for r in runs})
    cases = (report.get("comparisons") or {}).get("worst_case") or []
    out = []
    pooled = [key for key, _ in budget.runs if key in ("variant", "target")]
    for interface, load in groups:
        label = f"{interface}, {load} (its runs pooled)"
        if pooled:  # the report's figure is of every variant and target together
            out.append(Estimate(label, None, why="the report's miss probability pools the "
                                f"variants and targets of {interface} under {load}; a budget "
                                f"for one {' and one '.join(pooled)} has no figure of its own"))
            continue
        case = next((c for c in cases if c.get("interface") == interface
                     and c.get("load") == load), None)
        d = (case or {}).get("deadline") or {}
        if not d or round(float(d.get("deadline_ns") or -1)) != deadline_ns:
            said = "no deadline" if not d else f"a deadline of {d.get('deadline_ns')} ns"
            out.append(Estimate(label, None, why=f"the report gives {said}; set report.deadline "
                                f"to {budget.figure.name[5:-1]} in the campaign file (or "
                                "`station report --deadline`) for this budget's figure"))
            continue
        out.append(Estimate(label, d.get("p_exceed"), d.get("ci_low"), d.get("ci_high"),
                            method=d.get("dependence")))
    return out
