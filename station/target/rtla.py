"""rtla osnoise on a target: the kernel's own noise tracer, run after the detector on the same
CPU so the report can set the two side by side. It needs the rtla program (Debian: rtla) and a
kernel with CONFIG_OSNOISE_TRACER (Debian's 6.1 PREEMPT_RT kernel has it, its regular one not).
rtla cleans up (its tracefs instance, the tracer) only on SIGINT: that is how it is stopped."""

from __future__ import annotations

import shlex

from station.target.irqtrace import TRACEFS_DIRS
from station.target.ssh import TargetConnection

PROGRAM = "rtla"
INSTANCE = "osnoise_top"  # the tracefs instance `rtla osnoise top` creates


async def unavailable(conn: TargetConnection) -> str | None:
    """Why rtla osnoise cannot run on this target, or None."""
    if (await conn.run(f"command -v {PROGRAM}", check=False)).exit_status != 0:
        return "rtla is not installed (Debian: apt-get install rtla)"
    tracers = " ".join(f"{d}/available_tracers" for d in TRACEFS_DIRS)
    got = await conn.run(f"cat {tracers} 2>/dev/null", check=False, privileged=True)
    if "osnoise" not in (got.stdout or "").split():
        return "this kernel has no osnoise tracer (CONFIG_OSNOISE_TRACER; Debian's PREEMPT_RT kernel has it)"
    return None


def arguments(cpu: int, duration_s: int, threshold_us: int) -> list[str]:
    return ["osnoise", "top", "-q", "-c", str(cpu), "-d", f"{duration_s}s", "-T", str(max(1, threshold_us))]


async def remove_leftover(conn: TargetConnection) -> bool:
    """rtla killed (not interrupted) leaves its instance, with the osnoise tracer running on
    its CPUs; removed when no rtla runs. True if there was one."""
    dirs = " ".join(shlex.quote(f"{d}/instances/{INSTANCE}") for d in TRACEFS_DIRS)
    script = (f"pgrep -x {PROGRAM} >/dev/null 2>&1 && exit 0; for i in {dirs}; do "
              "if [ -d \"$i\" ]; then echo found; echo nop > \"$i/current_tracer\"; rmdir \"$i\"; fi; done; true")
    got = await conn.run(f"sh -c {shlex.quote(script)}", check=False, privileged=True)
    return "found" in (got.stdout or "")
