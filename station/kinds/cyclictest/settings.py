"""cyclictest's options (rt-tests): the campaign's cyclictest: section."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from station.config import Int, LocatedError, Seconds, Strict, _pattern

CT_INTERVAL_RANGE = (10e-6, 1.0, "10 us", "1 s")
CT_HISTOGRAM_RANGE = (1e-6, 0.1, "1 us", "100 ms")  # one 1 µs bucket per µs, per thread
CT_BREAK_RANGE = (1e-6, 1.0, "1 us", "1 s")
CPU_LIST = r"[0-9]{1,4}(?:-[0-9]{1,4})?(?:,[0-9]{1,4}(?:-[0-9]{1,4})?){0,63}"
RT_POLICIES = ("fifo", "rr")


def _whole_us(value: float) -> float:
    us = value * 1e6
    if abs(us - round(us)) > 1e-6:
        raise ValueError(f"{us:g} us: cyclictest takes whole microseconds")
    return value


WholeMicroseconds = AfterValidator(_whole_us)


class CyclictestSettings(Strict):
    """cyclictest's options (rt-tests), for matrix.kind: cyclictest. The run length is
    matrix.duration (-D) or matrix.samples (-l, loops per thread)."""

    interval: Annotated[Seconds(CT_INTERVAL_RANGE), WholeMicroseconds] = Field(
        1e-3, description="-i: wake-up period"
    )
    priority: Int | None = Field(None, ge=0, le=99,
                                 description="-p: default 95 for fifo/rr, 0 otherwise")
    # batch and idle are not offered: cyclictest measures them as SCHED_OTHER (or, given -p, as
    # FIFO)
    policy: Literal["fifo", "rr", "other"] = Field("fifo",
                                                   description="--policy (other: no -p, a normal "
                                                               "thread)")
    smp: bool = Field(False, description="-S: one thread per CPU, each pinned, clock_nanosleep "
                      "(sets threads and affinity itself)")
    threads: Literal["per-cpu"] | Annotated[Int, Field(ge=1, le=4096)] = Field(
        "per-cpu", description="-t: one thread per CPU, or this many"
    )
    affinity: Literal["all", "none"] | Annotated[str, _pattern(CPU_LIST,
                                                               "a CPU list such as 0-3,6")] = Field(
        "all",
        description="-a: pin threads to all CPUs in turn, to this CPU list, or none (unpinned)"
    )
    mlockall: bool = Field(True,
                           description="-m: lock memory (page faults would measure the pager)")
    histogram: Annotated[Seconds(CT_HISTOGRAM_RANGE), WholeMicroseconds] = Field(
        10e-3,
        description="-h: histogram range in 1 us buckets; longer latencies count as overflows"
    )
    smi: bool = Field(False, description="--smi: count SMIs (x86 with the msr driver; root)")
    breaktrace: Annotated[Seconds(CT_BREAK_RANGE), WholeMicroseconds] | None = Field(
        None,
        description="-b: stop the run at the first latency above this (with ftrace, the trace "
                    "shows why)"
    )
    deadline: Seconds(CT_BREAK_RANGE) | None = Field(
        None, description="a latency the application cannot exceed (seed 004: 125us for an 8 kHz "
        "device); the report flags the cases whose maximum is above it",
    )
    companion: Literal["none", "timerlat"] = Field(
        "none",
        description="timerlat: after cyclictest, `rtla timerlat hist` for as long on the same "
        "CPUs, period and priority, the loads still running (the kernel's timerlat tracer: its IRQ "
        "and thread latency per CPU, beside cyclictest's in the report; a kernel without the "
        "tracer is said and the run stands)"
    )
    timerlat_stop: Annotated[Seconds(CT_BREAK_RANGE), WholeMicroseconds] | None = Field(
        None, description="with companion timerlat: rtla's -a, stop at the first IRQ or thread "
        "latency above this, keep the trace (timerlat_trace.txt in the run) and, where rtla has it "
        "(6.3+), its auto-analysis of that sample"
    )
    slices: Annotated[Int, Field(ge=1, le=10_000)] = Field(
        1, description="run cyclictest as this many consecutive invocations of "
        "matrix.duration/slices each (whole seconds; the loads run on throughout): one histogram "
        "per slice, in time order, which is what the percentiles' and the deadline's intervals "
        "need to see dependence between cycles (phases of a load, carry-over); at least 10 for an "
        "interval (docs/statistics.md). 1: one invocation, no such interval. Each slice's start (a "
        "few ms: threads created, memory locked) goes unmeasured; no --json is kept"
    )
    cpu_dma_latency: Literal["off"] | Annotated[Int, Field(ge=0, le=10_000_000)] = Field(
        0, description="the value cyclictest holds in /dev/cpu_dma_latency for the run (us; 0: no "
        "C-state exit latency allowed, cyclictest's default), or off (--laptop: leave power "
        "management alone)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> CyclictestSettings:
        if self.smp and {"threads", "affinity"} & self.model_fields_set:
            raise LocatedError(("smp",),
                               "-S sets threads and affinity itself: give smp or threads/affinity")
        if self.slices > 1 and self.breaktrace is not None:
            raise LocatedError(("slices",),
                               "a break trace ends the run at its first hit: give slices or "
                               "breaktrace")
        if self.timerlat_stop is not None and self.companion != "timerlat":
            raise LocatedError(("timerlat_stop",),
                               "is an option of the timerlat companion: set companion: timerlat")
        p = self.priority
        if p is not None and self.policy in RT_POLICIES and p < 1:
            raise LocatedError(("priority",), f"policy {self.policy} needs a priority from 1 to 99")
        if p not in (None, 0) and self.policy not in RT_POLICIES:
            raise LocatedError(("priority",),
                               f"policy {self.policy} has no real-time priority: leave it out or 0")
        return self

    @property
    def effective_priority(self) -> int:
        if self.priority is not None:
            return self.priority
        return 95 if self.policy in RT_POLICIES else 0
