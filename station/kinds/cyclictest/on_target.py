"""cyclictest (rt-tests) on a host: its command line from the campaign's options
(every value checked by the schema, every word quoted here), what the installed
version can do, and where its JSON result goes."""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from station.kinds.cyclictest.settings import CyclictestSettings
from station.target import rtla
from station.target.ssh import TargetConnection, TargetError

PROGRAM = "cyclictest"


@dataclass(frozen=True)
class Installed:
    version: str | None  # "2.40" from "cyclictest V 2.40"; None if it did not say
    has_json: bool  # --json=FILE (rt-tests 2.0 and later)


async def installed(conn: TargetConnection) -> Installed:
    """What cyclictest the target has; a clear error if it has none."""
    found = await conn.run(f"command -v {PROGRAM}", check=False)
    if found.exit_status != 0:
        raise TargetError(f"{conn.endpoint.where}: cyclictest is not installed (Debian: apt-get "
                          "install rt-tests)")
    # --help exits non-zero in some versions: only its text matters
    usage = await conn.run(f"{PROGRAM} --help 2>&1", check=False)
    text = usage.stdout or ""
    version = re.search(r"cyclictest\s+V\s*([0-9][0-9A-Za-z.\-]*)", text)
    return Installed(version.group(1) if version else None, "--json" in text)


async def check_smi(conn: TargetConnection) -> None:
    """--smi reads MSR 0x34 through the msr driver: say so before cyclictest fails on it."""
    result = await conn.run("test -e /dev/cpu/0/msr || modprobe msr 2>/dev/null; test -e "
                            "/dev/cpu/0/msr",
                            check=False, privileged=True)
    if result.exit_status != 0:
        raise TargetError(f"{conn.endpoint.where}: cyclictest.smi needs /dev/cpu/0/msr (an x86 CPU "
                          "and the msr driver: modprobe msr); set smi: false on this target")


def arguments(s: CyclictestSettings, *, duration_s: float | None, loops: int | None,
              json_path: str | None) -> list[str]:
    """cyclictest's argument list for one run (quiet: results at the end only, so the
    terminal output never competes with the measurement)."""
    args = ["-q", f"--policy={s.policy}"]
    if s.policy in ("fifo", "rr"):  # -p makes any policy SCHED_FIFO: never give it for other
        args.append(f"-p{s.effective_priority}")
    args += [f"-i{round(s.interval * 1e6)}", f"-h{round(s.histogram * 1e6)}"]
    if s.smp:
        args.append("-S")
    else:
        args.append("-t" if s.threads == "per-cpu" else f"-t{s.threads}")
        if s.affinity == "all":
            args.append("-a")
        elif s.affinity != "none":
            args.append(f"-a{s.affinity}")
    if s.mlockall:
        args.append("-m")
    if s.smi:
        args.append("--smi")
    if s.breaktrace is not None:
        args.append(f"-b{round(s.breaktrace * 1e6)}")
    if s.cpu_dma_latency == "off":
        args.append("--laptop")
    elif s.cpu_dma_latency != 0:
        args.append(f"--latency={s.cpu_dma_latency}")
    if duration_s is not None:
        args.append(f"-D{math.ceil(duration_s)}")
    if loops is not None:
        args.append(f"-l{loops}")
    if json_path is not None:
        args.append(f"--json={json_path}")
    return args


#: the line the station prints before each slice of a sliced run (cyclictest.slices); the parser
#splits on it
SLICE_MARK = "# irq-station slice"


def sliced_command(s: CyclictestSettings, duration_s: float) -> str:
    """cyclictest.slices consecutive invocations of duration_s/slices each, a SLICE_MARK line before
    each, in one shell: the probe's process group (a TERM reaches the running slice, which prints
    its histogram, and the loop). A slice that fails ends the loop with its status."""
    one = shlex.join([PROGRAM, *arguments(s, duration_s=duration_s / s.slices, loops=None,
                                          json_path=None)])
    loop = (f"i=0; while [ $i -lt {s.slices} ]; do i=$((i+1)); echo \"{SLICE_MARK} $i of "
            f"{s.slices}\"; {one} || exit $?; done")
    return shlex.join(["sh", "-c", loop])


def command(s: CyclictestSettings, **kwargs: object) -> str:
    return shlex.join([PROGRAM, *arguments(s, **kwargs)])  # type: ignore[arg-type]


# rtla's own process (it reads the tracer's buffers) at SCHED_FIFO 1: in an emulated guest under
# hackbench it was starved for over 30 s of a 2-s run at SCHED_OTHER
TIMERLAT_COLLECTOR_PRIORITY = 1


def timerlat_arguments(s: CyclictestSettings, duration_s: float,
                       trace_path: str | None = None) -> list[str]:
    """`rtla timerlat hist` as cyclictest's companion: its CPUs (cyclictest's CPU list; every CPU
    otherwise), its period, its SCHED_FIFO priority (rtla's default for policy other) and its
    histogram range in 1 µs buckets, for duration_s rounded up to whole seconds."""
    cpus = s.affinity if not s.smp and s.affinity not in ("all", "none") else None
    priority = s.effective_priority if s.policy in ("fifo", "rr") else None
    stop_us = None if s.timerlat_stop is None else round(s.timerlat_stop * 1e6)
    return rtla.timerlat_arguments(cpus, max(1, math.ceil(duration_s)), round(s.interval * 1e6),
                                   priority,
                                   max(11, round(s.histogram * 1e6)), stop_us,
                                   trace_path if stop_us else None)
