"""The interruption detector (seed 003) for real, against injected gaps whose period and length
the test knows:
- in the QEMU VM (a real Debian kernel): the host takes the detector's vCPU (the QEMU thread that
  runs it descheduled by a SCHED_FIFO stealer on its host CPU, tests/vcpu_stealer.py; with one TCG
  thread, docs/vm.md, the guest's other CPU stops with it, as both do in an SMI: a gap no interrupt
  explains, like an SMI or a hypervisor); the test-only module irqgap_inject holds the CPU
  in an hrtimer callback (the local timer line) and in the handler of QEMU's edu device (its own
  line). Each must be found, measured, timed and attributed to its true cause;
- on this machine over the local sshd: the detector runs, the spoilers it reports match what
  sysfs and lscpu say, stops of the detector itself are found, and the report renders.
Emulation adds gaps of its own (milliseconds under TCG): the checks match the injected gaps
and never bound the machine's own latency."""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest
import yaml

from station.kinds.interruptions import analysis as ig
from station.target.irqtrace import TRACEFS_DIRS, instance_name
from station.target.spoilers import cpu_list
from tests.conftest import REPO, free_port, missing, station_cmd, this_machine_is_a_guest
from tests.manifest_check import assert_manifests_fit
from tests.test_cyclictest_campaign import _ssh_target, work_dir  # noqa: F401 - fixture
from tests.test_vm_campaign import vm  # noqa: F401 - fixture: a VM booted once for this module

INJECTOR = "/opt/irq-station/modules/irqgap_inject.ko"
HOLD_LOG = "/proc/irqgap_inject_holds"
# a SCHED_FIFO loop that never sleeps is stopped 50 ms a second by RT throttling: it would hide
# injected gaps (the VM is thrown away afterwards; on a bench, the spoilers report it)
# written once: each write goes through the kernel's RT bandwidth update on every CPU, which a
# loaded TCG guest was seen stuck in for minutes (soft lockups on both CPUs, the shell's write on one)
UNTHROTTLE = ("f=/proc/sys/kernel/sched_rt_runtime_us; "
              'test "$(cat $f)" = -1 || echo -1 > $f')
# periods prime to the 4 ms tick: at a multiple of it, every hold would fall at the same phase
# after a tick, in the blind bookkeeping window that follows a gap the tick caused
HRTIMER = {"period_us": 51_700, "hold_us": 5_000}
EDU = {"period_us": 41_300, "hold_us": 4_000}
STALL = {"count": 20, "period_s": 0.4, "length_s": 0.08}
# The detector's resolution: a gap is bounded by two loop iterations and two clock reads around
# it, microseconds even under TCG; 50 µs leaves room for the TSC calibration's error over a hold
# (irqgap checks it against CLOCK_MONOTONIC_RAW before and after the loop) without letting a
# misplaced or mis-scaled gap (a hold is 4-5 ms) pass.
RES_NS = 50_000


def _hold_log_file(mode: str) -> str:
    return f"/tmp/irqgap-holds-{mode}.txt"


def _injector(mode: str, period_us: int, hold_us: int) -> str:
    """Load the injector and keep a copy of its log of the holds it made (every second, and
    once more when stopped, before unloading: the log goes with the module)."""
    keep = f"cat {HOLD_LOG} > {_hold_log_file(mode)}.new && mv {_hold_log_file(mode)}.new {_hold_log_file(mode)}"
    return (f"{UNTHROTTLE}; insmod {INJECTOR} mode={mode} cpu=1 period_us={period_us} "
            f"hold_us={hold_us} || exit 1; trap '{keep}; rmmod irqgap_inject; exit 0' TERM INT; "
            f"while :; do {keep}; sleep 1; done")


@dataclass(frozen=True)
class Hold:
    """One hold as the injector logged it (guest CLOCK_MONOTONIC): the earliest its interrupt
    could arrive, the busy-wait, and the CPU it held."""

    due_ns: int
    start_ns: int
    end_ns: int
    cpu: int


@dataclass(frozen=True)
class HoldLog:
    mode: str
    period_ns: int
    hold_ns: int
    dropped: int
    now_ns: int  # the log is complete up to here
    holds: list[Hold]


def parse_hold_log(text: str) -> HoldLog:
    """/proc/irqgap_inject_holds (format 2, target_modules/linux/irqgap_inject.c)."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 9 or head[:2] != ["irqgap_inject", "2"]:
        raise ValueError(f"not an irqgap_inject log (format 2): {lines[:1]}")
    holds = []
    for line in lines[1:]:
        word, *fields = line.split()
        if word != "hold" or len(fields) != 4:
            raise ValueError(f"bad hold line: {line!r}")
        hold = Hold(*map(int, fields))
        if not hold.due_ns <= hold.start_ns <= hold.end_ns:
            raise ValueError(f"hold out of order: {line!r}")
        holds.append(hold)
    return HoldLog(head[2], int(head[4]) * 1000, int(head[5]) * 1000, int(head[7]), int(head[8]), holds)


def _guest_file(machine, path: str) -> str:  # noqa: ANN001 - a VirtualMachine
    async def go() -> str:
        async with asyncssh.connect(**machine.connect_options()) as conn:
            return (await conn.run(f"cat {path}", check=True)).stdout

    return asyncio.run(go())


@dataclass
class ClockOffset:
    """Guest CLOCK_MONOTONIC minus host time.monotonic(), measured by round trips over SSH (never
    from the detector): the guest's clock read between two host reads; the tightest round trip
    of many bounds the offset within ± its half."""

    host_s: float
    offset_s: float
    uncertainty_s: float


# busybox ash builtins only (no process per read): the third line of /proc/timer_list is
# "now at <ktime_get ns> nsecs"
_READ_GUEST_CLOCK = 'while read x; do { read a; read b; read c; } < /proc/timer_list; echo "$c"; done'


def _guest_clock_over_ssh(machine, rounds: int = 40) -> ClockOffset:  # noqa: ANN001 - a VirtualMachine
    async def go() -> ClockOffset:
        async with asyncssh.connect(**machine.connect_options()) as conn:
            proc = await conn.create_process(_READ_GUEST_CLOCK)
            best = None
            for _ in range(rounds):
                t0 = time.monotonic()
                proc.stdin.write("\n")
                line = await asyncio.wait_for(proc.stdout.readline(), 30)
                t1 = time.monotonic()
                words = line.split()
                assert words[:2] == ["now", "at"], f"/proc/timer_list: {line!r}"
                guest_s = int(words[2]) / 1e9
                if best is None or t1 - t0 < 2 * best.uncertainty_s:
                    best = ClockOffset((t0 + t1) / 2, guest_s - (t0 + t1) / 2, (t1 - t0) / 2)
            proc.stdin.write_eof()
            proc.close()
            return best

    return asyncio.run(go())


@dataclass
class Stall:
    """One stall of the detector's vCPU, on the guest's clock: it began after outer_start (the
    stealer could not run before it was due), by inner_start (the stealer had the host CPU then) and
    lasted at least until inner_end (the stealer still had it)."""

    outer_start_ns: int
    inner_start_ns: int
    inner_end_ns: int


def _stall_vm(machine, run_dir: Path, deadline_s: float = 120) -> list[Stall]:  # noqa: ANN001
    """Once the stall run measures, the host takes the detector's vCPU (guest CPU 1) STALL["count"]
    times (tests/vcpu_stealer.py: its QEMU thread pinned to a host CPU where the stealer busy-waits at
    SCHED_FIFO), as a hypervisor does; each stall on the guest's clock through offsets measured before
    and after (drift interpolated). (Stopping the whole QEMU process with SIGSTOP instead left a TCG
    guest hung, its CPU 0 taking no timer interrupt, on a loaded host: 2 of 2 runs beside a CPU hog.)"""
    from tests.vcpu_stealer import vcpu_thread

    out = run_dir / "irqgap.out"
    deadline = time.monotonic() + deadline_s
    while not (out.is_file() and "\nstart " in out.read_text(errors="replace")):
        assert time.monotonic() < deadline, "the stall run never started measuring"
        time.sleep(0.1)
    before = _guest_clock_over_ssh(machine)
    tid = vcpu_thread(machine.pid, 1)
    affinity = os.sched_getaffinity(tid)
    os.sched_setaffinity(tid, {max(os.sched_getaffinity(0))})
    stealer = subprocess.Popen([sys.executable, "-m", "tests.vcpu_stealer", "--cpu", str(max(os.sched_getaffinity(0))),
                                "--hold-us", str(round(STALL["length_s"] * 1e6)),
                                "--period-us", str(round(STALL["period_s"] * 1e6))],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert stealer.stdout.readline().strip() == "ready"
        time.sleep(STALL["count"] * STALL["period_s"])
    finally:
        log, _ = stealer.communicate("", timeout=60)
        os.sched_setaffinity(tid, affinity)
    after = _guest_clock_over_ssh(machine)
    rate = (after.offset_s - before.offset_s) / (after.host_s - before.host_s)
    u = max(before.uncertainty_s, after.uncertainty_s)

    def guest_ns(t_ns: int, side: int) -> int:
        t = t_ns / 1e9
        return round((t + before.offset_s + rate * (t - before.host_s) + side * u) * 1e9)

    host = [tuple(map(int, line.split()[1:])) for line in log.splitlines()]
    stalls = [Stall(guest_ns(d, -1), guest_ns(a, +1), guest_ns(b, -1)) for d, a, b in host]
    # kept beside the run for a post-mortem: the truth and how it was placed on the guest's clock
    (run_dir.parent.parent / "stalls-truth.json").write_text(json.dumps(
        {"before": vars(before), "after": vars(after), "host": host, "stalls": [vars(s) for s in stalls]}))
    return stalls


def _all_stopped(pid: int) -> bool:
    """Every thread of `pid` is in the stopped state ('T' in /proc/PID/task/TID/stat)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        if stat[stat.rindex(")") + 2] not in "Tt":
            return False
    return True


def _stop(pid: int, length_s: float) -> tuple[float, float, float, float]:
    """SIGSTOP, then SIGCONT after length_s: host times before the kill(), once every thread of
    the process is seen stopped (the stop surely began by then: a signal's delivery is not bounded
    on a host that is itself a loaded virtual machine, whose IPIs wait for its own vCPUs; CI saw a
    VM run 1.4 ms past kill() + 0.5 ms + the clock bound), before the SIGCONT, and after it."""
    t0 = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    while not _all_stopped(pid):
        time.sleep(0.0002)
    t1 = time.monotonic()
    time.sleep(length_s)
    t2 = time.monotonic()
    os.kill(pid, signal.SIGCONT)
    return t0, t1, t2, time.monotonic()


@dataclass
class Found:
    covered: int  # inside one gap
    clean: list[tuple[ig.Attributed, int, int]]  # the gap, the truth's start and end, for those it begins with
    missed: list[str] = field(default_factory=list)  # each missed truth beside its nearest gap and span


def _find(gaps: list[ig.Attributed], blind: list[tuple[int, int]], truth: list[tuple[int, int, int]]) -> Found:
    """truth: per injected gap, (earliest it can begin, latest it surely began, earliest it surely
    ended), guest ns (how late it can end is the emulator's business: no bound). Found: a gap holds
    [latest begin, earliest end] within the detector's resolution, or one of its blind spans does
    (bookkeeping the CPU was taken from: the detector says it did not watch then). Clean: that gap
    also begins no earlier than the earliest begin, so it is the injected gap's alone (emulation adds
    gaps of its own; one that began before swallows the injected one: found, but its length and
    cause are not the injected one's)."""
    starts = [g.start_ns for g in gaps]
    spans = sorted((end - duration, end) for end, duration in blind)
    span_starts = [a for a, _ in spans]
    found = Found(0, [])
    for first, began, ended in truth:
        # gaps are disjoint and ordered: the one holding `began` is the last one starting before it
        i = bisect.bisect_right(starts, began + RES_NS) - 1
        if i >= 0 and gaps[i].end_ns >= ended - RES_NS:
            found.covered += 1
            if gaps[i].start_ns >= first - RES_NS:
                found.clean.append((gaps[i], began, ended))
            continue
        j = bisect.bisect_right(span_starts, began + RES_NS) - 1
        if j >= 0 and spans[j][1] >= ended - RES_NS:
            found.covered += 1
            continue
        # for the post-mortem: what the detector said around the missed one
        near = [(g.start_ns, g.end_ns) for g in gaps[max(i, 0):i + 2]]
        found.missed.append(f"injected {began}..{ended} (earliest {first}): gaps {near}, "
                            f"blind {spans[max(j, 0):j + 2]}")
    return found


def _check_found(name: str, found: Found, n: int, cause: str, source, record) -> None:  # noqa: ANN001
    missed = n - found.covered
    # the detector's documented rule: a gap is its interrupts' when their handlers cover half of it
    # or more; the injected gap is inside the handler (or, a stop, covers no handler), so each
    # clean gap it makes up half of or more is its cause's (the rest is the emulator's own time)
    judged = [g for g, began, ended in found.clean if ended - began >= 0.5 * g.duration_ns]
    attributed = sum(1 for g in judged if g.cause == cause and source(g.source))
    record(name, f"{found.covered} of {n} injected gaps found ({len(found.clean)} on their own, {len(judged)} "
           f"mostly the injected gap), {attributed} attributed")
    # every one: a gap holds it, or a blind span does (a disturbance during the detector's own
    # bookkeeping lengthens it past the threshold, and the detector says so)
    assert missed == 0, (f"{name}: {missed} of {n} injected gaps neither in a gap nor in a blind span: "
                         + "; ".join(found.missed))
    # A clean gap is measured right: it begins no earlier than the injected one could, and holds it
    # (checked in _find). Its end is the detector's CLOCK_MONOTONIC read and its length the loop's
    # clock, so a mis-scaled or misplaced length moves every gap's start out of that window: none
    # would be clean. Emulation merges many gaps on a busy host (a vCPU thread descheduled
    # just before the injected gap), each independently of the others, so at least one of n is
    # clean unless the host held the vCPU at nearly every injected gap.
    assert found.clean, f"{name}: none of the {found.covered} gaps found begins when the injected gap could"
    assert judged, f"{name}: no gap found is mostly the injected one"
    assert attributed >= 0.9 * len(judged), (name, [(g.cause, g.source, g.duration_ns) for g in judged
                                                    if not (g.cause == cause and source(g.source))][:10])


def _truth_period(starts_ns: list[int]) -> float:
    """The injected period: the median spacing of what the injector logged (a skipped period
    doubles one spacing: the median is robust to a few)."""
    return statistics.median(b - a for a, b in zip(starts_ns, starts_ns[1:], strict=False))


def _holds_in_window(log: HoldLog, outputs: ig.RunOutputs) -> list[Hold]:
    """The holds made on the detector's CPU while it measured, complete in the log (an edu IRQ
    delivered to another CPU holds that one: no gap on the detector's)."""
    assert log.dropped == 0, f"the injector's log overflowed: {log.dropped} holds not logged"
    first, last = outputs.gaps.start_ns, min(outputs.gaps.end["mono_ns"], log.now_ns)
    return [h for h in log.holds if first <= h.due_ns and h.end_ns <= last and h.cpu == outputs.gaps.cpu]


def _check_holds(name: str, run_dir: Path, log: HoldLog, cause: str, source, record) -> list[Hold]:  # noqa: ANN001
    """The holds the injector made while the detector measured: found, measured, attributed."""
    outputs = ig.read_outputs(run_dir)
    holds = _holds_in_window(log, outputs)
    # the test's premise, not a bound on the detector: the injector ran (a late timer skips a period)
    assert len(holds) >= 0.5 * (outputs.gaps.end["mono_ns"] - outputs.gaps.start_ns) / log.period_ns, (
        f"{name}: the injector made only {len(holds)} holds while the detector measured")
    elsewhere = sum(1 for h in log.holds if h.cpu != outputs.gaps.cpu)
    record(f"{name} elsewhere", f"{elsewhere} of {len(log.holds)} holds on another CPU than the detector's")
    found = _find(ig.attribute(outputs), outputs.gaps.blind, [(h.due_ns, h.start_ns, h.end_ns) for h in holds])
    _check_found(name, found, len(holds), cause, source, record)
    return holds


def _line_name(source: str) -> str:
    """An attributed gap's interrupt line by name: "24 irqgap_inject" -> "irqgap_inject"."""
    return source.rsplit(" ", 1)[-1]


def _hold_period(group: dict, holds: list[Hold]) -> float | None:
    """The period the report gives the holds' gaps in their line's group: the group's own when it
    is periodic, else that of the family of gaps as long as the holds logged (a loaded emulator
    adds tick gaps above the threshold to the same line: the report shows the holds as a family
    of one length, which is what a reader takes the period from)."""
    if group["periodic"]:
        return group["period_ms"]
    held_us = statistics.median(h.end_ns - h.start_ns for h in holds) / 1e3
    family = [f for f in group.get("families") or [] if f["min_us"] <= held_us * 1.5 and held_us <= f["max_us"]]
    return family[0]["period_ms"] if family else None


def _check_period(name: str, reported_ms: float | None, truth_ns: float) -> None:
    """The period the report gives a family of gaps, against the injected one."""
    assert reported_ms is not None and abs(reported_ms * 1e6 - truth_ns) <= 0.05 * truth_ns, (name, reported_ms,
                                                                                               truth_ns)


def _vm_campaign(vm, tmp_path: Path) -> Path:  # noqa: F811 - the fixture
    cfg = {
        "name": "interruptions-vm",
        "bench": {"target": {"kind": "ssh", "host": "127.0.0.1", "user": "root", "port": vm.ssh_port,
                             "identity_file": str(vm.image.identity_file), "known_hosts": str(vm.known_hosts_file)},
                  "scope": {"kind": "none"}},
        # as written: the stall case's load lifts RT throttling for the runs after it (interleaved, edu ran
        # first, throttled, and one injected hold fell in no gap: CI 2026-12-06)
        "matrix": {"kind": "interruptions", "loads": ["stall", "hrtimer", "edu"], "duration": "12s",
                   "max_duration": "1min", "order": "as-written"},
        # TCG's own gaps reach milliseconds; under 200 µs there are thousands a second, and its
        # ticks cost 250-350 µs: above them, fewer gaps, less blind bookkeeping
        "interruptions": {"cpu": 1, "threshold": "500us", "priority": 99, "trace": "on",
                          "compare": "osnoise"},  # the regular kernel has no osnoise tracer: said, not fatal
        "loads": {
            "stall": [{"name": "unthrottle", "command": f"{UNTHROTTLE}; while :; do sleep 1; done"}],
            "hrtimer": [{"name": "hrtimer-injector", "command": _injector("hrtimer", **HRTIMER)}],
            "edu": [{"name": "edu-injector", "command": _injector("edu", **EDU)}],
        },
    }
    path = tmp_path / "interruptions-vm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_injected_gaps_in_the_vm_are_found_timed_and_attributed(vm, tmp_path, record_property):  # noqa: F811
    check_injected_gaps(vm, tmp_path, record_property, timer_line="LOC")


def check_injected_gaps(vm, tmp_path: Path, record_property, timer_line: str) -> None:  # noqa: ANN001, F811
    """The stolen vCPU's stalls (unexplained), the injector's hrtimer holds (the local timer's line,
    `timer_line`: x86's LOC, arm64's arch_timer) and its edu holds (its own line): each found,
    measured, timed and attributed to its true cause. Shared by the x86 and arm64 guests."""
    out = tmp_path / "results"
    proc = subprocess.Popen(station_cmd("run", str(_vm_campaign(vm, tmp_path)), "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stalls = _stall_vm(vm, out / "runs" / "stall-r0")
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-4000:] + stdout[-2000:]
    report = json.loads((out / "report.json").read_text())
    runs = {r["id"]: r for r in report["interruptions"]["runs"]}
    assert set(runs) == {"stall-r0", "hrtimer-r0", "edu-r0"}
    for run in runs.values():
        assert run["status"] == "complete", run["error"]
        assert run["trace"] is True
        assert run["osnoise"] is None and "no osnoise tracer" in run["osnoise_note"]
        assert f"Run {run['id']}: rtla osnoise not run: this kernel has no osnoise tracer" in " ".join(
            report["notes"])

    # the vCPU's stalls, on the guest's clock through offsets measured over SSH: no interrupt explains them
    outputs = ig.read_outputs(out / "runs" / "stall-r0")
    window = (outputs.gaps.start_ns, outputs.gaps.end["mono_ns"])
    stalls = [s for s in stalls if window[0] <= s.outer_start_ns and s.inner_end_ns <= window[1]]
    assert len(stalls) >= STALL["count"] - 1, f"only {len(stalls)} stalls while the detector measured"
    found = _find(ig.attribute(outputs), outputs.gaps.blind,
                  [(s.outer_start_ns, s.inner_start_ns, s.inner_end_ns) for s in stalls])
    _check_found("vm stall", found, len(stalls), "unexplained", lambda s: s == "" or s.startswith("inside "),
                  record_property)
    stall_run = runs["stall-r0"]
    assert "not explained by any interrupt" in stall_run["conclusion"]
    # among the emulator's own irregular gaps, the stops stand out as one periodic family (gaps of
    # similar length): the one most of the gaps found belong to, at the stops' period
    family = max(stall_run["unexplained"]["clusters"],
                 key=lambda c: sum(c["min_us"] <= g.duration_ns / 1e3 <= c["max_us"] for g, _, _ in found.clean))
    record_property("stall family", family)
    assert family["periodic"], stall_run["unexplained"]
    _check_period("vm stall", family["period_ms"], _truth_period([s.inner_start_ns for s in stalls]))

    # the injector's holds, as it logged them: the local timer line, and the edu device's own line
    for name, line in (("hrtimer", timer_line), ("edu", "irqgap_inject")):
        text = _guest_file(vm, _hold_log_file(name))
        (out / f"holds-{name}.txt").write_text(text)  # kept beside the run for a post-mortem
        log = parse_hold_log(text)
        assert log.mode == name
        holds = _check_holds(name, out / "runs" / f"{name}-r0", log, "interrupt",
                             lambda s, line=line: _line_name(s) == line, record_property)
        [group] = [g for g in runs[f"{name}-r0"]["groups"]
                   if g["cause"] == "interrupt" and _line_name(g["source"]) == line]
        _check_period(name, _hold_period(group, holds), _truth_period([h.due_ns for h in holds]))
    assert (out / "report.html").is_file() and "Interruptions" in (out / "report.html").read_text()


# the stolen vCPU's stalls (tests/vcpu_stealer.py): 2 ms every 4-6 ms, so that about every stall
# counts the tick (4 ms at HZ=250) that fell due since the gap before it and most gaps in which the
# local timer alone moved are stalls; 2 ms is well above what a tick explains (twice TCG's
# 250-350 µs tick plus the 500 µs threshold)
STEAL = {"hold_us": 2000, "period_us": 5000, "jitter_us": 1000}


def _steal_vcpu(machine, vcpu: int, host_cpu: int):  # noqa: ANN001, ANN202 - VirtualMachine; Popen
    """The QEMU thread that runs the guest's vCPU (with one TCG thread, every vCPU's) pinned to
    host_cpu, and the stealer started there."""
    from tests.vcpu_stealer import vcpu_thread

    tid = vcpu_thread(machine.pid, vcpu)
    before = os.sched_getaffinity(tid)
    os.sched_setaffinity(tid, {host_cpu})
    stealer = subprocess.Popen([sys.executable, "-m", "tests.vcpu_stealer", "--cpu", str(host_cpu),
                                "--hold-us", str(STEAL["hold_us"]), "--period-us", str(STEAL["period_us"]),
                                "--jitter-us", str(STEAL["jitter_us"]), "--seed", "3"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert stealer.stdout.readline().strip() == "ready"
    return stealer, tid, before


def test_stalls_more_frequent_than_the_tick_are_named_unexplained_not_the_tick(vm, tmp_path,  # noqa: F811
                                                                                  record_property):
    """Issue 47.4: a hypervisor takes the detector's CPU (its vCPU thread, descheduled on the host)
    2 ms every 5 ms, more often than the 4 ms tick, in the measured run and its calibration alike;
    the run is not traced, so the gaps are judged by counts. The tick that falls due in a stall
    fires right after it and is counted in its gap: most gaps in which the local timer alone moved
    are stalls. The line's cost comes from the calibration's trace, not from those gaps, and at
    least 95 % of the logged stalls the detector saw are named unexplained (not the timer)."""
    cfg = yaml.safe_load(_vm_campaign(vm, tmp_path).read_text())
    cfg["name"] = "frequent-stalls"
    cfg["matrix"] |= {"loads": ["stall"], "duration": "4s"}
    cfg["interruptions"] |= {"trace": "off", "counts": True, "compare": "none"}  # calibration: auto
    path = tmp_path / "frequent-stalls.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "results"
    before = _guest_clock_over_ssh(vm)
    stealer, tid, affinity = _steal_vcpu(vm, vcpu=1, host_cpu=max(os.sched_getaffinity(0)))
    try:
        res = subprocess.run(station_cmd("run", str(path), "--out", str(out)), capture_output=True, text=True,
                             timeout=600)
    finally:
        log, _ = stealer.communicate("", timeout=60)
        os.sched_setaffinity(tid, affinity)
    after = _guest_clock_over_ssh(vm)
    (out / "stalls-truth.json").write_text(json.dumps({"before": vars(before), "after": vars(after), "log": log}))
    assert res.returncode == 0, res.stderr[-4000:] + res.stdout[-2000:]
    run_dir = out / "runs" / "stall-r0"
    assert (run_dir / "calibration_irqtrace.txt").stat().st_size and not (run_dir / "irqtrace.txt").stat().st_size

    rate = (after.offset_s - before.offset_s) / (after.host_s - before.host_s)
    u = max(before.uncertainty_s, after.uncertainty_s)

    def guest_ns(t_ns: int, side: int) -> int:
        t = t_ns / 1e9
        return round((t + before.offset_s + rate * (t - before.host_s) + side * u) * 1e9)

    outputs = ig.read_outputs(run_dir)
    first, last = outputs.gaps.start_ns, outputs.gaps.end["mono_ns"]
    stalls = [(guest_ns(int(d), -1), guest_ns(int(s), +1), guest_ns(int(e), -1))
              for _, d, s, e in (line.split() for line in log.splitlines())]
    stalls = [t for t in stalls if first <= t[0] and t[2] <= last]
    # the test's premise: the stealer kept its pace while the detector measured
    assert len(stalls) >= 0.5 * (last - first) / (STEAL["period_us"] * 1000), len(stalls)
    costs = ig.line_costs(outputs)
    loc = [c for i, c in costs.items() if outputs.gaps.irq_lines[i][0] == "LOC"]
    assert loc and loc[0].basis == "calibration trace", costs
    gaps = ig.attribute(outputs, costs)
    starts = [g.start_ns for g in gaps]
    named = Counter()
    for _, began, ended in stalls:
        i = bisect.bisect_right(starts, began + RES_NS) - 1
        if i >= 0 and gaps[i].end_ns >= ended - RES_NS:  # the gap that holds the stall
            named[gaps[i].cause] += 1
    seen = sum(named.values())
    # the premise again: what the detector saw (a stall in its bookkeeping is a blind span)
    by_counts_loc = sum(1 for g in outputs.gaps.gaps if g.irqs and set(k for k, n in g.irqs.items() if n) == {
        next(i for i, (lab, _) in outputs.gaps.irq_lines.items() if lab == "LOC")})
    record_property("frequent stalls", f"{len(stalls)} logged, {seen} in gaps: {dict(named)}; LOC cost "
                    f"{loc[0].ns / 1e3:.0f} µs ({loc[0].samples} handler runs); {by_counts_loc} gaps with LOC alone; "
                    f"clock ±{u * 1e6:.0f} µs")
    assert seen >= 0.5 * len(stalls), (len(stalls), dict(named))
    assert named["unexplained"] >= 0.95 * seen, (len(stalls), dict(named))


def test_detector_on_this_machine_reports_true_spoilers_and_finds_its_own_stops(local, work_dir, tmp_path,  # noqa: F811
                                                                                record_property):
    if not any(Path(root, "instances").is_dir() for root in TRACEFS_DIRS):
        missing("no tracefs mounted on this machine")
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs/interruptions-local.yaml").read_text())
    cfg["bench"] = {"target": _ssh_target(local, work_dir), "scope": {"kind": "none"}}
    cfg["matrix"] |= {"loads": ["no-load"], "duration": "4s"}
    path = tmp_path / "interruptions-local.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "results"
    proc = subprocess.Popen(station_cmd("run", str(path), "--out", str(out)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stops = []
    try:
        run_dir = out / "runs" / "no-load-r0"
        deadline = time.monotonic() + 120
        while not ((run_dir / "irqgap.out").is_file() and "\nstart " in (run_dir / "irqgap.out").read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.05)
        pid = int(subprocess.run(["pgrep", "-n", "-f", f"{work_dir}/bin/irqgap-"], capture_output=True,
                                 text=True, check=True).stdout.split()[0])
        for _ in range(3):  # the detector itself stopped: the kernel switched it out (ctxsw)
            time.sleep(0.5)
            t0, t1, t2, t3 = _stop(pid, 0.08)  # longer than RT throttling's 50 ms: never taken for it
            stops.append((t2 - t1, t3 - t0))
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-4000:] + stdout[-2000:]
    gaps = ig.attribute(ig.read_outputs(out / "runs" / "no-load-r0"))
    for shortest, longest in stops:
        near = [g for g in gaps if 0.9 * shortest <= g.duration_ns / 1e9 <= 1.1 * longest]
        assert any(g.cause == "preempted" for g in near), (shortest, longest, [(g.cause, g.duration_ns) for g in near])

    manifest = json.loads((out / "runs" / "no-load-r0" / "manifest.json").read_text())
    spoil = manifest["spoilers"]
    cpu = max(cpu_list(Path("/sys/devices/system/cpu/online").read_text()))
    assert spoil["cpu"] == cpu
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    threads_per_core = int(next(ln.split(":")[1] for ln in lscpu.splitlines() if ln.startswith("Thread(s) per core")))
    flags = " ".join(spoil["flags"])
    assert ("SMT:" in flags) == (threads_per_core > 1)
    governor = Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
    assert ("governor:" in flags) == (governor.exists() and governor.read_text().strip() != "performance")
    isolated = cpu_list(Path("/sys/devices/system/cpu/isolated").read_text())
    assert ("isolation:" in flags) == (cpu not in isolated)
    assert spoil["facts"]["smt_active"] == Path("/sys/devices/system/cpu/smt/active").read_text().strip()
    assert ("virtual machine:" in flags) == this_machine_is_a_guest()
    fair_server = kernel_has_fair_server()
    assert ("fair server:" in flags) == fair_server
    if fair_server:  # sched_rt_runtime_us throttles nothing on such a kernel: no flag may say it does
        assert "RT throttling:" not in flags
    record_property("local", f"{len(gaps)} gaps; spoilers: {spoil['flags']}")

    report = json.loads((out / "report.json").read_text())
    for flag in spoil["flags"]:  # each said once in the report's warnings
        assert sum(flag in note for note in report["notes"]) == 1, (flag, report["notes"])
    entry = report["interruptions"]["runs"][0]
    assert entry["status"] == "complete" and entry["gaps"] == len(gaps)
    assert entry["conclusion"] in (out / "report.md").read_text()
    assert set(assert_manifests_fit(out).values()) == {"interruptions"}
    if entry["unexplained"]["count"]:  # who took the CPU, as this machine is
        assert ("the hypervisor (this target is a virtual machine)" in entry["conclusion"]) == this_machine_is_a_guest()
    for root in TRACEFS_DIRS:  # the station's trace instance is gone
        assert not Path(root, "instances", instance_name(work_dir)).exists()


def test_ctrl_c_in_the_calibration_leaves_no_detector_and_no_trace_instance(local, work_dir, tmp_path):  # noqa: F811
    """The calibration phase is a tracked, traced detector run: a Ctrl-C in it stops the detector,
    removes the trace instance and keeps what the detector printed."""
    if not any(Path(root, "instances").is_dir() for root in TRACEFS_DIRS):
        missing("no tracefs mounted on this machine")
    cfg = yaml.safe_load((REPO / "configs/interruptions-local.yaml").read_text())
    cfg["bench"] = {"target": _ssh_target(local, work_dir), "scope": {"kind": "none"}}
    cfg["matrix"] |= {"loads": ["no-load"], "duration": "4s"}
    cfg["interruptions"] |= {"trace": "off", "calibration": "60s"}
    path = tmp_path / "calibration.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "results"
    proc = subprocess.Popen(station_cmd("run", str(path), "--out", str(out)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    calibration = out / "runs" / "no-load-r0" / "calibration_irqgap.out"
    deadline = time.monotonic() + 120
    while not (calibration.is_file() and "\nstart " in calibration.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    detector = ["pgrep", "-f", f"{work_dir}/bin/irqgap-"]
    assert subprocess.run(detector, capture_output=True).returncode == 0, "the calibration's detector is not running"
    assert any(Path(root, "instances", instance_name(work_dir)).exists() for root in TRACEFS_DIRS)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, output
    assert subprocess.run(detector, capture_output=True).returncode == 1, output  # none left
    for root in TRACEFS_DIRS:
        assert not Path(root, "instances", instance_name(work_dir)).exists(), output
    manifest = json.loads((out / "runs" / "no-load-r0" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted", manifest["status"]
    assert calibration.read_text().startswith("irqgap 1\n")  # what it printed, kept


RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
RT_PERIOD = Path("/proc/sys/kernel/sched_rt_period_us")
FAIR_SERVER = Path("/sys/kernel/debug/sched/fair_server")


def kernel_has_fair_server() -> bool:
    """The kernel's own mark of its fair deadline server: sched/fair_server in debugfs. Unreadable
    without debugfs mounted (scripts/ci/debugfs.sh mounts it): then the test cannot know."""
    if not any(line.split()[1:3] == ["/sys/kernel/debug", "debugfs"]
               for line in Path("/proc/mounts").read_text().splitlines()):
        missing("debugfs is not mounted at /sys/kernel/debug: the kernel's mark of its fair server "
                "(sched/fair_server) cannot be read")
    try:
        return FAIR_SERVER.is_dir()
    except PermissionError:  # debugfs is root's alone
        missing("debugfs is not readable here (not root): the kernel's mark of its fair server cannot be read")
        raise

SAMPLE_S = 0.002  # how often the CFS task's runtime is read
MERGE_NS = 12_000_000  # over a tick (4 ms at HZ=250, 10 ms at HZ=100) and a sample apart


@dataclass(frozen=True)
class Burst:
    """A stretch in which the kernel ran the CFS task (its own account, /proc/PID/schedstat):
    between the last sample before its runtime rose and the first after it stopped rising."""

    start_ns: int
    end_ns: int
    ran_ns: int


def _bursts(samples: list[tuple[int, int]]) -> list[Burst]:
    """The kernel adds to a running task's runtime at each tick and when it is switched out, so
    one stretch shows as rises a tick apart: rises closer than MERGE_NS are one burst."""
    out: list[Burst] = []
    for (t0, r0), (t1, r1) in zip(samples, samples[1:], strict=False):
        if r1 <= r0:
            continue
        if out and t0 - out[-1].end_ns <= MERGE_NS:
            last = out.pop()
            out.append(Burst(last.start_ns, t1, last.ran_ns + r1 - r0))
        else:
            out.append(Burst(t0, t1, r1 - r0))
    return out


class StarvedTask:
    """The injector: a CFS task that never sleeps, pinned to the loop's CPU, and a sampler on
    another CPU that reads how long the kernel ran it (CLOCK_MONOTONIC, as the detector stamps)."""

    def __init__(self, cpu: int, sampler_cpu: int) -> None:
        import threading

        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"])
        self.samples: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._cpu = sampler_cpu
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        os.sched_setaffinity(0, {self._cpu})  # this thread only
        path = f"/proc/{self.proc.pid}/schedstat"
        while not self._stop.is_set():
            try:
                ran = int(Path(path).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return
            self.samples.append((time.monotonic_ns(), ran))
            time.sleep(SAMPLE_S)

    def stop(self) -> list[Burst]:
        self._stop.set()
        self._thread.join(5)
        self.proc.kill()
        self.proc.wait(10)
        return _bursts(self.samples)


def _overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


@pytest.mark.parametrize("starved", [True, False], ids=["cfs-task-starved", "loop-alone"])
def test_the_kernels_throttling_is_named_when_it_stops_the_loop_and_only_then(local, work_dir, tmp_path,  # noqa: F811
                                                                            starved):
    """This machine's kernel is the injector. A CFS task that never sleeps, pinned to the loop's
    CPU, is run by the kernel ahead of the detector's SCHED_FIFO loop once a period: by the fair
    deadline server (Linux 6.12 on) or by RT throttling (sched_rt_runtime_us 950000, before). The
    kernel's own account of that task's runtime, sampled from another CPU, says when it ran: each
    such stretch must be a gap named after the mechanism this kernel has (or a blind span), every
    gap so named must hold one, and the conclusion must say how to measure without it. Alone (no
    such task, RT throttling off), no gap may be named throttling."""
    if os.geteuid() != 0 or not os.access(RT_RUNTIME, os.W_OK):
        missing("cannot set /proc/sys/kernel/sched_rt_runtime_us (needs root and a writable /proc/sys)")
    online = cpu_list(Path("/sys/devices/system/cpu/online").read_text())
    if len(online) < 2:
        missing("needs two CPUs: the loop's, and one for the sampler")
    cpu, sampler_cpu = online[-1], online[0]  # the config's cpu: last
    fair_server = kernel_has_fair_server()
    runtime_us = 950_000 if starved else -1
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs/interruptions-local.yaml").read_text())
    cfg["bench"] = {"target": _ssh_target(local, work_dir), "scope": {"kind": "none"}}
    cfg["matrix"] |= {"loads": ["no-load"], "duration": "5s"}
    cfg["interruptions"]["trace"] = "off"  # throttling must be told from counts and the kernel's budget alone
    path = tmp_path / "throttling.yaml"
    path.write_text(yaml.safe_dump(cfg))
    saved = RT_RUNTIME.read_text().strip()
    task = None
    try:
        RT_RUNTIME.write_text(f"{runtime_us}\n")
        task = StarvedTask(cpu, sampler_cpu) if starved else None
        res = subprocess.run(station_cmd("run", str(path), "--out", str(tmp_path / "out")), capture_output=True,
                             text=True, timeout=300)
    finally:
        bursts = task.stop() if task else []
        RT_RUNTIME.write_text(f"{saved}\n")
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    entry = report["interruptions"]["runs"][0]
    run = ig.read_outputs(tmp_path / "out" / "runs" / "no-load-r0")
    gaps = ig.attribute(run)
    if not starved:
        assert not entry["by_cause"]["throttled"] and "throttling" not in entry["conclusion"]
        assert not any("RT throttling" in n for n in report["notes"])  # nor the spoiler, as it is off
        # the fair server is always there on its kernels: the spoiler says so, naming the CPU's files
        assert any("fair server:" in n and f"fair_server/cpu{cpu}/" in n for n in report["notes"]) == fair_server
        return
    name = "fair server" if fair_server else "RT throttling"
    words = "the fair deadline server" if fair_server else "RT throttling"
    advice = (f"/sys/kernel/debug/sched/fair_server/cpu{cpu}/runtime to 0" if fair_server
              else "/proc/sys/kernel/sched_rt_runtime_us to -1")
    # the gaps as the report judged them: the analysis re-run on the run's files with its facts
    summary, judged = ig.analyse_run_dir(tmp_path / "out" / "runs" / "no-load-r0")
    assert len(judged) == len(gaps)
    loop_start, loop_end = run.gaps.start_ns, run.gaps.end["mono_ns"]
    margin = 100_000_000
    rest_ns = 50_000_000 if fair_server else 1000 * (int(RT_PERIOD.read_text()) - runtime_us)
    # the kernel's stops: the task ran at least half the rest (shorter runs are the loop's own
    # pauses, such as the detector blocking on its output)
    inside = [b for b in bursts if loop_start + margin < b.start_ns and b.end_ns < loop_end - margin
              and b.ran_ns >= rest_ns / 2]
    period_ns = (1_000_000_000 if fair_server else int(RT_PERIOD.read_text()) * 1000)
    # the injection itself, from the kernel's account: the task ran in (nearly) every period
    assert len(inside) >= (loop_end - loop_start - 2 * margin) // period_ns - 1, (len(inside), bursts[:20])
    throttled = [g for g in judged if g.cause == "throttled"]
    blind = [(end - length, end) for end, length in run.gaps.blind if length >= rest_ns / 2]  # as long as a stop
    for b in inside:  # each stretch the kernel ran the task is a gap named after the mechanism, or a blind span
        held = [g for g in throttled if _overlaps(g.start_ns, g.end_ns, b.start_ns, b.end_ns)]
        if held:
            assert all(g.source == name for g in held), [(g.source, g.duration_ns) for g in held]
            # the task ran only while the loop was stopped: its runtime fits in the gap(s)
            assert b.ran_ns <= sum(g.duration_ns for g in held) + 1_000_000, (b, held)
        else:
            assert any(_overlaps(s, e, b.start_ns, b.end_ns) for s, e in blind), \
                (b, [(g.cause, g.start_ns, g.duration_ns) for g in gaps if _overlaps(g.start_ns, g.end_ns,
                                                                                       b.start_ns, b.end_ns)])
    for g in throttled:  # and nothing is called throttling that the kernel did not do
        assert any(_overlaps(g.start_ns, g.end_ns, b.start_ns, b.end_ns) for b in bursts), (g.start_ns, g.duration_ns)
    assert entry["by_cause"]["throttled"] == len(throttled)
    assert f"stops by {words}" in entry["conclusion"] and advice in entry["conclusion"], entry["conclusion"]
    assert entry["conclusion"] in (tmp_path / "out" / "report.md").read_text()
    assert any(n.startswith(f"{name}:") or f" {name}:" in n for n in report["notes"]), report["notes"]


@pytest.fixture(scope="module")
def rt_vm(tmp_path_factory):
    """Debian's PREEMPT_RT kernel, booted once: reached as an ssh bench, so the injector's log can
    be read after the campaign."""
    from station.vm import VirtualMachine, build_image

    machine = VirtualMachine(build_image(kernel="rt"), ssh_port=free_port(),
                             state_dir=tmp_path_factory.mktemp("rt-vm-state"), die_with_caller=True)
    machine.start(timeout_s=180)
    yield machine
    machine.stop()


def _guest_bench(machine) -> dict:  # noqa: ANN001 - station.vm.VirtualMachine
    """The guest as a kind: ssh bench, no scope."""
    return {"target": {"kind": "ssh", "host": "127.0.0.1", "user": "root", "port": machine.ssh_port,
                       "identity_file": str(machine.image.identity_file), "known_hosts": str(machine.known_hosts_file)},
            "scope": {"kind": "none"}}


def test_on_the_rt_kernel_rtla_osnoise_sees_the_holds_the_detector_sees(rt_vm, tmp_path, record_property):
    """Debian's PREEMPT_RT kernel has the osnoise tracer: the same injected holds, measured by
    the detector and then by the kernel's own tracer, side by side."""
    cfg = {
        "name": "interruptions-rt",
        "bench": _guest_bench(rt_vm),
        "matrix": {"kind": "interruptions", "loads": ["hrtimer"], "duration": "6s", "max_duration": "1min"},
        "interruptions": {"cpu": 1, "threshold": "500us", "priority": 99, "trace": "on", "compare": "osnoise"},
        "loads": {"hrtimer": [{"name": "hrtimer-injector", "command": _injector("hrtimer", **HRTIMER)}]},
    }
    path = tmp_path / "interruptions-rt.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "results"
    res = subprocess.run(station_cmd("run", str(path), "--out", str(out)), capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-4000:] + res.stdout[-2000:]
    report = json.loads((out / "report.json").read_text())
    [run] = report["interruptions"]["runs"]
    assert run["status"] == "complete", run["error"]
    # the detector: the holds the injector logged, found, measured, on the local timer line
    text = _guest_file(rt_vm, _hold_log_file("hrtimer"))
    (out / "holds-hrtimer.txt").write_text(text)  # kept beside the run for a post-mortem
    log = parse_hold_log(text)
    holds = _check_holds("rt hrtimer", out / "runs" / "hrtimer-r0", log, "interrupt", lambda s: s == "LOC",
                         record_property)
    [group] = [g for g in run["groups"] if g["cause"] == "interrupt" and g["source"] == "LOC"]
    _check_period("rt hrtimer", _hold_period(group, holds), _truth_period([h.due_ns for h in holds]))
    # the kernel's tracer ran after the detector, while the injector went on: it counts every
    # interrupt (ticks too), so at least the holds made in any window of its length, and its
    # longest single noise is at least the shortest hold
    o = run["osnoise"]
    record_property("rt", f"osnoise {o}")
    # rtla's loop wakes once a second: it stops at the first wake-up past -d, and reports the whole
    # seconds it ran: the 6 asked or, on a loaded host, one more (CI r3 under a CPU hog: 7)
    assert o["cpu"] == 1 and o["duration_s"] in (6, 7), o
    fewest = _fewest_in_window([h.due_ns for h in log.holds], o["duration_s"] * 1e9)
    assert o["irq"] >= fewest, (o, fewest)
    assert o["max_single_us"] * 1e3 >= min(h.end_ns - h.start_ns for h in log.holds) - RES_NS, o
    assert "Side by side with rtla osnoise" in (out / "report.html").read_text()


def test_on_a_kernel_before_6_12_rt_throttling_stops_the_loop_with_nothing_else_to_run(rt_vm, tmp_path):
    """Debian 12's kernels (6.1) still throttle: with sched_rt_runtime_us 950000 of 1000000 the
    detector's loop is stopped for the rest of every period even though no other task wants the
    CPU (a fair server would not stop it then). The budget the test set is the truth: a stop each
    period, named RT throttling, with the advice to set it to -1."""
    release = asyncio.run(_guest(rt_vm, "uname -r")).strip()
    assert asyncio.run(_guest(rt_vm, "test -d /sys/kernel/debug/sched/fair_server && echo fair")).strip() == "", release
    period_us = int(asyncio.run(_guest(rt_vm, "cat /proc/sys/kernel/sched_rt_period_us")))
    runtime_us = period_us - 50_000
    cfg = {
        "name": "rt-throttling",
        "bench": _guest_bench(rt_vm),
        "matrix": {"kind": "interruptions", "loads": ["no-load"], "duration": "5s", "max_duration": "1min"},
        "interruptions": {"cpu": 1, "threshold": "500us", "priority": 98, "trace": "off"},
        "loads": {"no-load": []},
    }
    path = tmp_path / "rt-throttling.yaml"
    path.write_text(yaml.safe_dump(cfg))
    saved = asyncio.run(_guest(rt_vm, "cat /proc/sys/kernel/sched_rt_runtime_us")).strip()
    try:
        asyncio.run(_guest(rt_vm, f"echo {runtime_us} > /proc/sys/kernel/sched_rt_runtime_us"))
        res = subprocess.run(station_cmd("run", str(path), "--out", str(tmp_path / "out")), capture_output=True,
                             text=True, timeout=600)
    finally:
        asyncio.run(_guest(rt_vm, f"echo {saved} > /proc/sys/kernel/sched_rt_runtime_us"))
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    [entry] = report["interruptions"]["runs"]
    assert entry["status"] == "complete", entry.get("error")
    gaps = ig.attribute(ig.read_outputs(tmp_path / "out" / "runs" / "no-load-r0"))
    stops = [(g.cause, g.duration_ns) for g in gaps if g.duration_ns >= 25_000_000]
    seen = entry["by_cause"]["throttled"] + entry["throttled_blind_spans"]
    assert seen >= int(entry["measured_s"] * 1e6 / period_us) - 1, (release, entry["by_cause"], stops)
    throttled = [r for r in entry["groups"] if r["cause"] == "throttled"]
    assert [r["source"] for r in throttled] == ["RT throttling"], throttled
    # at most the period's rest, plus the period timer's lateness: a TCG guest's was seen 10.2 ms
    # late (1 stop in 8 runs); twice that is the most this test lets pass as a late timer
    assert throttled[0]["max_us"] <= 50_000 + 20_000
    assert f"sched_rt_runtime_us {runtime_us} of sched_rt_period_us {period_us}" in entry["conclusion"]
    assert "stops by RT throttling" in entry["conclusion"] and "sched_rt_runtime_us to -1" in entry["conclusion"]


def _fewest_in_window(times_ns: list[int], window_ns: float) -> int:
    """The fewest events in any window of that length inside the span logged."""
    if not times_ns or times_ns[-1] - times_ns[0] < window_ns:
        return 0
    return min(bisect.bisect_left(times_ns, t + window_ns) - i
               for i, t in enumerate(times_ns) if t + window_ns <= times_ns[-1])


def test_a_killed_rtla_leaves_its_tracer_running_until_station_cleanup(rt_vm, tmp_path):
    """rtla removes its tracefs instance only on SIGINT: killed, it leaves the timerlat tracer running
    on its CPUs. `station cleanup` (after a killed station) finds and removes it, and says so."""

    async def guest(command: str) -> str:
        return await _guest(rt_vm, command)

    instances = "/sys/kernel/tracing/instances"
    # killed once its tracer runs (rtla's set-up took over 4 s right after an osnoise run here)
    started = asyncio.run(guest(
        f"rtla timerlat hist -d 60s -c 1 >/dev/null 2>&1 & p=$!; for i in $(seq 60); do sleep 0.5; "
        f"grep -qx timerlat {instances}/timerlat_hist/current_tracer 2>/dev/null && break; done; "
        "kill -KILL $p; echo killed after $i"))
    assert "timerlat" in asyncio.run(guest(f"cat {instances}/timerlat_hist/current_tracer")), started  # left running
    cfg = {"name": "cleanup", "bench": {"target": {
        "kind": "ssh", "host": "127.0.0.1", "user": "root", "port": rt_vm.ssh_port,
        "identity_file": str(rt_vm.image.identity_file), "known_hosts": str(rt_vm.known_hosts_file)},
        "scope": {"kind": "none"}},
        "matrix": {"kind": "cyclictest", "duration": "2s"}, "cyclictest": {"companion": "timerlat"}}
    path = tmp_path / "cleanup.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = subprocess.run(station_cmd("cleanup", str(path)), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "tracefs instance timerlat_hist" in res.stdout + res.stderr
    assert asyncio.run(guest(f"ls {instances}")).split() == []
    assert asyncio.run(guest("cat /sys/kernel/tracing/current_tracer")).strip() == "nop"


def test_timerlat_stopped_at_its_threshold_keeps_its_trace_and_leaves_nothing(rt_vm, tmp_path):
    """cyclictest.timerlat_stop: rtla stops at the first latency above it (an emulated guest's timer
    latency is far above 50 µs), saves its trace, which the run keeps and the target does not; the
    report says the figures end at that sample."""
    cfg = {"name": "timerlat-stop", "bench": {"target": {
        "kind": "ssh", "host": "127.0.0.1", "user": "root", "port": rt_vm.ssh_port,
        "identity_file": str(rt_vm.image.identity_file), "known_hosts": str(rt_vm.known_hosts_file),
        "work_dir": "/tmp/irq-station-tl"}, "scope": {"kind": "none"}},
        "matrix": {"kind": "cyclictest", "duration": "3s", "max_duration": "2min"},
        # one thread on CPU 1 at 1 ms: all CPUs at 500 µs (FIFO 95, rtla then tracing) left the emulated
        # guest's sshd without a CPU for over 10 s in CI; CPU 0 keeps the network's interrupt and sshd
        "cyclictest": {"threads": 1, "affinity": "1", "interval": "1ms", "companion": "timerlat",
                       "timerlat_stop": "50us"}}
    path = tmp_path / "tl.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    res = subprocess.run(station_cmd("run", str(path), "--out", str(out)), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    report = json.loads((out / "report.json").read_text())
    [run] = report["cyclictest"]["runs"]
    tl = run["timerlat"]
    assert tl["note"] is None and tl["stopped"], tl
    assert "hit stop tracing" in tl["analysis"] and "-a" in tl["arguments"]
    printed = (out / "runs" / run["id"] / "timerlat.out").read_text()
    assert "rtla timerlat hit stop tracing" in printed
    trace = (out / "runs" / run["id"] / "timerlat_trace.txt").read_text()
    assert "timerlat" in trace and len(trace.splitlines()) > 3  # the tracer's own lines, kept
    notes = report["cyclictest"]["timerlat_table"]["notes"]
    assert "stopped at the first latency above" in next(iter(notes.values()))[run["load"]]
    assert not asyncio.run(_guest(rt_vm, "ls /tmp/irq-station-tl/timerlat/ 2>/dev/null; "
                                         "ls /sys/kernel/tracing/instances")).split()  # nothing left


async def _guest(machine, command: str) -> str:  # noqa: ANN001 - station.vm.VirtualMachine
    async with asyncssh.connect("127.0.0.1", machine.ssh_port, username="root",
                                client_keys=[str(machine.image.identity_file)],
                                known_hosts=str(machine.known_hosts_file)) as conn:
        return (await conn.run(command, check=False)).stdout
