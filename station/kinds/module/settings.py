"""The module kind's own options: the campaign's module: section."""

from __future__ import annotations

from pydantic import Field

from station.config import Int, Seconds, Strict


class ModuleSettings(Strict):
    """Options of a module campaign beyond its matrix (all optional)."""

    trace: bool = Field(
        False, description="record the kernel's interrupt, softirq, timer and scheduler tracepoints on matrix.cpu "
        "(a tracefs instance of the station's own, clock mono: the module's own clock) and split every event's "
        "t_SW into stages, each interval credited to what ran in it (docs/decomposition.md). Mainline and "
        "PREEMPT_RT targets only: on RTAI the IRQ is taken before Linux sees it")
    trace_buffer_kb: Int = Field(
        65536, ge=1024, le=4 * 1024 * 1024, description="the trace buffer on the traced CPU, KiB: a run whose "
        "events outgrow it keeps only its latest part (the report counts the events before it as not decomposed)")
    trace_overhead: bool = Field(
        False, description="measure what recording the trace costs: alternate recorded and unrecorded blocks of "
        "trace_block during each traced run (the instance's tracing_on switched, each switch marked in the trace) "
        "and compare t_SW in the two; the unrecorded blocks' events are not decomposed")
    trace_block: Seconds((0.2, 60.0, "200 ms", "60 s")) = Field(
        1.0, description="the length of each traced and untraced block (trace_overhead)")
