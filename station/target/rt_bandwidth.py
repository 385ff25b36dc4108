"""How the target's kernel keeps a real-time task that never sleeps from starving the rest, read
from the facts the spoiler check gathers. Two mechanisms, by kernel:

- RT throttling (before 6.12, or with CONFIG_RT_GROUP_SCHED): the real-time class may run
  sched_rt_runtime_us of every sched_rt_period_us; a SCHED_FIFO loop that never sleeps is then
  stopped for the rest of each period, whether anything else wants the CPU or not.
- The fair deadline server (6.12 on, "sched/rt: Remove default bandwidth control"): CFS tasks on
  a CPU get a runtime of every period (50 ms of 1 s by default, per CPU in
  /sys/kernel/debug/sched/fair_server/cpuN/) ahead of real-time tasks, and only when they are
  runnable and starved: a real-time loop is stopped only while a CFS task on its CPU wants it.
  sched_rt_runtime_us no longer stops anything there (it bounds admission control).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from station.common.formatting import duration_us

FAIR_SERVER_SINCE = (6, 12)
FAIR_SERVER_DIR = "/sys/kernel/debug/sched/fair_server"
DEFAULT_FAIR_RUNTIME_NS = 50_000_000  # the kernel's default fair_server runtime and period
DEFAULT_FAIR_PERIOD_NS = 1_000_000_000

# facts the spoiler check reads ({cpu}: the measured CPU); an unreadable one reads ""
FACTS = {
    "rt_runtime_us": "cat /proc/sys/kernel/sched_rt_runtime_us",
    "rt_period_us": "cat /proc/sys/kernel/sched_rt_period_us",
    "kernel_release": "uname -r",
    "fair_server": f"ls {FAIR_SERVER_DIR}",
    "fair_server_runtime_ns": f"cat {FAIR_SERVER_DIR}/cpu{{cpu}}/runtime",
    "fair_server_period_ns": f"cat {FAIR_SERVER_DIR}/cpu{{cpu}}/period",
    "rt_group_sched": "grep -h '^CONFIG_RT_GROUP_SCHED=' /boot/config-$(uname -r)",
}

Mechanism = Literal["rt-throttling", "fair-server"]


@dataclass(frozen=True)
class Guard:
    """One mechanism's budget: a real-time loop that never sleeps may be stopped for up to
    `stop_ns` of every `period_ns`."""

    mechanism: Mechanism
    stop_ns: int
    period_ns: int
    read: bool = True  # False: the kernel's defaults, its own files not readable

    def sentence(self, cpu: int | None = None) -> str:
        """What it does, in the kernel's own terms."""
        stop, period = duration_us(self.stop_ns / 1e3), duration_us(self.period_ns / 1e3)
        if self.mechanism == "rt-throttling":
            runtime_us = (self.period_ns - self.stop_ns) // 1000
            return (f"sched_rt_runtime_us {runtime_us} of sched_rt_period_us "
                    f"{self.period_ns // 1000} stops a SCHED_FIFO loop that never sleeps for up to "
                    f"{stop} every {period}")
        where = f"cpu{cpu}" if cpu is not None else "cpuN"
        files = f"{FAIR_SERVER_DIR}/{where}/runtime and period"
        source = files if self.read else f"the kernel's default: {files} were not readable"
        return (f"the kernel's fair deadline server gives CFS tasks up to {stop} of every {period} "
                f"({source}) ahead of a SCHED_FIFO loop that starves them")

    def advice(self, cpu: int | None = None) -> str:
        """How to measure without it."""
        if self.mechanism == "rt-throttling":
            return "set /proc/sys/kernel/sched_rt_runtime_us to -1 for the run"
        where = f"cpu{cpu}" if cpu is not None else "cpuN"
        return (f"keep other tasks off the CPU (isolcpus=, nohz_full=, taskset), or set "
                f"{FAIR_SERVER_DIR}/{where}/runtime to 0 for the run")


def kernel_version(release: str) -> tuple[int, int] | None:
    """(major, minor) of a `uname -r` string; None when it is not one."""
    m = re.match(r"\s*(\d{1,4})\.(\d{1,4})", release or "")
    return (int(m[1]), int(m[2])) if m else None


def _whole(text: str | None) -> int | None:
    value = str(text or "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


def has_fair_server(facts: dict[str, str]) -> bool:
    """The kernel has the fair deadline server: its debugfs directory lists CPUs, or (debugfs not
    readable) the kernel is 6.12 or later."""
    if re.search(r"\bcpu\d+\b", str(facts.get("fair_server") or "")):
        return True
    version = kernel_version(str(facts.get("kernel_release") or ""))
    return version is not None and version >= FAIR_SERVER_SINCE


def guards(facts: dict[str, str]) -> list[Guard]:
    """The mechanisms that stop a never-sleeping real-time loop on this target, harshest first
    (RT throttling stops it whether or not anything else wants the CPU); [] when none does (RT
    throttling off or absent, a fair server with runtime 0) or nothing could be read."""
    out: list[Guard] = []
    fair = has_fair_server(facts)
    runtime, period = _whole(facts.get("rt_runtime_us")), _whole(facts.get("rt_period_us"))
    rt_group = str(facts.get("rt_group_sched") or "").strip() == "CONFIG_RT_GROUP_SCHED=y"
    if (not fair or rt_group) and runtime is not None and period and runtime < period:
        out.append(Guard("rt-throttling", (period - runtime) * 1000, period * 1000))
    if fair:
        f_runtime, f_period = (
            _whole(facts.get("fair_server_runtime_ns")), _whole(facts.get("fair_server_period_ns"))
        )
        if f_runtime is not None and f_period:
            if 0 < f_runtime < f_period:
                out.append(Guard("fair-server", f_runtime, f_period))
        else:
            out.append(Guard("fair-server", DEFAULT_FAIR_RUNTIME_NS, DEFAULT_FAIR_PERIOD_NS,
                             read=False))
    return out
