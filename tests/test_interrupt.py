"""Ctrl-C and SIGTERM in the middle of a run: the target is left clean (checked
over SSH from outside) and the data already streamed is on disk."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time

import asyncssh
import numpy as np
import pandas as pd
import pytest

from station.parsers.records import decode_file
from tests.conftest import run_station, station_cmd


def _config(endpoints: dict, path, with_scope: bool) -> None:
    scope = (f"  scope: {{kind: visa, resource: '{endpoints['scope_resource']}', time_per_div: 500us, "
             f"record_length: 120000}}\n" if with_scope else "  scope: {kind: none}\n")
    path.write_text(
        "name: interrupt-me\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {endpoints['ssh_port']}, user: root,\n"
        f"           identity_file: '{endpoints['identity_file']}', known_hosts: '{endpoints['known_hosts']}'}}\n"
        + scope +
        "matrix: {interfaces: [lpt], variants: [inb], loads: [seed-io], samples: 10000000, max_duration: 30min}\n"
        "loads:\n"
        "  seed-io:\n"
        "    - {name: hping3, command: hping3 --icmp --fast 127.0.0.1}\n"
        "    - {name: dd-loop, command: 'while :; do dd if=/dev/zero of=x bs=128M count=2; sync; done'}\n"
    )


async def _target_state(endpoints: dict) -> tuple[str, str, str]:
    async with asyncssh.connect("127.0.0.1", endpoints["ssh_port"], username="root",
                                client_keys=[endpoints["identity_file"]],
                                known_hosts=endpoints["known_hosts"]) as conn:
        lsmod = (await conn.run("lsmod")).stdout
        ps = (await conn.run("ps")).stdout
        pids = (await conn.run("ls /tmp/irq-station/loads", check=False)).stdout
    return lsmod, ps, pids


@pytest.mark.parametrize(
    ("sig", "with_scope", "repeat"),
    [(signal.SIGINT, True, 1), (signal.SIGTERM, False, 1), (signal.SIGINT, False, 3), (signal.SIGTERM, True, 3),
     (signal.SIGHUP, False, 1)],
    ids=["ctrl-c", "sigterm", "ctrl-c-thrice", "sigterm-thrice", "hangup"],
)
def test_interrupted_campaign_leaves_the_target_clean_and_keeps_the_data(standalone_twin, tmp_path, sig,
                                                                         with_scope, repeat):
    cfg = tmp_path / "c.yaml"
    _config(standalone_twin, cfg, with_scope)
    out = tmp_path / "out"
    run = subprocess.Popen(station_cmd("run", str(cfg), "--out", str(out)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    raw = out / "runs" / "lpt-inb-seed-io-r0" / "sw.raw"
    deadline = time.monotonic() + 60
    while not (raw.exists() and raw.stat().st_size > 200_000):  # > 5000 records streamed
        assert run.poll() is None, run.stderr.read()
        assert time.monotonic() < deadline, "no data streamed"
        time.sleep(0.1)
    # while it runs, the module and both loads are really there
    lsmod, ps, _ = asyncio.run(_target_state(standalone_twin))
    assert "rtai_lpt_latency" in lsmod and "hping3" in ps and "dd" in ps

    for _ in range(repeat):  # an impatient user: more signals while the teardown runs
        run.send_signal(sig)
        time.sleep(0.05)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr

    lsmod, ps, pids = asyncio.run(_target_state(standalone_twin))
    assert "latency" not in lsmod
    assert "hping3" not in ps and "dd" not in ps
    assert pids.strip() == ""

    manifest = json.loads((out / "runs" / "lpt-inb-seed-io-r0" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    sw = pd.read_parquet(out / "runs" / "lpt-inb-seed-io-r0" / "sw.parquet")
    assert len(sw) >= 5000
    assert len(sw) == len(decode_file(raw, "v1"))
    assert np.array_equal(sw["seq"].to_numpy(), np.arange(len(sw)))  # nothing lost before the stop
    assert manifest["losses"]["sw_lost"] == 0

    # its report is written all the same, the run named as interrupted (report.json's schema knows it)
    res = run_station("report", str(out))
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    assert {r["id"]: r["status"] for r in report["runs"]}["lpt-inb-seed-io-r0"] == "interrupted"
