"""The interruption detector program (target_modules/tools/irqgap.c) on a target (built or
uploaded as station/target/tools.py does for every program of ours); its command line from the
campaign's options (every value checked by the schema, every word quoted by the caller)."""

from __future__ import annotations

from pathlib import Path

from station.kinds.interruptions.settings import InterruptionsSettings
from station.target.spoilers import cpu_list
from station.target.ssh import TargetConnection, TargetError
from station.target.tools import Tool

IRQGAP = Tool("irqgap")
PROGRAM = IRQGAP.program


def source() -> Path:
    return IRQGAP.source()


def host_binary() -> Path:
    """The static binary for this machine's architecture, built on first use (gcc, libc6-dev)."""
    return IRQGAP.host_binary()


async def ensure(conn: TargetConnection, work_dir: str) -> str:
    """The path of the detector on the target, uploading or building it there if needed."""
    return await IRQGAP.ensure(conn, work_dir)


async def online_cpus(conn: TargetConnection) -> list[int]:
    got = await conn.run("cat /sys/devices/system/cpu/online", check=False)
    if not (cpus := cpu_list(got.stdout or "")):
        raise TargetError(f"{conn.endpoint.where}: cannot read the online CPUs "
                          f"({(got.stderr or got.stdout or '').strip()})")
    return cpus


async def msr_device(conn: TargetConnection, cpu: int, required: bool) -> tuple[str | None, bool]:
    """(/dev/cpu/N/msr if it can be opened, else None; whether the station loaded the msr
    driver for it, so that it unloads it afterwards) — or a TargetError when smi: on asked for
    it. Whether MSR 0x34 itself reads (Intel only; most hypervisors refuse) the detector says."""
    dev = f"/dev/cpu/{cpu}/msr"
    got = await conn.run(f"if ! test -e {dev}; then modprobe msr 2>/dev/null && echo loaded; fi; "
                         f"test -r {dev}",
                         check=False, privileged=True)
    loaded = "loaded" in (got.stdout or "")
    if got.exit_status == 0:
        return dev, loaded
    if required:
        raise TargetError(f"{conn.endpoint.where}: interruptions.smi needs {dev} (an x86 CPU and "
                          "the msr driver: modprobe msr); set smi: auto or off on this target")
    return None, loaded


def arguments(s: InterruptionsSettings, *, cpu: int, duration_s: float, msr: str | None,
              traced: bool = False) -> list[str]:
    # a tick every 250 ms also takes new count baselines: a gap's counts cover at most that
    args = ["--cpu", str(cpu), "--threshold-ns", str(round(s.threshold * 1e9)), "--duration-s",
            str(int(duration_s)), "--priority", str(s.priority), "--clock", s.clock, "--flush-ms",
            "250"]
    if s.counts is False or (s.counts == "auto" and traced):  # the trace says what ran in each gap
        args.append("--no-counts")
    args += ["--msr-dev", msr] if msr else ["--no-smi"]
    return args
