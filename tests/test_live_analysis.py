"""The analysis done while a campaign measures (issue 50, campaign/live_analysis.py and
analysis/run_cache.py): each run analysed as it is sealed, in a worker, its figures in the live
view (checked against the events the twin logged it made), the report after the last run the
same bytes as one made afresh; a kept analysis used only when it is this run's, this code's and
signed by this station (a foreign pickle is never unpickled)."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from station.analysis import run_cache
from station.campaign import live_analysis
from station.config import load_campaign
from station.kinds.module.run_analysis import analyse_run
from tests.conftest import station_cmd

CAMPAIGN = """\
name: live
bench:
  target: {kind: twin, family: rtai}
  twin: {seed: 11, ground_truth: true}
  scope: {kind: twin, channel: 1, volts_per_div: 1V, position_div: -3, time_per_div: 500us,
          record_length: 120000, trigger_level: 1.5V, threshold: auto, bus: loopback}
matrix:
  interfaces: [lpt, pcie]
  variants: [inb]
  loads: [none]
  repetitions: 1
  period: 100us
  samples: 6000
  pulses: 300
  max_duration: 1min
  format: v1
"""
NAME = run_cache.analysis_name(analyse_run)
LINE = re.compile(r"^(?P<run>\S+): analysed live in [\d.]+ s: t_SW median (?P<median>[\d.]+) µs, "
                  r"p99 [\d.]+ µs, max (?P<max>[\d.]+) µs over (?P<count>[\d,]+) events", re.M)


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, str]:
    """A small twin campaign run with the live analysis on (its runs are far smaller than the
    switch's automatic threshold): the campaign directory and what the station printed."""
    work = tmp_path_factory.mktemp("live")
    config = work / "live.yaml"
    config.write_text(CAMPAIGN)
    out = work / "out"
    env = dict(os.environ, COLUMNS="200", **{live_analysis.SWITCH: "on"})
    done = subprocess.run(station_cmd("run", str(config), "--out", str(out)), capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout + done.stderr


def runs_of(out: Path) -> list[Path]:
    return sorted(d for d in (out / "runs").iterdir() if (d / "manifest.json").exists())


def test_each_run_is_analysed_live_and_its_figures_are_the_twins_events(measured):
    out, printed = measured
    lines = {m["run"]: m for m in LINE.finditer(printed)}
    assert sorted(lines) == [d.name for d in runs_of(out)]
    for run_dir in runs_of(out):
        truth = pd.read_parquet(run_dir / "twin-truth.parquet", columns=["seq", "sw_ns", "stray"])
        got = pd.read_parquet(run_dir / "sw.parquet", columns=["seq"])["seq"].to_numpy()
        # the events the twin made that reached the station (its log, by the record's number)
        made = truth[truth["seq"].isin(got) & ~truth["stray"]]["sw_ns"].to_numpy()
        line = lines[run_dir.name]
        assert int(line["count"].replace(",", "")) == made.size
        assert float(line["median"]) == pytest.approx(np.median(made) / 1e3, abs=0.006)
        assert float(line["max"]) == pytest.approx(made.max() / 1e3, abs=0.006)
        assert run_cache.load(run_dir, NAME) is not None  # kept, and still this run's


def test_the_report_after_the_runs_is_the_one_made_afresh(measured, tmp_path):
    out, _ = measured
    written = (out / "report.json").read_bytes()
    aside = tmp_path / "kept"
    (out / run_cache.CACHE_DIR).rename(aside)  # the report names its directory: made in place
    try:
        fresh = subprocess.run(station_cmd("report", str(out)), capture_output=True, text=True,
                               timeout=300)
        assert fresh.returncode == 0, fresh.stderr
        assert (out / "report.json").read_bytes() == written
    finally:
        aside.rename(out / run_cache.CACHE_DIR)


@pytest.fixture
def kept(measured, tmp_path) -> Path:
    """A copy of the campaign whose first run's analysis is kept by this test's station."""
    out, _ = measured
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / run_cache.CACHE_DIR)
    run_dir = runs_of(copy)[0]
    run_cache.store(run_dir, NAME, analyse_run(run_dir), run_cache.run_fingerprint(run_dir))
    return run_dir


def test_a_kept_analysis_is_this_runs_as_it_is_now(kept):
    loaded = run_cache.load(kept, NAME)
    assert loaded is not None and loaded.sw.count == analyse_run(kept).sw.count
    # a file of the run changed since (its time): analysed afresh
    sw = kept / "sw.parquet"
    os.utime(sw, ns=(sw.stat().st_atime_ns, sw.stat().st_mtime_ns + 1))
    assert run_cache.load(kept, NAME) is None


def test_a_moved_campaign_is_analysed_afresh(kept, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(kept.parent.parent, moved)  # copytree keeps the files' times
    assert run_cache.load(moved / "runs" / kept.name, NAME) is None
    assert run_cache.load(kept, NAME) is not None


def test_a_damaged_file_is_ignored(kept):
    path = run_cache.cache_path(kept, NAME)
    blob = bytearray(path.read_bytes())
    blob[-100] ^= 0xFF
    path.write_bytes(bytes(blob))
    assert run_cache.load(kept, NAME) is None


def test_another_stations_key_is_not_this_ones(kept, tmp_path, monkeypatch):
    monkeypatch.setenv("IRQ_STATION_KEY_DIR", str(tmp_path / "other-keys"))
    run_cache._key.cache_clear()
    try:
        assert run_cache.load(kept, NAME) is None
    finally:
        monkeypatch.undo()
        run_cache._key.cache_clear()
    assert run_cache.load(kept, NAME) is not None


class _Planted:
    """A pickle that would leave a file behind if it were ever unpickled."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self):  # noqa: ANN204
        return (Path.touch, (self.mark,))


def test_a_planted_pickle_is_never_unpickled(kept, tmp_path):
    # a campaign handed over with a cache its sender wrote: right run, right fingerprint, but
    # signed with a key that is not this station's
    mark = tmp_path / "ran"
    payload = pickle.dumps(_Planted(mark))
    fingerprint = run_cache.run_fingerprint(kept)
    forged = run_cache.MAGIC + bytes(32) + fingerprint + payload
    run_cache.cache_path(kept, NAME).write_bytes(forged)
    assert run_cache.load(kept, NAME) is None
    assert not mark.exists()


@pytest.mark.parametrize("samples, switch, expected", [
    (6000, "auto", False), (400_000, "auto", True), (400_000, "off", False), (6000, "on", True),
])
def test_the_switch_and_the_automatic_size(tmp_path, monkeypatch, samples, switch, expected):
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.replace("samples: 6000", f"samples: {samples}")
                    .replace("max_duration: 1min", "max_duration: 2h"))
    monkeypatch.setenv(live_analysis.SWITCH, switch)
    assert live_analysis.wanted(load_campaign(path)) is expected


def test_closing_ends_a_busy_worker_at_once(measured):
    out, _ = measured
    from station.common.progress import QuietProgress

    live = live_analysis.LiveAnalysis(QuietProgress())
    live.submit(runs_of(out)[0], "module")
    pid = live._proc.pid
    assert not gone(pid)
    live.close()
    assert gone(pid)


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def update(self, progress: object) -> None:
        pass

    def message(self, text: str) -> None:
        self.lines.append(text)


def test_a_worker_killed_meanwhile_is_a_message_and_nothing_else(measured):
    # the OOM killer takes the worker: later runs are not handed over, nothing raises, and the
    # report analyses what the worker did not answer
    import asyncio
    import signal as signals

    out, _ = measured
    said = _Said()
    with live_analysis.LiveAnalysis(said) as live:
        first, second = runs_of(out)[:2]
        live.submit(first, "module")
        os.kill(live._proc.pid, signals.SIGKILL)
        live._proc.wait()
        live.submit(second, "module")
        asyncio.run(live.finish())
    assert live.done == []
    assert first.name in live.failed
    assert any("the live analysis ended" in line and first.name in line for line in said.lines)


def test_a_run_it_cannot_analyse_is_a_message(tmp_path):
    import asyncio

    broken = tmp_path / "c" / "runs" / "x-r0"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    said = _Said()
    with live_analysis.LiveAnalysis(said) as live:
        live.submit(broken, "module")
        asyncio.run(live.finish())
    assert "x-r0" in live.failed and not live.done
    assert any("x-r0: its live analysis failed" in line for line in said.lines)


def gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status  # ended, not yet reaped
