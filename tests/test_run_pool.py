"""Where runs are analysed (station/analysis/run_pool.py): forked processes only in a process with no
other thread (jemalloc's excepted), never for one run, and as IRQ_STATION_RUNS_IN says. Asked of
fresh processes: this test process has pytest's threads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ASK = """
import json, sys, threading
import station.analysis  # pyarrow and its allocator's thread, as in `station report`
from station.analysis import run_pool
answers = {"one run": run_pool.where(1, True), "large": run_pool.where(4, True), "small": run_pool.where(4, False)}
stop = threading.Event()
helper = threading.Thread(target=stop.wait)
helper.start()  # a thread of the caller's, as `station run` has its twin's and SSH's
answers["large, with another thread"] = run_pool.where(4, True)
stop.set()  # (just after a join the kernel may still list the thread for a moment: not asked then)
helper.join()
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
table = pa.table({name: np.arange(1 << 20) for name in "abcd"})
pq.write_table(table, sys.argv[1], row_group_size=1 << 16)
pq.read_table(sys.argv[1])  # with Arrow's own threads: native threads Python does not list
answers["large, after Arrow's threads"] = run_pool.where(4, True)
print(json.dumps(answers))
"""


def _ask(runs_in: str | None, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "IRQ_STATION_RUNS_IN"}
    if runs_in is not None:
        env["IRQ_STATION_RUNS_IN"] = runs_in
    res = subprocess.run([sys.executable, "-c", ASK, str(tmp_path / f"{runs_in}.parquet")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                                reason="forked workers are for Linux machines of two cores or more")


def test_processes_for_a_large_campaign_in_a_process_of_one_thread(tmp_path) -> None:
    assert _ask(None, tmp_path) == {"one run": "here", "large": "processes", "small": "threads",
                          "large, with another thread": "threads", "large, after Arrow's threads": "threads"}


def test_the_override_chooses_between_processes_and_threads_but_never_forks_beside_a_thread(tmp_path) -> None:
    assert _ask("processes", tmp_path) == {"one run": "here", "large": "processes", "small": "processes",
                                 "large, with another thread": "threads", "large, after Arrow's threads": "threads"}
    assert _ask("threads", tmp_path) == {"one run": "here", "large": "threads", "small": "threads",
                               "large, with another thread": "threads", "large, after Arrow's threads": "threads"}


HANG = """
import os, sys, time
from pathlib import Path
from station.analysis import run_pool

notes = Path(sys.argv[1])

def hang(item):
    (notes / f"{item}.{os.getpid()}").touch()
    time.sleep(600)

run_pool.mapped(hang, ["a", "b"], True)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie has ended: only its exit status is left to collect


@contextmanager
def _station_with_hanging_workers(tmp_path: Path, **popen: Any) -> Iterator[tuple[subprocess.Popen, set[int]]]:
    """A station process whose two workers are busy with items of ten minutes, and the workers'
    pids (each noted by its item); whatever the test does, nothing of it outlives the test."""
    env = {k: v for k, v in os.environ.items() if k != "IRQ_STATION_RUNS_IN"}
    station = subprocess.Popen([sys.executable, "-c", HANG, str(tmp_path)], env=env, **popen)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert station.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        workers = {int(p.name.rsplit(".", 1)[1]) for p in tmp_path.iterdir()}
        assert station.pid not in workers and len(workers) == 2
        yield station, workers
    finally:
        station.kill()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _outlived(workers: set[int]) -> list[int]:
    """The workers still alive after up to 30 s."""
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in workers if _alive(pid)]


def test_a_killed_station_leaves_no_worker_behind(tmp_path) -> None:
    """SIGKILL to the process whose workers analyse (a user's kill -9, a CI timeout): the workers end
    too, though they wait on a pipe whose writing end they hold themselves."""
    with _station_with_hanging_workers(tmp_path) as (station, workers):
        station.send_signal(signal.SIGKILL)
        station.wait(10)
        assert not _outlived(workers), "workers outlived the station"


def test_ctrl_c_ends_the_station_and_its_workers_without_waiting_for_their_work(tmp_path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while workers are busy
    with items of ten minutes: the station stops (KeyboardInterrupt) and leaves no worker."""
    with _station_with_hanging_workers(tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) \
            as (station, workers):
        os.killpg(station.pid, signal.SIGINT)
        _, err = station.communicate(timeout=120)  # the items would take 600 s
        assert station.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
        assert not _outlived(workers), "workers outlived the station"
