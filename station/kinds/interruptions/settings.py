"""The interruption detector's options: the campaign's interruptions: section."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from station.config import Int, Seconds, Strict

IG_THRESHOLD_RANGE = (100e-9, 0.1, "100 ns", "100 ms")
IG_CALIBRATION_RANGE = (1.0, 60.0, "1 s", "60 s")
CALIBRATION_AUTO_S = 2.0  # calibration: auto, when the measured run is not traced


class InterruptionsSettings(Strict):
    """The interruption detector (seed 003), for matrix.kind: interruptions: a spin loop pinned to
    one CPU records every gap above a threshold; each gap is tied to the interrupts that ran in it
    or flagged as not explained by any (firmware, SMI, a hypervisor). The run length is
    matrix.duration (whole seconds)."""

    cpu: Literal["last"] | Annotated[Int, Field(ge=0, le=4095)] = Field(
        "last",
        description="the CPU the spin loop holds (last: the highest online CPU, the one usually "
                    "isolated)"
    )
    threshold: Seconds(IG_THRESHOLD_RANGE) = Field(
        5e-6, description="a loop iteration longer than this is a gap (seed 003: about 1 us on "
        "bare metal; emulated targets need more)"
    )
    priority: Int = Field(99, ge=0, le=99,
                          description="SCHED_FIFO priority of the loop (0: SCHED_OTHER)")
    clock: Literal["auto", "tsc", "cntvct", "monotonic"] = Field(
        "auto",
        description="what the loop reads: a raw counter, x86's TSC or arm64's generic timer "
        "(cntvct, the virtual count; each calibrated against CLOCK_MONOTONIC_RAW), or the "
        "monotonic clock; auto takes the TSC where it is invariant (constant_tsc and "
        "nonstop_tsc), the generic timer on arm64, else the monotonic clock"
    )
    counts: Literal["auto"] | bool = Field(
        "auto",
        description="read the CPU's /proc/interrupts and /proc/softirqs counts after every gap "
        "(the attribution's basis without a trace); auto: only when the run is not traced, since "
        "reading them is time the loop does not watch"
    )
    trace: Literal["auto", "on", "off"] = Field(
        "auto",
        description="record the kernel's interrupt tracepoints on that CPU (a tracefs instance of "
        "the station's own) to know how long each handler ran in a gap; auto: where tracefs is "
        "available"
    )
    calibration: Literal["auto", "off"] | Seconds(IG_CALIBRATION_RANGE) = Field(
        "auto",
        description="a phase before the loads start: the detector on the same CPU for this long, "
        "traced where tracefs is (even with trace: off), so each interrupt line's usual cost comes "
        "from its handlers' durations, not from the gaps being judged; auto: 2 s when the measured "
        "run is not traced (a traced run takes the costs from its own trace); off: none (untraced, "
        "counted interrupts then explain no gap)"
    )
    smi: Literal["auto", "on", "off"] = Field(
        "auto",
        description="read the CPU's SMI count (MSR 0x34, x86 with the msr driver) after every gap"
    )
    compare: Literal["none", "osnoise"] = Field(
        "none",
        description="after the detector, run `rtla osnoise top` on the same CPU for as long, under "
        "the same loads, and set the two side by side (where the kernel has the osnoise tracer; "
        "the run says so where it has not)"
    )
