"""The VM target: Debian's kernel under QEMU, with our modules built for it, reached over real SSH.

Builds the image in the VM cache (default_vm_dir(); slow only the first time: apt downloads), boots
it once for the module, and talks to it with asyncssh as the station does. Missing host packages are
installed when running as root; otherwise the tests skip naming them, except under CI, where they fail.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import asyncssh
import pytest

from station.target.irqtrace import MODULE_EVENTS
from station.vm import VirtualMachine, VmError, VmImage, build_image, latency_modules, missing_host_packages
from station.vm.hostdeps import ARCH_PACKAGES, HOST_PACKAGES, host_packages
from tests.conftest import free_port as _free_port
from tests.conftest import missing as _missing

pytestmark = pytest.mark.timeout(900)  # the first build downloads QEMU and a 70 MB linux-image


@pytest.fixture(scope="module")
def image() -> VmImage:
    missing = missing_host_packages(host_packages("regular"))  # the RT headers are test_vm_rt's
    if missing and os.geteuid() != 0:
        _missing(f"VM host packages missing and not root to install them: apt-get install {' '.join(missing)}")
    try:
        return build_image(log=print)
    except VmError as exc:
        if missing_host_packages(host_packages("regular")):  # could not install: the environment, not a bug
            _missing(f"VM image not built: {exc}")
        raise


@pytest.fixture(scope="module")
def vm(image, tmp_path_factory) -> VirtualMachine:
    machine = VirtualMachine(image, ssh_port=_free_port(), state_dir=tmp_path_factory.mktemp("vm"))
    machine.start(timeout_s=180)
    yield machine
    machine.stop()


def sh(vm: VirtualMachine, command: str) -> asyncssh.SSHCompletedProcess:
    async def go() -> asyncssh.SSHCompletedProcess:
        async with asyncssh.connect(**vm.connect_options()) as conn:
            return await conn.run(command, check=False)

    return asyncio.run(go())


def test_ci_deps_script_installs_what_build_image_needs():
    script = Path(__file__).resolve().parents[1] / "station" / "vm" / "ci-deps.sh"
    listed = re.search(r'^PACKAGES="([^"]*)"', script.read_text(), re.M)
    assert listed and listed.group(1).split() == list(HOST_PACKAGES)
    arm64 = re.search(r'^ARM64_PACKAGES="([^"]*)"', script.read_text(), re.M)
    assert arm64 and arm64.group(1).split() == list(ARCH_PACKAGES["arm64"])


def test_image_is_reused_when_nothing_changed(image):
    before = image.read_manifest()
    lines: list[str] = []
    again = build_image(image.dir, log=lines.append)
    assert again.read_manifest()["inputs"] == before["inputs"]
    rebuilt = [ln for ln in lines if re.search(r"unpacking|building|assembling|download", ln)]
    assert rebuilt == []
    for path in (image.kernel_path, image.initrd_path, image.identity_file):
        assert path.is_file(), path
    assert {p.name for p in image.modules_dir.glob("*.ko")} == set(latency_modules.MODULES)
    assert image.kernel_path.name == "vmlinux", "fell back to the bzImage: slower boots"


def test_boot_timings(vm, record_property):
    t = vm.timings
    print(f"\nVM boot: /init after {t['boot_to_init_s']} s (guest uptime {t['guest_uptime_at_init_s']} s), "
          f"SSH after {t['to_ssh_s']} s")
    for key, value in t.items():
        record_property(f"vm_{key}", value)
    assert t["boot_to_init_s"] <= t["to_ssh_s"] < 60


def test_guest_runs_the_kernel_the_modules_were_built_for(vm, image):
    res = sh(vm, "uname -r")
    assert res.exit_status == 0, res.stderr
    assert res.stdout.strip() == image.kernel_release


def test_host_key_is_pinned(vm):
    line = vm.known_hosts_file.read_text().strip()
    assert line == f"[127.0.0.1]:{vm.ssh_port} {vm.image.host_key_pub}"


def test_interrupts_edu_device_and_parallel_port(vm):
    res = sh(vm, "cat /proc/interrupts; echo ---; "
                 "for d in /sys/bus/pci/devices/*; do echo $(cat $d/vendor):$(cat $d/device); done; echo ---; "
                 "for d in /sys/bus/pnp/devices/*; do echo $(cat $d/id) $(cat $d/resources); done")
    assert res.exit_status == 0, res.stderr
    interrupts, pci, pnp = res.stdout.split("---\n")
    assert re.match(r"\s*CPU0\s+CPU1", interrupts)
    assert "0x1234:0x11e8" in pci.split(), pci  # -device edu: the PCIe module's emulated target
    # the ISA parallel port, where the LPT module expects it (no parport_pc holds it)
    assert re.search(r"PNP0400 .*io 0x378-0x37f irq 7", pnp), pnp


def test_bad_parameter_is_refused_with_the_kernels_words(vm):
    res = sh(vm, "insmod /opt/irq-station/modules/pcie_latency.ko period_us=1")
    assert res.exit_status != 0
    assert "Invalid argument" in res.stderr, res.stderr  # -EINVAL, as the kernel returned it
    dmesg = sh(vm, "dmesg").stdout
    assert "pcie_latency: period_us=1 out of range: accepted 10..1000000" in dmesg
    assert "pcie_latency" not in sh(vm, "lsmod").stdout


def test_switching_trace_events_again_and_again_leaves_the_guest_answering(vm):
    """docs/vm.md: with a QEMU thread per vCPU the guest hung when its kernel patched its own text,
    which switching a trace event does (3 of 3 loops like this one hung within 130 cycles). The
    VM's one TCG thread runs both vCPUs, and 40 cycles of the station's own event switches (an
    instance, its events on, a reader waiting, events off, removed) leave the guest answering,
    its console clean (test_console_has_no_oops_or_warning, after this one)."""
    tasks = Path(f"/proc/{vm.pid}/task")
    threads = [(task / "comm").read_text().strip() for task in tasks.iterdir()]
    assert threads.count("ALL CPUs/TCG") == 1 and not [t for t in threads if t.startswith("CPU ")], threads
    i = "/sys/kernel/tracing/instances/switching"
    on = "; ".join(f"f={i}/events/{e}/enable; [ -e $f ] && echo 1 > $f" for e in MODULE_EVENTS)
    cycles = 40
    script = (f"n=0; while [ $n -lt {cycles} ]; do mkdir {i}; {on}; echo 1 > {i}/tracing_on; "
              f"cat {i}/trace_pipe > /dev/null & r=$!; echo 0 > {i}/events/enable; kill $r; wait $r; "
              f"rmdir {i}; n=$((n + 1)); done; echo $n")

    async def go() -> asyncssh.SSHCompletedProcess:
        async with asyncssh.connect(**vm.connect_options()) as conn:
            return await conn.run(script, check=False)

    res = asyncio.run(asyncio.wait_for(go(), 600))  # a hung guest never answers: TimeoutError
    assert res.stdout.split()[-1:] == [str(cycles)], (res.stdout, res.stderr)


def test_console_has_no_oops_or_warning(vm):
    text = vm.console_log.read_text(errors="replace")
    assert "/init at" in text
    assert not re.search(r"Oops|WARNING:|BUG:|Call Trace", text), text


def test_stop_ends_qemu_and_is_idempotent(vm):
    other = VirtualMachine.from_state(vm.state_dir)  # as `station vm down` finds it
    assert other.pid == vm.pid and other.is_running()
    other.stop()
    assert not other.is_running()
    vm.stop()  # reaps our child; must not fail on a VM that is already down
    assert not Path(f"/proc/{vm.pid}").exists()
    assert not vm.state_file.exists()
    other.stop()
    with pytest.raises(VmError, match="no VM state"):
        VirtualMachine.from_state(vm.state_dir)
