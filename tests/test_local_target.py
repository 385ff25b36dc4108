"""The station's process control against a real OpenSSH server and real processes on
this machine: loads lead their own process group, carry the station's tag, die by
their own deadline, survive a lost session until cleanup stops them — after a
SIGKILLed station too — and a stale pid file never makes the station signal a
process that is not its own."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from station.target import SSHEndpoint, Target, TargetConnection, TargetError
from station.target import processes as proc_ctl
from tests.conftest import run_station

LOOP = "while :; do dd if=/dev/zero of=/dev/null bs=1M count=64 2>/dev/null; done"


@pytest.fixture
def work_dir():
    path = Path(f"/tmp/irq-station-test-{secrets.token_hex(4)}")
    yield str(path)
    subprocess.run(["rm", "-rf", str(path)], check=False)


def _endpoint(local) -> SSHEndpoint:
    return SSHEndpoint(local.host, local.port, local.user, local.identity_file, local.known_hosts, 5)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return {"Z": "zombie"}.get(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0], "running")
    except (OSError, IndexError):
        return "gone"


def _group(pgid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if _alive(int(p))]


def _wait_gone(pids: list[int], within_s: float = 30) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_loads_are_tagged_process_groups_that_cleanup_stops_after_a_lost_session(local, work_dir):
    async def main():
        conn = await TargetConnection.open(_endpoint(local))
        loop = await proc_ctl.start_load(conn, "dd-loop", LOOP, work_dir, 60)
        sleeper = await proc_ctl.start_load(conn, "sleeper", "sleep 300", work_dir, 60)
        conn.abort()  # the station lost its session: no teardown
        return loop.pid, sleeper.pid

    loop_pid, sleeper_pid = asyncio.run(main())
    members = _group(loop_pid) + _group(sleeper_pid)
    assert loop_pid in members and sleeper_pid in members and len(members) >= 3  # sh, dd/timeout...
    environ = Path(f"/proc/{loop_pid}/environ").read_bytes().split(b"\0")
    assert f"IRQ_STATION_TAG={work_dir}/loads/dd-loop.pid".encode() in environ
    time.sleep(0.5)
    assert _alive(loop_pid) and _alive(sleeper_pid)  # no pty: a lost session does not stop them

    async def cleanup():
        target = Target(_endpoint(local), _settings(work_dir))
        await target.activate()
        try:
            return await target.cleanup(within_s=30)
        finally:
            await target.deactivate()

    done = asyncio.run(cleanup())
    assert done["loads_stopped"] == ["dd-loop", "sleeper"]
    assert _wait_gone(members) == []
    assert list(Path(work_dir, "loads").iterdir()) == []


def test_a_stale_pid_file_never_signals_a_stranger(local, work_dir):
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)  # not started by the station
    try:
        loads = Path(work_dir, "loads")
        loads.mkdir(parents=True)
        (loads / "reused.pid").write_text(f"{stranger.pid}\n")
        (loads / "init.pid").write_text("1\n")

        async def main():
            conn = await TargetConnection.open(_endpoint(local))
            try:
                return await proc_ctl.kill_recorded(conn, work_dir)
            finally:
                await conn.close()

        assert sorted(asyncio.run(main())) == ["init", "reused"]
        time.sleep(0.5)
        assert stranger.poll() is None  # still running: the pid was not ours
        assert list(loads.iterdir()) == []
    finally:
        stranger.kill()
        stranger.wait()


def test_a_load_ends_by_its_own_deadline(local, work_dir):
    async def main():
        conn = await TargetConnection.open(_endpoint(local))
        load = await proc_ctl.start_load(conn, "short", "sleep 300", work_dir, max_seconds=1)
        await conn.close()
        return load.pid

    pid = asyncio.run(main())
    assert _wait_gone([pid], within_s=60) == []  # `timeout -s KILL 1` ended it, nobody else


def _settings(work_dir: str):
    from station.config import TargetSettings

    return TargetSettings(kind="ssh", work_dir=work_dir)


CRASHER = """
import asyncio, sys
from station.target import SSHEndpoint, TargetConnection
from station.target import processes as proc_ctl

async def main():
    ep = SSHEndpoint(*sys.argv[1:3], "root", sys.argv[3], sys.argv[4], 5)
    conn = await TargetConnection.open(ep)
    for name, cmd in (("dd-loop", sys.argv[6]), ("sleeper", "sleep 300")):
        load = await proc_ctl.start_load(conn, name, cmd, sys.argv[5], 600)
        print(load.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_sigkilled_station_then_station_cleanup(local, work_dir, tmp_path):
    crasher = subprocess.Popen(
        [sys.executable, "-c", CRASHER, local.host, str(local.port), local.identity_file, local.known_hosts,
         work_dir, LOOP], stdout=subprocess.PIPE, text=True)
    pids = [int(crasher.stdout.readline()), int(crasher.stdout.readline())]
    crasher.send_signal(signal.SIGKILL)
    crasher.wait(10)
    members = [p for pid in pids for p in _group(pid)]
    assert all(_alive(p) for p in pids)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: local\nbench: {{target: {local.target_yaml(work_dir=work_dir)}, scope: {{kind: none}}}}\n"
                   "matrix: {samples: 100}\n")
    res = run_station("cleanup", str(cfg), timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["target"] == {"modules_unloaded": [], "loads_stopped": ["dd-loop", "sleeper"]}
    assert _wait_gone(members) == []


def test_commands_with_assignments_and_odd_bytes_on_a_real_shell(local, work_dir):
    """`VAR=value program` is shell syntax, not a program name; a pid file holding a byte
    that is not UTF-8 must not cost the SSH session that cleanup needs."""

    async def main():
        conn = await TargetConnection.open(_endpoint(local))
        load = await proc_ctl.start_load(conn, "env-load", "LC_ALL=C sleep 300", work_dir, 60)
        Path(work_dir, "loads", "odd.pid").write_bytes(b"12\xe9\n")
        stopped = await proc_ctl.kill_recorded(conn, work_dir)
        assert (await conn.run("true")).exit_status == 0  # the session survived the odd byte
        await conn.close()
        return load.pid, stopped

    pid, stopped = asyncio.run(main())
    assert sorted(stopped) == ["env-load", "odd"]
    assert _wait_gone([pid]) == []


@pytest.fixture
def one_session_sshd(tmp_path):
    """OpenSSH's sshd allowing one session per connection (MaxSessions 1): a second is refused,
    as a busy target's sshd refuses one whose fork failed."""
    from station.target.local_sshd import LocalSshd

    server = LocalSshd(tmp_path / "sshd1", extra_config="MaxSessions 1\n")
    target = server.start()
    yield target
    server.stop()


def test_a_session_sshd_refuses_is_asked_for_again_on_the_same_connection(one_session_sshd, tmp_path):
    """The command is sent while another session holds sshd's only one: sshd refuses it, the
    station asks again, and it runs once the other has ended (it sees the marker the other
    left on its way out). A session still held after the tries is a clear error, and the
    connection carries commands again once it is free."""
    marker = tmp_path / "first-ended"
    ep = _endpoint(one_session_sshd)

    async def scenario() -> tuple[str, str, str]:
        conn = await TargetConnection.open(ep)
        try:
            await conn.start(f"sleep 1; touch {marker}")
            after = (await conn.run(f"test -e {marker} && echo after-the-first")).stdout
            long_sleep = f"sleep 29.{secrets.randbelow(10**6):06d}"  # this test's own, to end it
            held = await conn.start(long_sleep)
            with pytest.raises(TargetError) as refused:
                await conn.run("echo never")
            other = await TargetConnection.open(ep)  # a session of its own on a second connection
            await other.run(f"pkill -f '^{long_sleep}$'")
            await other.close()
            await held.wait_closed()
            again = (await conn.run("echo again")).stdout
            return after, str(refused.value), again
        finally:
            await conn.close()

    after, refused, again = asyncio.run(scenario())
    assert after.strip() == "after-the-first"
    assert "refused a session running `echo never` 5 times" in refused and "MaxSessions" in refused, refused
    assert again.strip() == "again"
