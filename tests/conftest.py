"""Shared fixtures: a twin on a background thread, reached over real SSH/TCP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def station_cmd(*args: str) -> list[str]:
    """The installed console script, as a user runs it."""
    exe = Path(sys.executable).with_name("station")
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "station.cli", *args]


def run_station(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(station_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture
def twin(tmp_path):
    from station.twin.runner import Twin

    tw = Twin(state_dir=tmp_path / "twin", seed=7, truth_dir=tmp_path / "truth", with_scope=False)
    tw.start_in_thread()
    yield tw
    tw.stop_thread()
