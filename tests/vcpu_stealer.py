"""A hypervisor's stalls, made on this host: one thread of a QEMU guest's vCPU is pinned to a host
CPU and, at SCHED_FIFO on that CPU, this process busy-waits `hold` every `period` (jittered), so the
guest's CPU stops as it does when a hypervisor or firmware takes it: no interrupt of the guest's
runs meanwhile, and a guest timer due in the stall fires right after it.

Run as its own process (its SCHED_FIFO must not reach the test's threads):

    python -m tests.vcpu_stealer --cpu 1 --hold-us 2000 --period-us 5000 --jitter-us 1000 --seed 3

It runs until stdin closes, then prints its log, one stall a line: `stall <due> <start> <end>`, host
CLOCK_MONOTONIC ns: the stall cannot begin before `due` (this process could not run before it),
surely covers [start, end] (this process had the CPU from before start to after end)."""

from __future__ import annotations

import argparse
import os
import random
import select
import sys
import time

FIFO_PRIORITY = 50


def vcpu_thread(qemu_pid: int, index: int) -> int:
    """The thread id that runs the guest's vCPU `index` (TCG names them "CPU <n>/TCG", KVM "CPU <n>/KVM";
    single-threaded TCG runs every vCPU on its "ALL CPUs/TCG" thread)."""
    names = {}
    for task in os.listdir(f"/proc/{qemu_pid}/task"):
        try:
            names[open(f"/proc/{qemu_pid}/task/{task}/comm").read().strip()] = int(task)  # noqa: SIM115 - /proc
        except OSError:
            continue
    for name, tid in names.items():
        if name.startswith((f"CPU {index}/", "ALL CPUs/")):
            return tid
    raise LookupError(f"QEMU {qemu_pid} has no thread for vCPU {index}: {sorted(names)}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", type=int, required=True)
    p.add_argument("--hold-us", type=int, required=True)
    p.add_argument("--period-us", type=int, required=True)
    p.add_argument("--jitter-us", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    os.sched_setaffinity(0, {a.cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    rng = random.Random(a.seed)
    print("ready", flush=True)
    log = []
    due = time.monotonic_ns() + 50_000_000
    while True:
        due += (a.period_us + rng.randint(-a.jitter_us, a.jitter_us)) * 1000
        wait = due - time.monotonic_ns()
        if wait > 0 and select.select([sys.stdin], [], [], wait / 1e9)[0]:  # nothing is written: closed
            break
        start = time.monotonic_ns()
        end = start + a.hold_us * 1000
        while time.monotonic_ns() < end:
            pass
        log.append((due, start, time.monotonic_ns()))
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    sys.stdout.write("".join(f"stall {d} {s} {e}\n" for d, s, e in log))


if __name__ == "__main__":
    main()
