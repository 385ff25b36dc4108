"""The campaign's analysis done while it measures: each run, once sealed, is analysed by its kind's
per-run analysis (Kind.run_analysis) in a worker process while the next run measures, and kept
(analysis/run_cache.py), so the report after the last run analyses that run alone and assembles
the others. The stop rule's intervals are judged round by round as before (stopping.py); this adds
each run's own figures to the live view as soon as they are known.

One worker: a station process of its own (`python -m station.campaign.live_analysis`, fed run
directories on its stdin, answering a JSON line each on its stdout), at a lower priority than the
measurement (nice), dying with the station. Not a multiprocessing pool: its spawn would run the
calling script again in the worker (a script without a main guard would start a second
campaign), and a pool's threads would keep the report's runs and figures out of forked workers.
A run whose live analysis fails, or a worker that dies (the OOM killer), is only a message: the
report analyses those runs afresh, as it always could.

When: IRQ_STATION_LIVE_ANALYSIS=on | off | auto (default). auto: when a run is large enough that
its analysis takes noticeable time (samples ≥ LIVE_MIN_SAMPLES or duration ≥ LIVE_MIN_SECONDS),
its kind has a per-run analysis, and no target is this machine or a guest on it (a `local` or
`vm` target: the analysis would be load on the very kernel measured); a campaign of short runs
analyses them in the report in less time than a worker takes to start.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
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
    if any(t.kind in ("local", "vm") for t in campaign.bench.named_targets().values()):
        return False
    matrix = campaign.matrix
    return ((matrix.samples or 0) >= LIVE_MIN_SAMPLES
            or float(matrix.duration or 0) >= LIVE_MIN_SECONDS)


class LiveAnalysis:
    """Runs handed over as they are sealed, analysed one after another in one worker process."""

    def __init__(self, progress: ProgressSink) -> None:
        self.progress = progress
        self._proc: subprocess.Popen | None = None
        self._pending: list[str] = []  # run ids handed over, in order (answers come in order)
        self._buffer = b""
        self._gone = False  # the worker ended: nothing more is handed over
        self.done: list[LiveResult] = []
        self.failed: dict[str, str] = {}

    @property
    def worker_cpu_s(self) -> float:
        """The worker's CPU time up to its last analysis (0 before any)."""
        return max((r.worker_cpu_s for r in self.done), default=0.0)

    def submit(self, run_dir: Path, kind_name: str) -> None:
        self.collect()
        if self._gone:
            return
        if self._proc is None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps({"kind": kind_name, "run_dir": str(run_dir)})
                                    + "\n").encode())
            self._proc.stdin.flush()
        except OSError:  # it ended (killed): what it had not answered, the report analyses
            self._ended()
            return
        self._pending.append(run_dir.name)

    def collect(self) -> None:
        """Say what finished since the last look (from the campaign's own thread)."""
        if self._proc is None or self._proc.stdout is None:
            return
        try:
            chunk = os.read(self._proc.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            chunk = None
        except OSError:
            chunk = b""
        if chunk:
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in lines:
                self._settle(json.loads(line))
        if chunk == b"" or (self._pending and self._proc.poll() is not None and chunk is None):
            self._ended()

    async def finish(self) -> None:
        """Every run handed over analysed, or failed, or its worker gone (the report analyses
        those); Ctrl-C meanwhile cancels this like any other wait of the station's."""
        while self._pending and not self._gone:
            self.collect()
            if self._pending and not self._gone:
                await asyncio.sleep(0.05)

    def close(self) -> None:
        """The worker gone, whatever it was doing (its unfinished runs: analysed by the report)."""
        proc, self._proc = self._proc, None
        self._gone = True
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> LiveAnalysis:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _start(self) -> None:
        from station.common.lifetime import die_with_parent

        # the same station in the worker, however this one was found (a checkout, a clone)
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p))
        self._proc = subprocess.Popen([sys.executable, "-m", "station.campaign.live_analysis"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=env,
                                      preexec_fn=die_with_parent)
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdout.fileno(), False)

    def _ended(self) -> None:
        self._gone = True
        status = self._proc.poll() if self._proc is not None else None
        if self._pending:
            self.progress.message(
                f"the live analysis ended (status {status}) before "
                f"{', '.join(self._pending)}: the report analyses "
                + ("it" if len(self._pending) == 1 else "them"))
            for run_id in self._pending:
                self.failed[run_id] = f"the worker ended (status {status})"
        self._pending = []

    def _settle(self, said: dict) -> None:
        run_id = said["run_id"]
        if self._pending and self._pending[0] == run_id:
            self._pending.pop(0)
        if "error" in said:
            self.failed[run_id] = said["error"]
            self.progress.message(f"{run_id}: its live analysis failed ({said['error']}); the "
                                  "report analyses it afresh")
            return
        result = LiveResult(run_id, said["seconds"], said["worker_cpu_s"], said["line"])
        self.done.append(result)
        self.progress.message(f"{run_id}: analysed live in {result.seconds:.1f} s"
                              + (f": {result.line}" if result.line else ""))


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


def _serve() -> None:
    """The worker: a run directory a line in, a JSON line out, until its input ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the station's: it closes us
    os.nice(NICENESS)
    for line in sys.stdin:
        asked = json.loads(line)
        run_dir = Path(asked["run_dir"])
        try:
            done = _analyse_and_keep(asked["kind"], run_dir)
            said = {"run_id": done.run_id, "seconds": done.seconds,
                    "worker_cpu_s": done.worker_cpu_s, "line": done.line}
        except Exception as exc:  # noqa: BLE001 - the station reports it; the report re-analyses
            said = {"run_id": run_dir.name, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(said) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
