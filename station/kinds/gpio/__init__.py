"""The gpio kind (GPIO response timing): a generator drives the target's input line, a responder
answers on its output line, the scope records both; one run per case (responder), load and
repetition."""

from __future__ import annotations

from station.config import Campaign, LocatedError, TargetSettings
from station.kind_registry import BenchNeeds, Kind
from station.kinds.cases import case_cells, case_run_id
from station.kinds.gpio.settings import TWIN_ONLY_RESPONDERS, GpioSettings
from station.kinds.stop_rule import check_rounds


def _stimulus(campaign: Campaign) -> GpioSettings:
    gpio = getattr(campaign, "gpio", None)
    assert gpio is not None  # the campaign schema requires it of a gpio campaign
    return gpio


def _responder_module(campaign: Campaign, target: TargetSettings) -> set[str]:
    """The kernel responder, if a case loads it."""
    return (
        {"gpio_responder"}
        if any(c.responder == "kernel" for c in _stimulus(campaign).cases.values())
        else set()
    )


def _board(campaign: Campaign) -> dict[str, int]:
    """The twin as a board answering GPIO edges: the channels the scope and generator see it on."""
    bench = campaign.bench
    return {"stimulus_channel": bench.scope.channel,
            "response_channel": _stimulus(campaign).response_channel,
            "generator_channel": bench.generator.channel}


def _scope_inputs(campaign: Campaign) -> tuple[tuple[int, ...], str]:
    """The response channel beside the stimulus's, and the stimulus edge the scope triggers on."""
    gpio = _stimulus(campaign)
    return (gpio.response_channel,), "fall" if gpio.stimulus_edge == "fall" else "rise"


def _check(campaign: Campaign) -> None:
    m, gpio, scope, generator = (
        campaign.matrix, _stimulus(campaign), campaign.bench.scope, campaign.bench.generator
    )
    if scope.kind == "none":
        raise LocatedError(("bench", "scope", "kind"),
                           "a gpio campaign measures with the scope: twin or visa")
    if scope.channel == gpio.response_channel:
        raise LocatedError(("gpio", "response_channel"),
                           f"is bench.scope.channel too ({scope.channel}): the "
                           "stimulus and the response need a channel each")
    for name, t in campaign.bench.named_targets().items():
        where = ("bench", "targets", name, "kind") if name else ("bench", "target", "kind")
        if t.kind in ("vm", "local"):
            raise LocatedError(where, f"a {t.kind} target has no GPIO lines a scope can probe: use "
                               "ssh (a board) or twin")
        twin_parts = [part for part, kind in (("bench.scope", scope.kind), ("bench.generator",
                                                                            generator.kind))
                      if (kind == "twin") != (t.kind == "twin")]
        if twin_parts:
            raise LocatedError(where, "the twin board answers the twin generator under the twin "
                               f"scope: {' and '.join(twin_parts)} must be twin exactly when the "
                               "target is")
        if t.kind != "twin":
            for case_name, case in gpio.cases.items():
                if case.responder in TWIN_ONLY_RESPONDERS:
                    raise LocatedError(("gpio", "cases", case_name, "responder"),
                                       f"{case.responder} is the seed's own program, modelled on "
                                       "the twin only")
    # a scope sees only part of the stimuli (it is blind while it transfers), so this is a floor
    needed = min(x for x in (m.duration, m.samples and m.samples * gpio.period) if x)
    if needed > m.max_duration:
        raise LocatedError(("matrix", "max_duration"),
                           f"a run needs at least {needed:g} s (samples × gpio.period, or "
                           f"duration) but max_duration is {m.max_duration:g} s: every run would "
                           "end incomplete")
    check_rounds(campaign, len(gpio.cases))  # a stop rule: each case under each load


_cells = case_cells("gpio")


KIND = Kind(
    budget_figures="station.kinds.gpio.budgets:figures",
    budget_selectors=(("case", "variant"),),
    name="gpio",
    store_tables=("delays",),
    summary="GPIO response timing: a generator's stimulus, a responder's answer, both on the "
    "scope; options under gpio:",
    settings=GpioSettings,
    settings_required=True,
    cells=_cells,
    units=True,
    describe_cells=lambda c: f"{len(_cells(c))} cases",
    run_id=case_run_id,
    check=_check,
    needs=BenchNeeds(scope=True, stimulus=_stimulus, modules=_responder_module, board=_board,
                     scope_inputs=_scope_inputs),
    measurement="station.kinds.gpio.run:GpioRun",
    bench_check="station.kinds.gpio.bench_check:check",
    analysis="station.kinds.gpio.analysis:analyse",
    report="station.kinds.gpio.report:PAGE",
    report_model="station.kinds.gpio.report_model:GpioSection",
    manifest_model="station.kinds.gpio.manifest_part:GpioManifest",
)
