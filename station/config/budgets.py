"""Latency budgets (`budgets:` in a campaign file, `station check --budget`): what a CI job fails
on. A budget is one line, `<figure> <op> <limit>`:

    p99.99 <= 50us            a percentile of each run's events (p50 … p99.9999)
    max <= 120us              the run's largest latency as measured (the detector: its longest gap)
    mean < 10us
    miss(100us) < 1e-6        the probability per event of a latency above 100 µs
    timerlat_irq_max <= 80us  rtla timerlat's largest IRQ latency beside cyclictest (also
                              timerlat_thread_max)

optionally followed by `for` and the runs it applies to (`for load=hackbench interface=pcie`),
which the mapping form says as keys: `{budget: "p99 <= 20us", load: hackbench}`. Judged by
station/analysis/budgets.py against each figure's interval (docs/ci.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from station.common.units import parse_duration
from station.config.types import Strict

PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d{1,4})?)")
MISS = re.compile(r"miss\((.+)\)")
OBSERVED = ("max", "timerlat_irq_max", "timerlat_thread_max")
SELECTORS = ("target", "load", "interface", "variant", "case")
LINE = re.compile(r"\s*(?P<figure>\S+?)\s*(?P<op><=|<)\s*(?P<limit>\S+)\s*(?:\bfor\b(?P<runs>.*))?")
MAX_LINE = 300


@dataclass(frozen=True)
class Figure:
    """What a budget bounds: `name` as written (p99.99, max, mean, miss(100us), …)."""

    name: str
    level: float | None = None  # a percentile's level (0.9999)
    deadline_s: float | None = None  # miss(D)'s D

    @property
    def is_probability(self) -> bool:
        return self.deadline_s is not None


def parse_figure(text: str) -> Figure:
    text = text.strip()
    if match := PERCENTILE.fullmatch(text):
        level = float(match.group(1))
        if not 50 <= level < 100:
            raise ValueError(f"{text!r}: a percentile from p50 to p99.9999")
        return Figure(text, level=level / 100)
    if match := MISS.fullmatch(text):
        deadline = parse_duration(match.group(1), require_unit=True)
        if not 0 < deadline <= 60:
            raise ValueError(f"{text!r}: a deadline above 0 and at most 60 s")
        return Figure(text, deadline_s=deadline)
    if text in ("mean", *OBSERVED):
        return Figure(text)
    raise ValueError(f"{text!r} is not a budget's figure (p99.99, max, mean, miss(100us), "
                     "timerlat_irq_max, timerlat_thread_max)")


@dataclass(frozen=True)
class Budget:
    figure: Figure
    op: Literal["<=", "<"]
    limit: float  # seconds, or a probability for miss(D)
    runs: tuple[tuple[str, str], ...] = ()  # (selector, value): the runs it applies to
    text: str = ""

    def holds(self, value: float) -> bool:
        limit = self.limit
        if not self.figure.is_probability:  # in whole picoseconds: 23526 ns is 23.526us exactly
            value, limit = round(value * 1e12), round(limit * 1e12)
        return value <= limit if self.op == "<=" else value < limit

    def applies_to(self, run: dict[str, Any]) -> bool:
        return all(str(run.get(key)) == value for key, value in self.runs)


def _limit(text: str, figure: Figure) -> float:
    if figure.is_probability:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r}: a probability, e.g. 1e-6") from None
        if not 0 < value < 1:
            raise ValueError(f"{text!r}: a probability between 0 and 1")
        return value
    value = parse_duration(text, require_unit=True)
    if not 0 < value <= 60 or not math.isfinite(value):
        raise ValueError(f"{text!r}: a latency above 0 and at most 60 s")
    return value


def parse_runs(text: str) -> tuple[tuple[str, str], ...]:
    """`load=hackbench interface=pcie` → the selectors, each once."""
    out: dict[str, str] = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq or not value or key not in SELECTORS:
            raise ValueError(f"{word!r}: the runs a budget applies to are key=value words, the "
                             f"keys among {', '.join(SELECTORS)}")
        if key in out:
            raise ValueError(f"{key} given twice")
        out[key] = value
    return tuple(sorted(out.items()))


def parse_budget(text: str, runs: tuple[tuple[str, str], ...] = ()) -> Budget:
    """One budget line; ValueError says what is wrong with it."""
    if not isinstance(text, str) or len(text) > MAX_LINE or "\n" in text:
        raise ValueError("a budget is one line of text, e.g. 'p99.99 <= 50us'")
    match = LINE.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not '<figure> <= <limit>' (e.g. 'p99.99 <= 50us', "
                         "'miss(100us) < 1e-6')")
    figure = parse_figure(match.group("figure"))
    limit = _limit(match.group("limit"), figure)
    written = parse_runs(match.group("runs") or "")
    if written and runs:
        raise ValueError("say the runs either after 'for' or as keys, not both")
    op: Literal["<=", "<"] = "<=" if match.group("op") == "<=" else "<"
    return Budget(figure, op, limit, written or runs, text.strip())


def _from_yaml(value: object) -> object:
    if isinstance(value, str):
        return {"budget": value}
    return value


class BudgetSpec(Strict):
    """One budget of a campaign file: the line, and the runs it applies to (all by default)."""

    budget: Annotated[str, Field(max_length=MAX_LINE, description="e.g. 'p99.99 <= 50us', "
                                 "'max <= 120us', 'miss(100us) < 1e-6' (docs/ci.md)")]
    target: str | None = Field(None, max_length=64, description="only this target's runs")
    load: str | None = Field(None, max_length=64, description="only this load's runs")
    interface: str | None = Field(None, max_length=64, description="only this interface's runs")
    variant: str | None = Field(None, max_length=64, description="only this variant's runs")
    case: str | None = Field(None, max_length=64, description="only this case's runs (gpio)")

    @model_validator(mode="after")
    def _parses(self) -> BudgetSpec:
        self.parsed()
        return self

    def parsed(self) -> Budget:
        runs = tuple(sorted((k, str(getattr(self, k))) for k in SELECTORS
                            if getattr(self, k) is not None))
        return parse_budget(self.budget, runs)


BudgetEntry = Annotated[BudgetSpec, BeforeValidator(_from_yaml)]
