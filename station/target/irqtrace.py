"""A tracefs instance of the station's own on the target: the kernel's interrupt tracepoints
(irq, irq_vectors, nmi, sched_switch) on the measured CPU only, clock `mono` (the detector's
CLOCK_MONOTONIC). An instance has its own buffer, events and clock, so the user's own tracing
is left alone; removing it (rmdir) undoes everything. Its name comes from the bench's work
directory, so two stations measuring different work directories never remove each other's;
`station cleanup` and every run's preflight remove one a crash left behind."""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass

from station.target.ssh import TargetConnection, TargetError

INSTANCE_PREFIX = "irq-station-"
MARKER = "irq-station:"  # the tracing-cost blocks' marks in the trace: traced, untracing
BUFFER_KB = 16384  # on the measured CPU; the others get the minimum
TRACEFS_DIRS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
EVENTS = ("irq", "irq_vectors", "nmi/nmi_handler", "sched/sched_switch")
# a traced module run (docs/decomposition.md): also who woke whom, every hrtimer callback (the
# module's own timer among them) and, where the kernel has them, the IRQ-off regions
MODULE_EVENTS = ("irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry",
                 "irq/softirq_exit",
                 "irq_vectors", "nmi/nmi_handler", "sched/sched_switch", "sched/sched_wakeup",
                 "timer/hrtimer_expire_entry", "timer/hrtimer_expire_exit",
                 "preemptirq/irq_disable", "preemptirq/irq_enable")

# the tracefs root, mounting it where the kernel has it but nobody mounted it (an initramfs)
_FIND_ROOT = (
    "for d in " + " ".join(TRACEFS_DIRS) + "; do [ -d \"$d/instances\" ] && { echo \"$d\"; exit 0; "
                                           "}; done; mount -t tracefs nodev /sys/kernel/tracing "
                                           "2>/dev/null && [ -d /sys/kernel/tracing/instances ] && "
                                           "{ echo /sys/kernel/tracing; exit 0; }; exit 1"
)


def cpumask(cpu: int) -> str:
    """tracing_cpumask's format: hex words of 32 CPUs, highest first, comma-separated."""
    words = [0] * (cpu // 32 + 1)
    words[cpu // 32] = 1 << (cpu % 32)
    return ",".join(f"{w:08x}" for w in reversed(words)).lstrip("0,") or "0"


def _remove_script(instance: str) -> str:
    i = shlex.quote(instance)
    # events off first: an instance with enabled events can still be busy for a moment
    return (f"if [ -d {i} ]; then echo 0 > {i}/tracing_on; echo 0 > {i}/events/enable; "
            f"rmdir {i} || {{ sleep 0.2; rmdir {i}; }}; fi")


def instance_name(work_dir: str) -> str:
    return INSTANCE_PREFIX + hashlib.sha256(work_dir.encode()).hexdigest()[:12]


class TraceSession:
    """The instance of one run: opened before the probe starts, read and removed after it ends."""

    def __init__(self, root: str, cpu: int, work_dir: str, events: tuple[str, ...] = EVENTS,
                 buffer_kb: int = BUFFER_KB) -> None:
        self.root = root
        self.cpu = cpu
        self.events = events
        self.buffer_kb = buffer_kb
        self.name = instance_name(work_dir)
        self.path = f"{root}/instances/{self.name}"

    async def open(self, conn: TargetConnection, record: bool = True) -> list[str]:
        """Create it, and start recording unless record is False (then `record()` does); returns the
        events the kernel had (nmi is x86 only, say)."""
        i, cpu = shlex.quote(self.path), self.cpu
        enable = " ".join(
            f"if [ -e {i}/events/{e}/enable ]; then echo 1 > {i}/events/{e}/enable && echo {e}; "
            "fi" + ";"
            for e in self.events
        )
        script = (
            f"{_remove_script(self.path)}; mkdir {i} && echo 0 > {i}/tracing_on && echo mono > "
            f"{i}/trace_clock && echo {cpumask(cpu)} > {i}/tracing_cpumask && echo 8 > "
            f"{i}/buffer_size_kb && echo {self.buffer_kb} > {i}/per_cpu/cpu{cpu}/buffer_size_kb && "
            f"{{ {enable} }}"
            + (f" && echo 1 > {i}/tracing_on" if record else "")
        )
        got = await conn.run(f"sh -c {shlex.quote(script)}", check=False, privileged=True)
        if got.exit_status != 0:
            await self.remove(conn)
            raise TargetError(f"tracefs instance {self.path}: "
                              f"{(got.stderr or got.stdout or '').strip()[-300:]}")
        enabled = (got.stdout or "").split()
        if not any(e.split("/")[0] == "irq" for e in enabled):
            await self.remove(conn)
            raise TargetError(f"tracefs instance {self.path}: the kernel has no irq tracepoints")
        return enabled

    async def read(self, conn: TargetConnection) -> tuple[str, str]:
        """(the CPU's trace, its stats: overruns and dropped events), tracing stopped first."""
        i = shlex.quote(self.path)
        await conn.run(f"sh -c {shlex.quote(f'echo 0 > {i}/tracing_on')}", check=False,
                       privileged=True)
        trace = await conn.run(f"cat {i}/per_cpu/cpu{self.cpu}/trace", check=False, privileged=True)
        stats = await conn.run(f"cat {i}/per_cpu/cpu{self.cpu}/stats", check=False, privileged=True)
        if trace.exit_status != 0:
            raise TargetError(f"reading {self.path}: {(trace.stderr or '').strip()[-300:]}")
        return trace.stdout or "", stats.stdout or ""

    async def read_exact(self, conn: TargetConnection) -> TraceDump:
        """The CPU's trace twice, tracing stopped first: as printed (fields, µs) and in the raw form
        (`options/raw`: the same events in the same order with their nanosecond timestamps), with
        the enabled events' type ids that tie the two together (station/parsers/tracefs.py)."""
        text, stats = await self.read(conn)
        i = shlex.quote(self.path)
        raw_script = (f"echo 1 > {i}/options/raw && cat {i}/per_cpu/cpu{self.cpu}/trace; s=$?; "
                      f"echo 0 > {i}/options/raw; exit $s")
        raw = await conn.run(f"sh -c {shlex.quote(raw_script)}", check=False, privileged=True)
        systems = sorted({e.split("/")[0] for e in self.events})
        ids_script = (
            f"cd {i}/events && grep -H . {' '.join(f'{s}/*/id' for s in systems)} 2>/dev/null; true"
        )
        ids = await conn.run(f"sh -c {shlex.quote(ids_script)}", check=False, privileged=True)
        return TraceDump(text, (raw.stdout or "") if raw.exit_status == 0 else "", ids.stdout or "",
                         stats)

    async def remove(self, conn: TargetConnection) -> None:
        await remove_instance(conn, self.name, self.root)

    async def record(self, conn: TargetConnection) -> None:
        """Start recording (its events enabled by `open`: switching tracing_on patches nothing)."""
        got = await conn.run(
            f"sh -c {shlex.quote(f'echo 1 > {shlex.quote(self.path)}/tracing_on')}", check=False,
            privileged=True
        )
        if got.exit_status != 0:
            raise TargetError(f"tracefs instance {self.path}: "
                              f"{(got.stderr or got.stdout or '').strip()[-300:]}")

    def toggle_command(self, block_s: float) -> str:
        """A shell loop that alternates recorded and unrecorded blocks of block_s (the tracing-cost
        reference, docs/decomposition.md) by switching the instance's recording (tracing_on), each
        switch marked in the trace itself (trace_marker: `untracing` before it stops, `traced` once
        it records again), so the blocks are on the trace's clock. Not the events' enable files:
        turning a tracepoint on or off patches kernel text on every CPU, which every block would
        repeat (and which froze the emulated guest). Run it on the traced CPU: tracing_cpumask keeps
        its marks only."""
        i = shlex.quote(self.path)
        mark = f"echo {MARKER}{{}} > {i}/trace_marker"
        return (f"{mark.format('traced')}; while :; do sleep {block_s:g}; "
                f"{mark.format('untracing')}; echo 0 > {i}/tracing_on; sleep {block_s:g}; echo 1 > "
                f"{i}/tracing_on; {mark.format('traced')}; done")


@dataclass(frozen=True)
class TraceDump:
    text: str  # per_cpu/cpuN/trace as printed
    raw: str  # the same with options/raw ("" if the kernel refused it)
    ids: str  # "<system>/<event>/id:<type id>" lines
    stats: str  # per_cpu/cpuN/stats: overruns, dropped events


async def tracefs_root(conn: TargetConnection) -> str | None:
    """Where tracefs is (mounting it if the kernel has it), or None."""
    got = await conn.run(f"sh -c {shlex.quote(_FIND_ROOT)}", check=False, privileged=True)
    root = (got.stdout or "").strip()
    return root if got.exit_status == 0 and root in TRACEFS_DIRS else None


async def remove_instance(conn: TargetConnection, name: str, root: str | None = None) -> bool:
    """Remove an instance of the station's (one a crash left, too); True if there was one."""
    roots = [root] if root else list(TRACEFS_DIRS)
    script = "; ".join(
        f"if [ -d {shlex.quote(f'{r}/instances/{name}')} ]; then echo found; "
        f"{_remove_script(f'{r}/instances/{name}')}; fi" for r in roots
    )
    got = await conn.run(f"sh -c {shlex.quote(script)}", check=False, privileged=True)
    return "found" in (got.stdout or "")
