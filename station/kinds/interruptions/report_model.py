"""The interruptions kind's part of report.json: `report["interruptions"]`. Its times are in the
unit each field's name says (`_us`, `_ms`, `_s`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from station.report.model import Closed, Finding, Float, RunIdentity


class Family(Closed):
    """Gaps of about one length (three or more, neighbours within 10 %)."""

    count: int = Field(description="gaps in the family")
    median_us: Float = Field(description="their median duration, µs")
    min_us: Float = Field(description="the shortest, µs")
    max_us: Float = Field(description="the longest, µs")
    period_ms: Float = Field(None, description="median time between them, ms; null below three")
    periodic: bool = Field(description="they keep to that period")


class Unexplained(Closed):
    """The gaps nothing explains."""

    count: int = Field(description="how many")
    median_us: Float = Field(None, description="their median duration, µs (null without any)")
    max_us: Float = Field(None, description="the longest, µs (null without any)")
    period_ms: Float = Field(None, description="median time between them, ms; null below three")
    periodic: bool = Field(description="two thirds of the intervals within 10 % of a whole number "
                                       "of periods")
    clusters: list[Family] = Field(default_factory=list,
                                   description="their families of about one length")


class Group(Closed):
    """GROUP: gaps of one cause and source."""

    cause: Literal["interrupt", "throttled", "preempted", "smi",
                   "unexplained"] = Field(description="the cause")
    source: str = Field(description="the interrupt line, the task(s) that ran, or `\"\"` for "
                                    "unexplained gaps")
    count: int = Field(description="gaps in the group")
    median_us: Float = Field(description="their median duration, µs")
    p99_us: Float = Field(description="their p99, µs")
    max_us: Float = Field(description="the longest, µs")
    total_ms: Float = Field(description="their sum, ms")
    period_ms: Float = Field(None,
                             description="median time between them, ms; null below three gaps")
    periodic: bool = Field(description="they keep to that period (a timer)")
    families: list[Family] = Field(default_factory=list,
                                   description="the group's gaps of about one length")


class LineCostRow(Closed):
    """An interrupt line's usual cost: what its counted interrupts may explain of an untraced
    gap."""

    line: str = Field(description="the line (`LOC`, `24 eth0`)")
    cost_us: Float = Field(description="its usual cost, µs: the median handler run with the "
                           "softirqs that followed it (a trace), or the median quiet gap in which "
                           "it alone moved once")
    basis: Literal["trace", "calibration trace", "calibration counts"] = Field(
        description="the evidence: the run's own trace, the calibration phase's trace, or the "
        "calibration phase's gaps (never the gaps being judged)")
    samples: int = Field(description="handler runs or gaps the median is over")


class GapHistogram(Closed):
    """Gap durations per cause on shared log-spaced bins."""

    edges_us: list[float] = Field(description="bin edges, µs (empty without gaps)")
    counts: dict[str, list[int]] = Field(description="cause → gaps per bin (causes with gaps only)")


class IgRun(RunIdentity):
    """IG_RUN: one detector run. One whose output could not be read has only the fields up to
    `osnoise_note`."""

    spoilers: list[str] = Field(default_factory=list,
                                description="what on the measured CPU may disturb the "
                                "measurement, one sentence each")
    osnoise_note: str | None = Field(None,
                                     description="why rtla osnoise did not run, when asked for")
    cpu: int | None = Field(None, description="the CPU the loop held")
    clock: Literal["tsc", "cntvct", "monotonic"] | None = Field(
        None, description="what the loop read: x86's TSC, arm64's generic timer (its virtual "
        "count), or CLOCK_MONOTONIC")
    arch: str | None = Field(None, description="the loop's architecture as uname -m names it "
                             "(x86_64, aarch64; null: a detector output before it said)")
    threshold_us: Float = Field(None, description="a loop iteration longer than this is a gap, µs")
    priority: int | None = Field(None,
                                 description="SCHED_FIFO priority of the loop (0: SCHED_OTHER)")
    measured_s: Float = Field(None, description="time the loop ran, s")
    gaps: int | None = Field(None, description="gaps recorded")
    max_us: Float = Field(None, description="the longest gap, µs; null without gaps")
    lost_ms: Float = Field(None, description="all gaps together, ms")
    blind_ms: Float = Field(None, description="the detector's own bookkeeping windows, ms")
    blind_spans: int | None = Field(None,
                                    description="bookkeeping windows that outlasted the threshold")
    blind_span_max_us: Float = Field(None, description="the longest of them, µs")
    min_loop_ns: int | None = Field(None,
                                    description="the shortest loop iteration: the resolution, ns")
    iterations: int | None = Field(None, description="loop iterations")
    end_reason: str | None = Field(None, description="why the loop stopped (`duration`, `signal`)")
    smi_counter: bool | None = Field(None,
                                     description="the CPU's SMI count was read after every gap")
    smi_reason: str | None = Field(None, description="why the SMI count could not be read")
    trace: bool | None = Field(None, description="the kernel's interrupt tracepoints were recorded")
    trace_lost_events: int | None = Field(None,
                                          description="events the trace lost; null without a trace")
    by_cause: dict[str, int] | None = Field(None, description="gaps per cause")
    calibrated: bool | None = Field(None, description="a calibration phase ran before the loads "
                                    "(interruptions.calibration)")
    line_costs: list[LineCostRow] | None = Field(None,
                                                 description="each counted line's usual cost and "
                                                             "its "
                                                 "evidence; a line not listed explains no untraced "
                                                 "gap")
    uncosted_gaps: int | None = Field(None, description="untraced gaps left unexplained though "
                                      "interrupts were counted in them, on lines without a usual "
                                      "cost")
    throttled_blind_spans: int | None = Field(None,
                                              description="the kernel's throttling stops that fell "
                                              "in blind spans")
    throttling: str | None = Field(None, description="what stops a never-sleeping real-time loop "
                                   "on the target (RT throttling's budget or the fair deadline "
                                   "server's), in words; null when nothing does")
    throttling_advice: str | None = Field(None,
                                          description="how to measure without that throttling")
    virtual_machine: bool | None = Field(None, description="the target is a guest on a hypervisor")
    unexplained: Unexplained | None = Field(None, description="the gaps nothing explains")
    groups: list[Group] | None = Field(None, description="the gaps by cause and source")
    conclusion: str | None = Field(None, description="the run's finding in one sentence")
    suspect_inter_arrival_ms: list[float] | None = Field(None,
                                                         description="times between consecutive "
                                                         "unexplained gaps, ms")
    histogram: GapHistogram | None = Field(None, description="gap durations per cause")
    osnoise: dict[str, Any] | None = Field(None,
                                           description="rtla osnoise top's summary row for the "
                                           "CPU: `cpu`, `duration_s`, noise figures (µs) and "
                                           "counts; null without rtla")


class InterruptionsSection(Closed):
    """`interruptions`: an interruption-detector campaign, each run's gaps attributed and summed
    up."""

    runs: list[IgRun] = Field(description="one entry per run")
    findings: list[Finding] = Field(default_factory=list,
                                    description="one per readable run (`kind` `interruptions`, "
                                    "`run`); also the report's top-level `findings`")
