"""Where runs are analysed (station/analysis/run_pool.py): forked processes only in a process with no
other thread (jemalloc's excepted), never for one run, and as IRQ_STATION_RUNS_IN says. Asked of
fresh processes: this test process has pytest's threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
print(json.dumps(answers))
"""


def _ask(runs_in: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "IRQ_STATION_RUNS_IN"}
    if runs_in is not None:
        env["IRQ_STATION_RUNS_IN"] = runs_in
    res = subprocess.run([sys.executable, "-c", ASK], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                                reason="forked workers are for Linux machines of two cores or more")


def test_processes_for_a_large_campaign_in_a_process_of_one_thread() -> None:
    assert _ask(None) == {"one run": "here", "large": "processes", "small": "threads",
                          "large, with another thread": "threads"}


def test_the_override_chooses_between_processes_and_threads_but_never_forks_beside_a_thread() -> None:
    assert _ask("processes") == {"one run": "here", "large": "processes", "small": "processes",
                                 "large, with another thread": "threads"}
    assert _ask("threads") == {"one run": "here", "large": "threads", "small": "threads",
                               "large, with another thread": "threads"}
