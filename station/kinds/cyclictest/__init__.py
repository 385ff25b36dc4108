"""The cyclictest kind: rt-tests' cyclictest on the target under the campaign's loads (a probe
run: no scope), its histogram and maxima per thread."""

from __future__ import annotations

from station.config import Campaign, LocatedError
from station.kind_registry import BenchNeeds, Kind
from station.kinds.cyclictest.settings import CyclictestSettings
from station.kinds.stop_rule import check_rounds


def _check(campaign: Campaign) -> None:
    m, settings = campaign.matrix, campaign.cyclictest  # type: ignore[attr-defined]
    check_rounds(campaign, 1)  # one cell: the loads are its conditions
    if m.duration is not None and (m.duration < 1 or m.duration != int(m.duration)):
        raise LocatedError(("matrix", "duration"),
                           f"cyclictest -D takes whole seconds; {m.duration:g} s is not")
    if settings.slices > 1:
        if m.duration is None or m.samples is not None:
            raise LocatedError(("cyclictest", "slices"),
                               "slices divide matrix.duration: give duration, not samples")
        if m.duration % settings.slices or m.duration < settings.slices:
            raise LocatedError(("cyclictest", "slices"),
                               f"{settings.slices} slices of {m.duration:g} s are not whole "
                               "seconds each (cyclictest -D): make duration a multiple of slices")
    # cyclictest ends at whichever of -D and -l comes first
    needed = min(x for x in (m.duration, m.samples and m.samples * settings.interval) if x)
    if needed > m.max_duration:
        raise LocatedError(("matrix", "max_duration"),
                           f"a run needs at least {needed:g} s (samples × cyclictest.interval, or "
                           f"duration) but max_duration is {m.max_duration:g} s: every run would "
                           "end incomplete")


KIND = Kind(
    budget_figures="station.kinds.cyclictest.budgets:figures",
    name="cyclictest",
    store_tables=("cyclictest_histogram",),
    window_maximum=lambda run: (run.get("combined") or {}).get("max_ns"),  # every thread's
    units=True,
    summary="cyclictest on the target, options under cyclictest:",
    settings=CyclictestSettings,
    check=_check,
    needs=BenchNeeds(twin_target=False),
    measurement="station.kinds.cyclictest.run:CyclictestRun",
    analysis="station.kinds.cyclictest.analysis:analyse",
    report="station.kinds.cyclictest.report:PAGE",
    compare="station.kinds.cyclictest.compare:COMPARE",
    report_model="station.kinds.cyclictest.report_model:CyclictestSection",
    manifest_model="station.kinds.cyclictest.manifest_part:CyclictestManifest",
)
