"""rtla beside a probe, against a real OpenSSH server on this machine: when rtla fails (seen in CI:
rtla timerlat aborted under a memory load in the PREEMPT_RT guest), the companion's note names the
signal and quotes what rtla printed on its stderr, and the probe's run stands (the note is not an
exception). The rtla here is a script standing in for the program, which this machine's kernel
could not run (no timerlat tracer); what it prints and how it dies is the test's truth."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from station.common.progress import QuietProgress
from station.config import TargetSettings
from station.kinds.rtla_companion import RtlaCompanion
from station.store.run_store import Appender
from station.target import SSHEndpoint, Target, rtla


@pytest.fixture
def work_dir():
    path = f"/tmp/irq-station-test-{secrets.token_hex(4)}"
    yield path
    subprocess.run(["rm", "-rf", path], check=False)


def _companion(local, work_dir: str, tmp_path: Path) -> tuple[RtlaCompanion, Target]:
    endpoint = SSHEndpoint(local.host, local.port, local.user, local.identity_file, local.known_hosts, 5)
    target = Target(endpoint, TargetSettings(kind="ssh", work_dir=work_dir))
    ctx = SimpleNamespace(target=target, max_seconds=60, spec=SimpleNamespace(id="r0"), sink=QuietProgress())
    companion = RtlaCompanion(ctx, "timerlat", "rtla timerlat")
    companion.out, companion.err = Appender(tmp_path / "timerlat.out"), Appender(tmp_path / "timerlat.err")
    return companion, target


def _fake_rtla(tmp_path: Path, body: str) -> str:
    script = tmp_path / f"rtla-{secrets.token_hex(3)}"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(("body", "status", "signal_name"), [
    ('echo "Timer Latency"; sleep 1; echo "Failed to allocate the histogram: Cannot allocate memory" >&2; '
     "kill -ABRT $$\n", 134, "SIGABRT"),
    ('sleep 1; echo "timerlat: could not set the tracer: Device or resource busy" >&2; exit 1\n', 1, None),
])
def test_a_failed_rtla_is_a_note_quoting_its_stderr(local, work_dir, tmp_path, monkeypatch, body, status,
                                                     signal_name):
    monkeypatch.setattr(rtla, "PROGRAM", _fake_rtla(tmp_path, body))
    companion, target = _companion(local, work_dir, tmp_path)
    asyncio.run(_run_and_stop(companion, target))
    said = body.split('echo "')[-1].split('" >&2')[0]  # what the script printed on stderr
    assert companion.exit_status == status
    assert companion.note.startswith(f"rtla timerlat exited with status {status}")
    assert said in companion.note
    assert (f"killed by {signal_name}" in companion.note) == (signal_name is not None)
    companion.out.close()
    if status == 134:
        assert "Timer Latency" in (tmp_path / "timerlat.out").read_text()  # what it printed is kept


def test_an_rtla_that_fails_at_once_is_a_note_not_a_failed_run(local, work_dir, tmp_path, monkeypatch):
    body = 'echo "timerlat: unknown option -Z" >&2; exit 2\n'
    monkeypatch.setattr(rtla, "PROGRAM", _fake_rtla(tmp_path, body))
    companion, target = _companion(local, work_dir, tmp_path)
    asyncio.run(_run_and_stop(companion, target))  # no exception: the probe's run stands
    assert companion.exit_status == 2
    assert companion.note == "rtla timerlat exited at once with status 2: timerlat: unknown option -Z"


async def _run_and_stop(companion: RtlaCompanion, target: Target) -> None:
    await target.activate()
    try:
        await companion.run(["timerlat", "hist", "-d", "1s"], duration_s=3.0)
        await companion.stop()
    finally:
        await target.deactivate()


def test_an_rtla_that_ends_well_leaves_no_note(local, work_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(rtla, "PROGRAM", _fake_rtla(tmp_path, 'echo "# RTLA timerlat histogram"\n'))
    companion, target = _companion(local, work_dir, tmp_path)
    asyncio.run(_run_and_stop(companion, target))
    assert companion.exit_status == 0 and companion.note is None
