"""A campaign's question, so it can stop once answered (`matrix.until`, issue 50): its rounds —
every condition measured once each, in the seeded interleaved order (`matrix.order`) — go on
until the answer is known at the stated confidence, at most `matrix.repetitions` rounds.

The unit is a run: its own figure (t_SW's quantile `at` over its events) is one value, the
rounds' values a sequence, judged after every round by an anytime-valid confidence sequence
(station/analysis/anytime/) so that looking after each round does not break the confidence.
station/campaign/stopping.py judges; docs/stopping.md says what each rule guarantees.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from station.config.types import Float, Int, LocatedError, Seconds, Strict

WIDTH_RANGE = (1e-9, 1.0, "1 ns", "1 s")
QUESTIONS = ("compare", "interval_width", "worst")
LEVEL = re.compile(r"p(\d{1,2}(?:\.\d{1,4})?)")  # p50, p99, p99.99 …


def _level(value: object) -> object:
    """"p99.99" → 0.9999 (a percentile of each run's events, between p50 and p99.9999)."""
    if isinstance(value, str):
        match = LEVEL.fullmatch(value.strip())
        if not match or not 50 <= float(match.group(1)) < 100:
            raise ValueError(f"{value!r} is not a percentile from p50 to p99.9999 (e.g. p99.99)")
        return float(match.group(1)) / 100
    raise ValueError(f"write the percentile as text, e.g. p99.99, not {value!r}")


Level = Annotated[float, BeforeValidator(_level)]


def _fraction(value: object) -> object:
    """"95%" → 0.95; a number as given."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip()[:-1]) / 100
        except ValueError:
            raise ValueError(f"{value!r} is not a percentage (e.g. 95%)") from None
    return value


Confidence = Annotated[Float, BeforeValidator(_fraction)]


class StopRule(Strict):
    """What the campaign wants to know (one of compare, interval_width, worst)."""

    compare: Literal["interfaces", "variants"] | None = Field(
        None, description="settle the order of the matrix's two interfaces (or variants) at `at`, "
        "each load and other cell on its own: stop when the median of their paired difference "
        "(same round) is known to be above or below 0, or, with a margin, within ±margin")
    worst: Literal["loads"] | None = Field(
        None, description="find the load set that makes the median run's `at` percentile "
        "largest, each interface and variant on its own: every surviving load measured each "
        "round, a load dropped once it is known not to be the worst, until one is left")
    interval_width: Seconds(WIDTH_RANGE) | None = Field(
        None, description="stop when every condition's median-run `at` percentile is known to "
        "within this width (the whole interval)")
    at: Level = Field(..., description="the percentile of each run's t_SW events the question is "
                      "about, e.g. p99.99 (each run gives one value)")
    confidence: Confidence = Field(0.95, ge=0.5, le=0.9999,
                                   description="for all conditions and all rounds together "
                                   "(0.95 or 95%)")
    margin: Seconds((0.0, 1.0, "0 s", "1 s")) = Field(
        0.0, description="compare: a difference known to be within ±margin also settles it "
        "(0: only an order settles it)")
    t_opt: Int = Field(30, ge=2, le=100_000, description="the round count at which the "
                       "confidence sequence is tightest (it holds at every count)")

    @model_validator(mode="after")
    def _one_question(self) -> StopRule:
        asked = [name for name in QUESTIONS if getattr(self, name) is not None]
        if len(asked) != 1:
            raise ValueError(f"give one question: {', '.join(QUESTIONS)}")
        if self.margin and self.compare is None:
            raise LocatedError(("margin",), "is compare's (a difference within it settles a "
                               "comparison)")
        return self


def check_until(campaign: Any, kind: Any) -> None:  # a Campaign, its kind_registry.Kind
    """What a stop rule asks of its campaign: a kind whose runs carry units, one target, two of
    what a comparison compares (the module kind's), and room in `repetitions` for an answer."""
    m, rule = campaign.matrix, campaign.matrix.until
    if not kind.units:
        raise LocatedError(("matrix", "until"), f"{kind.name} runs carry no unit a stop rule can "
                           "judge (the module and cyclictest kinds' do)")
    if len(campaign.bench.named_targets()) > 1:
        raise LocatedError(("matrix", "until"), "judges one target's rounds: a campaign over "
                           "several targets (bench.targets) cannot stop on it yet")
    if rule.compare is not None:
        values = getattr(m, rule.compare, None)
        if rule.compare not in kind.matrix_keys() or values is None:
            raise LocatedError(("matrix", "until", "compare"),
                               f"compares a module campaign's {rule.compare}; {kind.name} runs "
                               "have none (search the loads: worst: loads)")
        if len(values) != 2:
            raise LocatedError(("matrix", "until", "compare"),
                               f"compares two {rule.compare}; the matrix has {len(values)}: "
                               f"{values}")
    if rule.worst is not None and len(m.loads) < 2:
        raise LocatedError(("matrix", "until", "worst"),
                           f"searches two or more load sets; the matrix has {m.loads}")
