"""The module kind's own options: its matrix keys (ModuleMatrix) and the campaign's module:
section (ModuleSettings)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from station.config import Int, LocatedError, Seconds, Strict
from station.config.types import (
    MAX_PULSES,
    PERIOD_RANGE,
    Interface,
    LocalPath,
    ModuleParamName,
    ModuleParamValue,
    Variant,
)
from station.target.module_build import BuildPlan


def _period(value: float) -> float:
    period_us = value * 1e6
    if abs(period_us - round(period_us)) > 1e-6:
        raise ValueError(f"period {period_us:g} us: the modules take whole microseconds, at least "
                         "10 us")
    return value


class ModuleMatrix(Strict):
    """The matrix keys of a module campaign (they join the campaign's matrix:
    Kind.matrix_fields)."""

    interfaces: list[Interface] = Field(default_factory=lambda: ["lpt", "pcie"], min_length=1)
    variants: list[Variant] = Field(default_factory=lambda: ["inb", "no-inb"], min_length=1)
    period: Annotated[Seconds(PERIOD_RANGE), AfterValidator(_period)] = 100e-6
    pulses: Int = Field(0, ge=0, le=MAX_PULSES,
                        description="at least this many scope pulses per run (0: no minimum)")
    format: Literal["v1", "legacy"] = "v1"
    cpu: Int = Field(-1, ge=-1, le=4095,
                     description="CPU the module's task and IRQ run on (-1: any)")
    lpt_base: Int = Field(0x378, ge=0, le=0xFFFF, description="I/O port base of the parallel port")
    lpt_irq: Int = Field(7, ge=0, le=255)
    module_params: dict[Interface, dict[ModuleParamName, ModuleParamValue]] = Field(
        default_factory=dict,
        description="extra module parameters per interface, e.g. {pcie: {profile: edu}} (emulation "
                    "modes)",
    )


class ModuleSettings(Strict):
    """Options of a module campaign beyond its matrix (all optional)."""

    trace: bool = Field(
        False, description="record the kernel's interrupt, softirq, timer and scheduler "
        "tracepoints on matrix.cpu (a tracefs instance of the station's own, clock mono: the "
        "module's own clock) and split every event's t_SW into stages, each interval credited to "
        "what ran in it (docs/decomposition.md). Mainline and PREEMPT_RT targets only: on RTAI the "
        "IRQ is taken before Linux sees it")
    trace_buffer_kb: Int = Field(
        65536, ge=1024, le=4 * 1024 * 1024, description="the trace buffer on the traced CPU, KiB: "
        "a run whose events outgrow it keeps only its latest part (the report counts the events "
        "before it as not decomposed)")
    trace_overhead: bool = Field(
        False, description="measure what recording the trace costs: alternate recorded and "
        "unrecorded blocks of trace_block during each traced run (the instance's tracing_on "
        "switched, each switch marked in the trace) and compare t_SW in the two; the unrecorded "
        "blocks' events are not decomposed")
    trace_block: Seconds((0.2, 60.0, "200 ms", "60 s")) = Field(
        1.0, description="the length of each traced and untraced block (trace_overhead)")
    build: Literal["never", "auto", "always"] = Field(
        "never", description="build the mainline modules for the target's running kernel on "
        "this station before the runs (station/target/module_build.py): auto when the files to "
        "load were built for another kernel or are missing, always every campaign; never: the "
        "files are the user's (`station modules build` does it by hand)")
    kdir: LocalPath | None = Field(
        None, description="the kernel build tree to build against (default: this station's "
        "/lib/modules/<release>/build or /usr/src/linux-headers-<release>)")
    cross_compile: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]{1,64}-$")] | None = (
        Field(None, description="a cross-compiler prefix for another architecture's target, "
              "e.g. aarch64-linux-gnu- (ARCH follows from it)"))
    build_on: Literal["auto", "station", "target"] = Field(
        "auto", description="where the modules are built: station (against kdir, or this "
        "station's tree for the target's release), target (with its own make and compiler, "
        "against target_kdir, in a scratch directory removed after), auto (station when kdir or "
        "cross_compile is given, else the target when it has the tree, make, cc and tar, else "
        "the station)")
    target_kdir: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9_.+/-]{1,255}$")] | None = (
        Field(None, description="the kernel build tree on the target (default: its "
              "/lib/modules/<release>/build)"))

    @model_validator(mode="after")
    def _one_place_to_build(self) -> ModuleSettings:
        if self.build_on == "target" and (self.kdir or self.cross_compile):
            field = "kdir" if self.kdir else "cross_compile"
            raise LocatedError((field,), "is for a build on the station; build_on is target "
                               "(its tree: target_kdir)")
        if self.build_on == "station" and self.target_kdir:
            raise LocatedError(("target_kdir",), "is for a build on the target; build_on is "
                               "station (its tree: kdir)")
        return self

    def build_plan(self) -> BuildPlan:
        return BuildPlan(self.build, self.kdir, self.cross_compile, self.build_on,
                         self.target_kdir)
