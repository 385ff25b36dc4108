"""The module kind's part of report.json: the top-level `runs` and `comparisons`
(station.report.model joins it to the envelope)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from station.report.model import Closed, Float, Interval, RunIdentity, Stats

Blob = dict[str, Any] | None


class Losses(Closed):
    """What the record stream lost."""

    sw_lost: int = Field(description="software records lost between target and station")
    sw_dropped_by_target: int = Field(description="records the target could not queue (FIFO full)")
    gaps: int = Field(description="sequence-number gaps in the stream")
    format: Literal["v1",
                    "legacy"] = Field(description="record stream format; `legacy` cannot reveal "
                                                  "gaps")
    restarts: list[dict[str, int]] = Field(default_factory=list,
                                           description="where the module's sequence numbers went "
                                           "back or repeated (`record` index, `seq_before`, "
                                           "`seq_after`): a module reloaded, a reader that re-read "
                                           "its ring, streams concatenated; sw.parquet numbers the "
                                           "parts on (`module_seq` keeps the module's)")
    paired_part: dict[str, int] | None = Field(None,
                                               description="with restarts: the one part the "
                                               "pairing used (`part`, its `records`, of `parts`): "
                                               "pairs never span a restart")


class Shift(Closed):
    """t_HW − t_SW of a run: ≈ t_rw with the inb variant, ≈ 0 without."""

    hw_minus_sw_mean_ns: Float = Field(description="mean of t_HW − t_SW: the pulses' mean less the "
                                       "records' mean over the same stretch of the run (`sw_side`)")
    sw_records: int | None = Field(None, description="the records the software side's mean is over")
    sw_side: str | None = Field(None, description="which records: those of the scope's capture "
                                "window (from the first acquisition's arming to the last one's "
                                "transfer, placed by the records' arrivals), or every record (an "
                                "import: no arrivals)")
    se_ns: Float = Field(None, description="its standard error: the scope side's cluster-robust "
                         "one over acquisitions (they span the window: a load's phases are in "
                         "their spread), the records' std/√n; null: `ci_withheld` says why")
    ci95_ns: Interval = Field(None, description="its 95 % interval [lo, hi]")
    hw_minus_sw_median_ns: Float = Field(None, description="median of t_HW − t_SW")
    hw_se_ns: Float = Field(None, description="the scope mean's standard error inside `se_ns`")
    ci_withheld: str | None = Field(None, description="why there is no standard error")


class Strays(Closed):
    """Stray IRQs: records the module flagged NOT_OURS (a foreign interrupt on its line), left out
    of `sw`, the tail fit and the pairing."""

    count: int | None = Field(description="how many; null: the format has no flags (legacy) and "
                                          "`note` says so")
    share: Float = Field(None, description="their share of the run's records")
    per_s: Float = Field(None, description="their rate, /s")
    first_s: Float = Field(None, description="when the first came, s from the run's first record")
    last_s: Float = Field(None, description="when the last came, s")
    times_s: list[float] = Field(default_factory=list, description="when the first 20 came, s")
    note: str | None = Field(None, description="why they cannot be counted")


class RunOutliers(Closed):
    """Robust outliers: samples above their run's own median + 8 · 1.4826 · MAD (not the seed's
    criterion, which is `comparisons.cross_interface_outliers`)."""

    method: str = Field(description="how the threshold was chosen")
    sw_threshold_ns: Float = Field(description="the software threshold")
    sw_count: int = Field(description="software samples above it")
    hw_threshold_ns: Float = Field(None,
                                   description="the scope widths' threshold; null without a scope")
    hw_count: int | None = Field(None,
                                 description="scope widths above it; null: no scope, or 10 pulses "
                                             "or fewer")
    sw_threshold_basis: str | None = Field(None,
                                           description="`mad`, or the std where more than half the "
                                           "samples share one value (the MAD is 0): the outliers "
                                           "then widen their own threshold and fewer are called")


class OutlierVerdict(Closed):
    """Which side delayed the outliers: among the outlier events pairing matched to a pulse, their
    paired HW−SW against the run's bulk (see `runs[].outlier_verdict` below)."""

    verdict: Literal["none", "cannot tell", "both", "software-side", "hardware-side"] = Field(
        description="the side with the majority (at least 2), `both`, `cannot tell` (fewer than 3 "
        "paired outlier events, or no pairing), or `none` (no sample and no pulse above threshold)")
    software_side: int = Field(description="`sw_only`")
    hardware_side: int = Field(description="`hw_only` + `both_sides`: what the scope sees")
    sw_only: int = Field(description="late in software only (a delay between timestamp and bus "
                                     "write)")
    hw_only: int = Field(description="late on the scope only (a stretched clearing access)")
    both_sides: int = Field(description="late on both (a late handler)")
    paired_outliers: int = Field(description="`software_side` + `hardware_side`")
    paired_events: int = Field(description="the pairs looked at")
    sw_outliers: int = Field(
        description="the run's software samples above threshold, paired or not"
    )
    hw_outliers: int | None = Field(description="its scope widths above threshold, paired or not; "
                                                "null: no scope")
    method: str = Field(description="how, in words")
    sentence: str = Field(description="the verdict in words, with the sub-counts")


class Pairing(Closed):
    """Event pairing (v1 streams with a scope): each scope acquisition aligned with the records."""

    acquisitions: int = Field(description="scope acquisitions")
    acquisitions_paired: int = Field(description="acquisitions paired with records")
    pulses: int = Field(description="pulses in them")
    pulses_paired: int = Field(description="pulses paired with an event")
    coverage: Float = Field(None, description="pulses paired / pulses")
    pairable: int = Field(description="acquisitions long enough to be paired at all")
    pulses_needed: int | None = Field(None, description="pulses an acquisition needs, all "
                                      "agreeing, with this t_SW spread")
    expected_false_pairs: Float = Field(None, description="the sum of each paired acquisition's "
                                        "bound on being wrong")
    false_pair_rate_bound: Float = Field(None, description="that bound per acquisition paired")
    estimates: bool = Field(description="false: no paired estimate is made from this run")
    unmatched: bool = Field(description="in at most 1 % of the pairable acquisitions does any "
                            "alignment fit (residuals within 150 ns, beyond chance): the scope "
                            "watches something else (`station run` exits with status 4); "
                            "acquisitions that fit several alignments alike (a record too coarse "
                            "to tell neighbouring events apart) are unpaired, not unmatched")
    note: str | None = Field(None, description="why, when either is so")
    hw_minus_sw_paired_mean_ns: Float = Field(
        None, description="mean paired HW−SW, on the target's clock"
    )
    hw_minus_sw_paired_median_ns: Float = Field(None, description="its median")
    hw_minus_sw_paired_std_ns: Float = Field(None, description="its standard deviation")
    scope_vs_target_ppm: Float = Field(
        None, description="the scope's timebase against the target's clock"
    )
    clock_ratio_unmeasured: dict[str, Any] | None = Field(None,
                                                          description="pairs whose acquisition's "
                                                                      "clock ratio "
                                                          "could not be fitted and was taken as 1: "
                                                          "`pairs` of `of`, "
                                                          "`max_error_ns` (|ppm| × the widest such "
                                                          "pulse; null: no "
                                                          "acquisition measured the ratio); null: "
                                                          "none")
    method: str = Field(description="how events are paired, in words")


class StageStats(Closed):
    """One stage's distribution over a run's decomposed events."""

    stage: Literal["delivery", "dispatch"]
    text: str = Field(description="what the stage spans, in words")
    median_ns: Float = Field(None, description="its median over the decomposed events")
    p99_ns: Float = Field(None, description="its 99th percentile")
    max_ns: Float = Field(None, description="its largest")
    mean_ns: Float = Field(None, description="its mean")


class Credited(Closed):
    """What ran in a stage, over the run."""

    label: str = Field(description="a handler (`IRQ 7 lpt_latency`), `softirq X`, `hrtimer "
                       "<function>`, a vector (`local_timer interrupt (LOC)`), `NMI …`, `IRQs off "
                       "(caller)`, a task, or `nothing traced (<task> running)`")
    total_ns: int = Field(description="its nanoseconds in this stage, summed over the decomposed "
                                      "events")
    events: int = Field(description="decomposed events it ran in")
    largest_in: int = Field(description="events where it held the largest part of the stage")


class Culprit(Closed):
    """What ran in one stage of one event."""

    stage: Literal["delivery", "dispatch"]
    label: str = Field(description="as in `credited`")
    ns: int = Field(description="its nanoseconds in that stage of that event")


class DecomposedEvent(Closed):
    """One of the run's largest events, split."""

    seq: int = Field(description="the record's sequence number")
    t_sw_ns: int = Field(description="its t_SW (the record's latency)")
    delivery_ns: int = Field(description="write → the kernel's entry for the module's IRQ line")
    dispatch_ns: int = Field(description="that entry → the handler's timestamp")
    culprits: list[Culprit] = Field(description="what held at least a tenth of a stage (the "
                                                "largest always)")
    explanation: str = Field(description="the stage that grew most over its median and what ran in "
                                         "it")


class StageOutlier(Closed):
    """Outlier events by the stage that grew most over its median and what ran most in it."""

    stage: Literal["delivery", "dispatch"]
    label: str = Field(description="as in `credited`")
    events: int = Field(description="outlier events")


class DecompositionOutliers(Closed):
    threshold_ns: float = Field(description="the run's robust outlier threshold on t_SW")
    count: int = Field(description="decomposed events above it")
    by_stage: list[StageOutlier] = Field(description="per (stage that grew, what ran most in it): "
                                                     "events")


class OverheadSide(Closed):
    """t_SW of the events that fell wholly inside one kind of block (unrecorded: nothing of their
    window in the trace)."""

    count: int = Field(description="events")
    median_ns: Float = Field(None, description="their median t_SW")
    p99_ns: Float = Field(None, description="their 99th percentile")


class TraceOverhead(Closed):
    """module.trace_overhead: recorded and unrecorded blocks alternated in the same run, same load
    (the tracepoints enabled in both: the cost of recording)."""

    block_s: Float = Field(None, description="each block's length")
    traced: OverheadSide
    untraced: OverheadSide
    median_added_ns: Float = Field(
        None, description="traced median − untraced median: what tracing added"
    )
    p99_added_ns: Float = Field(None, description="the same at the 99th percentile")


class StageBand(Closed):
    """The decomposed events between two t_SW percentiles, their stages' means (the figure's
    bars)."""

    from_pct: float
    to_pct: float
    events: int
    t_sw_mean_ns: float
    delivery_mean_ns: float
    dispatch_mean_ns: float


class ClockCheck(Closed):
    """The trace's clock against the module's: each event whose line has a kernel entry near its
    window must have it between its write and its timestamp."""

    checked: int = Field(description="events with an entry of the module's line within `radius_ns` "
                                     "of their window")
    in_window: int = Field(description="of those, events with the entry between their write and "
                                       "timestamp")
    agrees: bool = Field(description="at least 90 % of the checked are in their window; false: "
                         "nothing is decomposed (every event counts as a clock mismatch)")
    radius_ns: int = Field(description="half the line's median spacing of entries: an entry nearer "
                                       "is the event's")
    offset_within_ns: Interval | None = Field(None,
                                              description="how far the trace's clock may be off "
                                              "the module's with every in-window entry still in "
                                              "its window: [−smallest dispatch, +smallest "
                                              "delivery]")
    median_displacement_ns: Float = Field(None, description="where the entries outside their "
                                          "window lie (negative: before the write); null: none "
                                          "outside")


class Decomposition(Closed):
    """module.trace: every own event's t_SW split into stages from the trace of the measured CPU
    (docs/decomposition.md)."""

    decomposed: int = Field(description="events split into stages")
    events: int = Field(description="the run's own records")
    not_decomposed: dict[str, int] = Field(description="reason → events without stages")
    resolution_ns: int = Field(description="the stage boundary's resolution: 1 (the trace's raw "
                                           "ns) or 1000")
    resolution_note: str | None = Field(None, description="why it is 1000")
    clock: Literal["mono"] = Field(description="the trace clock (the module's CLOCK_MONOTONIC)")
    trace_lost_events: int = Field(description="events the trace buffer reported lost")
    trace_overrun: int = Field(description="events the ring buffer overwrote (per_cpu stats)")
    trace_first_ns: int | None = Field(None,
                                       description="the trace's oldest event (clock mono); null: "
                                                   "empty")
    trace_last_ns: int | None = Field(None, description="its last event")
    stages: list[StageStats] = Field(description="each stage's distribution")
    clock_check: ClockCheck | None = Field(None,
                                           description="does the trace's clock agree with the "
                                           "module's (each event's IRQ entry between its write and "
                                           "its timestamp)?")
    credited: dict[Literal["delivery", "dispatch"], list[Credited]] = Field(
        description="per stage, what ran in it over the run, largest total first (at most 8)")
    largest: list[DecomposedEvent] = Field(description="the run's largest t_SW events, split")
    bands: list[StageBand] = Field(default_factory=list,
                                   description="t_SW percentile bands (0–50, 50–90, "
                                   "90–99, 99–99.9, 99.9–100) and their stages' means")
    outliers: DecompositionOutliers | None = Field(None,
                                                   description="events above the run's robust "
                                                               "threshold")
    overhead: TraceOverhead | None = Field(None,
                                           description="what tracing cost (module.trace_overhead); "
                                           "null when not measured")


class DependentMean(Closed):
    """The run's mean t_SW with a dependence-aware interval (docs/statistics.md)."""

    estimate_ns: Float = Field(None, description="mean of t_SW")
    se_ns: Float = Field(None, description="its standard error (`method`); null when withheld")
    ci95_ns: Interval = Field(None, description="Student's t interval over the batches, or the "
                              "normal one over a cycle's lag window; null when withheld")
    method: str | None = Field(None, description="`batch means (k batches)`, or `a lag window of "
                               "one load cycle (M blocks)` where the run shows a cycle")
    batches: int = Field(0, description="batches the interval uses (long enough to be "
                         "uncorrelated); 0 with a cycle's window")
    events_per_batch: int | None = Field(None, description="events in each batch")
    window_blocks: int | None = Field(None,
                                      description="the cycle's lag window, in blocks of "
                                                  "`block_events`")
    independent: bool | None = Field(None,
                                     description="the finest batches were already uncorrelated")
    effective_n: Float = Field(None,
                               description="events' variance over the mean's: the sample's "
                                           "independent worth")
    withheld: str | None = Field(None,
                                 description="why there is no interval (a run too short for its "
                                             "dependence)")


class DependentPercentile(Closed):
    """A percentile of t_SW with an interval that keeps its coverage on dependent events."""

    estimate_ns: Float = Field(None, description="the percentile (numpy's, as `sw.percentiles_ns`)")
    ci95_ns: Interval = Field(None, description="[lo, hi]: order statistics at the ranks of "
                              "Binomial(effective_n, p) scaled to the run's events; null: no bound")
    effective_n: Float = Field(None, description="effective sample size at this level")
    method: str | None = Field(None, description="`batch means (k batches)`, a cycle's lag window, "
                               "or the extremal index in a tail")
    withheld: str | None = Field(None, description="why there is no interval")


class Dependence(Closed):
    """How a run's events depend on each other, and the intervals that account for it."""

    independent: bool = Field(description="no correlation between neighbouring blocks of events "
                                          "was found")
    cycle_s: Float = Field(None, description="a cycle in the latency (a load's phases), s: the "
                           "block medians' autocorrelation dips, then peaks at it (beyond ±3/√k); "
                           "null: none seen")
    block_events: int = Field(description="events per fine block (the finest batch)")
    mean: DependentMean
    percentiles: dict[str, DependentPercentile] = Field(default_factory=dict)
    sentence: str = Field(description="what was found, in words")


class ModuleRun(RunIdentity):
    """One run of the matrix interface × variant × load × repetition."""

    interface: str = Field(description="the IRQ echoer measured (`lpt`, `pcie`)")
    variant: str = Field(
        description="`inb` or `no-inb`: handler with or without the extra bus read"
    )
    load: str = Field(description="load profile name")
    repetition: int = Field(description="repetition index, from 0")
    target: str | None = Field(None,
                               description="the target's name (`null` or `\"\"` with a single "
                                           "target)")
    period_ns: int | None = Field(None,
                                  description="period of the RT task that triggers the IRQs, ns")
    duration_s: Float = Field(None, description="wall time of the measurement, s")
    sw: Stats | None = Field(None, description="statistics of the software latencies t_SW")
    hw: Stats | None = Field(None,
                             description="statistics of the scope pulse widths t_HW; null without "
                                         "a scope")
    board: Stats | None = Field(None,
                                description="statistics of the widths the board measured; null "
                                            "without")
    losses: Losses | None = Field(None, description="what the record stream lost")
    strays: Strays | None = Field(None, description="stray IRQs on the module's line")
    test_held: int | None = Field(None, description="records the module flagged HELD: its "
                                  "test_hold_us made the handler wait before its timestamp (a "
                                  "test's injection, not the target's latency)")
    off_cpu: int | None = Field(None, description="the module's own records it flagged OFF_CPU: "
                                "its IRQ was pinned to the campaign's CPU but the kernel took this "
                                "one on another (x86's IO-APIC moves an IRQ at its next interrupt, "
                                "so the first after loading can still arrive where it was); kept "
                                "in `sw`, they measured that CPU's path")
    truth: Blob = Field(None,
                        description="(twin) what the twin injected: `t_rw_mean_ns`, "
                                    "`strays_injected`, …")
    pairing: Pairing | None = Field(
        None, description="event pairing; null without a scope or a v1 stream"
    )
    shift: Shift | None = Field(None, description="t_HW − t_SW")
    interrupts: Blob = Field(None,
                             description="/proc/interrupts on the echoer's line: `row`, `before`, "
                                         "`after`")
    capture: Blob = Field(None, description="what the scope saw (docs/capture.md): `strategy`, "
                          "`acquisitions`, `pulses`, dead time, `capture_ratio`, `bus`, …")
    scope_measurement: Blob = Field(None, description="`capture: measurement` only: the scope's "
                                    "own width statistics")
    outliers: RunOutliers | None = Field(None,
                                         description="robust outliers; null without software "
                                                     "samples")
    dependence: Dependence | None = Field(None, description="dependence between the run's events "
                                          "and the intervals that hold on it (docs/statistics.md); "
                                          "null without samples")
    outlier_verdict: OutlierVerdict | None = Field(None,
                                                   description="which side delayed the run's "
                                                               "outliers; null "
                                                   "without software samples")
    decomposition: Decomposition | None = Field(None,
                                                description="module.trace: t_SW split into stages; "
                                                "absent for a run that was not traced")


class PairedExcluded(Closed):
    """Paired events left out of each run's mean: HW−SW beyond 6 robust sigmas of its median."""

    inb: int = Field(description="of the inb run")
    no_inb: int = Field(description="of the no-inb run")


class TRw(Closed):
    """An estimate of t_rw, the bus read time: the inb run's shift minus the no-inb run's, under one
    load (the seed found ≈ 2 µs on LPT)."""

    interface: str = Field(description="interface the estimate is for")
    load: str | None = Field(None, description="the load both runs were measured under")
    estimate_ns: Float = Field(None,
                               description="t_rw: the shift of the pulse width the extra bus read "
                                           "causes")
    se_ns: Float = Field(None, description="its standard error")
    ci95_ns: Interval = Field(None, description="its 95 % confidence interval")
    ci_withheld: str | None = Field(None, description="why the estimate has no interval (a run too "
                                    "short for its own dependence); the paired estimate may still "
                                    "have one")
    median_estimate_ns: Float = Field(None, description="the same from the shifts' medians")
    withheld: str | None = Field(None, description="why there is no estimate (a scope that matches "
                                 "none of the target's events); the figures above are then null")
    paired_estimate_ns: Float = Field(None,
                                      description="t_rw from event pairing (v1 streams with "
                                                  "pairing)")
    paired_se_ns: Float = Field(None, description="its standard error")
    paired_ci95_ns: Interval = Field(None, description="its 95 % interval")
    paired_excluded: PairedExcluded | None = Field(
        None, description="paired events left out of each mean"
    )
    paired_method: str | None = Field(None, description="that rule, in words")
    paired_withheld: str | None = Field(None, description="no paired estimate: which run could not "
                                        "give one and why")
    inb_run: str = Field(description="the inb run id")
    no_inb_run: str = Field(description="the no-inb run id")
    truth_ns: Float = Field(None, description="value injected by the twin; null on a real bench")


class CaughtEvent(Closed):
    """A software outlier the scope saw too."""

    run: str = Field(description="its run")
    seq: int = Field(description="its record's sequence number")
    sw_ns: Float = Field(description="its t_SW")
    hw_ns: Float = Field(description="its pulse width")


class CrossInterface(Closed):
    """The seed's PCIe puzzle, per load: one interface's software samples above the other's largest,
    and whether the scope (and the board) saw them."""

    load: str | None = Field(None, description="the load compared under")
    interface: str = Field(description="interface examined (e.g. `pcie`)")
    reference_interface: str = Field(description="interface whose maximum is the yardstick (e.g. "
                                                 "`lpt`)")
    threshold_ns: Float = Field(description="the reference interface's largest software latency")
    sw_count_above: int = Field(description="software samples above the threshold")
    sw_total: int = Field(description="all software samples")
    sw_fraction: Float = Field(None,
                               description="`sw_count_above / sw_total` (the seed saw ≈ 10⁻⁵)")
    hw_count_above: int | None = Field(None, description="scope pulse widths above the threshold "
                                       "(less the run's shift)")
    hw_total: int | None = Field(None, description="all scope pulse widths")
    hw_expected_if_real: Float = Field(None, description="`sw_fraction × hw_total`: what the scope "
                                       "would see if the delay were on the bus")
    seen_by_scope: bool | None = Field(None,
                                       description="whether the scope sees the outliers too; null: "
                                                   "no scope")
    side: Literal["none above", "no scope", "seen by the scope", "software-side", "cannot tell",
                  "board: software-side", "board: on the wire"] | None = Field(
        None,
        description="what the scope says of them: the one reading the finding's headline and "
                    "`verdict` take")
    board_count_above: int | None = Field(None, description="board-measured widths above the "
                                          "threshold; null without a board")
    board_total: int | None = Field(None, description="all board-measured widths")
    board_max_of_sw_outliers_ns: Float = Field(None,
                                               description="the largest board width among the "
                                               "software outliers")
    scope_caught: list[CaughtEvent] | None = Field(None,
                                                   description="the outliers the scope caught, by "
                                                               "event")
    scope_caught_note: str | None = Field(None,
                                          description="when the list is of the kept tail only")
    outlier_verdict: OutlierVerdict | None = Field(None,
                                                   description="the PCIe runs' verdicts pooled "
                                                               "(counts "
                                                   "summed)")
    verdict: str = Field(description="one-sentence conclusion")


class FittedQuantile(Closed):
    """The tail fit's quantile at a probability per event, ns."""

    exceedance: Float = Field(description="the probability per event")
    estimate: Float = Field(None, description="the latency exceeded with that probability")
    ci_low: Float = Field(None, description="its interval's lower bound; null: none")
    ci_high: Float = Field(None, description="its upper bound; null: none")
    level: Float = Field(description="the interval's confidence (0.95)")
    interval: str = Field(description="how: `empirical, order statistics` or `profile likelihood "
                                      "(binomial x GPD)`")


class Quantile(FittedQuantile):
    """The worst case at `exceedance`, ns: the order statistic where the sample resolves the
    probability (with the fit beside it above the threshold), else the fit's extrapolation."""

    fit: FittedQuantile | None = Field(None,
                                       description="the tail fit's own quantile beside the "
                                                   "empirical one")


class Bound(Closed):
    """What the sample supports with no model: with confidence `level`, at most 1 event in `one_in`
    exceeds `bound_ns`, for any continuous distribution."""

    bound_ns: Float = Field(description="the largest sample")
    exceedance: Float = Field(description="p = 1 − 0.05^(1/n_eff) ≈ 3/n_eff")
    one_in: Float = Field(description="1/p")
    level: Float = Field(description="the confidence (0.95)")
    effective_n: Float = Field(None, description="n_eff: the events counted by clusters of the "
                               "largest values (n·θ, θ the extremal index of the 20 largest; n "
                               "when they stand alone)")
    method: str = Field(description="the rule, in words")


class FittedDeadline(Closed):
    """The tail fit's probability per event of exceeding the deadline."""

    p_exceed: Float = Field(description="the probability")
    ci_low: Float = Field(None, description="its interval's lower bound")
    ci_high: Float = Field(None, description="its upper bound; null: none")
    level: Float = Field(description="the interval's confidence")
    interval: str = Field(description="how the interval was found")


class Deadline(Closed):
    """The probability per event of exceeding a deadline (`station report --deadline` or the
    campaign's `report.deadline`): the observed fraction with its Clopper–Pearson interval over the
    effective number of events (exact for independent events)."""

    deadline_ns: Float = Field(description="the deadline")
    source: Literal["empirical"] = Field(description="always the observed fraction")
    p_exceed: Float = Field(description="the observed fraction of events above the deadline")
    ci_low: Float = Field(description="its interval's lower bound")
    ci_high: Float = Field(description="its upper bound")
    level: Float = Field(description="the interval's confidence")
    observed_exceedances: int = Field(description="events above the deadline")
    effective_n: Float = Field(None, description="the independent events the interval counts: "
                               "exceedances that come together (a load's phase, one disturbance) "
                               "are fewer chances than events")
    dependence: str | None = Field(None, description="how effective_n was found (batch means of "
                                   "the exceedance indicator over time, or the extremal index of "
                                   "its clusters)")
    fit_p_exceed: Float = Field(None,
                                description="above the threshold: the fit's probability (as "
                                            "`fit.p_exceed`)")
    fit: FittedDeadline | None = Field(None,
                                       description="above the threshold: the tail fit's figure")
    note: str | None = Field(None,
                             description="where the fit's probability is further out than the "
                                         "sample supports")


class WorstCase(Closed):
    """Per interface and load: the largest latency seen, p99.999 and the tail fit's worst case."""

    interface: str = Field(description="the interface")
    load: str | None = Field(None, description="the load")
    observed_max_ns: Float = Field(description="largest latency observed over the interface's runs")
    p99_999_ns: Float = Field(description="99.999th percentile of its samples pooled")
    run: str = Field(description="run id the maximum comes from")
    samples: int | None = Field(None, description="the samples pooled")
    exceedance: Float = Field(None,
                              description="the per-event probability asked (campaign "
                                          "`report.exceedance`)")
    worst_case_1e9_ns: Float = Field(None,
                                     description="`quantile_ns.estimate` when reliable and at 1e-9")
    quantile_ns: Quantile | None = Field(None, description="the worst case at `exceedance`; null "
                                         "when too few samples")
    reliable: bool | None = Field(None,
                                  description="every check passed and ≥ 10 events expected beyond "
                                              "it")
    fit_reliable: bool | None = Field(None, description="the fit's own checks passed")
    reasons: list[str] | None = Field(None, description="why not reliable")
    bound: Bound | None = Field(None,
                                description="the distribution-free bound; null without samples")
    deadline: Deadline | None = Field(
        None, description="with a deadline: the probability of exceeding it"
    )
    tail_fit: Blob = Field(None, description="station/analysis/worst_case/'s whole result "
                           "(threshold diagnostics, shape, scale, goodness of fit, independence): "
                           "a diagnostic blob")


class Comparisons(Closed):
    """Results across module runs; each list may be empty."""

    t_rw: list[TRw] = Field(default_factory=list,
                            description="bus read/write time per interface and load")
    cross_interface_outliers: list[CrossInterface] = Field(default_factory=list,
                                                           description="the seed's PCIe puzzle, "
                                                                       "per load")
    worst_case: list[WorstCase] = Field(default_factory=list,
                                        description="worst case per interface and load")


class ModulePart(BaseModel):
    """The module kind's top-level fields."""

    runs: list[ModuleRun] = Field(default_factory=list,
                                  description="one entry per module run (empty without)")
    comparisons: Comparisons | None = Field(None,
                                            description="results across module runs; absent "
                                            "without them (schema 1 had it with empty lists)")
