"""Faults a real-time bench meets during cyclictest campaigns, each of which once let the
station report a run that did not measure what the campaign said (review of seed 004).

Each campaign here runs on this machine through the test sshd (the `local` fixture),
with a work_dir of its own, so that the tests signal only the processes they started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from station import api
from station.config import ConfigError, parse_campaign
from station.kinds.cyclictest.on_target import arguments
from station.kinds.cyclictest.settings import CyclictestSettings
from tests.conftest import missing

TAG = b"IRQ_STATION_TAG="


def _campaign(local, work_dir: Path, loads: dict, duration: str = "4s", **ct) -> dict:
    target = {"kind": "ssh", "host": local.host, "port": local.port, "user": local.user,
              "identity_file": local.identity_file, "known_hosts": local.known_hosts,
              "family": "mainline", "work_dir": str(work_dir)}
    return {
        "name": "faults", "bench": {"target": target, "scope": {"kind": "none"}},
        "matrix": {"kind": "cyclictest", "loads": list(loads), "duration": duration, "max_duration": "1min"},
        "cyclictest": {"threads": 1, "affinity": "none", "priority": 80, "interval": "1ms", "histogram": "1ms",
                       **ct},
        "loads": loads,
    }


def _run(cfg: dict, out: Path) -> api.CampaignResult:
    return asyncio.run(api.run_campaign_async(parse_campaign(yaml.safe_dump(cfg)), out))


def _tagged(work_dir: Path, comm: str) -> list[int]:
    """Pids of processes named comm that a wrapper started under this work_dir."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != comm:
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(TAG + str(work_dir).encode()) for e in env):
            found.append(int(entry.name))
    return found


def _signal_when_running(work_dir: Path, comm: str, sig: int, after_s: float) -> threading.Thread:
    def act() -> None:
        deadline = time.monotonic() + 120
        while not (pids := _tagged(work_dir, comm)) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(after_s)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


def test_a_load_cannot_take_the_probes_pid_file():
    """The probe's pid file is <work_dir>/loads/cyclictest.pid: a load of that name is killed
    by the probe's start (kill_pidfile of a 'stale' file) and the run still says complete."""
    text = ("name: c\nbench:\n  target: {kind: local}\n  scope: {kind: none}\n"
            "matrix: {kind: cyclictest, loads: [x], duration: 2s}\n"
            "loads:\n  x: [{name: cyclictest, command: 'sleep 100'}]\n")
    with pytest.raises(ConfigError, match="reserved"):
        parse_campaign(text, "c.yaml")


def test_batch_and_idle_are_not_offered():
    """cyclictest measures them as SCHED_OTHER (or with -p as FIFO): offering them would lie."""
    for policy in ("batch", "idle"):
        with pytest.raises(ValueError):
            CyclictestSettings(policy=policy)


@pytest.mark.parametrize("policy", ["other"])
def test_a_non_real_time_policy_is_not_measured_as_sched_fifo(policy, tmp_path):
    """cyclictest's -p switches a non-RT --policy to SCHED_FIFO (and -p0 then defaults to
    priority 2): policy other must not end up measuring a FIFO thread."""
    if not Path("/usr/bin/cyclictest").exists():
        missing("cyclictest (apt-get install rt-tests)")
    settings = CyclictestSettings(policy=policy, threads=1, affinity="none", mlockall=False, histogram=1e-4)
    args = arguments(settings, duration_s=2, loops=None, json_path=None)
    proc = subprocess.Popen(["/usr/bin/cyclictest", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        policies = []
        deadline = time.monotonic() + 5
        while not policies and time.monotonic() < deadline and proc.poll() is None:
            for task in Path(f"/proc/{proc.pid}/task").glob("*"):
                if int(task.name) != proc.pid:  # the measuring thread, not main()
                    with contextlib.suppress(OSError):
                        policies.append(os.sched_getscheduler(int(task.name)))
            time.sleep(0.02)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert policies, f"cyclictest {args} showed no measuring thread: {err!r}"
    assert not set(policies) & {os.SCHED_FIFO, os.SCHED_RR}, (
        f"policy {policy}: cyclictest {' '.join(args)} measured a real-time thread; it said {err.decode()!r}")


def test_cyclictest_ended_early_by_sigterm_is_not_a_complete_run(local, tmp_path):
    """Someone else's SIGTERM (`station cleanup` in another terminal, a second station on the
    same target, a shutdown) makes cyclictest print its results and exit 0 after a fraction
    of matrix.duration: that run must not enter the table as a complete 4 s measurement."""
    work = tmp_path / "wd"
    cfg = _campaign(local, work, {"none": []}, duration="4s")
    killer = _signal_when_running(work, "cyclictest", signal.SIGTERM, after_s=1.0)
    result = _run(cfg, tmp_path / "out")
    killer.join(5)
    [outcome] = result.outcomes
    assert outcome.status != "complete", "cyclictest ran about 1 s of its 4 s and the run says complete"


def test_a_load_that_dies_mid_run_is_not_a_complete_loaded_run(local, tmp_path):
    """The case is named for its load: if the load stops during the measurement, the run
    measured (partly) an idle machine and must say so."""
    work = tmp_path / "wd"
    cfg = _campaign(local, work, {"busy": [{"name": "spin", "command": "sleep 1; exit 7"}]}, duration="3s")
    result = _run(cfg, tmp_path / "out")
    [outcome] = result.outcomes
    assert outcome.status != "complete", "the load exited with status 7 a second into the run"


def test_cyclictest_failing_at_once_keeps_its_stderr(local, tmp_path):
    """cyclictest refusing its options (a CPU the target does not have) fails the run; what it
    printed on stderr belongs in the run directory's cyclictest.err, not only in the error."""
    work = tmp_path / "wd"
    cpu = (os.cpu_count() or 1) + 8
    cfg = _campaign(local, work, {"none": []}, duration="2s", affinity=str(cpu))
    result = _run(cfg, tmp_path / "out")
    [outcome] = result.outcomes
    assert outcome.status == "failed"
    err = (tmp_path / "out" / "runs" / outcome.run_id / "cyclictest.err").read_text()
    assert str(cpu) in err, f"cyclictest.err is {err!r}; the run's error said {outcome.error!r}"


def test_a_target_lost_mid_campaign_does_not_cancel_the_other_targets(tmp_path, monkeypatch):
    """bench.targets are independent machines: losing the first one after a run (it stops
    answering) ends that target's runs, not the campaign's runs on the others."""
    from station.campaign import loop as campaign_mod
    from station.campaign.run import RunOutcome

    campaign = parse_campaign(
        "name: c\nbench:\n  targets: {a: {kind: local}, b: {kind: local}}\n  scope: {kind: none}\n"
        "matrix: {kind: cyclictest, loads: [x, y], duration: 2s}\nloads: {x: [], y: []}\n")
    measured: list[str] = []

    class FakeBench:
        def __init__(self, campaign, log, target_name=None, needs=None):  # noqa: ANN001
            self.target_name = target_name

        async def __aenter__(self):  # noqa: ANN204
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        def describe(self) -> dict:
            return {"target": {"name": self.target_name}, "scope": None, "twin": None}

        async def not_answering(self) -> str | None:
            return "target: SSH to a failed: Connection lost" if self.target_name == "a" else None

    async def fake_run(bench, spec, store, progress, sink):  # noqa: ANN001, ANN202
        measured.append(spec.id)
        failed = bench.target_name == "a"
        return RunOutcome(spec.id, "failed" if failed else "complete", "lost the SSH session" if failed else None)

    monkeypatch.setattr(campaign_mod, "Bench", FakeBench)
    monkeypatch.setattr(campaign_mod, "execute_run", fake_run)
    from station.common.progress import QuietProgress

    asyncio.run(campaign_mod.run_campaign(campaign, tmp_path / "out", QuietProgress()))
    assert [m for m in measured if m.startswith("b-")] == ["b-x-r0", "b-y-r0"], measured
