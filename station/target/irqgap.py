"""The interruption detector program (target_modules/tools/irqgap.c) on a target: built once on
this machine as a static binary and uploaded where the target has the same architecture, or
compiled on the target with its own cc otherwise; its command line from the campaign's options
(every value checked by the schema, every word quoted by the caller)."""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
from pathlib import Path

from station.config import InterruptionsSettings
from station.target.spoilers import cpu_list
from station.target.ssh import TargetConnection, TargetError

PROGRAM = "irqgap"
CFLAGS = ("-std=gnu11", "-O2", "-Wall", "-Wextra")


def source() -> Path:
    from station.vm.latency_modules import module_sources  # the packaged target_modules/, or the checkout's

    return module_sources() / "tools" / "irqgap.c"


def source_digest() -> str:
    return hashlib.sha256(source().read_bytes()).hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "irq-station" / "irqgap"


def host_binary() -> Path:
    """The static binary for this machine's architecture, built on first use (gcc, libc6-dev)."""
    out = cache_dir() / f"{PROGRAM}-{platform.machine()}-{source_digest()}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")  # two stations may build at once
    res = subprocess.run(["gcc", *CFLAGS, "-static", "-o", str(tmp), str(source())],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise TargetError(f"building {PROGRAM} here failed (gcc and libc6-dev are needed):\n{res.stderr[-2000:]}")
    tmp.rename(out)
    return out


async def ensure(conn: TargetConnection, work_dir: str) -> str:
    """The path of the detector on the target, uploading or building it there if needed."""
    remote = f"{work_dir.rstrip('/')}/bin/{PROGRAM}-{source_digest()}"
    q = shlex.quote(remote)
    if (await conn.run(f"test -x {q}", check=False)).exit_status == 0:
        return remote
    await conn.run(f"mkdir -p {shlex.quote(remote.rsplit('/', 1)[0])}")
    arch = ((await conn.run("uname -m", check=False)).stdout or "").strip()
    if arch == platform.machine():
        await conn.upload(host_binary().read_bytes(), remote + ".part")
        await conn.run(f"chmod 755 {q}.part && mv {q}.part {q}")
        return remote
    # another architecture: its own compiler, or nothing
    if (await conn.run("command -v cc", check=False)).exit_status != 0:
        raise TargetError(f"{conn.endpoint.where} is {arch or 'of an unknown architecture'} (this machine: "
                          f"{platform.machine()}) and has no cc to build {PROGRAM}: install gcc there")
    await conn.upload(source().read_bytes(), remote + ".c")
    built = await conn.run(f"cc {' '.join(CFLAGS)} -o {q} {q}.c", check=False)
    await conn.run(f"rm -f {q}.c", check=False)
    if built.exit_status != 0:
        raise TargetError(f"{conn.endpoint.where}: building {PROGRAM} failed: {(built.stderr or '').strip()[-1500:]}")
    return remote


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
    got = await conn.run(f"if ! test -e {dev}; then modprobe msr 2>/dev/null && echo loaded; fi; test -r {dev}",
                         check=False, privileged=True)
    loaded = "loaded" in (got.stdout or "")
    if got.exit_status == 0:
        return dev, loaded
    if required:
        raise TargetError(f"{conn.endpoint.where}: interruptions.smi needs {dev} (an x86 CPU and the msr driver: "
                          "modprobe msr); set smi: auto or off on this target")
    return None, loaded


def arguments(s: InterruptionsSettings, *, cpu: int, duration_s: float, msr: str | None,
              traced: bool = False) -> list[str]:
    # a tick every 250 ms also takes new count baselines: a gap's counts cover at most that
    args = ["--cpu", str(cpu), "--threshold-ns", str(round(s.threshold * 1e9)), "--duration-s",
            str(int(duration_s)), "--priority", str(s.priority), "--clock", s.clock, "--flush-ms", "250"]
    if s.counts is False or (s.counts == "auto" and traced):  # the trace says what ran in each gap
        args.append("--no-counts")
    args += ["--msr-dev", msr] if msr else ["--no-smi"]
    return args
