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

from station.config.types import MAX_DURATION_RANGE, Float, Int, LocatedError, Seconds, Strict

WIDTH_RANGE = (1e-9, 1.0, "1 ns", "1 s")
QUESTIONS = ("compare", "interval_width", "worst", "deadline", "exceedance")
TAIL_RANGE = (1e-6, 0.5)  # a run's own percentile up to p99.9999 (LEVEL's finest)
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


def _probability(value: object) -> object:
    """1e-5, "1e-5" or "0.001%" → a probability; refused outside TAIL_RANGE."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a probability (e.g. 1e-5 or 0.001%)") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a probability (e.g. 1e-5)")
    low, high = TAIL_RANGE
    if not low <= value <= high:
        raise ValueError(f"{value:g} is outside [{low:g}, {high:g}]: a run's own percentile is "
                         "read from p50 to p99.9999")
    return float(value)


Probability = Annotated[float, BeforeValidator(_probability)]


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
    deadline: Seconds(WIDTH_RANGE) | None = Field(
        None, description="with miss_below: stop when it is known, for every condition, whether "
        "the median run misses this deadline less often than miss_below (its own "
        "(1 − miss_below) percentile below the deadline) or more often")
    miss_below: Probability | None = Field(
        None, description="deadline's miss rate (per event, within a run), e.g. 1e-5")
    exceedance: Probability | None = Field(
        None, description="stop when every condition's latency exceeded with this probability "
        "(the median run's (1 − exceedance) percentile) has a finite upper bound, and, with "
        "interval_width, is known to within it")
    at: Level | None = Field(None, description="the percentile of each run's t_SW events the "
                             "question is about, e.g. p99.99 (each run gives one value); "
                             "deadline and exceedance set it themselves")
    confidence: Confidence = Field(0.95, ge=0.5, le=0.9999,
                                   description="for all conditions and all rounds together "
                                   "(0.95 or 95%)")
    margin: Seconds((0.0, 1.0, "0 s", "1 s")) = Field(
        0.0, description="compare: a difference known to be within ±margin also settles it "
        "(0: only an order settles it)")
    t_opt: Int = Field(30, ge=2, le=100_000, description="the round count at which the "
                       "confidence sequence is tightest (it holds at every count)")
    time_budget: Seconds(MAX_DURATION_RANGE) | None = Field(
        None, description="the bench time a session may spend on each target's rounds (e.g. 2h): "
        "no round is started that the rounds so far say would end past it (the first always "
        "is); the question is then left open, as at the cap (`repetitions`). Not part of the "
        "question: a resumed campaign may be given another")

    @model_validator(mode="after")
    def _one_question(self) -> StopRule:
        asked = [name for name in QUESTIONS if getattr(self, name) is not None]
        if asked == ["interval_width", "exceedance"]:
            asked = ["exceedance"]  # the width qualifies the exceedance's bound
        if len(asked) != 1:
            raise ValueError(f"give one question: {', '.join(QUESTIONS)}"
                             + (f" (not {' and '.join(asked)})" if asked else ""))
        if self.margin and self.compare is None:
            raise LocatedError(("margin",), "is compare's (a difference within it settles a "
                               "comparison)")
        if (self.deadline is None) != (self.miss_below is None):
            raise LocatedError(("miss_below" if self.miss_below is None else "deadline",),
                               "is needed: a deadline rule names the deadline and the miss rate "
                               "(e.g. deadline: 50us, miss_below: 1e-5)")
        derived = self.deadline is not None or self.exceedance is not None
        if derived and self.at is not None:
            raise LocatedError(("at",), "is set by the rule itself (1 − miss_below, or "
                               "1 − exceedance): leave it out")
        if not derived and self.at is None:
            raise LocatedError(("at",), "is needed: the percentile the question is about "
                               "(e.g. at: p99.99)")
        return self

    def question(self) -> dict[str, Any]:
        """The rule as its rounds are judged under (campaign.json's `stopping.rule`): all of it but
        the time budget, which says how long to ask, not what."""
        return self.model_dump(mode="json", exclude={"time_budget"})

    @property
    def level(self) -> float:
        """The percentile of each run's events its unit is (0.9999 for p99.99)."""
        if self.miss_below is not None:
            return 1.0 - self.miss_below
        if self.exceedance is not None:
            return 1.0 - self.exceedance
        assert self.at is not None
        return self.at

    @property
    def tail(self) -> float:
        """The share of each run's events above its unit's percentile (1e-5 for miss_below 1e-5),
        as given where the rule gives it (1 − level loses digits)."""
        given = self.miss_below if self.miss_below is not None else self.exceedance
        return given if given is not None else 1.0 - self.level


def check_until(campaign: Any, kind: Any) -> None:  # a Campaign, its kind_registry.Kind
    """What a stop rule asks of its campaign: a kind whose runs carry units, two of
    what a comparison compares (the module kind's), and room in `repetitions` for an answer."""
    m, rule = campaign.matrix, campaign.matrix.until
    if not kind.units:
        raise LocatedError(("matrix", "until"), f"{kind.name} runs carry no unit a stop rule can "
                           "judge (the module and cyclictest kinds' do)")
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
