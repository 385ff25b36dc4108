"""What the target was when it was measured: kernel, RT flavour, CPU settings, IRQs."""

from __future__ import annotations

import asyncio
import re

from station.target import virtualization
from station.target.spoilers import read_facts
from station.target.ssh import TargetConnection

AUDIT_COMMANDS = {
    "uname": "uname -a",
    "cmdline": "cat /proc/cmdline",
    "nproc": "nproc",
    "rtai": "cat /proc/rtai/hal",
    "realtime": "cat /sys/kernel/realtime",  # "1" on a PREEMPT_RT kernel; absent otherwise
    "smt_active": "cat /sys/devices/system/cpu/smt/active",
    "governor_cpu0": "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
    "loadavg": "cat /proc/loadavg",
    "lsmod": "lsmod",
    "interrupts": "cat /proc/interrupts",
}


# Commands in flight at once on the one SSH connection: each costs a round trip and a shell on the
# target (0.1-0.4 s on a loaded machine, more in an emulated guest), so one at a time made the
# audit the longest step of a short run; OpenSSH allows 10 sessions per connection (MaxSessions),
# and a run's own stream or probe may hold one.
AUDIT_CONCURRENCY = 4


async def audit(conn: TargetConnection) -> dict[str, str]:
    gate = asyncio.Semaphore(AUDIT_CONCURRENCY)

    async def fact(command: str) -> str:
        async with gate:
            result = await conn.run(command, check=False)
        if result.exit_status == 0:
            return (result.stdout or "").strip()
        return f"unavailable: {(result.stderr or '').strip()}"

    async def virtual_machine() -> str:
        async with gate:
            return virtualization.judge(await read_facts(conn, virtualization.FACTS)).text()

    values = await asyncio.gather(*(fact(c) for c in AUDIT_COMMANDS.values()), virtual_machine())
    return dict(zip([*AUDIT_COMMANDS, "virtual_machine"], values, strict=True))


def irq_total(interrupts: str, irq: int | str) -> int | None:
    """Total count over CPUs of one /proc/interrupts row (by number or device name)."""
    for line in interrupts.splitlines()[1:]:
        head, _, rest = line.partition(":")
        fields = rest.split()
        counts = [int(f) for f in fields if f.isdigit()]
        if head.strip() == str(irq) or (isinstance(irq, str) and re.search(rf"\b{re.escape(irq)}\b", rest)):
            return sum(counts)
    return None


async def interrupt_count(conn: TargetConnection, row: int | str) -> int | None:
    """The current total of one /proc/interrupts row (None: no such row now)."""
    return irq_total((await conn.run("cat /proc/interrupts")).stdout or "", row)
