"""The gpio kind's part of report.json: `report["gpio"]`. Its times are in µs (`_us`), except the
scope's `resolution_ns`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from station.report.model import Closed, Finding, Float, Interval, RunIdentity


class Delays(Closed):
    """The answered delays, µs."""

    min: Float = Field(description="the shortest")
    p50: Float = Field(description="the median")
    mean: Float = Field(description="the mean")
    mean_ci: Interval = Field(description="the mean's 95 % interval [lo, hi], dependence-aware "
                              "over the delays in stimulus order (docs/statistics.md); null: "
                              "`mean_ci_withheld` says why")
    mean_ci_method: str | None = Field(None, description="how its standard error was taken (`batch "
                                       "means (k batches)`, a load cycle's lag window)")
    mean_ci_withheld: str | None = Field(None, description="why the mean has no interval")
    std: Float = Field(description="standard deviation")
    p99: Float = Field(description="99th percentile")
    p999: Float = Field(description="99.9th percentile")
    max: Float = Field(description="the longest")
    spread: Float = Field(description="max − min")


class DelayHistogram(Closed):
    """The run's own histogram of delays."""

    edges_us: list[float] = Field(description="n + 1 ascending bin edges, µs")
    counts: list[int] = Field(description="n counts")


class Outliers(Closed):
    """OUTLIERS: the delays above the bulk and what they collide with."""

    threshold_us: Float = Field(description="delays above it are outliers, µs")
    count: int = Field(description="how many")
    fraction: Float = Field(description="their share of the answered stimuli")
    excess_max_us: Float = Field(description="the largest outlier's delay beyond the median, µs")
    period_us: Float = Field(None,
                             description="the spacing most outliers keep, µs; null when none fits")
    period_share: Float = Field(None, description="the share of spacings that fit the period")
    window_us: Float = Field(None, description="the collision window, µs")
    expected_fraction: Float = Field(None, description="`window_us / period_us`")
    explanation: str = Field(description="one sentence")


class GpioRun(RunIdentity):
    """GPIO_RUN: one run. One whose delays could not be read has no counts and null delays."""

    case: str | None = Field(None, description="the case of `gpio.cases`")
    responder: str | None = Field(None,
                                  description="what answered: `kernel`, `chardev`, `sysfs`, "
                                              "`external`, …")
    mode: Literal["echo", "toggle"] | None = Field(None,
                                                   description="the response follows the input, or "
                                                               "flips")
    threaded: bool | None = Field(
        None, description="the kernel responder answers from a threaded handler"
    )
    priority: int | None = Field(None, description="a user-space responder's SCHED_FIFO priority")
    governor: str | None = Field(None, description="the cpufreq governor set for the run")
    idle: bool | None = Field(None, description="the run's load set started nothing")
    stimuli: int | None = Field(None,
                                description="stimulus edges the scope saw, censored ones excluded")
    answered: int | None = Field(None, description="stimuli with a response within the window")
    missed: int | None = Field(None, description="stimuli without")
    censored: int | None = Field(None, description="stimuli whose window the record cut")
    ambiguous: int | None = Field(None,
                                  description="stimuli with two response edges or more in their "
                                              "window")
    unanswering: int | None = Field(None, description="response edges that answer no stimulus")
    miss_fraction: Float = Field(None, description="`missed / stimuli`; null without stimuli")
    resolution_ns: Float = Field(None, description="the scope's sample interval, ns")
    delay_us: Delays | None = Field(None,
                                    description="the answered delays; null when nothing answered")
    histogram: DelayHistogram | None = Field(None, description="their histogram")
    outliers: Outliers | None = Field(None, description="the delays above the bulk")


class GpioComparison(Closed):
    """GPIO_COMPARISON: two conditions (case under load, per target) that differ in the case or in
    the load, with the runs as units (issue 46: two runs never meet the same machine state)."""

    a: str = Field(description="the first condition: `case under load` (`on target` with several "
                               "targets)")
    b: str = Field(description="the second")
    differs: str | None = Field(None, description="what they differ in: `case` or `load` (null in "
                                "reports written before issue 46, whose a and b were run ids)")
    runs_a: list[str] = Field(default_factory=list,
                              description="the first condition's run ids (its repetitions)")
    runs_b: list[str] = Field(default_factory=list, description="the second's")
    mean_a_us: Float = Field(description="the mean of its runs' mean delays, µs")
    mean_b_us: Float = Field(description="the second's, µs")
    ratio: Float = Field(None, description="`mean_a_us / mean_b_us`")
    p_value: Float = Field(None, description="Welch's test on the two conditions' run means; null: "
                           "not tested (`note` says why: one run on a side)")
    p_holm: Float = Field(None, description="`p_value` Holm-adjusted over the pairs tested")
    significant: bool | None = Field(None, description="`p_holm` below 0.05; null: not tested")
    runs_needed: int | None = Field(None, description="(not tested) runs of each that would tell a "
                                    "difference of this size, from the runs' own standard errors "
                                    "(a floor under the run-to-run spread)")
    events_p_value: Float = Field(None, description="Mann–Whitney test of the pooled delays, every "
                                  "delay taken as independent: whether these runs differ, not "
                                  "these conditions")
    note: str | None = Field(None, description="why there is no test")


class GpioSection(Closed):
    """`gpio`: a GPIO response campaign: each run's stimulus-to-response delays."""

    runs: list[GpioRun] = Field(description="one per run, in campaign order")
    findings: list[Finding] = Field(default_factory=list,
                                    description="the answer, one sentence each (`kind`: "
                                    "`ranking`, `ratio`, `load`, `outliers`; `load`)")
    comparisons: list[GpioComparison] = Field(default_factory=list,
                                              description="pairs of conditions compared, "
                                              "the runs as units")
