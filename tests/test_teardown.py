"""Teardown in the windows the reviewer found: a failure right after insmod
succeeded, a stop while the reader was starting, a crash that left a reader
holding the device. Faults are injected around the station's own calls; the
SSH protocol and the twin are real. After each, the target must be clean."""

from __future__ import annotations

import asyncio

import pytest

from station import api
from station.config import parse_campaign
from station.target import Target, TargetError, modules
from station.target import processes as load_ctl
from station.target.ssh import SSHEndpoint, TargetConnection


def _campaign(twin):
    e = twin.endpoints
    return parse_campaign(
        "name: t\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}'}}\n"
        "  scope: {kind: none}\n"
        "matrix: {interfaces: [lpt], variants: [inb], loads: [io], samples: 3000}\n"
        "loads:\n"
        "  io: [{name: dd, command: 'while :; do dd if=/dev/zero of=x bs=1M count=1; done'}]\n"
    )


def _endpoint(twin) -> SSHEndpoint:
    e = twin.endpoints
    return SSHEndpoint(e.ssh_host, e.ssh_port, e.user, e.identity_file, e.known_hosts, 5)


async def _state(twin) -> tuple[set[str], str, str]:
    conn = await TargetConnection.open(_endpoint(twin))
    try:
        return (await modules.loaded_modules(conn) & modules.ALL_STEMS, (await conn.run("ps")).stdout,
                (await conn.run("ls /tmp/irq-station/loads", check=False)).stdout)
    finally:
        await conn.close()


def _assert_clean(twin) -> None:
    loaded, ps, pids = asyncio.run(_state(twin))
    assert loaded == set(), loaded
    assert "dd" not in ps and "cat" not in ps, ps
    assert pids.strip() == "", pids


@pytest.mark.parametrize("fault", [TargetError("reply lost"), asyncio.CancelledError()], ids=["error", "cancel"])
def test_insmod_succeeded_but_its_reply_was_lost(twin, tmp_path, monkeypatch, fault):
    real = modules.insmod

    async def insmod_then_fail(conn, path, params):
        await real(conn, path, params)  # the module really is loaded now
        raise fault

    monkeypatch.setattr(modules, "insmod", insmod_then_fail)
    coro = api.run_campaign_async(_campaign(twin), tmp_path / "out")
    if isinstance(fault, asyncio.CancelledError):
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(coro)
    else:
        result = asyncio.run(coro)
        assert result.outcomes[0].status == "failed" and "reply lost" in result.outcomes[0].error
    _assert_clean(twin)


def test_stopped_while_the_reader_was_starting(twin, tmp_path, monkeypatch):
    real = load_ctl.start_load

    async def start_then_cancel(conn, name, command, work_dir, max_seconds, **options):
        started = await real(conn, name, command, work_dir, max_seconds, **options)
        if name == load_ctl.STREAM_NAME:  # running and holding the device, but not yet tracked
            raise asyncio.CancelledError
        return started

    monkeypatch.setattr(load_ctl, "start_load", start_then_cancel)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(api.run_campaign_async(_campaign(twin), tmp_path / "out"))
    _assert_clean(twin)


def test_cleanup_after_a_crash_stops_the_reader_before_unloading(twin):
    """A crashed station left: the module, a load, and a reader holding the device
    (so a plain rmmod says 'in use')."""

    async def crash_then_cleanup():
        conn = await TargetConnection.open(_endpoint(twin))
        await modules.insmod(conn, "/opt/irq-station/modules/rtai_lpt_latency.ko", {})
        await load_ctl.start_load(conn, "dd", "while :; do dd if=/dev/zero of=x bs=1M count=1; done",
                                  "/tmp/irq-station", 60)
        await load_ctl.start_load(conn, load_ctl.STREAM_NAME, "cat /dev/rtf0", "/tmp/irq-station", 60, binary=True)
        res = await conn.run("rmmod rtai_lpt_latency", check=False)
        assert "in use" in res.stderr
        conn.abort()  # the crash: no teardown
        from station.config import TargetSettings

        target = Target(_endpoint(twin), TargetSettings(kind="ssh"))
        await target.activate()
        done = await target.cleanup()
        await target.deactivate()
        return done

    done = asyncio.run(crash_then_cleanup())
    assert done == {"modules_unloaded": ["rtai_lpt_latency"], "loads_stopped": ["dd", "record-stream"]}
    _assert_clean(twin)


def test_loads_on_a_load_host_are_started_there_and_stopped_on_every_exit(twin, tmp_path, monkeypatch):
    """A load host (here a second SSH session to the twin under another name, with its own
    pid directory) runs the flood; a failure mid-run still stops it, and cleanup finds it."""
    e = twin.endpoints
    campaign = parse_campaign(
        "name: lh\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}'}}\n"
        "  scope: {kind: none}\n"
        "  load_hosts:\n"
        f"    peer: {{host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}', work_dir: /tmp/peer}}\n"
        "matrix: {interfaces: [lpt], variants: [inb], loads: [flood], samples: 3000}\n"
        "loads:\n"
        "  flood: [{name: hping3, command: hping3 --icmp --fast 127.0.0.1, host: peer}]\n"
    )
    seen = {}
    real = modules.insmod

    async def insmod_and_look(conn, path, params):
        await real(conn, path, params)
        seen["peer_pids"] = (await conn.run("ls /tmp/peer/loads")).stdout.split()
        raise TargetError("lost mid-run")

    monkeypatch.setattr(modules, "insmod", insmod_and_look)
    result = asyncio.run(api.run_campaign_async(campaign, tmp_path / "out"))
    assert result.outcomes[0].status == "failed"
    assert seen["peer_pids"] == ["hping3.pid"]  # it ran on the load host, under its pid directory
    _assert_clean(twin)
    loaded, ps, _ = asyncio.run(_state(twin))
    assert "hping3" not in ps


def test_a_pid_file_is_acted_on_only_when_it_still_names_our_process(twin):
    """Stale pid files (a reboot, a reused pid, a hand edit) never make the station signal a
    stranger: `1` would have been `kill -TERM -1`, and a live process started for another
    pid file is not this file's process."""

    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        other = await load_ctl.start_load(conn, "hping3", "hping3 --icmp --fast 127.0.0.1", "/tmp/irq-station", 60)
        await conn.run(f"echo {other.pid} > /tmp/irq-station/loads/stale.pid")
        await conn.run("echo 1 > /tmp/irq-station/loads/init.pid")
        await conn.run("echo 'not a pid' > /tmp/irq-station/loads/junk.pid")
        twin.call(twin.target.command_log.clear)
        for name in ("stale", "init", "junk"):
            await load_ctl.kill_pidfile(conn, f"/tmp/irq-station/loads/{name}.pid")
        kills = [c for c in twin.call(lambda: list(twin.target.command_log)) if c.startswith("kill")]
        ps = (await conn.run("ps")).stdout
        left = (await conn.run("ls /tmp/irq-station/loads")).stdout.split()
        await load_ctl.stop_load(other)
        await conn.close()
        return kills, ps, left, other.pid

    kills, ps, left, pid = asyncio.run(main())
    assert kills == []  # no signal at all
    assert str(pid) in ps  # the live process named by the stale file still runs
    assert left == ["hping3.pid"]  # the stale files are gone, the live one's own file stays
    _assert_clean(twin)


def test_cleanup_reaches_every_host_even_when_one_is_down(twin):
    """The target is unreachable; the flood on the load host must be stopped all the same."""
    e = twin.endpoints

    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        await load_ctl.start_load(conn, "hping3", "hping3 --icmp --fast 127.0.0.1", "/tmp/peer", 60)
        await conn.close()
        campaign = parse_campaign(
            "name: lh\n"
            "bench:\n"
            "  target: {kind: ssh, host: 127.0.0.1, port: 1, connect_timeout: 1s}\n"
            "  scope: {kind: none}\n"
            "  load_hosts:\n"
            f"    peer: {{host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
            f" known_hosts: '{e.known_hosts}', work_dir: /tmp/peer}}\n"
            "matrix: {samples: 100}\n"
        )
        with pytest.raises(TargetError, match=r"the target is not clean.*\(cleaned: peer\)"):
            await api.cleanup_bench(campaign)

    asyncio.run(main())
    _, ps, _ = asyncio.run(_state(twin))
    assert "hping3" not in ps
