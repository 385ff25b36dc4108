"""The module kind: the LPT/PCIe latency module on the target answers the scope's trigger
(t_SW from its record stream, t_HW from the scope's pulse widths), one run per interface,
variant (inb / no-inb), load and repetition."""

from __future__ import annotations

import itertools

from station.common.module_names import module_stem
from station.config import Campaign, LocatedError, RunSpec, TargetSettings
from station.kind_registry import BenchNeeds, Kind
from station.kinds.module.settings import ModuleMatrix, ModuleSettings
from station.kinds.stop_rule import check_rounds
from station.target.module_build import BuildPlan


def _latency_modules(campaign: Campaign, target: TargetSettings) -> set[str]:
    """The latency modules a module campaign loads: one per interface, of the target's family."""
    return {module_stem(target.family, i) for i in campaign.matrix.interfaces}


def _module_build(campaign: Campaign) -> BuildPlan:
    settings = getattr(campaign, "module", None)
    return BuildPlan() if settings is None else settings.build_plan()


def _check(campaign: Campaign) -> None:
    m = campaign.matrix
    for name, values in (("interfaces", m.interfaces), ("variants", m.variants)):
        if len(set(values)) != len(values):
            raise LocatedError(("matrix", name), f"{name} lists a value twice: {values}")
    needed = max(m.duration or 0.0, (m.samples or 0) * m.period)
    if needed > m.max_duration:
        raise LocatedError(("matrix", "max_duration"),
                           f"a run needs at least {needed:g} s (samples × period, or duration) but "
                           f"max_duration is {m.max_duration:g} s: every run would end incomplete")
    check_rounds(campaign, len(m.interfaces) * len(m.variants))
    if m.pulses and campaign.bench.scope.kind == "none":
        raise LocatedError(("matrix", "pulses"),
                           "asks for scope pulses but bench.scope.kind is none")
    if "lpt" in m.interfaces:
        for name, target in campaign.bench.named_targets().items():
            if target.kind == "vm" and target.arch != "amd64":
                which = f"target {name!r}" if name else "the target"
                raise LocatedError(("matrix", "interfaces"),
                                   f"lists lpt, but {which} is an {target.arch} VM: QEMU's virt "
                                   "board has no ISA bus, so no parallel port at 0x378 (the "
                                   "module would load on empty I/O space and never see an "
                                   "interrupt); measure pcie there (profile: edu)")
    settings = getattr(campaign, "module", None)
    if settings is not None and settings.trace:
        _check_traced(campaign)
    if settings is not None and settings.build != "never":
        for name, target in campaign.bench.named_targets().items():
            if target.kind == "twin" or target.family == "rtai":
                which = f"target {name!r}" if name else "the target"
                what = "the twin" if target.kind == "twin" else "an RTAI box"
                raise LocatedError(("module", "build"),
                                   f"builds the mainline modules, but {which} is {what}: RTAI "
                                   "modules are built with RTAI's tree (target_modules/README.md)")


def _check_traced(campaign: Campaign) -> None:
    """A traced run needs Linux to take the IRQ, on one CPU it can trace, with a tracefs to read."""
    if campaign.matrix.cpu < 0:
        raise LocatedError(("module", "trace"),
                           "needs matrix.cpu: the module's timer and IRQ pinned to the CPU "
                           "the station traces (an unpinned IRQ can be taken on any CPU)")
    if campaign.matrix.format != "v1":
        raise LocatedError(("matrix", "format"),
                           "module.trace needs the v1 records: a legacy record has no "
                           "t_write to place the event in the trace")
    for name, target in campaign.bench.named_targets().items():
        where = ("bench", "targets", name, "family") if name else ("bench", "target", "family")
        if target.kind == "twin":
            raise LocatedError(("module", "trace"),
                               "the twin has no kernel to trace: trace a mainline or "
                               "PREEMPT_RT target (kind: ssh, vm or local)")
        if target.family == "rtai":
            raise LocatedError(where, "module.trace is on, but on RTAI the IRQ is taken by RTAI "
                               "before Linux: Linux tracing does not see it (trace a mainline or "
                               "PREEMPT_RT kernel)")


def _run_id(spec: RunSpec) -> str:
    return f"{spec.interface}-{spec.variant}-{spec.load}-r{spec.repetition}"


KIND = Kind(
    budget_figures="station.kinds.module.budgets:figures",
    budget_selectors=(("interface", "interface"), ("variant", "variant")),
    name="module",
    settings=ModuleSettings,
    store_tables=("sw", "hw", "decomposition"),
    summary="the LPT/PCIe latency module, t_SW and t_HW",
    matrix_fields=ModuleMatrix,
    cells=lambda c: list(itertools.product(c.matrix.interfaces, c.matrix.variants)),
    describe_cells=lambda c: f"{len(c.matrix.interfaces)} interfaces × {len(c.matrix.variants)} "
                             "variants",
    run_id=_run_id,
    check=_check,
    needs=BenchNeeds(scope=True, modules=_latency_modules, module_build=_module_build,
                     family=True),
    top_level_runs=True,
    window_maximum=lambda run: (run.get("sw") or {}).get("max_ns"),  # t_SW's
    units=True,
    measurement="station.kinds.module.run:ModuleRun",
    bench_check="station.kinds.module.bench_check:check",
    analysis="station.kinds.module.analysis:analyse",
    run_analysis="station.kinds.module.run_analysis:analyse_run",
    report="station.kinds.module.report:PAGE",
    compare="station.kinds.module.compare:COMPARE",
    report_model="station.kinds.module.report_model:ModulePart",
    manifest_model="station.kinds.module.manifest_part:ModuleManifest",
)
