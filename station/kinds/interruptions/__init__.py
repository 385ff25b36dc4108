"""The interruptions kind (the interruption detector): a spin loop pinned to one CPU records
every gap above a threshold, each tied to the interrupts that ran in it (a probe run: no scope)."""

from __future__ import annotations

from station.config import Campaign, LocatedError
from station.kind_registry import BenchNeeds, Kind
from station.kinds.interruptions.settings import InterruptionsSettings


def _check(campaign: Campaign) -> None:
    m = campaign.matrix
    if m.duration is not None and (m.duration < 1 or m.duration != int(m.duration)):
        raise LocatedError(("matrix", "duration"),
                           f"the detector takes whole seconds; {m.duration:g} s is not")
    if m.samples is not None:
        raise LocatedError(("matrix", "samples"),
                           "the detector runs for matrix.duration; it counts no samples")
    if m.duration is not None and m.duration > m.max_duration:
        raise LocatedError(("matrix", "max_duration"),
                           f"a run needs {m.duration:g} s but max_duration is "
                           f"{m.max_duration:g} s: every run would end incomplete")


KIND = Kind(
    budget_figures="station.kinds.interruptions.budgets:figures",
    name="interruptions",
    store_tables=("interruptions_gaps",),
    # the longest interruption the detector saw (µs in its report)
    window_maximum=lambda run: None if run.get("max_us") is None else run["max_us"] * 1e3,
    summary="the interruption detector: every gap in a pinned spin loop, options under "
            "interruptions:",
    settings=InterruptionsSettings,
    check=_check,
    needs=BenchNeeds(twin_target=False),
    measurement="station.kinds.interruptions.run:InterruptionsRun",
    analysis="station.kinds.interruptions.analysis:analyse",
    report="station.kinds.interruptions.report:PAGE",
    report_model="station.kinds.interruptions.report_model:InterruptionsSection",
    manifest_model="station.kinds.interruptions.manifest_part:InterruptionsManifest",
)
