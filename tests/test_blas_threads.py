"""The station asks OpenBLAS for one thread (station/__init__.py): its worker threads spin between
the station's small calls and take a core from the runs analysed beside them; a user's own setting
is kept. Checked in fresh interpreters, as the setting only acts before numpy is imported, by
asking the OpenBLAS numpy loaded how many threads it runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ASK = """
import ctypes, station, numpy
libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.lower()})
if not libs:
    print("none")
else:
    lib = ctypes.CDLL(libs[0])
    ask = next((getattr(lib, name) for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                                                "openblas_get_num_threads") if hasattr(lib, name)), None)
    print(ask() if ask is not None else "unknown")
"""


def _blas_threads(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_one_blas_thread_unless_the_user_set_it():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    found = _blas_threads(env)
    if found in ("none", "unknown"):
        pytest.skip(f"numpy's BLAS is not an OpenBLAS this test can ask ({found})")
    assert found == "1"
    assert _blas_threads({**env, "OPENBLAS_NUM_THREADS": "2"}) == "2"


ANALYSE = """
import numpy  # first: station/__init__.py's default comes too late
from pathlib import Path
from threadpoolctl import threadpool_info
import station.kinds.module.analysis as module_analysis

seen = []
def analyse_run(run_dir):
    seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
    raise KeyboardInterrupt
module_analysis.analyse_run = analyse_run
try:
    module_analysis.analyse(module_analysis.AnalysisInput([Path("r0")], {}, None, 1e-9))
except KeyboardInterrupt:
    pass
print(seen[0], max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
"""


def test_runs_are_analysed_with_one_blas_thread_whoever_imported_numpy_first():
    """A notebook imports numpy, then the station: the module analysis still runs its runs with one
    BLAS thread, and gives the user's count back after."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["OPENBLAS_NUM_THREADS"] = "2"
    during, after = subprocess.run([sys.executable, "-c", ANALYSE], env=env, capture_output=True, text=True,
                                   check=True).stdout.split()
    assert (during, after) == ("1", "2")
