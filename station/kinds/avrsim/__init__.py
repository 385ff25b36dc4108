"""The avrsim kind (seed 002's Arduino, simulated): an ATmega328P under simavr answers jittered
edges on its INT0 pin, the bare avr-libc responder or the seed's sketch on the real Arduino core,
timer0's overflow interrupt on or masked; one run per case, load and repetition. The harness logs
what a scope would see (each edge, each output change) and what no scope sees (each interrupt
handler run), so every slow answer is tied to the handler that held it up."""

from __future__ import annotations

from station.config import Campaign, LocatedError
from station.kind_registry import BenchNeeds, Kind
from station.kinds.avrsim.settings import AvrsimSettings
from station.kinds.cases import case_cells, case_run_id


def _settings(campaign: Campaign) -> AvrsimSettings:
    avrsim = getattr(campaign, "avrsim", None)
    assert avrsim is not None  # the campaign schema requires it of an avrsim campaign
    return avrsim


def _check(campaign: Campaign) -> None:
    m = campaign.matrix
    if m.samples is None:
        raise LocatedError(("matrix", "samples"),
                           "an avrsim run applies a number of edges: give matrix.samples")
    if m.duration is not None:
        raise LocatedError(("matrix", "duration"),
                           "the simulated clock is not the wall clock: an avrsim run ends "
                           "after matrix.samples edges (max_duration still bounds it)")
    for name, t in campaign.bench.named_targets().items():
        if t.kind != "local":
            where = ("bench", "targets", name, "kind") if name else ("bench", "target", "kind")
            raise LocatedError(where, "the simulated microcontroller runs on the station's own "
                               "machine, where its firmware is built: use kind local (a real Uno "
                               "is a gpio campaign's external responder)")
    for load in m.loads:
        if campaign.loads.get(load):
            raise LocatedError(("matrix", "loads"),
                               f"load set {load!r} starts programs, but a simulated CPU counts its "
                               "own cycles: the host's load changes nothing it measures (use a "
                               "load set without programs)")


_cells = case_cells("avrsim")


KIND = Kind(
    name="avrsim",
    store_tables=("avrsim_edges", "avrsim_handlers"),
    summary="an ATmega328P under simavr answering jittered edges (the bare responder or the seed's "
    "Arduino sketch, timer0 on or masked); options under avrsim:",
    settings=AvrsimSettings,
    settings_required=True,
    cells=_cells,
    describe_cells=lambda c: f"{len(_cells(c))} cases",
    run_id=case_run_id,
    check=_check,
    needs=BenchNeeds(twin_target=False),
    measurement="station.kinds.avrsim.run:AvrsimRun",
    analysis="station.kinds.avrsim.analysis:analyse",
    report="station.kinds.avrsim.report:PAGE",
    report_model="station.kinds.avrsim.report_model:AvrsimSection",
    manifest_model="station.kinds.avrsim.manifest_part:AvrsimManifest",
)
