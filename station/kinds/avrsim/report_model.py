"""The avrsim kind's part of report.json: `report["avrsim"]`. Times in µs (`_us`) or CPU cycles
(`_cycles`) as named."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from station.report.model import Closed, Finding, Float, Interval, RunIdentity


class DelayCycles(Closed):
    """The answered delays, CPU cycles."""

    min: int = Field(description="the shortest")
    p50: float = Field(description="the median")
    max: int = Field(description="the longest")


class DelayUs(Closed):
    """The answered delays, µs."""

    min: float = Field(description="the shortest")
    p50: float = Field(description="the median")
    mean: float = Field(description="the mean")
    max: float = Field(description="the longest")
    spread: float = Field(description="max − min")


class CycleHistogram(Closed):
    """The delays counted per CPU cycle (only cycles that occurred)."""

    cycles: list[int] = Field(description="delays, cycles, ascending")
    counts: list[int] = Field(description="edges answered in that many cycles")


class Timer0Handler(Closed):
    """Timer0's overflow handler as the harness logged it."""

    runs: int = Field(description="how often it ran (0: masked)")
    rate_hz: Float = Field(None,
                           description="its rate, from its entries; null with fewer than two runs")
    min_cycles: int | None = Field(None, description="its shortest run, cycles")
    max_cycles: int | None = Field(None, description="its longest run")
    mean_cycles: Float = Field(None, description="its mean run")


class AvrOutliers(Closed):
    """The delays above the firmware's own spread, and why."""

    threshold_cycles: int = Field(description="delays above it are outliers, cycles")
    baseline: str = Field(description="where the threshold comes from")
    count: int = Field(description="how many")
    fraction: Float = Field(description="their share of the answered edges")
    fraction_ci: Interval = Field(description="its 99 % Clopper–Pearson interval [lo, hi]")
    expected_fraction: float = Field(description="timer0's rate × its handler's mean length / the "
                                     "clock (0: it never ran)")
    as_predicted: bool = Field(description="`expected_fraction` lies in `fraction_ci`")
    explained: int = Field(description="outliers that arrived while a logged handler ran")
    unexplained: int = Field(description="outliers that did not")
    worst_us: Float = Field(None, description="the largest outlier's delay, µs")


class AvrsimRun(RunIdentity):
    """AVRSIM_RUN: one run. One whose harness output could not be read has its identity only."""

    case: str | None = Field(None, description="the case of `avrsim.cases`")
    firmware: Literal["responder", "sketch"] | None = Field(None,
                                                            description="the build: the bare "
                                                                        "responder or "
                                                            "the seed's sketch on the Arduino core")
    timer0: Literal["enabled", "masked"] | None = Field(None,
                                                        description="timer0's overflow interrupt")
    seed: int | None = Field(None, description="the edges' random seed")
    sha256: str | None = Field(None, description="the ELF's SHA-256")
    clock_hz: int | None = Field(None, description="the simulated CPU clock")
    stimuli: int | None = Field(None, description="edges applied")
    answered: int | None = Field(None, description="edges the output answered before the next edge")
    missed: int | None = Field(None, description="edges it did not")
    delay_cycles: DelayCycles | None = Field(None,
                                             description="the answered delays, cycles; null when "
                                                         "none")
    delay_us: DelayUs | None = Field(None, description="the same, µs")
    hardware_us: Interval = Field(None, description="[min, max] with what a real ATmega adds and "
                                  "simavr does not count: its 4-cycle interrupt entry and 1–2 "
                                  "synchroniser cycles")
    histogram: CycleHistogram | None = Field(None, description="the delays counted per cycle")
    timer0_handler: Timer0Handler | None = Field(None,
                                                 description="timer0's overflow handler, as logged")
    outliers: AvrOutliers | None = Field(None,
                                         description="the delays above the firmware's own spread")


class SeedFigure(Closed):
    """The seed's published figure the runs are read against."""

    masked_us: list[float] = Field(
        description="[min, max] of every response with timer0 masked, µs"
    )
    spread_us: float = Field(description="max − min, µs")
    source: str = Field(description="where it comes from")


class AvrsimSection(Closed):
    """`avrsim`: a simulated microcontroller campaign: each run's edge-to-response delays."""

    runs: list[AvrsimRun] = Field(description="one per run, in the order of their directories")
    seed: SeedFigure = Field(description="seed 002's published figure, read against the sketch")
    findings: list[Finding] = Field(default_factory=list,
                                    description="the answer, one sentence each (`kind`: `seed`, "
                                    "`outliers`, `masking`; `case` or `firmware`, `values`)")
