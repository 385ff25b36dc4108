"""Budgets judged on a campaign's report (`station check`, docs/ci.md): each figure with its
interval, never rounded into a pass.

A figure with an interval meets a budget when the interval's upper end does, misses it when its
lower end does not, and is undecided otherwise; a figure that is a fact of what was measured (the
largest latency seen: no interval, nothing estimated) meets or misses it as it is; a figure the
report cannot give (an interval withheld, a percentile it does not keep) leaves the budget
undecided, with the reason. A budget over several runs is met when every one of its runs meets
it, missed when one misses it, undecided otherwise: so each run's interval (95 %, two-sided) is
read one-sided at 97.5 %, and a budget called met wrongly needs the one run that misses it
called met wrongly (≤ 2.5 %), while with m runs that all meet it a budget is called missed
wrongly with probability ≤ m × 2.5 % (say so before budgeting many runs at once).

Each kind reads its own figures from its part of the report (Kind.budget_figures); this module
names no kind.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from station import kind_registry
from station.common.formatting import us
from station.config.budgets import Budget

Verdict = Literal["met", "missed", "undecided"]
# the campaign's verdict, and `station check`'s exit status, from its budgets' verdicts
EXIT_STATUS = {"met": 0, "missed": 1, "undecided": 3}


@dataclass(frozen=True)
class Estimate:
    """One figure a kind's report gives for a budget: a run's, or a group's (miss(D) pooled)."""

    label: str  # the run's id, or the group's name
    value: float | None  # seconds, or a probability; None: the report does not give it
    low: float | None = None  # the interval's ends (95 %); None: no such end
    high: float | None = None
    observed: bool = False  # a fact of the measured sample (its maximum): no interval needed
    method: str | None = None
    why: str | None = None  # why there is no figure, or no interval: the budget stays undecided


@dataclass
class Judged:
    label: str
    verdict: Verdict
    text: str  # the figure and its interval, in words
    estimate: Estimate


@dataclass
class BudgetVerdict:
    budget: str
    verdict: Verdict
    judged: list[Judged] = field(default_factory=list)

    @property
    def message(self) -> str:
        if not self.judged:
            return f"{self.budget}: {self.verdict}: no run of the campaign is one it applies to"
        deciding = [j for j in self.judged if j.verdict == self.verdict] or self.judged
        return (f"{self.budget}: {self.verdict} ({len(deciding)} of {len(self.judged)} "
                f"figures {self.verdict}): "
                + "; ".join(f"{j.label} {j.text}" for j in deciding))


@dataclass
class CheckResult:
    campaign: str
    verdicts: list[BudgetVerdict]

    @property
    def verdict(self) -> Verdict:
        said = {v.verdict for v in self.verdicts}
        return "missed" if "missed" in said else "undecided" if "undecided" in said else "met"

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    def as_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "verdict": self.verdict,
                "budgets": [{"budget": v.budget, "verdict": v.verdict, "message": v.message,
                             "figures": [{"label": j.label, "verdict": j.verdict, "text": j.text,
                                          **asdict(j.estimate)} for j in v.judged]}
                            for v in self.verdicts]}


def seconds(ns: Any) -> float | None:
    """A report's nanoseconds as a budget's seconds (None stays None)."""
    return None if ns is None else float(ns) * 1e-9


def percentile_key(level: float) -> str:
    """0.9999 → "p99.99", as report.json names its percentiles."""
    return f"p{level * 100:.4f}".rstrip("0").rstrip(".")


def _amount(budget: Budget, value: float) -> str:
    return f"{value:.3g}" if budget.figure.is_probability else f"{us(value * 1e9)} µs"


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def judge_estimate(budget: Budget, e: Estimate) -> Judged:
    name = budget.figure.name
    if any(x is not None and not math.isfinite(x) for x in (e.value, e.low, e.high)):
        e = Estimate(e.label, _finite(e.value), _finite(e.low), _finite(e.high), e.observed,
                     e.method, e.why or "the report gives a figure that is not a number")
        if e.observed and e.value is None:
            e = Estimate(e.label, None, why=e.why)
    if e.observed and e.value is not None:
        verdict: Verdict = "met" if budget.holds(e.value) else "missed"
        return Judged(e.label, verdict, f"{name} = {_amount(budget, e.value)} as measured "
                      "(the largest seen; no interval)", e)
    value = "" if e.value is None else f" = {_amount(budget, e.value)}"
    if e.low is None and e.high is None:
        return Judged(e.label, "undecided", f"{name}{value}: {e.why or 'not in the report'}", e)
    ends = (f"[{'–' if e.low is None else _amount(budget, e.low)}, "
            f"{'–' if e.high is None else _amount(budget, e.high)}] (95 %"
            + (f", {e.method})" if e.method else ")"))
    text = f"{name}{value} {ends}"
    if e.high is not None and budget.holds(e.high):
        return Judged(e.label, "met", text, e)
    if e.low is not None and not budget.holds(e.low):
        return Judged(e.label, "missed", text, e)
    return Judged(e.label, "undecided", text + (f": {e.why}" if e.why else
                                                ": the interval holds the budget"), e)


def judge_budget(report: dict[str, Any], budget: Budget,
                 planned: list[dict[str, Any]] | None = None) -> BudgetVerdict:
    """`planned`: the runs the campaign's matrix names (id, target, load, interface, variant,
    case), when known: one it applies to that the report does not hold (never measured: its
    target unavailable, the campaign cut short) leaves the budget undecided. A campaign that stops
    when answered (matrix.until) measures fewer rounds than its repetitions: `planned` then holds
    one run per condition, and a condition with no run at all is what is missing."""
    judged: list[Judged] = []
    present = [r for k in kind_registry.kinds().values()
               for r in kind_registry.report_runs(k, report)]
    for plan in planned or []:
        if budget.applies_to(plan) and not any(_same_condition(plan, r) for r in present):
            judged.append(judge_estimate(budget, Estimate(
                str(plan["id"]), None, why="planned, not in the report: never measured (its "
                "target unavailable, or the campaign cut short)")))
    for kind in kind_registry.kinds().values():
        reader = kind.load("budget_figures")
        runs = [r for r in kind_registry.report_runs(kind, report) if budget.applies_to(r)]
        if reader is None or not runs:
            continue
        complete = [r for r in runs if r.get("status") == "complete"]
        for run in runs:
            if run.get("status") != "complete":
                e = Estimate(str(run.get("id")), None,
                             why=f"the run is {run.get('status')}: its figures are not all there")
                judged.append(judge_estimate(budget, e))
        judged += [judge_estimate(budget, e) for e in reader(report, budget, complete)]
    said = {j.verdict for j in judged}
    verdict: Verdict = ("missed" if "missed" in said else "met" if said == {"met"}
                        else "undecided")
    return BudgetVerdict(budget.text, verdict, judged)


def _same_condition(plan: dict[str, Any], run: dict[str, Any]) -> bool:
    """Whether a report's run is the planned one (by id), or of its condition where the plan
    names conditions (no id)."""
    if plan.get("id") is not None:
        return str(run.get("id")) == str(plan["id"])
    return all(str(run.get(k)) == str(v) for k, v in plan.items() if k != "id" and v is not None)


def check(report: dict[str, Any], budgets: list[Budget], campaign: str,
          planned: list[dict[str, Any]] | None = None) -> CheckResult:
    return CheckResult(campaign, [judge_budget(report, b, planned) for b in budgets])
