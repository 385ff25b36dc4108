"""arm64 targets (issue 51): Debian's arm64 kernels, regular and PREEMPT_RT, on QEMU's virt board
(TCG), the mainline modules cross-built for them (tests/test_arm64_modules.py builds them alone),
driven over SSH like any bench.

On each kernel: a module campaign on QEMU's edu device (pcie_latency profile=edu on virt's PCIe
bus), its records checked against the module's own counters and the kernel's /proc/interrupts;
the interruption detector on the regular one, with the x86 guest's injected stalls and holds and
the same truth rule (tests/test_interruptions_campaign.py: the injector's own log, the stealer's);
a station killed with SIGKILL mid-run, then `station cleanup`: nothing left. cyclictest on both
arm64 kernels runs in seed 004's sheet (tests/test_cyclictest_campaign.py). Emulated latencies are
never bounded here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time

import asyncssh
import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from station.common.module_names import vermagic
from station.vm import VirtualMachine, VmError, build_image, kernel, latency_modules, missing_host_packages
from station.vm.hostdeps import host_packages
from tests.conftest import REPO, free_port, run_station, station_cmd
from tests.conftest import missing as _missing
from tests.test_interruptions_campaign import check_injected_gaps
from tests.test_vm_campaign import _guest

pytestmark = pytest.mark.timeout(900)  # a first build fetches two arm64 kernels (~60 MB each)


@pytest.fixture(scope="module", params=kernel.FLAVOURS)
def arm64_vm(request, tmp_path_factory) -> VirtualMachine:
    """One arm64 guest per kernel flavour, booted once for this module's tests of it."""
    flavour = request.param
    needed = missing_host_packages(host_packages(flavour, "arm64"))
    if needed and os.geteuid() != 0:
        _missing(f"arm64 VM host packages missing and not root to install them: apt-get install {' '.join(needed)}")
    try:
        image = build_image(log=print, kernel=flavour, arch="arm64")
    except VmError as exc:
        if missing_host_packages(host_packages(flavour, "arm64")):
            _missing(f"arm64 {flavour} image not built: {exc}")
        raise
    vm = VirtualMachine(image, ssh_port=free_port(), state_dir=tmp_path_factory.mktemp(f"arm64-{flavour}"),
                        die_with_caller=True)
    vm.start(timeout_s=300)
    print(f"\narm64 {flavour} VM ({image.kernel_release}): {vm.timings}")
    yield vm
    vm.stop()
    assert not vm.is_running()
    console = vm.console_log.read_text(errors="replace")
    assert not re.search(r"Oops|WARNING:|BUG:|Call Trace", console), console[-3000:]


async def _guest_bytes(vm: VirtualMachine, path: str) -> bytes:
    async with asyncssh.connect(**vm.connect_options()) as conn:
        return (await conn.run(f"cat {path}", check=True, encoding=None)).stdout


def _ssh_target(vm: VirtualMachine) -> dict:
    return {"kind": "ssh", "host": "127.0.0.1", "user": "root", "port": vm.ssh_port,
            "identity_file": str(vm.image.identity_file), "known_hosts": str(vm.known_hosts_file),
            "upload_modules": str(vm.image.modules_dir)}


def _module_config(vm: VirtualMachine, tmp_path, **matrix) -> str:
    cfg = yaml.safe_load((REPO / "configs/lpt-vs-pcie-qemu.yaml").read_text())
    cfg["bench"]["target"] |= _ssh_target(vm)
    cfg["matrix"] |= {"interfaces": ["pcie"], "samples": 2000} | matrix
    path = tmp_path / "arm64-module.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_the_guest_is_the_arm64_kernel_asked_for(arm64_vm):
    said = asyncio.run(_guest(arm64_vm, "uname -m; uname -r; cat /sys/kernel/realtime 2>/dev/null || echo 0"))
    machine, release, realtime = said.split()
    assert machine == "aarch64" and release == arm64_vm.image.kernel_release
    assert kernel.release_arch(release) == "arm64"
    assert realtime == ("1" if arm64_vm.image.flavour == "rt" else "0")
    # every module the image put in the guest is for exactly the kernel it runs (that it loads there is
    # the campaign test's); busybox's modinfo needs a modules.dep the guest has no use for: read here
    for ko in latency_modules.MODULES:
        data = asyncio.run(_guest_bytes(arm64_vm, f"/opt/irq-station/modules/{ko}"))
        magic = (vermagic(data) or "").split()
        assert magic[:1] == [release] and "aarch64" in magic, (ko, magic)


def test_module_campaign_on_edu_counts_every_record_in_order(arm64_vm, tmp_path, record_property):
    out = tmp_path / "results"
    res = run_station("run", _module_config(arm64_vm, tmp_path), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    assert {(r["interface"], r["variant"]) for r in report["runs"]} == {("pcie", "inb"), ("pcie", "no-inb")}
    for run in report["runs"]:
        assert run["status"] == "complete", run["error"]
        manifest = json.loads((out / "runs" / run["id"] / "manifest.json").read_text())
        assert manifest["module"]["params"]["profile"] == "edu"
        assert "aarch64" in manifest["audit"]["uname"]
        seq = pq.read_table(out / "runs" / run["id"] / "sw.parquet", columns=["seq"])["seq"].to_numpy()
        # in order, and every number from the first to the last there, or counted as dropped by the module
        assert np.all(np.diff(seq) > 0), "records out of order"
        losses = manifest["losses"]
        assert seq[-1] - seq[0] + 1 - len(seq) == losses["sw_lost"], (losses, seq[0], seq[-1], len(seq))
        assert losses["sw_lost"] == losses["sw_dropped_by_target"], losses
        assert run["sw"]["count"] == len(seq) >= 2000
        # the kernel's own count of the device's interrupts covers every record
        irq = manifest["interrupts"]
        assert irq["row"] == "pcie_latency" and irq["after"] - irq["before"] >= len(seq), irq
        assert manifest["kernel_log"]["trouble"] == [], manifest["kernel_log"]["trouble"]
        p50_us = round(run["sw"]["percentiles_ns"]["p50"] / 1e3, 1)
        record_property(f"{arm64_vm.image.flavour} {run['id']} p50_us", p50_us)
    # the module unloaded, its load stopped
    assert "latency" not in asyncio.run(_guest(arm64_vm, "lsmod"))
    assert asyncio.run(_guest(arm64_vm, "pgrep -f 'dd if=/dev/[z]ero' || true")).split() == []


def test_lpt_is_refused_on_an_arm64_vm_before_anything_runs(arm64_vm, tmp_path):
    cfg = yaml.safe_load((REPO / "configs/lpt-vs-pcie-qemu.yaml").read_text())
    cfg["bench"]["target"] = {"kind": "vm", "arch": "arm64", "kernel": arm64_vm.image.flavour}
    path = tmp_path / "lpt.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = run_station("validate", str(path))
    assert res.returncode != 0
    assert "matrix.interfaces" in res.stderr and "no ISA bus" in res.stderr, res.stderr


@pytest.mark.parametrize("arm64_vm", ["regular"], indirect=True)  # once: the cleanup path is the flavour's own
def test_killed_station_then_cleanup_leaves_nothing_on_the_arm64_guest(arm64_vm, tmp_path):
    path = _module_config(arm64_vm, tmp_path, variants=["inb"], samples=200_000, max_duration="10min")
    probe = "lsmod | grep -c '^pcie_latency' || true; pgrep -f 'dd if=/dev/[z]ero' >/dev/null && echo load || echo -"
    log = tmp_path / "station.log"
    station = subprocess.Popen(station_cmd("run", path, "--out", str(tmp_path / "out")),
                               stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(240):
            state = asyncio.run(_guest(arm64_vm, probe)).split()
            if state == ["1", "load"]:
                break
            assert station.poll() is None, f"the run ended before it could be killed: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        else:
            raise AssertionError(f"the run never got going: {state}")
    finally:
        station.send_signal(signal.SIGKILL)
        station.wait(timeout=30)
    assert asyncio.run(_guest(arm64_vm, probe)).split() == ["1", "load"]  # a SIGKILL cleans nothing
    res = run_station("cleanup", path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    for _ in range(10):
        left = asyncio.run(_guest(arm64_vm, probe)).split()
        if left == ["0", "-"]:
            break
        time.sleep(0.5)
    assert left == ["0", "-"], f"left on the guest: {left}\n{res.stdout}\n{res.stderr}"


@pytest.mark.parametrize("arm64_vm", ["regular"], indirect=True)  # the guest for it
def test_detector_finds_injected_gaps_on_arm64(arm64_vm, tmp_path, record_property):
    """The x86 guest's test of the detector, on the arm64 regular kernel: the generic timer as its
    clock, the local timer's line arch_timer."""
    check_injected_gaps(arm64_vm, tmp_path, record_property, timer_line="arch_timer")
    run = json.loads((tmp_path / "results" / "report.json").read_text())["interruptions"]["runs"]
    assert {r["clock"] for r in run} == {"cntvct"} and {r["arch"] for r in run} == {"aarch64"}
    stall = next(r for r in run if r["id"] == "stall-r0")
    assert "TrustZone" in stall["conclusion"] or "hypervisor" in stall["conclusion"]
    assert "SMI" not in stall["conclusion"], stall["conclusion"]


@pytest.mark.parametrize("arm64_vm", ["rt"], indirect=True)  # the kernel with timerlat: both probes
def test_cyclictest_on_the_arm64_guest_is_cyclictests_own_and_leaves_nothing(arm64_vm, tmp_path):
    """A short cyclictest campaign under hackbench, timerlat after it, on the running PREEMPT_RT
    guest (the kernel with the tracer: both probes, cyclictest and rtla): the run's figures are
    cyclictest's own JSON and rtla's own summary (read by the checks of
    tests/test_cyclictest_campaign.py), and no probe or load is left on the guest after. Seed
    004's whole sheet runs on both arm64 kernels there (their figures checked the same way)."""
    from tests.test_cyclictest_campaign import (
        PROBE_AND_LOADS,
        _threads_without_cycles,
        check_run_against_cyclictest,
        check_timerlat_beside_cyclictest,
        seed_004,
    )

    name = f"arm64-{arm64_vm.image.flavour}"  # the seed test's names: its timerlat check reads "-rt"
    target = {k: v for k, v in _ssh_target(arm64_vm).items() if k != "upload_modules"}
    cfg = seed_004({name: target}, network=False)
    cfg["matrix"]["loads"] = ["hackbench"]
    cfg["cyclictest"]["companion"] = "timerlat"
    path = tmp_path / "cyclictest.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=600)
    section = json.loads((out / "report.json").read_text())["cyclictest"]
    assert len(section["runs"]) == 1 and section["targets"][name]["arch"] == "aarch64"
    [entry] = section["runs"]
    starved = _threads_without_cycles(out / "runs" / entry["id"])
    if starved:
        # the emulated guest's two vCPUs share one host thread: under hackbench a measuring thread
        # can get no CPU for the whole run (1 try in 4 here, as in seed 004's test); cyclictest's own
        # '# Total:' line says so, and the station must call the run incomplete, naming the thread
        assert res.returncode == 3 and entry["status"] == "incomplete", (res.returncode, entry["status"])
        assert all(f"thread {t} " in entry["error"] for t in starved), entry["error"]
    else:
        assert res.returncode == 0, res.stderr[-4000:]
        check_run_against_cyclictest(out / "runs" / entry["id"], entry)
    check_timerlat_beside_cyclictest(out, section)
    left = asyncio.run(_guest(arm64_vm, f"pgrep -x '{'|'.join(PROBE_AND_LOADS)}' || true")).split()
    assert left == [], f"left on the guest: {left}"
