"""The cyclictest kind's part of report.json: `report["cyclictest"]`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from station.report.model import Closed, Finding, Float, Interval, RunIdentity, Stats

Number = int | float | None


class CtStats(Stats):
    """CT_STATS: STATS of a 1 µs histogram; a percentile beyond its range is null."""

    resolution_ns: Float = Field(None, description="the bucket width (1000)")
    overflows: int | None = Field(None, description="samples beyond the histogram's range")
    range_ns: Float = Field(None, description="the histogram's range")
    percentile_flags: dict[str, str | None] | None = Field(None,
                                                           description="`> range` where a "
                                                                       "percentile is "
                                                            "beyond the histogram")
    percentile_ci95_ns: dict[str, Interval] = Field(default_factory=dict,
                                                    description="`pNN` → [lo, hi] ns; empty "
                                                    "for cyclictest's histograms "
                                                    "(`percentile_ci_withheld`)")
    percentile_ci_withheld: str | None = Field(None,
                                               description="why the percentiles (or some) have no "
                                               "interval: a histogram keeps no time order, so the "
                                               "events' dependence is unseen (issue 46), unless "
                                               "the run was sliced (cyclictest.slices) and has "
                                               "enough slices")
    percentile_ci_method: dict[str, str] | None = Field(
        None,
        description="sliced runs: `pNN` → how its "
        "interval "
        "took the cycles' dependence from the "
        "slices (batch means, "
        "a load cycle's window, the extremal index)",
    )


class Thread(Closed):
    """THREAD: cyclictest's summary of one measuring thread."""

    thread: int = Field(description="thread index")
    cpu: int | None = Field(None, description="its CPU")
    cycles: int | None = Field(None, description="cycles measured")
    min_us: Number = Field(None, description="cyclictest's own minimum, µs")
    avg_us: Number = Field(None, description="cyclictest's own average, µs")
    max_us: Number = Field(None, description="cyclictest's own maximum, µs")
    overflows: int | None = Field(None, description="cycles beyond the histogram's range")
    stats: CtStats | None = Field(None, description="CT_STATS of the thread's histogram")


class TimerlatFigures(Closed):
    """One CPU's IRQ or thread latency, as rtla timerlat printed it (µs)."""

    count: int = Field(description="samples")
    over: int | None = Field(None, description="samples beyond the histogram's range")
    min: Number = Field(None, description="the smallest, µs (null: no sample)")
    avg: Number = Field(None, description="the mean, µs")
    max: Number = Field(None, description="the largest, µs")


class TimerlatCpu(Closed):
    """One CPU of a timerlat run."""

    cpu: int = Field(description="the CPU")
    irq: TimerlatFigures | None = Field(None, description="the timer IRQ's latency")
    thread: TimerlatFigures | None = Field(None, description="the timerlat thread's latency")


class TimerlatRun(Closed):
    """TIMERLAT_RUN: the companion `rtla timerlat hist` run after cyclictest
    (cyclictest.companion)."""

    arguments: list[str] | None = Field(None, description="rtla's arguments")
    note: str | None = Field(None, description="why it did not run, or how it failed")
    cpus: list[TimerlatCpu] = Field(default_factory=list, description="per CPU")
    irq_max_us: Number = Field(None, description="the largest IRQ latency of any CPU, µs")
    thread_max_us: Number = Field(None, description="the largest thread latency of any CPU, µs")
    stopped: bool = Field(False, description="a threshold (cyclictest.timerlat_stop) stopped it")
    analysis: str | None = Field(None, description="what rtla printed after its summary: at a "
                                 "stop, its auto-analysis of the sample (rtla 6.3+) and where it "
                                 "saved the trace")


class CtRun(RunIdentity):
    """CT_RUN: one cyclictest run."""

    target: str = Field(description="the table's row")
    cyclictest_version: str | None = Field(None, description="rt-tests version on the target")
    arguments: list[str] | None = Field(None, description="cyclictest's command-line arguments")
    duration_s: Float = Field(None, description="wall time of the measurement, s")
    threads: list[Thread] = Field(default_factory=list, description="per-thread summary")
    slices: int | None = Field(None, description="the histograms cyclictest printed one after "
                               "another (cyclictest.slices); null: one invocation")
    combined: CtStats | None = Field(None, description="all threads' histograms pooled")
    timerlat: TimerlatRun | None = Field(None,
                                         description="the companion timerlat run, with "
                                                     "cyclictest.companion")
    break_: dict[str, Any] | None = Field(None, alias="break",
                                          description="`thread`, `value_us` when cyclictest "
                                          "stopped itself (`--breaktrace`)")


class Table(Closed):
    """The maximum-latency table: target × case."""

    targets: list[str] = Field(description="row order")
    cases: list[str] = Field(description="column order: the campaign's loads")
    max_latency_us: dict[str, dict[str,
                                   Number]] = Field(description="target → case → the largest "
                                                                "latency of the "
                                                          "cell's complete runs (µs), null when "
                                                          "none measured it")
    problems: dict[str, dict[str, str]] = Field(default_factory=dict,
                                                description="target → case → why its runs "
                                                "did not complete")


class TimerlatCell(Closed):
    """rtla timerlat's maxima in one target × case (µs; null: not measured)."""

    irq_max_us: Number = Field(None, description="the timer IRQ's")
    thread_max_us: Number = Field(None, description="the timerlat thread's")


class TimerlatTable(Closed):
    """rtla timerlat's maxima beside the maximum-latency table (cyclictest.companion: timerlat)."""

    targets: list[str] = Field(description="row order")
    cases: list[str] = Field(description="column order")
    max_us: dict[str, dict[str, TimerlatCell]] = Field(description="target → case → its maxima")
    notes: dict[str, dict[str, str]] = Field(default_factory=dict,
                                             description="target → case → why timerlat did "
                                             "not measure it")


class Target(Closed):
    """TARGET: what a row measured."""

    kind: str | None = Field(None, description="how the target is reached (`vm`, `ssh`, …)")
    kernel_release: str | None = Field(None, description="`uname -r`")
    preempt_rt: bool | None = Field(None, description="a PREEMPT_RT kernel")
    emulated: bool | None = Field(None, description="the CPU is emulated (QEMU/TCG)")
    arch: str | None = Field(None, description="the architecture, as `uname -m` says (x86_64, "
                             "aarch64)")
    virtual_machine: bool | None = Field(None,
                                         description="a guest on a hypervisor (null: cannot tell)")
    virtual_evidence: str | None = Field(None, description="what said so")
    cpus: int | None = Field(None, description="CPUs online")
    uname: str | None = Field(None, description="`uname -a`")
    unavailable: str | None = Field(
        None, description="why the target was unavailable in the last session"
    )


class DeadlineCell(Closed):
    """How often one target × case reached the deadline (complete runs, threads pooled)."""

    target: str = Field(description="the row")
    load: str = Field(description="the column")
    deadline_us: Float = Field(description="the deadline, µs")
    cycles: int = Field(description="cycles measured")
    above: int = Field(description="cycles in the deadline's bucket or above (overflows counted)")
    overflows: int = Field(description="cycles beyond the histogram")
    p_exceed: Float = Field(description="`above / cycles`")
    ci_low: Float = Field(description="95 % Clopper–Pearson lower bound")
    ci_high: Float = Field(description="95 % Clopper–Pearson upper bound")
    effective_n: Float = Field(None, description="the independent cycles the interval takes "
                               "(`cycles` unless every run was sliced)")
    method: str | None = Field(None, description="how the cycles' dependence was taken: from the "
                               "runs' slices, or not at all (cycles taken as independent)")


class CyclictestSection(Closed):
    """`cyclictest`: a cyclictest campaign's maximum-latency table, targets and runs."""

    table: Table = Field(description="the maximum-latency table")
    timerlat_table: TimerlatTable | None = Field(None, description="rtla timerlat's maxima, with "
                                                 "cyclictest.companion: timerlat")
    targets: dict[str, Target] = Field(default_factory=dict,
                                       description="name → what each row measured")
    runs: list[CtRun] = Field(description="one entry per cyclictest run")
    deadline_us: Number = Field(None, description="a user deadline, µs: cells above it are flagged")
    deadline_view: list[DeadlineCell] = Field(default_factory=list,
                                              description="with a deadline, per target × "
                                              "case")
    findings: list[Finding] = Field(default_factory=list,
                                    description="`cyclictest_max` per target and, with a deadline, "
                                    "`cyclictest_deadline`; also in the report's top-level "
                                    "`findings`")
