"""Several runs analysed at once: in forked worker processes where that is safe and worth it, else
in threads.

A run's analysis is numpy and compiled loops joined by Python. In threads, the Python of one run
waits for the other's (the GIL), numba's loader serialises the workers' first compiled calls, and
the process that waits for them cannot use the time. Forked workers share none of that: each
analyses its runs alone and hands back their analyses pickled (~20 MB a run at seed scale), and the
parent runs `meanwhile` (the report writer's imports) while it waits. Measured on 2 cores, 4 runs
of 8.4 M records: the report 7.6 s with threads, 6.4 s with processes, its peak memory 0.95 GB
then 0.55 GB (one run per process at a time).

Processes only where
- Linux forks (a fork copies the parent's imports: a spawned worker would import everything again);
- the calling process has no other thread, counted by the kernel (/proc/self/task), but those
  made to survive a fork (FORK_SAFE_THREADS): a fork copies the calling thread alone, so a lock
  another thread held (an SSH session's, a pool's) would stay held in the child forever: `station
  run`, with its twin and SSH threads, uses threads;
- there are two runs at least and enough records that the fork and the pickling pay (`large`).
IRQ_STATION_RUNS_IN=threads or =processes overrides the last condition (a test, a user ruling the
fork out); never the first two. A worker that dies (the OOM killer) leaves its runs to be analysed
here, one at a time, with a warning: nothing measured is lost to it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
WORKERS = min(len(os.sched_getaffinity(0)) or 1, 4)  # runs analysed at once (a few hundred MB each at seed scale)
OVERRIDE = "IRQ_STATION_RUNS_IN"


def where(runs: int, large: bool) -> str:
    """"processes", "threads" or "here" (one run, or one worker): where `runs` runs are analysed."""
    if runs < 2 or WORKERS < 2:
        return "here"
    asked = os.environ.get(OVERRIDE, "").lower()
    wanted = asked == "processes" or (asked != "threads" and large)
    return "processes" if wanted and fork_is_safe() else "threads"


# threads that survive a fork by their own design: jemalloc's purging thread (pyarrow's allocator,
# there from its import on) takes every allocator lock before a fork and rebuilds itself after
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def fork_is_safe() -> bool:
    """Linux, and no thread in this process but the calling one (and FORK_SAFE_THREADS)."""
    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return False
    me = str(threading.get_native_id())
    try:
        others = [t for t in os.listdir("/proc/self/task") if t != me]
        return all(Path(f"/proc/self/task/{t}/comm").read_text().strip() in FORK_SAFE_THREADS for t in others)
    except OSError:  # a thread that ended meanwhile, a /proc not mounted: not sure, so no
        return False


def analysed(analyse: Callable[[Path], T], run_dirs: Sequence[Path], large: bool,
             meanwhile: Callable[[], object] | None = None) -> list[T]:
    """analyse(run_dir) of each run, in their order. `analyse` must be a module-level function (a
    worker process finds it by name); `meanwhile` runs in this process while workers analyse."""
    mode = where(len(run_dirs), large)
    if mode == "here":
        return [analyse(d) for d in run_dirs]
    workers = min(WORKERS, len(run_dirs))
    if mode == "threads":
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(analyse, run_dirs))
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(analyse, d) for d in run_dirs]
        if meanwhile is not None:
            meanwhile()
        return [_result(f, analyse, d) for f, d in zip(futures, run_dirs, strict=True)]


def _result(future: Future, analyse: Callable[[Path], T], run_dir: Path) -> T:
    try:
        return future.result()
    except BrokenProcessPool as exc:  # a worker died: its runs (and those queued behind) are done here
        warnings.warn(f"the worker process analysing {run_dir.name} ended abruptly ({exc}): analysed "
                      "in the station's own process instead", RuntimeWarning, stacklevel=2)
        return analyse(run_dir)
