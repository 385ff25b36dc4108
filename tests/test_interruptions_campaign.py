"""The interruption detector (seed 003) for real, against injected gaps whose period and length
the test knows:
- in the QEMU VM (a real Debian kernel): the host stops the whole VM (SIGSTOP/SIGCONT of QEMU:
  a gap no interrupt explains, like an SMI); the test-only module irqgap_inject holds the CPU
  in an hrtimer callback (the local timer line) and in the handler of QEMU's edu device (its own
  line). Each must be found, measured, timed and attributed to its true cause;
- on this machine over the local sshd: the detector runs, the spoilers it reports match what
  sysfs and lscpu say, stops of the detector itself are found, and the report renders.
Emulation adds gaps of its own (milliseconds under TCG): the checks match the injected gaps
and never bound the machine's own latency."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

import yaml

from station.analysis import interruptions as ig
from station.target.irqtrace import TRACEFS_DIRS, instance_name
from station.target.spoilers import cpu_list
from tests.conftest import missing, station_cmd
from tests.test_cyclictest_campaign import _ssh_target, work_dir  # noqa: F401 - fixture
from tests.test_vm_campaign import vm  # noqa: F401 - fixture: a VM booted once for this module

INJECTOR = "/opt/irq-station/modules/irqgap_inject.ko"
# a SCHED_FIFO loop that never sleeps is stopped 50 ms a second by RT throttling: it would hide
# injected gaps (the VM is thrown away afterwards; on a bench, the spoilers report it)
UNTHROTTLE = "echo -1 > /proc/sys/kernel/sched_rt_runtime_us"
HOLD_LOOP = "trap 'rmmod irqgap_inject; exit 0' TERM INT; while :; do sleep 1; done"
# periods prime to the 4 ms tick: at a multiple of it, every hold would fall at the same phase
# after a tick, in the blind bookkeeping window that follows a gap the tick caused
HRTIMER = {"period_us": 51_700, "hold_us": 5_000}
EDU = {"period_us": 41_300, "hold_us": 4_000}
STALL = {"count": 20, "period_s": 0.4, "length_s": 0.08}


def _injector(mode: str, period_us: int, hold_us: int) -> str:
    return (f"{UNTHROTTLE}; insmod {INJECTOR} mode={mode} cpu=1 period_us={period_us} "
            f"hold_us={hold_us} || exit 1; {HOLD_LOOP}")


def _vm_campaign(vm, tmp_path: Path) -> Path:  # noqa: F811 - the fixture
    cfg = {
        "name": "interruptions-vm",
        "bench": {"target": {"kind": "ssh", "host": "127.0.0.1", "user": "root", "port": vm.ssh_port,
                             "identity_file": str(vm.image.identity_file), "known_hosts": str(vm.known_hosts_file)},
                  "scope": {"kind": "none"}},
        "matrix": {"kind": "interruptions", "loads": ["stall", "hrtimer", "edu"], "duration": "12s",
                   "max_duration": "1min"},
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


def _stall_vm(pid: int, run_dir: Path, deadline_s: float = 120) -> list[tuple[float, float]]:
    """Once the stall run measures, stop the whole VM STALL["count"] times; (when, how long)."""
    out = run_dir / "irqgap.out"
    deadline = time.monotonic() + deadline_s
    while not (out.is_file() and "\nstart " in out.read_text(errors="replace")):
        assert time.monotonic() < deadline, "the stall run never started measuring"
        time.sleep(0.1)
    time.sleep(1.0)
    injected = []
    for k in range(STALL["count"]):
        due = time.monotonic() + STALL["period_s"]
        t = time.monotonic()
        shortest, longest = _stop(pid, STALL["length_s"])
        injected.append((t, (shortest + longest) / 2))
        if k + 1 < STALL["count"]:
            time.sleep(max(0.0, due - time.monotonic()))
    return injected


def _stop(pid: int, length_s: float) -> tuple[float, float]:
    """SIGSTOP, then SIGCONT after length_s; the stop's length lies between the two bounds
    returned (this process may itself be delayed around each kill)."""
    before = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    time.sleep(length_s)
    resuming = time.monotonic()
    os.kill(pid, signal.SIGCONT)
    return resuming - stopped, time.monotonic() - before


def _offset(found: list[int], injected: list[float]) -> float:
    """Guest CLOCK_MONOTONIC minus host time: the most common difference between any found
    gap and any injected stop (10 ms bins), refined by the median within that bin."""
    diffs = [f / 1e9 - i for f in found for i in injected]
    bins: dict[int, list[float]] = {}
    for d in diffs:
        bins.setdefault(round(d / 0.01), []).append(d)
    best = max(bins.values(), key=len)
    return statistics.median(best)


def _grid(gaps: list[ig.Attributed], period_ns: int, hold_ns: int, start_ns: int, end_ns: int) -> list[int]:
    """When the injector's holds began: its grid's phase is the most common phase (1 ms bins) of
    the gaps about a hold long."""
    like = [g for g in gaps if 0.8 * hold_ns <= g.duration_ns <= 1.5 * hold_ns]
    assert like, "no gap about a hold long"
    bins: dict[int, list[int]] = {}
    for g in like:
        bins.setdefault((g.start_ns % period_ns) // 1_000_000, []).append(g.start_ns % period_ns)
    phase = int(statistics.median(max(bins.values(), key=len)))
    first = start_ns - start_ns % period_ns + phase + period_ns
    return list(range(first, end_ns - period_ns, period_ns))


def _match(gaps: list[ig.Attributed], injected: list[int], length_ns: float) -> tuple[list, int]:
    """(the gap that starts with each injected one, for those found on their own; how many were
    found at all). Emulation adds gaps of its own: one that began just before an injected gap
    swallows it, and the detector sees one longer gap that covers it (found, but neither its
    length nor its cause is the injected one's alone)."""
    tol = max(1_000_000, 0.1 * length_ns)
    clean, covered = [], 0
    for t in injected:
        near = [g for g in gaps if abs(g.start_ns - t) <= tol]
        if near:
            clean.append(min(near, key=lambda g: abs(g.start_ns - t)))
        if any(g.start_ns <= t + tol and g.end_ns >= t + length_ns - tol for g in gaps):
            covered += 1
    return clean, covered


def _check_injected(name: str, gaps: list[ig.Attributed], injected: list[int], length_ns: float,
                    period_ns: float, cause: str, source, record) -> None:  # noqa: ANN001
    clean, covered = _match(gaps, injected, length_ns)
    median_ns = statistics.median(g.duration_ns for g in clean)
    starts = sorted(g.start_ns for g in clean)
    period = statistics.median(b - a for a, b in zip(starts, starts[1:], strict=False))
    # a missed gap doubles one interval: the median is robust to a few
    attributed = sum(1 for g in clean if g.cause == cause and source(g.source)) / len(clean)
    record(f"{name}", f"found {covered}/{len(injected)} ({len(clean)} on their own), median "
           f"{median_ns / 1e3:.0f} us (injected {length_ns / 1e3:.0f}), period {period / 1e6:.2f} ms (injected "
           f"{period_ns / 1e6:.2f}), attributed {attributed:.1%}")
    # the truth here is the grid of holds asked for; in an emulated guest a hold whose timer fires
    # while the vCPU thread is not running can be skipped or merged, and the injector does not log
    # the holds it made yet (the follow-up): 270 of 288 edu holds were found on one CI run, so the
    # bound leaves that room while a detector missing one gap in ten still fails it
    assert covered >= 0.90 * len(injected), f"{name}: found {covered} of {len(injected)}"
    assert len(clean) >= 0.5 * len(injected), f"{name}: only {len(clean)} gaps of {len(injected)} on their own"
    assert abs(median_ns - length_ns) <= 0.10 * length_ns, f"{name}: median {median_ns} ns vs {length_ns} ns"
    assert abs(period - period_ns) <= 0.05 * period_ns, f"{name}: period {period} ns vs {period_ns} ns"
    assert attributed >= 0.90, (name, [(g.cause, g.source, g.duration_ns) for g in clean
                                       if not (g.cause == cause and source(g.source))][:10])


def test_injected_gaps_in_the_vm_are_found_timed_and_attributed(vm, tmp_path, record_property):  # noqa: F811
    out = tmp_path / "results"
    proc = subprocess.Popen(station_cmd("run", str(_vm_campaign(vm, tmp_path)), "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        injected = _stall_vm(vm.pid, out / "runs" / "stall-r0")
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.kill(vm.pid, signal.SIGCONT)
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

    # the VM stops: no interrupt explains them
    gaps = ig.attribute(ig.read_outputs(out / "runs" / "stall-r0"))
    long = [g for g in gaps if g.duration_ns >= 0.8 * STALL["length_s"] * 1e9]
    offset = _offset([g.start_ns for g in long], [t for t, _ in injected])
    stall_ns = statistics.median(d for _, d in injected) * 1e9
    period_ns = statistics.median(b[0] - a[0] for a, b in zip(injected, injected[1:], strict=False)) * 1e9
    _check_injected("vm stall", gaps, [round((t + offset) * 1e9) for t, _ in injected], stall_ns, period_ns,
                    "unexplained", lambda s: s == "" or s.startswith("inside "), record_property)
    stall_run = runs["stall-r0"]
    assert stall_run["unexplained"]["count"] >= 0.5 * STALL["count"]
    assert "not explained by any interrupt" in stall_run["conclusion"]
    # among the emulator's own irregular gaps, the stalls stand out as one periodic family
    family = stall_run["unexplained"]["clusters"][0]
    assert family["periodic"], stall_run["unexplained"]
    assert abs(family["median_us"] * 1e3 - stall_ns) <= 0.10 * stall_ns
    assert abs(family["period_ms"] * 1e6 - period_ns) <= 0.05 * period_ns
    assert family["count"] >= 0.95 * STALL["count"]
    record_property("stall family", family)

    # the injector's holds: the local timer line, and the edu device's own line
    for name, params, source in (("hrtimer", HRTIMER, lambda s: s == "LOC"),
                                 ("edu", EDU, lambda s: s.endswith(" irqgap_inject"))):
        run_dir = out / "runs" / f"{name}-r0"
        outputs = ig.read_outputs(run_dir)
        gaps = ig.attribute(outputs)
        period, hold = params["period_us"] * 1_000, params["hold_us"] * 1_000
        grid = _grid(gaps, period, hold, outputs.gaps.start_ns, outputs.gaps.end["mono_ns"])
        _check_injected(name, gaps, grid, hold, period, "interrupt", source, record_property)
    edu_rows = [g for g in runs["edu-r0"]["groups"] if g["source"].endswith("irqgap_inject")]
    assert edu_rows and edu_rows[0]["periodic"] is True
    assert (out / "report.html").is_file() and "Interruptions" in (out / "report.html").read_text()


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
            stops.append(_stop(pid, 0.05))
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
    record_property("local", f"{len(gaps)} gaps; spoilers: {spoil['flags']}")

    report = json.loads((out / "report.json").read_text())
    for flag in spoil["flags"]:  # each said once in the report's warnings
        assert sum(flag in note for note in report["notes"]) == 1, (flag, report["notes"])
    entry = report["interruptions"]["runs"][0]
    assert entry["status"] == "complete" and entry["gaps"] == len(gaps)
    assert entry["conclusion"] in (out / "report.md").read_text()
    for root in TRACEFS_DIRS:  # the station's trace instance is gone
        assert not Path(root, "instances", instance_name(work_dir)).exists()


def test_on_the_rt_kernel_rtla_osnoise_sees_the_holds_the_detector_sees(tmp_path, record_property):
    """Debian's PREEMPT_RT kernel has the osnoise tracer: the same injected holds, measured by
    the detector and then by the kernel's own tracer, side by side."""
    cfg = {
        "name": "interruptions-rt",
        "bench": {"target": {"kind": "vm", "kernel": "rt"}, "scope": {"kind": "none"}},
        "matrix": {"kind": "interruptions", "loads": ["hrtimer"], "duration": "6s", "max_duration": "1min"},
        "interruptions": {"cpu": 1, "threshold": "500us", "priority": 99, "compare": "osnoise"},
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
    period, hold = HRTIMER["period_us"] * 1_000, HRTIMER["hold_us"] * 1_000
    holds = run["measured_s"] * 1e9 / period
    # the detector: its LOC gaps are the holds
    [loc] = [g for g in run["groups"] if g["cause"] == "interrupt" and g["source"] == "LOC"]
    assert loc["count"] >= 0.9 * holds and abs(loc["median_us"] * 1e3 - hold) <= 0.10 * hold, loc
    # the kernel's tracer: as many IRQ noises at least, the longest single one a hold or more
    o = run["osnoise"]
    record_property("rt", f"detector LOC {loc}; osnoise {o}")
    assert o["cpu"] == 1 and o["duration_s"] == 6
    assert o["irq"] >= 0.9 * holds * o["duration_s"] / run["measured_s"], o
    assert o["max_single_us"] * 1e3 >= 0.9 * hold, o
    assert "Side by side with rtla osnoise" in (out / "report.html").read_text()
