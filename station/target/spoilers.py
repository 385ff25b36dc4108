"""What spoils a latency figure on the measured CPU, checked at every run: the things the seeds
ran into. SMT siblings online (seed 003: hyper-threading made its figures "completely bunk"), a
frequency governor other than performance (seed 002: ondemand made an idle Pi slower than a
loaded one), a CPU the scheduler is free to use (not isolated), RT throttling (a SCHED_FIFO
loop stopped for the rest of each period) or, from Linux 6.12, the fair deadline server (CFS tasks
on the CPU run ahead of it for their runtime of each period), a device under test that shares its
IRQ line (seed 000: the handler of another device runs first), and a target that is a virtual
machine (station/target/virtualization.py)."""

from __future__ import annotations

import re
import shlex
from typing import Any

from station.common.units import decimal_int
from station.target import rt_bandwidth, virtualization
from station.target.ssh import TargetConnection

_FACTS = {
    "online": "cat /sys/devices/system/cpu/online",
    "smt_active": "cat /sys/devices/system/cpu/smt/active",
    "siblings": "cat /sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list",
    "governor": "cat /sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor",
    "isolated": "cat /sys/devices/system/cpu/isolated",
    "nohz_full": "cat /sys/devices/system/cpu/nohz_full",
    **rt_bandwidth.FACTS,
    **virtualization.FACTS,
}
_TRIGGER = re.compile(r"\s\S*\d-(?:edge|level|fasteoi|simple|percpu|eoi)\s+(?P<actions>\S.*)$")


def cpu_list(text: str) -> list[int]:
    """A kernel CPU list ("0-3,6\n") as numbers; [] if it is empty or not one."""
    cpus: list[int] = []
    for part in "".join(text.split()).split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = decimal_int(lo), decimal_int(hi or lo)
        if first is None or last is None or last < first or last > 65535:
            return []
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def irq_actions(interrupts: str, row: int | str) -> list[str] | None:
    """The handlers registered on one /proc/interrupts row (by number or device name)."""
    for line in interrupts.splitlines()[1:]:
        head, _, rest = line.partition(":")
        m = _TRIGGER.search(rest)
        actions = [a.strip() for a in m["actions"].split(",")] if m else []
        if head.strip() == str(row) or (isinstance(row, str) and row in actions):
            return actions
    return None


def flags(facts: dict[str, str], cpu: int | None, device_actions: list[str] | None) -> list[str]:
    """The spoilers, each a sentence; facts as read by `check` (an absent file reads "")."""
    out: list[str] = []
    if vm := virtualization.spoiler(virtualization.judge(facts)):
        out.append(vm)
    online = set(cpu_list(facts.get("online", "")))
    if not online:  # nothing could be read (a target without sysfs, such as the twin)
        return out
    if cpu is not None:
        siblings = [c for c in cpu_list(facts.get("siblings", "")) if c != cpu and c in online]
        if siblings:
            out.append(f"SMT: CPU {cpu} shares its core with CPU {', '.join(map(str, siblings))}, "
                       "online (seed 003: hyper-threading spoils the figures; take the sibling "
                       "offline)")
        governor = facts.get("governor", "")
        if governor and governor != "performance":
            out.append(f"governor: CPU {cpu} runs the {governor} frequency governor, not "
                       "performance (seed 002: ondemand made an idle board slower than a loaded "
                       "one)")
        isolated = set(cpu_list(facts.get("isolated", ""))) | set(cpu_list(facts.get("nohz_full",
                                                                                     "")))
        if cpu not in isolated:
            out.append(f"isolation: CPU {cpu} is not isolated (isolcpus=, nohz_full=): the "
                       "scheduler may run other tasks and timers there")
    elif facts.get("smt_active") == "1":
        out.append("SMT: hyper-threading is active on this target (seed 003)")
    for guard in rt_bandwidth.guards(facts):
        name = "RT throttling" if guard.mechanism == "rt-throttling" else "fair server"
        out.append(f"{name}: {guard.sentence(cpu)}")
    if device_actions is not None and len(device_actions) > 1:
        out.append(f"shared IRQ: the device's line also serves {', '.join(device_actions[1:])} "
                   f"(handlers: {', '.join(device_actions)}; seed 000)")
    return out


async def check(conn: TargetConnection, cpu: int | None,
                device_row: int | str | None = None) -> dict[str, Any]:
    """{"cpu", "facts", "flags", "virtual_machine"} for the run's measured CPU (None: not
    pinned)."""
    facts = await read_facts(conn, {k: cmd.format(cpu=cpu if cpu is not None else 0)
                                    for k, cmd in _FACTS.items()})
    actions = None
    if device_row is not None:
        interrupts = await conn.run("cat /proc/interrupts", check=False)
        actions = irq_actions(interrupts.stdout or "", device_row)
    verdict = virtualization.judge(facts)
    return {"cpu": cpu, "facts": facts, "flags": flags(facts, cpu, actions),
            "virtual_machine": {"virtual": verdict.virtual, "evidence": verdict.evidence}}


async def read_facts(conn: TargetConnection, commands: dict[str, str]) -> dict[str, str]:
    """Each command's output on one line (newlines and NULs as spaces; "" when it fails), in one
    round trip; the keys are ours, never the target's."""
    script = "; ".join(f"printf '%s=' {key}; {cmd} 2>/dev/null | tr '\\000\\n' '  '; echo"
                       for key, cmd in commands.items())
    got = await conn.run(f"sh -c {shlex.quote(script)}", check=False)
    facts = {}
    for line in (got.stdout or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in commands:
            facts[key] = value.strip()
    return facts
