"""configs/lpt-vs-pcie-qemu.yaml end to end: Debian's kernel in QEMU, our mainline modules on
QEMU's emulated devices, driven by the station over SSH like any bench.
Emulation stalls reach milliseconds, so the checks use medians and percentiles."""

from __future__ import annotations

import asyncio
import json

import asyncssh
import pytest
import yaml

from tests.conftest import REPO, run_station
from tests.conftest import free_port as _free_port


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    from station.vm import VirtualMachine, build_image

    image = build_image()
    machine = VirtualMachine(image, ssh_port=_free_port(), state_dir=tmp_path_factory.mktemp("vm-state"))
    machine.start()
    yield machine
    machine.stop()
    assert not machine.is_running(), "the VM must be shut down afterwards"


def _config(vm, tmp_path, **matrix_overrides) -> str:
    cfg = yaml.safe_load((REPO / "configs/lpt-vs-pcie-qemu.yaml").read_text())
    cfg["bench"]["target"] |= {"kind": "ssh", "host": "127.0.0.1", "user": "root",  # the fixture's VM
                               "port": vm.ssh_port, "identity_file": str(vm.image.identity_file),
                               "known_hosts": str(vm.known_hosts_file), "upload_modules": str(vm.image.modules_dir)}
    cfg["matrix"] |= matrix_overrides
    path = tmp_path / "vm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


async def _lsmod(vm) -> str:
    async with asyncssh.connect("127.0.0.1", vm.ssh_port, username="root", client_keys=[str(vm.image.identity_file)],
                                known_hosts=str(vm.known_hosts_file)) as conn:
        return (await conn.run("lsmod")).stdout


def test_vm_campaign_runs_the_real_modules_end_to_end(vm, tmp_path, record_property):
    out = tmp_path / "results"
    res = run_station("run", _config(vm, tmp_path), "--out", str(out), timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    assert {(r["interface"], r["variant"]) for r in report["runs"]} == {
        ("lpt", "inb"), ("lpt", "no-inb"), ("pcie", "inb"), ("pcie", "no-inb")}
    for run in report["runs"]:
        manifest = json.loads((out / "runs" / run["id"] / "manifest.json").read_text())
        assert run["status"] == "complete", run["error"]
        assert run["sw"]["count"] >= 5000
        # continuous sequence numbers, or gaps the module itself accounted for
        losses = manifest["losses"]
        assert losses["sw_lost"] == 0 or losses["sw_lost"] == losses["sw_dropped_by_target"], losses
        p50, p99 = run["sw"]["percentiles_ns"]["p50"], run["sw"]["percentiles_ns"]["p99"]
        # units, not speed: emulated time stretches with the host's load, so no latency bound here
        # beyond "nanoseconds, and less than a second" (a unit slip would miss by 10^3 or more)
        assert 1_000 < p50 <= p99 < 1_000_000_000, (p50, p99)
        # the real kernel said nothing alarming while the module ran
        assert manifest["kernel_log"]["trouble"] == [], manifest["kernel_log"]["trouble"]
        # and its /proc/interrupts row counted (at least) every record
        irq = manifest["interrupts"]
        assert irq["after"] - irq["before"] >= run["sw"]["count"], irq
        record_property(f"{run['id']}_p50_us", round(p50 / 1000, 2))
        record_property(f"{run['id']}_p99_us", round(p99 / 1000, 2))
        print(f"{run['id']}: median {p50 / 1000:.2f} us, p99 {p99 / 1000:.2f} us, n={run['sw']['count']}")
    assert "latency" not in asyncio.run(_lsmod(vm))
    # the result store over this real campaign (DuckDB over its Parquet files, as `station compare`
    # and a lab read it) says what the report says of each run's software samples
    from station import api

    store = api.open_results([out])
    store.register()
    got = {r[0]: r[1:] for r in store.con.sql(
        "SELECT run_id, count(*), min(latency_ns), max(latency_ns) FROM sw_own GROUP BY run_id").fetchall()}
    for run in report["runs"]:
        assert got[run["id"]] == (run["sw"]["count"], run["sw"]["min_ns"], run["sw"]["max_ns"]), (got, run["sw"])


def test_bad_module_parameter_reaches_the_user_verbatim(vm, tmp_path):
    out = tmp_path / "results"
    cfg = _config(vm, tmp_path, interfaces=["pcie"], variants=["inb"],
                  module_params={"pcie": {"profile": "bogus"}}, samples=100)
    res = run_station("run", cfg, "--out", str(out), timeout=300)
    assert res.returncode == 3, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    manifest = json.loads((out / "runs" / "pcie-inb-io-r0" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    # the kernel's refusal (insmod's words and the module's pr_err from dmesg), verbatim
    assert "insmod" in manifest["error"] and "profile=bogus invalid" in manifest["error"], manifest["error"]
    assert "latency" not in asyncio.run(_lsmod(vm))
