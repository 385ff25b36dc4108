"""The twin's SSH server driven through asyncssh and the station's own target code."""

from __future__ import annotations

import asyncio

import asyncssh
import numpy as np
import pandas as pd
import pytest

from station.config import TargetSettings
from station.parsers import records
from station.target import Target, TargetError, modules
from station.target import processes as load_ctl
from station.target.ssh import SSHEndpoint, TargetConnection


def _endpoint(twin, **over) -> SSHEndpoint:
    e = twin.endpoints
    base = dict(host=e.ssh_host, port=e.ssh_port, user=e.user, identity_file=e.identity_file,
                known_hosts=e.known_hosts, connect_timeout=5)
    return SSHEndpoint(**(base | over))


def _run(coro):
    return asyncio.run(coro)


def test_key_auth_only_and_host_key_checked(twin, tmp_path):
    async def main():
        # a password is refused: no password auth at all
        with pytest.raises(asyncssh.PermissionDenied):
            await asyncssh.connect("127.0.0.1", twin.endpoints.ssh_port, username="root", password="root",
                                   known_hosts=twin.endpoints.known_hosts, client_keys=None)
        # a key the twin did not issue is refused
        other = tmp_path / "other_key"
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(other))
        with pytest.raises(TargetError, match="refused our key"):
            await TargetConnection.open(_endpoint(twin, identity_file=str(other)))
        # an unknown host key is refused (empty known_hosts)
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        with pytest.raises(TargetError, match="host key .* is not trusted"):
            await TargetConnection.open(_endpoint(twin, known_hosts=str(empty)))

    _run(main())


def test_unreachable_target_is_one_clear_error():
    async def main():
        with pytest.raises(TargetError, match="cannot reach root@127.0.0.1:1"):
            await TargetConnection.open(SSHEndpoint("127.0.0.1", 1, "root", connect_timeout=3))

    _run(main())


def test_insmod_refusal_reaches_the_user_verbatim_and_nothing_is_loaded(twin):
    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        path = "/opt/irq-station/modules/rtai_lpt_latency.ko"
        with pytest.raises(TargetError, match="insmod: ERROR: could not insert module .*: Invalid parameters"):
            await modules.insmod(conn, path, {"period_us": "3"})
        with pytest.raises(TargetError, match="unknown parameter"):
            await modules.insmod(conn, path, {"perido_us": "100"})
        assert not (await modules.loaded_modules(conn)) & modules.ALL_STEMS
        await conn.close()

    _run(main())


def test_record_stream_is_continuous_and_matches_the_injected_truth(twin, tmp_path):
    truth_path = tmp_path / "truth.parquet"
    twin.set_truth_path(truth_path)

    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        params = modules.module_params("rtai", "pcie", period_ns=100_000, check=True, cpu=-1, fmt="v1",
                                       fifo=0, lpt_base=0x378, lpt_irq=7)
        await modules.insmod(conn, "/opt/irq-station/modules/rtai_pcie_latency.ko", params)
        proc = await conn.start("cat /dev/rtf0", binary=True)
        dec = records.V1Decoder()
        got = []
        while dec.records < 5000:
            got.append(dec.feed(await proc.stdout.read(1 << 16)))
        proc.close()
        await modules.rmmod(conn, "rtai_pcie_latency")
        await conn.close()
        return dec, np.concatenate(got)

    dec, recs = _run(main())
    assert dec.losses.lost == 0
    assert np.array_equal(recs["seq"], np.arange(len(recs)))
    flags = recs["flags"][0]
    assert flags & records.Flag.CHECK and (flags & records.IFACE_MASK) >> records.IFACE_SHIFT == records.Interface.PCIE
    assert np.all(recs["flags"] & records.Flag.HW_WIDTH)
    truth = pd.read_parquet(truth_path).set_index("seq").loc[recs["seq"]]
    assert np.array_equal(truth["sw_ns"].to_numpy(), recs["latency_ns"])
    assert np.array_equal(truth["t_write_ns"].to_numpy(), recs["t_write_ns"].astype(np.int64))
    # the board counts 8 ns cycles: its width is the true width to within one cycle
    assert np.all(np.abs(recs["hw_width_ns"] - truth["hw_ns"].to_numpy()) <= 8)


def test_loads_survive_a_closed_channel_until_killed_and_cleanup_finds_them(twin):
    settings = TargetSettings(kind="ssh")

    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        load = await load_ctl.start_load(conn, "hping3", "hping3 --icmp --fast 127.0.0.1", "/tmp/irq-station", 60)
        dd = await load_ctl.start_load(conn, "dd", "while :; do dd if=/dev/zero of=x bs=1M count=2; done",
                                       "/tmp/irq-station", 60)
        load.process.close()  # the station lost its channel: the load keeps running (no pty)
        await asyncio.sleep(0.3)
        ps = (await conn.run("ps")).stdout
        assert str(load.pid) in ps and str(dd.pid) in ps
        await conn.run("insmod /opt/irq-station/modules/rtai_lpt_latency.ko")
        await conn.close()
        target = Target(_endpoint(twin), settings)
        await target.activate()
        done = await target.cleanup()
        assert done == {"modules_unloaded": ["rtai_lpt_latency"], "loads_stopped": ["dd", "hping3"]}
        conn = await target.live_connection()
        assert str(load.pid) not in (await conn.run("ps")).stdout
        assert (await conn.run("ls /tmp/irq-station/loads")).stdout.strip() == ""
        await target.deactivate()

    _run(main())


def test_a_load_that_cannot_start_is_an_error(twin):
    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        with pytest.raises(TargetError, match="frobnicate"):
            await load_ctl.start_load(conn, "bad", "frobnicate --hard", "/tmp/irq-station", 60)
        await conn.close()

    _run(main())


def test_command_lines_typed_by_hand(twin):
    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        path = "/opt/irq-station/modules/rtai_lpt_latency.ko"
        out = (await conn.run(f"insmod {path} period_us=200 && lsmod; rmmod rtai_lpt_latency; lsmod")).stdout
        first, second = out.split("Module ")[1:]
        assert "rtai_lpt_latency" in first and "rtai_lpt_latency" not in second
        res = await conn.run("rmmod rtai_lpt_latency || echo was not loaded", check=False)
        assert res.exit_status == 0 and res.stdout == "was not loaded\n"
        assert "is not currently loaded" in res.stderr
        await conn.close()

    _run(main())


def test_module_upload_checks_vermagic_against_the_target_kernel(twin, tmp_path):
    good = tmp_path / "good"
    bad = tmp_path / "bad"
    for d, release in ((good, "3.4.55-rtai"), (bad, "6.1.0-56-amd64")):
        d.mkdir()
        (d / "rtai_lpt_latency.ko").write_bytes(
            b"\x7fELF fake" + f"\0vermagic={release} SMP preempt mod_unload\0".encode()
        )

    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        with pytest.raises(TargetError, match="built for kernel 6.1.0-56-amd64, but .* runs 3.4.55-rtai"):
            await modules.upload_modules(conn, bad, {"rtai_lpt_latency"}, "/opt/uploaded")
        assert await modules.upload_modules(conn, good, {"rtai_lpt_latency"}, "/opt/uploaded") == ["rtai_lpt_latency"]
        assert (await conn.run("ls /opt/uploaded")).stdout.split() == ["rtai_lpt_latency.ko"]
        await modules.insmod(conn, "/opt/uploaded/rtai_lpt_latency.ko", {})
        assert "rtai_lpt_latency" in await modules.loaded_modules(conn)
        await modules.rmmod(conn, "rtai_lpt_latency")
        await conn.close()

    _run(main())
