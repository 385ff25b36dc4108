"""target_modules/tools/irqgap, compiled and run: gaps injected with SIGSTOP/SIGCONT must be found
with the length the test measured. Nothing is asserted about the machine's own latencies."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from station.parsers.irqgap import Gap, IrqgapOutput, parse
from tests.conftest import missing

SRC = Path(__file__).resolve().parents[1] / "target_modules" / "tools" / "irqgap.c"
STOP_S = 0.060
THRESHOLD_NS = 2_000_000  # well under the injected stops, above most of a VM's noise
TOLERANCE = 0.20


@pytest.fixture(scope="module")
def irqgap(tmp_path_factory) -> Path:
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if not cc:
        missing("no C compiler to build irqgap")
    out = tmp_path_factory.mktemp("irqgap") / "irqgap"
    res = subprocess.run(
        [cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-o", str(out), str(SRC)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return out


def _base_args(exe: Path, *extra: str) -> list[str]:
    return [str(exe), "--cpu", "0", "--threshold-ns", str(THRESHOLD_NS), "--priority", "0", "--no-mlock", *extra]


def _wait_for_start(proc: subprocess.Popen, out_path: Path, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "\nstart " in out_path.read_text():
            return
        assert proc.poll() is None, f"irqgap exited early ({proc.returncode}): {out_path.read_text()}"
        time.sleep(0.01)
    raise AssertionError("irqgap printed no start line")


class Stop(NamedTuple):
    t_stop: int  # CLOCK_MONOTONIC ns, just before kill(SIGSTOP)
    t_cont: int  # just after kill(SIGCONT)
    waited: int  # ns the program waited for the CPU meanwhile and shortly after (schedstat run_delay)


def _run_delay(pid: int) -> int:
    """Time the process spent runnable but not running, per the kernel (0 if not known)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _inject_stops(pid: int, n: int, on_stopped: Callable[[int], None] | None = None) -> list[Stop]:
    """SIGSTOP, sleep, SIGCONT, n times, 250 ms apart: the real instants of each.

    A busy CPU 0 can keep the program waiting for a while after SIGCONT: that wait is part of the
    gap. The kernel's count of it (read once the program has run again) is kept as slack."""
    stops = []
    for i in range(n):
        time.sleep(0.25)
        waited = _run_delay(pid)
        t0 = time.monotonic_ns()
        os.kill(pid, signal.SIGSTOP)
        if on_stopped:
            on_stopped(i)
        time.sleep(STOP_S)
        os.kill(pid, signal.SIGCONT)
        t1 = time.monotonic_ns()
        time.sleep(0.05)
        stops.append(Stop(t0, t1, _run_delay(pid) - waited))
    return stops


def _run(exe: Path, tmp_path: Path, extra: tuple[str, ...], n_stops: int, terminate: bool,
         on_stopped: Callable[[int], None] | None = None) -> tuple[IrqgapOutput, list]:
    """Run the program (its output in tmp_path/out.txt), inject n_stops stops, optionally end it
    with SIGTERM; the parsed output and the stops."""
    out_path = tmp_path / "out.txt"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(_base_args(exe, *extra), stdout=out, stderr=subprocess.PIPE)
    try:
        _wait_for_start(proc, out_path)
        stops = _inject_stops(proc.pid, n_stops, on_stopped)
        if terminate:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    result = parse(out_path.read_text())
    assert not result.torn
    return result, stops


def _gap_of(result: IrqgapOutput, stop: Stop) -> Gap:
    overlapping = [g for g in result.gaps if g.start_ns < stop.t_cont and g.end_ns > stop.t_stop]
    assert overlapping, f"no gap for {stop}"
    return max(overlapping, key=lambda g: g.duration_ns)


def _check_stops_found(result: IrqgapOutput, stops: list[Stop]) -> None:
    """Each stop is a gap as long as the stop, within TOLERANCE (plus the time the kernel says the
    program then waited for the CPU: nothing on a quiet machine), with a context switch."""
    assert result.end is not None and result.start_ns is not None
    for stop in stops:
        assert result.start_ns < stop.t_stop and stop.t_cont < result.end["mono_ns"], "stop outside the loop"
        real = stop.t_cont - stop.t_stop
        gap = _gap_of(result, stop)
        assert real * (1 - TOLERANCE) <= gap.duration_ns <= real * (1 + TOLERANCE) + stop.waited, (gap, stop)
        assert gap.ctxsw >= 1, gap


def test_injected_stops_until_duration(irqgap, tmp_path):
    result, stops = _run(
        irqgap, tmp_path, ("--clock", "monotonic", "--duration-s", "2", "--flush-ms", "200"), 4, terminate=False
    )
    assert (result.version, result.clock, result.cpu) == (1, "monotonic", 0)
    assert (result.threshold_ns, result.priority) == (THRESHOLD_NS, 0)
    assert result.counter_hz is None and result.counter_hz_end is None
    if Path("/proc/interrupts").exists():
        assert result.irq_lines
    if Path("/proc/softirqs").exists():
        assert "TIMER" in result.softirq_names.values()
    assert result.end is not None and result.end["reason"] == "duration"
    assert result.end["gaps"] == len(result.gaps) >= 4
    assert result.end["iterations"] > 0
    assert 1.9e9 <= result.end["mono_ns"] - result.start_ns <= 2.5e9
    assert len(result.ticks) >= 5  # every 200 ms, the stops included
    _check_stops_found(result, stops)


def test_injected_stops_until_sigterm_with_fake_msr(irqgap, tmp_path):
    msr = tmp_path / "msr"
    msr.write_bytes(bytes(0x34) + (7).to_bytes(8, "little") + bytes(8))  # SMI count 7, never moving
    result, stops = _run(irqgap, tmp_path, ("--clock", "monotonic", "--msr-dev", str(msr)), 2, terminate=True)
    assert result.end is not None and result.end["reason"] == "signal"
    assert result.smi_available and result.smi_reason is None
    assert result.gaps and all(g.smi == 0 for g in result.gaps)
    _check_stops_found(result, stops)


def test_smi_unavailable_and_no_counts(irqgap, tmp_path):
    absent = tmp_path / "no-such-msr"
    result, _ = _run(irqgap, tmp_path, ("--msr-dev", str(absent), "--no-counts"), 0, terminate=True)
    assert not result.smi_available and str(absent) in result.smi_reason
    assert result.irq_lines == {} and result.softirq_names == {}
    assert all(g.smi is None and g.irqs == {} and g.softirqs == {} for g in result.gaps)
    assert result.end is not None and result.end["reason"] == "signal"


def test_no_smi(irqgap, tmp_path):
    result, _ = _run(irqgap, tmp_path, ("--no-smi",), 0, terminate=True)
    assert not result.smi_available and "--no-smi" in result.smi_reason
    assert all(g.smi is None for g in result.gaps)


def _interrupts(rows: list[str]) -> str:
    # CPU 0 in the middle column, as when other CPUs are offline: its column comes from the header
    return "           CPU3       CPU0       CPU5       \n" + "".join(r + "\n" for r in rows)


def test_counts_from_files_rows_come_and_go(irqgap, tmp_path):
    """--interrupts-file/--softirqs-file: files the test rewrites while the program is stopped,
    so the gap after each stop has known deltas."""
    irq, soft = tmp_path / "interrupts", tmp_path / "softirqs"
    soft_text = (
        "                    CPU3       CPU0       CPU5       \n          HI:          0          {}          0\n"
    )
    soft_text += "       TIMER:        100        {}         99\n"
    base = ["  0:   5  10  15   IO-APIC   2-edge      timer", "LOC:   1  4294967290  2   Local timer interrupts"]
    versions = [
        # baseline; ERR/MIS have one global count and no column for a CPU
        (_interrupts([*base, "ERR:          3", "MIS:          0"]), (0, 50)),
        # timer +3, LOC unchanged, a new row 31 with 7 on CPU 0
        (
            _interrupts([base[0].replace("10", "13"), base[1], " 31:  0  7  0   PCI-MSI 524288-edge      nvme0q1"]),
            (0, 52),
        ),
        # 31 gone; timer +7; LOC wraps at 2^32: +11
        (_interrupts([base[0].replace("10", "20"), base[1].replace("4294967290", "5")]), (1, 52)),
        # 31 back, another device: a new index; PIN has no description
        (
            _interrupts(
                [
                    base[0].replace("10", "20"),
                    base[1].replace("4294967290", "5"),
                    " 31:  0  4  0   PCI-MSI 1-edge      eth0",
                    "PIN:  0  2  0",
                ]
            ),
            (1, 52),
        ),
    ]
    irq.write_text(versions[0][0])
    soft.write_text(soft_text.format(*versions[0][1]))
    args = ("--clock", "monotonic", "--interrupts-file", str(irq), "--softirqs-file", str(soft))

    def rewrite(i: int) -> None:
        text, soft_counts = versions[i + 1]
        irq.write_text(text)
        soft.write_text(soft_text.format(*soft_counts))

    result, stops = _run(irqgap, tmp_path, args, len(versions) - 1, terminate=True, on_stopped=rewrite)
    text = (tmp_path / "out.txt").read_text()
    assert result.softirq_names == {0: "HI", 1: "TIMER"}
    assert result.irq_lines == {
        0: ("0", "IO-APIC   2-edge      timer"),
        1: ("LOC", "Local timer interrupts"),
        2: ("31", "PCI-MSI 524288-edge      nvme0q1"),
        3: ("31", "PCI-MSI 1-edge      eth0"),
        4: ("PIN", ""),
    }
    # rows seen mid-run are declared before the gap that uses them
    assert text.index("irq 2 31 ") > text.index("\nstart ")
    _check_stops_found(result, stops)
    found = [_gap_of(result, stop) for stop in stops]
    assert [(g.irqs, g.softirqs) for g in found] == [
        ({0: 3, 2: 7}, {1: 2}),
        ({0: 7, 1: 11}, {0: 1}),
        ({3: 4, 4: 2}, {}),
    ]
    assert all(g.irqs == {} and g.softirqs == {} for g in result.gaps if g not in found)


def _has_constant_tsc() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " constant_tsc" in flags


def test_tsc_clock(irqgap, tmp_path):
    if not _has_constant_tsc():
        # a property of this CPU (or of the hypervisor's virtual one), which no install provides
        pytest.skip("this CPU has no constant_tsc (/proc/cpuinfo): its TSC rate varies, so --clock tsc "
                    "cannot be checked against CLOCK_MONOTONIC here")
    result, stops = _run(irqgap, tmp_path, ("--clock", "tsc", "--duration-s", "1"), 1, terminate=False)
    assert result.clock == "tsc" and result.counter_hz is not None and result.counter_hz > 1e8
    assert result.counter_hz_end == pytest.approx(result.counter_hz, rel=0.02)
    # the loop ran duration_s * tsc_hz TSC ticks: with a right tsc_hz, one second of CLOCK_MONOTONIC
    assert result.end is not None and result.end["reason"] == "duration"
    assert (result.end["mono_ns"] - result.start_ns) / 1e9 == pytest.approx(1.0, rel=0.02)
    _check_stops_found(result, stops)


def test_reader_gone_exits_3(irqgap):
    proc = subprocess.Popen(
        _base_args(irqgap, "--flush-ms", "20", "--duration-s", "5"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"irqgap 1\n"
        proc.stdout.close()
        assert proc.wait(timeout=5) == 3
        assert b"Broken pipe" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--cpu", "x", "--threshold-ns", "5"], "--cpu"),
        (["--cpu", "0", "--threshold-ns", "5", "--cpu", "-1"], "--cpu"),
        (["--threshold-ns", "5"], "--cpu"),
        (["--cpu", "0"], "--threshold-ns"),
        (["--cpu", "0", "--threshold-ns", "0"], "--threshold-ns"),
        (["--cpu", "0", "--threshold-ns", "5", "--priority", "100"], "--priority"),
        (["--cpu", "0", "--threshold-ns", "5", "--clock", "hpet"], "--clock"),
        (["--cpu", "0", "--threshold-ns", "5", "--duration-s", "1s"], "--duration-s"),
        (["--cpu", "0", "--threshold-ns", "5", "--flush-ms", "0"], "--flush-ms"),
        (["--cpu", "0", "--threshold-ns", "5", "--flush-ms"], "--flush-ms"),
        (["--cpu", "0", "--threshold-ns", "5", "--bogus"], "--bogus"),
    ],
)
def test_bad_option_exits_2(irqgap, args, named):
    res = subprocess.run([str(irqgap), *args], capture_output=True, text=True, timeout=5)
    assert res.returncode == 2
    assert named in res.stderr
    assert res.stdout == ""
