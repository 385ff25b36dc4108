"""rtla on a target: the kernel's own osnoise and timerlat tracers, run beside the station's
probes (the interruption detector, cyclictest) on the same CPUs so the report can set them side
by side. It needs the rtla program (Debian: rtla) and a kernel with the tracer
(CONFIG_OSNOISE_TRACER, CONFIG_TIMERLAT_TRACER: Debian's 6.1 PREEMPT_RT kernel has both, its
regular one neither). rtla cleans up (its tracefs instance, the tracer) only on SIGINT: that is
how it is stopped."""

from __future__ import annotations

import shlex

from station.target.irqtrace import TRACEFS_DIRS
from station.target.ssh import TargetConnection

PROGRAM = "rtla"
# the tracefs instances rtla's modes create (a killed rtla leaves its own behind)
INSTANCES = ("osnoise_top", "osnoise_hist", "timerlat_top", "timerlat_hist")
TRACER_CONFIG = {"osnoise": "CONFIG_OSNOISE_TRACER", "timerlat": "CONFIG_TIMERLAT_TRACER"}
TIMERLAT_ENTRIES = 9_999_998  # rtla: "Entries must be > 10 and < 9999999"


async def unavailable(conn: TargetConnection, tracer: str) -> str | None:
    """Why rtla's `tracer` mode cannot run on this target, or None."""
    if (await conn.run(f"command -v {PROGRAM}", check=False)).exit_status != 0:
        return "rtla is not installed (Debian: apt-get install rtla)"
    tracers = " ".join(f"{d}/available_tracers" for d in TRACEFS_DIRS)
    got = await conn.run(f"cat {tracers} 2>/dev/null", check=False, privileged=True)
    if tracer not in (got.stdout or "").split():
        return (f"this kernel has no {tracer} tracer ({TRACER_CONFIG[tracer]}; Debian's PREEMPT_RT "
                "kernel has it)")
    return None


def arguments(cpu: int, duration_s: int, threshold_us: int) -> list[str]:
    """`rtla osnoise top` on one CPU: its summary, noise above threshold_us counted."""
    return [
        "osnoise", "top", "-q", "-c", str(cpu), "-d", f"{duration_s}s", "-T",
        str(max(1, threshold_us))
    ]


def timerlat_arguments(cpus: str | None, duration_s: int, period_us: int, priority: int | None,
                       entries: int, stop_us: int | None = None,
                       trace_path: str | None = None) -> list[str]:
    """`rtla timerlat hist`: per CPU (a CPU list, None: every CPU) the timer IRQ's and the
    timerlat thread's latency, 1 µs buckets up to `entries`, at SCHED_FIFO `priority` (None:
    rtla's default), for duration_s seconds; with stop_us, rtla's auto mode (-a: stop at the first
    latency above it, save the trace to trace_path, analyse it where rtla can)."""
    if not 10 < entries <= TIMERLAT_ENTRIES:
        raise ValueError(f"rtla takes 11 to {TIMERLAT_ENTRIES} histogram entries, not {entries}")
    args = ["timerlat", "hist", "-d", f"{duration_s}s", "-p", str(period_us), "-E", str(entries)]
    if cpus is not None:
        args += ["-c", cpus]
    if priority is not None:
        args += ["-P", f"f:{priority}"]
    if stop_us is not None:
        if trace_path is None:
            raise ValueError("rtla's auto mode saves a trace: give its path")
        # "-t=FILE": rtla 6.1 drops the first character of -t's optional argument (it expects the
        # "="; "--trace=/x" saved to "x"), later versions drop a leading "=": the one form both read
        args += ["-a", str(stop_us), f"-t={trace_path}"]
    return args


async def remove_leftover(conn: TargetConnection) -> list[str]:
    """rtla killed (not interrupted) leaves its instance, with its tracer running on its CPUs;
    removed when no rtla runs. The instances found."""
    dirs = " ".join(
        shlex.quote(f"{d}/instances/{name}") for d in TRACEFS_DIRS for name in INSTANCES
    )
    script = (f"pgrep -x {PROGRAM} >/dev/null 2>&1 && exit 0; for i in {dirs}; do if [ -d \"$i\" "
              "]; then echo \"found ${i##*/}\"; echo nop > \"$i/current_tracer\"; rmdir \"$i\"; "
              "fi; done; true")
    got = await conn.run(f"sh -c {shlex.quote(script)}", check=False, privileged=True)
    return [
        line.split(" ", 1)[1]
        for line in (got.stdout or "").splitlines()
        if line.startswith("found ")
    ]
