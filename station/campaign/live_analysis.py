"""The campaign's analysis done while it measures: each run, once sealed, is analysed by its kind's
per-run analysis (Kind.run_analysis) in a worker process while the next run measures, and kept
(analysis/run_cache.py), so the report after the last run analyses that run alone and assembles
the others. The stop rule's intervals are judged round by round as before (stopping.py); this adds
each run's own figures to the live view as soon as they are known.

One worker, started by spawning (the station's process has SSH and twin threads: a fork would copy
their locks held), at a lower priority than the measurement (nice), dying with the station. A run
whose live analysis fails is only a message: the report analyses it afresh, as it always could.

When: IRQ_STATION_LIVE_ANALYSIS=on | off | auto (default). auto: when a run is large enough that
its analysis takes noticeable time (samples ≥ LIVE_MIN_SAMPLES or duration ≥ LIVE_MIN_SECONDS),
and its kind has a per-run analysis; a campaign of short runs analyses them in the report in less
time than a worker takes to start.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from station.common.progress import ProgressSink

SWITCH = "IRQ_STATION_LIVE_ANALYSIS"
LIVE_MIN_SAMPLES = 200_000  # ~0.05 s of analysis a run: a spawned worker's start costs more
LIVE_MIN_SECONDS = 20.0
NICENESS = 10


@dataclass(frozen=True)
class LiveResult:
    """What the worker says of one run it analysed (the analysis itself is kept on disk)."""

    run_id: str
    seconds: float  # wall time of the run's analysis
    worker_cpu_s: float  # the worker's CPU time since it started (imports included)
    line: str  # the run's figures in a line for the live view ("" if its kind has none)


def wanted(campaign: object) -> bool:
    """Whether this campaign is analysed live (SWITCH, else the size of its runs)."""
    from station.kind_registry import kind

    asked = os.environ.get(SWITCH, "auto").strip().lower()
    if asked in ("off", "0", "no") or kind(campaign.matrix.kind).run_analysis is None:
        return False
    if asked in ("on", "1", "yes"):
        return True
    matrix = campaign.matrix
    return ((matrix.samples or 0) >= LIVE_MIN_SAMPLES
            or float(matrix.duration or 0) >= LIVE_MIN_SECONDS)


class LiveAnalysis:
    """Runs handed over as they are sealed, analysed one after another in one worker."""

    def __init__(self, progress: ProgressSink) -> None:
        self.progress = progress
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[tuple[str, Future]] = []
        self.done: list[LiveResult] = []
        self.failed: dict[str, str] = {}

    @property
    def worker_cpu_s(self) -> float:
        """The worker's CPU time up to its last analysis (0 before any)."""
        return max((r.worker_cpu_s for r in self.done), default=0.0)

    def submit(self, run_dir: Path, kind_name: str) -> None:
        self.collect()
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_start, initargs=(os.getpid(),))
        self._pending.append((run_dir.name, self._pool.submit(_analyse_and_keep, kind_name,
                                                               run_dir)))

    def collect(self) -> None:
        """Say what finished since the last look (called from the campaign's own thread)."""
        still = []
        for run_id, future in self._pending:
            if not future.done():
                still.append((run_id, future))
                continue
            self._settle(run_id, future)
        self._pending = still

    def wait(self) -> None:
        """Every run handed over analysed (or failed: the report analyses it)."""
        for run_id, future in self._pending:
            try:
                future.exception()
            finally:
                self._settle(run_id, future)
        self._pending = []

    def close(self) -> None:
        """The worker gone, whatever it was doing (its unfinished runs: analysed by the report)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(5)

    def __enter__(self) -> LiveAnalysis:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _settle(self, run_id: str, future: Future) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self.failed[run_id] = f"{type(error).__name__}: {error}"
            self.progress.message(f"{run_id}: its live analysis failed ({error}); the report "
                                  "analyses it afresh")
            return
        result: LiveResult = future.result()
        self.done.append(result)
        self.progress.message(f"{run_id}: analysed live in {result.seconds:.1f} s"
                              + (f": {result.line}" if result.line else ""))


def _worker_start(parent: int) -> None:
    from station.common.lifetime import die_with_parent

    die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the station's: it closes us
    os.nice(NICENESS)


def _analyse_and_keep(kind_name: str, run_dir: Path) -> LiveResult:
    """In the worker: the kind's analysis of the run, kept for the report."""
    from station.analysis import run_cache
    from station.kind_registry import kind

    analyse = kind(kind_name).load("run_analysis")
    started = time.perf_counter()
    fingerprint = run_cache.run_fingerprint(run_dir)  # the run as the analysis reads it
    analysis = analyse(run_dir)
    run_cache.store(run_dir, run_cache.analysis_name(analyse), analysis, fingerprint)
    line = analysis.live_line() if hasattr(analysis, "live_line") else ""
    return LiveResult(run_dir.name, time.perf_counter() - started, time.process_time(), line)
