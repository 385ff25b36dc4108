"""What the target was when it was measured: kernel, RT flavour, CPU settings, IRQs."""

from __future__ import annotations

import re

from station.common.units import decimal_int
from station.target import virtualization
from station.target.spoilers import read_facts
from station.target.ssh import TargetConnection

AUDIT_COMMANDS = {
    "uname": "uname -a",
    "machine": "uname -m",  # the architecture: x86_64, aarch64, armv7l
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


async def audit(conn: TargetConnection) -> dict[str, str]:
    # One command at a time: the guest's dropbear refused a fifth concurrent session ("Session
    # request failed"), and a target's SSH server may allow fewer sessions per connection than
    # OpenSSH's 10.
    facts = {}
    for key, command in AUDIT_COMMANDS.items():
        result = await conn.run(command, check=False)
        if result.exit_status == 0:
            facts[key] = (result.stdout or "").strip()
        else:
            facts[key] = f"unavailable: {(result.stderr or '').strip()}"
    facts["virtual_machine"] = virtualization.judge(await read_facts(conn,
                                                                     virtualization.FACTS)).text()
    return facts


def irq_total(interrupts: str, irq: int | str) -> int | None:
    """Total count over CPUs of one /proc/interrupts row (by number or device name)."""
    for line in interrupts.splitlines()[1:]:
        head, _, rest = line.partition(":")
        fields = rest.split()
        counts = [n for f in fields if (n := decimal_int(f)) is not None]
        if head.strip() == str(irq) or (isinstance(irq, str) and re.search(rf"\b{re.escape(irq)}\b",
                                                                           rest)):
            return sum(counts)
    return None


async def interrupt_count(conn: TargetConnection, row: int | str) -> int | None:
    """The current total of one /proc/interrupts row (None: no such row now)."""
    return irq_total((await conn.run("cat /proc/interrupts")).stdout or "", row)
