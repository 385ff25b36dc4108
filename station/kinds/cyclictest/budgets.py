"""cyclictest runs' figures for budgets (station/analysis/budgets.py): the pooled threads'
percentiles with the intervals of a sliced run (cyclictest.slices; a histogram alone keeps no time
order, so an unsliced run's percentiles get none and their budgets stay undecided), the largest
latency as measured, rtla timerlat's largest IRQ and thread latencies (both in whole µs: the true
maximum lies below the next µs, an interval; cycles beyond the histogram make it a lower bound),
and the probability of missing the campaign's deadline per target and load (the report's
deadline view)."""

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
        label, combined = str(run["id"]), run.get("combined") or {}
        if f.name == "max":
            # cyclictest's own maxima (whole µs, whatever the histogram's range), else the
            # histogram's, which cycles beyond its range leave a lower bound
            threads = [t["max_us"] for t in run.get("threads") or [] if t.get("max_us") is not None]
            if threads:
                out.append(_whole_us(label, max(threads) * 1e-6, 0))
            else:
                out.append(_whole_us(label, seconds(combined.get("max_ns")),
                                     int(combined.get("overflows") or 0)))
        elif f.name.startswith("timerlat_"):
            timerlat = run.get("timerlat") or {}
            value = timerlat.get(f.name.removeprefix("timerlat_") + "_us")
            if value is None or timerlat.get("note"):
                out.append(Estimate(label, None, why=timerlat.get("note") or "the run has no rtla "
                                    "timerlat companion (cyclictest.timerlat)"))
            else:
                # a threshold stopped it: the largest is the one that stopped it, or a lower bound
                out.append(_whole_us(label, value * 1e-6, 1 if timerlat.get("stopped") else 0))
        elif f.level is not None:
            key = percentile_key(f.level)
            value = (combined.get("percentiles_ns") or {}).get(key)
            ci = (combined.get("percentile_ci95_ns") or {}).get(key)
            why = None if ci else (combined.get("percentile_ci_withheld")
                                   or f"the report keeps no {key} interval of this run")
            if value is None and key not in (combined.get("percentiles_ns") or {}):
                why = f"the report keeps no {key} of a cyclictest run"
            low, high = ci or (None, None)
            out.append(Estimate(label, seconds(value), seconds(low), seconds(high),
                                method=(combined.get("percentile_ci_method") or {}).get(key),
                                why=why))
        else:
            out.append(Estimate(label, seconds(combined.get("mean_ns")),
                                why="a cyclictest run's mean has no interval in the report"))
    return out


def _whole_us(label: str, value: float | None, beyond: int) -> Estimate:
    """A maximum counted in whole µs (cyclictest's histogram, rtla's figures): the true one lies in
    [value, value + 1 µs); with latencies beyond the histogram (or a run stopped short) it is a
    lower bound."""
    if value is None:
        return Estimate(label, None, why="the run gives no maximum")
    high = None if beyond else value + 1e-6 - 1e-12
    return Estimate(label, value, value, high,
                    method=f"{beyond} beyond the histogram: a lower bound" if beyond else
                    "whole µs: the true maximum is under the next µs")


def _misses(report: dict[str, Any], budget: Budget, runs: list[dict[str, Any]]) -> list[Estimate]:
    deadline_us = budget.figure.deadline_s * 1e6  # type: ignore[operator]
    section = report.get("cyclictest") or {}
    cells = section.get("deadline_view") or []
    out = []
    for target, load in sorted({(str(r.get("target")), str(r.get("load"))) for r in runs}):
        label = f"{target}, {load} (its runs pooled)"
        cell = next((c for c in cells if str(c.get("target")) == target
                     and c.get("load") == load), None)
        if cell is None or abs(float(cell.get("deadline_us") or -1) - deadline_us) > 1e-6:
            out.append(Estimate(label, None, why="the report gives no miss probability at "
                                f"{budget.figure.name[5:-1]}: set cyclictest.deadline (or "
                                "report.deadline) to it in the campaign file"))
            continue
        out.append(Estimate(label, cell.get("p_exceed"), cell.get("ci_low"), cell.get("ci_high"),
                            method=cell.get("method")))
    return out
