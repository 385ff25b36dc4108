"""Faults a real bench meets, injected from outside a real `station run`: the SSH
link or the scope link cut, frozen or restored (a TCP relay between the station
and the twin), the station killed with SIGKILL, a changed host key, a full disk.
For each: one clear message, a non-zero exit, every sample received before the
fault on disk and readable, and nothing left loaded or running on the target
(checked over SSH, bypassing the faulty link)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import asyncssh
import numpy as np
import pytest

from station.kinds.module.data import load_run
from station.parsers.records import decode_file
from station.target import TargetError
from tests.conftest import run_station, station_cmd
from tests.fault_proxy import FaultyLink, relay_known_hosts

RUN = "lpt-inb-io-r0"


def _config(path: Path, twin: dict, ssh_port: int, scope_port: int | None = None, samples: int = 10_000_000,
            known_hosts: str | None = None) -> Path:
    if known_hosts is None and ssh_port != twin["ssh_port"]:  # the twin's key, under the relay's port
        known_hosts = str(relay_known_hosts(twin["known_hosts"], ssh_port,
                                            path.with_name("known_hosts_relay")))
    scope = (f"  scope: {{kind: visa, resource: 'TCPIP::127.0.0.1::{scope_port}::SOCKET', timeout: 3s}}\n"
             if scope_port else "  scope: {kind: none}\n")
    path.write_text(
        "name: faults\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {ssh_port}, user: root, connect_timeout: 3s,\n"
        f"           identity_file: '{twin['identity_file']}', known_hosts: '{known_hosts or twin['known_hosts']}'}}\n"
        + scope +
        f"matrix: {{interfaces: [lpt], variants: [inb], loads: [io], samples: {samples}, max_duration: 30min}}\n"
        "loads:\n"
        "  io: [{name: dd-loop, command: 'while :; do dd if=/dev/zero of=x bs=1M count=8; done'}]\n"
    )
    return path


def _start(cfg: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(station_cmd("run", str(cfg), "--out", str(out)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, COLUMNS="200"))


def _wait_streaming(run: subprocess.Popen, out: Path, min_records: int = 3000, pulses: bool = False) -> None:
    raw, hw = out / "runs" / RUN / "sw.raw", out / "runs" / RUN / "hw_pulses.csv"
    deadline = time.monotonic() + 90
    while not (raw.exists() and raw.stat().st_size >= 40 * min_records
               and (not pulses or (hw.exists() and hw.stat().st_size > 10_000))):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no data streamed"
        time.sleep(0.1)


def _finish(run: subprocess.Popen, timeout: float = 180) -> tuple[int, str]:
    _, stderr = run.communicate(timeout=timeout)
    assert "Traceback" not in stderr, stderr
    assert "never retrieved" not in stderr, stderr
    # what the user saw, for the record (pytest -s shows it)
    said = [ln for ln in stderr.splitlines() if ln.startswith(("error:", "lpt-", "campaign stopped", "teardown"))]
    print(f"\n[exit {run.returncode}] " + "\n  ".join(said))
    return run.returncode, stderr


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


async def _state(twin: dict) -> tuple[str, str, str]:
    async with asyncssh.connect("127.0.0.1", twin["ssh_port"], username="root", client_keys=[twin["identity_file"]],
                                known_hosts=twin["known_hosts"]) as conn:
        return ((await conn.run("lsmod")).stdout, (await conn.run("ps")).stdout,
                (await conn.run("ls /tmp/irq-station/loads", check=False)).stdout)


def _assert_clean(twin: dict) -> None:
    lsmod, ps, pids = asyncio.run(_state(twin))
    assert "latency" not in lsmod, lsmod
    assert "dd" not in ps and "cat" not in ps, ps
    assert pids.strip() == "", pids


def _assert_data_kept(out: Path, at_least: int = 3000) -> dict:
    """The samples streamed before the fault: on disk, whole, in sequence, readable by the API."""
    run_dir = out / "runs" / RUN
    raw = decode_file(run_dir / "sw.raw", "v1")
    assert len(raw) >= at_least
    assert np.array_equal(raw["seq"].to_numpy(), np.arange(len(raw)))
    data = load_run(run_dir)
    assert len(data.sw) == len(raw)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert not list(run_dir.glob("*.tmp"))
    return manifest


@pytest.fixture
def ssh_link(standalone_twin):
    with FaultyLink(standalone_twin["ssh_port"]) as link:
        yield link


def test_ssh_link_cut_and_back(standalone_twin, ssh_link, tmp_path):
    """The link drops mid-run (sshd restarted, a switch rebooted) and returns: the run fails
    saying so, teardown reconnects and cleans up."""
    out = tmp_path / "out"
    run = _start(_config(tmp_path / "c.yaml", standalone_twin, ssh_link.port), out)
    _wait_streaming(run, out)
    ssh_link.cut()
    time.sleep(2)
    ssh_link.restore()
    code, stderr = _finish(run)
    assert code == 3
    assert "lost the SSH session" in stderr
    assert _errors(stderr) == [f"error: some runs did not complete: {RUN} (failed)"]
    manifest = _assert_data_kept(out)
    assert manifest["status"] == "failed" and "lost the SSH session" in manifest["error"]
    _assert_clean(standalone_twin)


def test_ssh_link_frozen_names_the_link(standalone_twin, ssh_link, tmp_path):
    """No byte passes, no connection closes: the station says the link went silent (not
    'is the module running?'), then cleans up once the link thaws."""
    out = tmp_path / "out"
    run = _start(_config(tmp_path / "c.yaml", standalone_twin, ssh_link.port), out)
    _wait_streaming(run, out)
    before = ssh_link.connections
    ssh_link.freeze()
    frozen_at = time.monotonic()
    # the station notices the stall (5 s without a record + a 5 s probe on the same session) and only
    # then opens a new session, to clean up: wait for that attempt, not for a time a loaded machine
    # could outrun (at least the 10 s the detection takes: waiting longer is harmless)
    assert ssh_link.wait_for_connections(before + 1, timeout_s=300), "the station never gave up the frozen link"
    time.sleep(max(0.0, 10.0 - (time.monotonic() - frozen_at)))
    ssh_link.restore()
    code, stderr = _finish(run)
    assert code == 3
    manifest = _assert_data_kept(out)
    assert "SSH link to" in manifest["error"] and "went silent" in manifest["error"], manifest["error"]
    _assert_clean(standalone_twin)


def test_ssh_link_gone_stops_the_campaign_and_cleanup_repairs_later(standalone_twin, ssh_link, tmp_path):
    """The target stays unreachable: the run fails, the campaign stops instead of trying every
    remaining run, and `station cleanup` repairs the target once it is back."""
    out = tmp_path / "out"
    cfg = _config(tmp_path / "c.yaml", standalone_twin, ssh_link.port)
    # the teardown's reconnecting, shortened from a minute: what is asserted is that it gives up
    cfg.write_text(cfg.read_text().replace("variants: [inb]", "variants: [inb, no-inb]")
                   .replace("connect_timeout: 3s,", "connect_timeout: 3s, reconnect_for: 10s,"))
    run = _start(cfg, out)
    _wait_streaming(run, out)
    ssh_link.cut()
    code, stderr = _finish(run, timeout=240)
    assert code == 3
    [error] = _errors(stderr)
    assert error.startswith("error: campaign stopped: the target:") and "resume" in error
    assert not (out / "runs" / "lpt-no-inb-io-r0").exists()  # the next run was not attempted
    manifest = _assert_data_kept(out)
    assert manifest["status"] == "failed"
    lsmod, _, _ = asyncio.run(_state(standalone_twin))
    assert "rtai_lpt_latency" in lsmod  # unreachable: nobody could unload it
    ssh_link.restore()
    res = run_station("cleanup", str(cfg), timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["target"]["modules_unloaded"] == ["rtai_lpt_latency"]
    _assert_clean(standalone_twin)


@pytest.mark.parametrize("fault", ["cut", "freeze"])
def test_scope_link_fault_fails_the_run_and_stops_the_campaign(standalone_twin, tmp_path, fault):
    scope_port = int(standalone_twin["scope_resource"].split("::")[2])
    with FaultyLink(scope_port) as scope_link:
        out = tmp_path / "out"
        run = _start(_config(tmp_path / "c.yaml", standalone_twin, standalone_twin["ssh_port"], scope_link.port),
                     out)
        _wait_streaming(run, out, pulses=True)
        getattr(scope_link, fault)()
        code, stderr = _finish(run)
    assert code == 3
    [error] = _errors(stderr)
    assert error.startswith("error: campaign stopped: scope:"), error
    assert "one new session after 1 s failed too" in error, error  # one reconnect, then the error
    manifest = _assert_data_kept(out)
    assert manifest["status"] == "failed"
    hw = load_run(out / "runs" / RUN).hw
    assert len(hw) > 0 and np.all(hw["width_s"] > 0)  # pulses captured before the fault are kept
    _assert_clean(standalone_twin)


def test_scope_link_dropped_briefly_is_reopened_once_and_the_run_completes(standalone_twin, tmp_path):
    """The scope's LAN drops for a moment (a switch, a cable): the station opens one new session,
    configured as the first was, and the run goes on; the manifest says it reconnected."""
    scope_port = int(standalone_twin["scope_resource"].split("::")[2])
    with FaultyLink(scope_port) as scope_link:
        out = tmp_path / "out"
        run = _start(_config(tmp_path / "c.yaml", standalone_twin, standalone_twin["ssh_port"], scope_link.port,
                             samples=60_000), out)
        _wait_streaming(run, out, pulses=True)
        before = scope_link.connections
        scope_link.drop()  # an instant: whatever the machine's load, the station's one reopening finds the link
        code, stderr = _finish(run)
        assert scope_link.connections == before + 1, "exactly one new session"
    assert code == 0, stderr[-2000:]
    manifest = _assert_data_kept(out, at_least=60_000)
    assert manifest["status"] == "complete" and manifest["scope_reconnects"] == 1
    _assert_clean(standalone_twin)


def test_sigkill_then_cleanup_then_resume(standalone_twin, tmp_path):
    """SIGKILL leaves the module and the load running (nothing can run in a killed process);
    `station cleanup` stops them, the streamed data is readable, and a resumed campaign
    keeps the killed attempt marked as abandoned."""
    out = tmp_path / "out"
    cfg = _config(tmp_path / "c.yaml", standalone_twin, standalone_twin["ssh_port"], samples=20_000)
    run = _start(cfg, out)
    _wait_streaming(run, out)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    lsmod, ps, _ = asyncio.run(_state(standalone_twin))
    assert "rtai_lpt_latency" in lsmod and "dd" in ps
    res = run_station("cleanup", str(cfg), timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["target"] == {"modules_unloaded": ["rtai_lpt_latency"],
                                                "loads_stopped": ["dd-loop", "record-stream"]}
    _assert_clean(standalone_twin)
    assert _assert_data_kept(out)["status"] == "running"  # as the kill left it
    res = run_station("run", str(cfg), "--out", str(out), timeout=120)
    assert res.returncode == 0, res.stderr
    attempt = json.loads((out / "runs" / f"{RUN}.attempt-1" / "manifest.json").read_text())
    assert attempt["status"] == "abandoned"
    assert json.loads((out / "runs" / RUN / "manifest.json").read_text())["status"] == "complete"


def test_changed_host_key_is_refused_plainly_and_never_retried(standalone_twin, ssh_link, tmp_path):
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_link.port} {other}\n")
    cfg = _config(tmp_path / "c.yaml", standalone_twin, ssh_link.port, known_hosts=str(known))
    res = run_station("run", str(cfg), "--out", str(tmp_path / "out"), timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    [error] = _errors(res.stderr)
    assert "CHANGED" in error and "man-in-the-middle" in error and "ssh-keygen -R" in error
    before = ssh_link.connections
    res = run_station("cleanup", str(cfg), timeout=60)
    assert res.returncode == 2 and "CHANGED" in res.stderr
    assert ssh_link.connections == before + 1  # one attempt: a refusal is final


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the disk-full test mounts a tmpfs and needs root (CI runs as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_ends_the_campaign_cleanly(standalone_twin, small_disk, tmp_path):
    out = small_disk / "out"
    run = _start(_config(tmp_path / "c.yaml", standalone_twin, standalone_twin["ssh_port"]), out)
    code, stderr = _finish(run)
    assert code != 0
    [error] = _errors(stderr)
    assert "No space left on device" in error and "sw.raw" in error, error
    run_dir = out / "runs" / RUN
    raw = decode_file(run_dir / "sw.raw", "v1")
    assert len(raw) > 10_000 and np.array_equal(raw["seq"].to_numpy(), np.arange(len(raw)))
    assert len(load_run(run_dir).sw) == len(raw)
    assert not list(run_dir.glob("*.tmp"))
    manifest = json.loads((run_dir / "manifest.json").read_text())  # the reserve made room for the outcome
    assert manifest["status"] == "failed" and "No space left on device" in manifest["error"]
    _assert_clean(standalone_twin)


def _relayed_host(twin: dict, port: int, tmp_path: Path, identity_file: str | None = None,
                  reconnect_for: float = 60.0):
    from station.target.hosts import Host
    from station.target.ssh import SSHEndpoint

    known_hosts = relay_known_hosts(twin["known_hosts"], port, tmp_path / "known_hosts_relay")
    endpoint = SSHEndpoint("127.0.0.1", port, "root", identity_file or twin["identity_file"], str(known_hosts), 1.0,
                           reconnect_for=reconnect_for)
    host = Host(endpoint, "/tmp/irq-station", "the target")
    asyncio.run(host.activate(connect=False))
    return host


def test_a_host_that_answers_again_within_reconnect_for_is_not_lost(standalone_twin, ssh_link, tmp_path):
    """'Is the bench lost?' after a failed run: a host busy past one try (its loads, its tracer)
    that answers a later try is not lost, so its other runs go on. The truth is the relay's own
    count of connection attempts: the link thaws only once a second try began, the first unanswered."""
    host = _relayed_host(standalone_twin, ssh_link.port, tmp_path)
    ssh_link.freeze()

    async def probe() -> str | None:
        async with asyncio.timeout(50):
            while ssh_link.connections < 2:  # a second try: the first went unanswered
                await asyncio.sleep(0.05)
        ssh_link.restore()
        return None

    async def both() -> tuple[str | None, None]:
        return await asyncio.gather(host.not_answering(timeout=1.0), probe())  # within its reconnect_for, 60 s

    answer, _ = asyncio.run(both())
    assert answer is None
    assert ssh_link.connections >= 2  # the answer came on a later try, through the thawed link


def test_a_host_that_stays_silent_is_lost_after_reconnect_for_and_a_refused_key_at_once(
        standalone_twin, ssh_link, tmp_path):
    host = _relayed_host(standalone_twin, ssh_link.port, tmp_path, reconnect_for=2.5)
    ssh_link.freeze()
    answer = asyncio.run(host.not_answering(timeout=1.0))
    assert answer is not None and "did not answer within 1 s" in answer and "tries over" in answer, answer
    assert ssh_link.connections >= 2
    ssh_link.restore()
    before = ssh_link.connections
    stranger = tmp_path / "stranger_ed25519"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    stranger.chmod(0o600)
    refused = asyncio.run(_relayed_host(standalone_twin, ssh_link.port, tmp_path, str(stranger))
                          .not_answering(timeout=1.0))
    assert refused is not None and "refused our key" in refused, refused
    assert ssh_link.connections == before + 1  # waiting does not change a refused key: one try


def test_a_host_its_teardown_gave_up_on_is_not_waited_for_again(standalone_twin, ssh_link, tmp_path):
    """The teardown's cleanup already spent reconnect_for on a silent host: 'is it lost?' asks once
    more, not for another reconnect_for (the relay counts the tries)."""
    host = _relayed_host(standalone_twin, ssh_link.port, tmp_path, reconnect_for=60.0)
    ssh_link.freeze()
    with pytest.raises(TargetError, match="not clean after 2 s"):
        asyncio.run(host.cleanup(within_s=2.0))
    before = ssh_link.connections
    answer = asyncio.run(host.not_answering(timeout=1.0))
    assert answer is not None and "did not answer within 1 s" in answer and "tries" not in answer, answer
    assert ssh_link.connections == before + 1
