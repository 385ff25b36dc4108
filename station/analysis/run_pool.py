"""Work of a report done several pieces at once (each run's analysis, each figure's drawing): in
forked worker processes where that is safe and worth it, else in threads or one after another.

A run's analysis is numpy and compiled loops joined by Python; a figure's drawing is Python
(matplotlib). In threads, the Python of one piece waits for the other's (the GIL), numba's loader
serialises the workers' first compiled calls, and the waiting process cannot use the time. Forked
workers share none of that: they inherit the work (a function and its items: nothing of them is
pickled) and hand back each result pickled (a run's analysis ~20 MB at seed scale, an SVG ~0.2 MB);
the parent runs `meanwhile` (the report writer's imports) as it waits. Measured on 2 cores, 4 runs
of 8.4 M records (`station report`): 7.2 s with threads and figures drawn in turn, 6.2 s with
workers; peak memory 0.95 GB, then 0.55 GB (a run per process at a time).

Processes only where
- Linux forks (a fork copies the parent's imports: a spawned worker would import everything again);
- the calling process has no other thread, counted by the kernel (/proc/self/task), but those
  made to survive a fork (FORK_SAFE_THREADS): a fork copies the calling thread alone, so a lock
  another thread held (an SSH session's, a pool's) would stay held in the child forever: `station
  run`, with its twin and SSH threads, uses threads;
- there are two pieces at least and enough work that the forks and the pickling pay (`large`).
IRQ_STATION_RUNS_IN=threads or =processes overrides the last condition (a test, a user ruling the
fork out), for the runs' analysis and the figures' drawing alike; never the first two. A worker
that dies (the OOM killer) breaks the pool: every piece not finished yet is then done here, one at a
time, with a warning naming it (a finished one keeps its result): nothing measured is lost. A
worker dies with the station (a killed report leaves none behind) and ignores Ctrl-C: the station
cancels what is queued and goes at once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
# pieces done at once (a run: a few hundred MB at seed scale)
WORKERS = min(len(os.sched_getaffinity(0)) or 1, 4)
OVERRIDE = "IRQ_STATION_RUNS_IN"


def where(pieces: int, large: bool) -> str:
    """"processes", "threads" or "here" (one piece, or one worker): where `pieces` pieces of work
    (runs to analyse, figures to draw) are done."""
    if pieces < 2 or WORKERS < 2:
        return "here"
    asked = os.environ.get(OVERRIDE, "").lower()
    wanted = asked == "processes" or (asked != "threads" and large)
    return "processes" if wanted and fork_is_safe() else "threads"


# threads that survive a fork by their own design: jemalloc's purging thread (pyarrow's allocator,
# there from its import on) takes every allocator lock before a fork and rebuilds itself after
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def fork_is_safe() -> bool:
    """Linux, and no thread in this process but the calling one (and FORK_SAFE_THREADS)."""
    if (
        not sys.platform.startswith("linux")
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        return False
    if threading.active_count() > 1:
        return False
    # a thread just joined (a pool's, a moment ago) is still listed while the kernel finishes its
    # exit: a short wait for it; a thread Python does not know of (a library's) stays, and says no
    deadline = time.monotonic() + LINGER_S
    while True:
        if not _unknown_threads():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)


# a thread's exit takes microseconds; a library's thread would cost this once a report
LINGER_S = 0.05


def _unknown_threads() -> list[str]:
    """This process's threads other than the calling one and FORK_SAFE_THREADS (the kernel's
    list)."""
    me = str(threading.get_native_id())
    unknown = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # no /proc: nothing to go by, so not safe
        return ["?"]
    for task in tasks:
        if task == me:
            continue
        try:
            name = Path(f"/proc/self/task/{task}/comm").read_text().strip()
        except OSError:  # it ended meanwhile
            continue
        if name not in FORK_SAFE_THREADS:
            unknown.append(name)
    return unknown


def analysed(analyse: Callable[[Path], T], run_dirs: Sequence[Path], large: bool,
             meanwhile: Callable[[], object] | None = None) -> list[T]:
    """analyse(run_dir) of each run, in their order; `meanwhile` runs in this process while worker
    processes analyse, if they do. A run the live analysis already analysed (run_cache.py: this
    run as it is now, this code, signed here) is taken as kept."""
    from station.analysis import run_cache

    name = run_cache.analysis_name(analyse)
    kept = [run_cache.load(run_dir, name) for run_dir in run_dirs]
    todo = [run_dir for run_dir, done in zip(run_dirs, kept, strict=True) if done is None]
    if not todo and meanwhile is not None:
        meanwhile()
    fresh = iter(mapped(analyse, todo, large, meanwhile, what="analysing") if todo else [])
    return [done if done is not None else next(fresh) for done in kept]


def mapped(
    fn: Callable[[Any], T], items: Sequence[Any], large: bool,
    meanwhile: Callable[[], object] | None = None, fallback: str = "threads",
    what: str = "working on"
) -> list[T]:
    """fn(item) of each item, in their order: in forked workers where `where` says processes, else
    in threads (`fallback` "threads") or one after another here ("here": work that holds the GIL,
    such as drawing). The workers inherit fn and the items (nothing of them is pickled: a figure's
    samples are tens of MB); only each result comes back, pickled."""
    mode = where(len(items), large)
    if mode == "processes":
        return _in_processes(fn, items, meanwhile, what)
    if mode == "threads" and fallback == "threads":
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
            return list(pool.map(fn, items))
    return [fn(item) for item in items]


# a worker's work, set by its initializer: the function and the items it inherited in the fork (the
# initializer's arguments are not pickled under fork). Never set in the station's own process, so a
# mapped() inside a worker (its own pool, its own workers) leaves this worker's work alone.
_work: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _worker_start(parent: int, fn: Callable[[Any], Any], items: Sequence[Any]) -> None:
    """In each worker, first: die with the station (a worker waits on a pipe whose writing end it
    inherited, so it would never see its parent go: a killed `station report` would leave its
    workers asleep for good, a run's memory each); leave Ctrl-C to the station (which cancels what
    is queued and lets the worker go); hold the work."""
    global _work
    # (asyncio's import with it: paid here, not by every report)
    from station.common.lifetime import die_with_parent

    die_with_parent()
    if os.getppid() != parent:  # gone already, before the request took hold
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _work = (fn, items)


def _call(index: int) -> Any:
    assert _work is not None, "a worker started without its work"
    fn, items = _work
    return fn(items[index])


def _in_processes(fn: Callable[[Any], T], items: Sequence[Any], meanwhile: Callable[[],
                                                                                    object] | None,
                  what: str) -> list[T]:
    pool = ProcessPoolExecutor(max_workers=min(WORKERS, len(items)),
                               mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_start, initargs=(os.getpid(), fn, items))
    try:
        futures = [pool.submit(_call, i) for i in range(len(items))]
        if meanwhile is not None:
            meanwhile()
        results = [_result(f, fn, item, what) for f, item in zip(futures, items, strict=True)]
    # an item's error, Ctrl-C: nothing queued is started, nothing running waits
    except BaseException:
        # the workers still running end now: Python's exit would otherwise wait for their items (a
        # run's analysis: seconds). (_processes: the pool's own, gone after shutdown; Python 3.14
        # does this as terminate_workers.)
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            worker.terminate()
        raise
    pool.shutdown()
    return results


def _result(future: Future, fn: Callable[[Any], T], item: Any, what: str) -> T:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        # a worker died (the OOM killer), or a result could not be unpickled here: this item is done
        # here, as are the others still unfinished (finished ones keep their results)
        name = getattr(item, "name", None) or str(item)
        cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
        warnings.warn(f"the worker processes could not finish {what} {name} ({exc}{cause}): done "
                      "in the station's own process instead", RuntimeWarning, stacklevel=3)
        return fn(item)
