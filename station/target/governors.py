"""The target's cpufreq governors: read, set for a run, and put back — also by a cleanup after
a crash, from the copy saved in the work dir (a gpio case may ask for a governor)."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from station.target.errors import TargetError

if TYPE_CHECKING:  # the config's governor names are read without the SSH stack (asyncssh)
    from station.target.ssh import TargetConnection

GOVERNORS = ("performance", "ondemand", "powersave", "schedutil", "conservative", "userspace")
CPUFREQ_DIR = "/sys/devices/system/cpu/cpufreq"
GOVERNOR_FILE = re.compile(r"/sys/devices/system/cpu/cpufreq/policy[0-9]{1,4}/scaling_governor")
SAVED = "governors.saved"  # in the work dir: what a run found, for a cleanup after a crash


async def governor_files(conn: TargetConnection) -> list[str]:
    """Each cpufreq policy's scaling_governor file; TargetError if the target has no cpufreq."""
    listed = await conn.run(f"ls {CPUFREQ_DIR}", check=False)
    policies = [
        p for p in (listed.stdout or "").split() if p.startswith("policy") and p[6:].isdigit()
    ]
    if listed.exit_status != 0 or not policies:
        raise TargetError(f"{conn.endpoint.where}: no cpufreq policies under {CPUFREQ_DIR} (the "
                          "kernel has no CPU frequency scaling, or it is not exposed): a case "
                          "cannot set a governor here")
    return [f"{CPUFREQ_DIR}/{p}/scaling_governor" for p in sorted(policies,
                                                                  key=lambda p: int(p[6:]))]


async def read_governors(conn: TargetConnection) -> dict[str, str]:
    """The governor of each policy now (to put back after the run)."""
    found = {}
    for path in await governor_files(conn):
        got = await conn.run(f"cat {shlex.quote(path)}", check=False)
        if got.exit_status != 0 or not (got.stdout or "").strip():
            raise TargetError(f"{conn.endpoint.where}: cannot read {path}: "
                              f"{(got.stderr or '').strip()}")
        found[path] = (got.stdout or "").strip()
    return found


async def write_governors(conn: TargetConnection, governors: dict[str, str]) -> None:
    """Set each policy's governor; the kernel refuses an unknown one (it says which it knows)."""
    for path, governor in governors.items():
        await conn.upload(f"{governor}\n".encode(), path, privileged=True)
        now = ((await conn.run(f"cat {shlex.quote(path)}", check=False)).stdout or "").strip()
        if now != governor:
            known = await conn.run(
                f"cat {shlex.quote(path.rsplit('/', 1)[0] + '/scaling_available_governors')}",
                check=False,
            )
            raise TargetError(f"{conn.endpoint.where}: {path} reads {now!r} after writing "
                              f"{governor!r} (available: {(known.stdout or '?').strip()})")


def saved_path(work_dir: str) -> str:
    return f"{work_dir.rstrip('/')}/{SAVED}"


async def save_governors(conn: TargetConnection, work_dir: str, governors: dict[str, str]) -> None:
    """Leave the governors found on the target where `station cleanup` finds them: a run killed
    before it puts them back (SIGKILL, a power cut of this machine) must not change the target."""
    await conn.run(f"mkdir -p {shlex.quote(work_dir)}")
    await conn.upload("".join(f"{path} {gov}\n" for path, gov in governors.items()).encode(),
                      saved_path(work_dir))


async def forget_saved(conn: TargetConnection, work_dir: str) -> None:
    await conn.run(f"rm -f {shlex.quote(saved_path(work_dir))}", check=False)


async def restore_saved(conn: TargetConnection, work_dir: str) -> list[str]:
    """Put back the governors a run saved and did not restore; what was put back, for the log.
    The file is outside input: only governor files and known governors are taken from it."""
    got = await conn.run(f"cat {shlex.quote(saved_path(work_dir))}", check=False)
    if got.exit_status != 0:
        return []
    governors = {}
    for line in (got.stdout or "").splitlines():
        path, _, governor = line.strip().partition(" ")
        if GOVERNOR_FILE.fullmatch(path) and governor in GOVERNORS:
            governors[path] = governor
    await write_governors(conn, governors)
    await forget_saved(conn, work_dir)
    return [f"cpufreq governor {gov} put back on {path}" for path, gov in governors.items()]
