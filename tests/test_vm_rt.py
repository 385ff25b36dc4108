"""Two kernels for the VM: Debian's regular one and its PREEMPT_RT build of the same version, each image
with cyclictest, hackbench, stressapptest and stress-ng in the guest.

Each flavour's image is built once (cached side by side: <vm dir> and <vm dir>/rt) and booted once for
the module; every guest test runs on both. Latencies under TCG are emulated: nothing here bounds them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import asyncssh
import pytest

from station.target.processes import TAG_VARIABLE, wrap
from station.vm import VirtualMachine, VmError, VmImage, build_image, kernel, latency_modules, missing_host_packages
from station.vm.hostdeps import HOST_PACKAGES, host_packages
from station.vm.paths import image_dir
from tests.conftest import free_port as _free_port
from tests.conftest import missing as _missing
from tests.conftest import run_station
from tests.test_report_browser import _run, chromium  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(900)  # the first build downloads a 70 MB linux-image per flavour

FLAVOURS = ("regular", "rt")
TOOLS = ("pgrep", "pkill", "kill", "setsid", "timeout", "nproc", "taskset", "chrt",
         "cyclictest", "hackbench", "stressapptest", "stress-ng")  # fmt: skip


def _image(flavour: str) -> VmImage:
    missing = missing_host_packages(host_packages(flavour))
    if missing and os.geteuid() != 0:
        _missing(f"VM host packages missing and not root to install them: apt-get install {' '.join(missing)}")
    try:
        return build_image(log=print, kernel=flavour)
    except VmError as exc:
        if missing_host_packages(host_packages(flavour)):  # could not install: the environment, not a bug
            _missing(f"{flavour} VM image not built: {exc}")
        raise


@pytest.fixture(scope="module", params=FLAVOURS)
def guest(request, tmp_path_factory) -> VirtualMachine:
    """One booted VM per flavour; pytest runs every test of one flavour before booting the next."""
    image = _image(request.param)
    vm = VirtualMachine(image, ssh_port=_free_port(), state_dir=tmp_path_factory.mktemp(f"vm-{request.param}"),
                        die_with_caller=True)  # fmt: skip
    vm.start(timeout_s=180)
    print(f"\n{request.param} VM ({image.kernel_release}): {vm.timings}")
    yield vm
    vm.stop()
    console = vm.console_log.read_text(errors="replace")
    assert not re.search(r"Oops|WARNING:|BUG:|Call Trace", console), console[-3000:]


def sh(vm: VirtualMachine, command: str, timeout: float = 120) -> asyncssh.SSHCompletedProcess:
    async def go() -> asyncssh.SSHCompletedProcess:
        async with asyncssh.connect(**vm.connect_options()) as conn:
            return await conn.run(command, check=False, timeout=timeout)

    return asyncio.run(go())


# -- without a VM ---------------------------------------------------------------------------------


def test_flavour_releases():
    assert kernel.flavour_release("6.1.0-56-amd64", "regular") == "6.1.0-56-amd64"
    assert kernel.flavour_release("6.1.0-56-amd64", "rt") == "6.1.0-56-rt-amd64"
    assert kernel.release_flavour("6.1.0-56-rt-amd64") == "rt"
    assert kernel.release_flavour("6.1.0-56-cloud-amd64") == "cloud"
    assert kernel.release_flavour("6.12.12+bpo-amd64") == "regular"
    with pytest.raises(VmError, match="not a regular"):
        kernel.flavour_release("6.1.0-56-rt-amd64", "rt")
    # installed RT headers must not pass for the regular kernel's (they sort after them)
    assert all(kernel.release_flavour(r) == "regular" for r in kernel.headers_releases())
    assert all(r.endswith("-rt-amd64") for r in kernel.headers_releases("rt"))


def test_unknown_flavour_is_refused(tmp_path):
    with pytest.raises(VmError, match="unknown kernel flavour 'lowlatency': choose one of regular, rt"):
        build_image(tmp_path, kernel="lowlatency")
    assert not any(tmp_path.iterdir())


def test_rt_headers_are_a_host_package_of_the_rt_build_only():
    assert "linux-headers-rt-amd64" in HOST_PACKAGES  # ci-deps.sh installs it (test_vm_image keeps them equal)
    assert "linux-headers-rt-amd64" in host_packages("rt")
    assert "linux-headers-rt-amd64" not in host_packages("regular")
    for tool_package in ("rt-tests", "stressapptest", "stress-ng", "procps"):
        assert tool_package in host_packages("regular") and tool_package in host_packages("rt")


def test_missing_rt_headers_say_what_to_install(monkeypatch):
    monkeypatch.setattr(kernel, "package_version", lambda package: None)
    monkeypatch.setattr(kernel.os, "geteuid", lambda: 1000)
    with pytest.raises(VmError) as info:
        kernel.ensure_headers("6.1.0-56-rt-amd64", "6.1.192-2", log=print)
    assert "apt-get install --no-install-recommends linux-headers-6.1.0-56-rt-amd64=6.1.192-2" in str(info.value)


# -- the two images -------------------------------------------------------------------------------


def test_both_images_coexist_and_are_reused():
    images = {flavour: _image(flavour) for flavour in FLAVOURS}
    regular, rt = images["regular"], images["rt"]
    assert rt.dir == image_dir(regular.dir, "rt") == regular.dir / "rt"
    assert (regular.flavour, rt.flavour) == ("regular", "rt") and rt.preempt_rt and not regular.preempt_rt
    assert rt.kernel_release == kernel.flavour_release(regular.kernel_release, "rt")
    assert rt.read_manifest()["linux_image_version"] == regular.read_manifest()["linux_image_version"]
    assert rt.read_manifest()["headers_version"] == rt.read_manifest()["linux_image_version"]
    for flavour, image in images.items():
        assert image.kernel_path.name == "vmlinux", f"{flavour}: fell back to the bzImage: slower boots"
        assert {p.name for p in image.modules_dir.glob("*.ko")} == set(latency_modules.MODULES)
        assert VmImage.open(regular.dir, kernel=flavour) == image
        lines: list[str] = []
        build_image(regular.dir, log=lines.append, kernel=flavour)  # building one leaves the other as it is
        assert [ln for ln in lines if re.search(r"unpacking|building|assembling|download|install", ln)] == []
    with pytest.raises(VmError, match="holds the 'rt' amd64 image"):
        build_image(rt.dir, kernel="regular")  # the cache root is expected, not the rt image's directory


# -- in each guest --------------------------------------------------------------------------------


def test_uname_says_preempt_rt_on_the_rt_kernel_only(guest):
    res = sh(guest, "uname -r; uname -v; cat /sys/kernel/realtime 2>/dev/null || echo none")
    assert res.exit_status == 0, res.stderr
    release, version, realtime = res.stdout.splitlines()
    assert release == guest.image.kernel_release
    if guest.image.preempt_rt:
        assert "PREEMPT_RT" in version.split() and realtime == "1", res.stdout
    else:
        assert "PREEMPT_RT" not in version and realtime == "none", res.stdout


def test_guest_has_the_tools_devices_and_loopback(guest):
    res = sh(guest, "for t in " + " ".join(TOOLS) + "; do command -v $t >/dev/null || echo missing $t; done; "
                    "test -c /dev/cpu_dma_latency || echo missing /dev/cpu_dma_latency; "
                    "head -1 /proc/interrupts; nproc; grep MemTotal /proc/meminfo; ip -4 addr show dev lo")
    assert res.exit_status == 0, res.stderr
    assert "missing" not in res.stdout, res.stdout
    assert re.search(r"^\s*CPU0\s+CPU1\s*$", res.stdout, re.M) and "\n2\n" in res.stdout, res.stdout
    mem_kib = int(re.search(r"MemTotal:\s+(\d+) kB", res.stdout).group(1))
    assert mem_kib > 900 * 1024, "stressapptest -M 256 needs room"
    assert re.search(r"lo: <LOOPBACK,UP", res.stdout) and "inet 127.0.0.1/8" in res.stdout, res.stdout


def test_cyclictest_writes_json_with_a_thread_per_cpu(guest):
    res = sh(guest, "cyclictest -m -p 80 -i 1000 -t -a -h 100 -q -D 2 --json=/tmp/x.json && cat /tmp/x.json")
    assert res.exit_status == 0, res.stderr
    report = json.loads(res.stdout[res.stdout.index("{"):])
    assert report["return_code"] == 0
    assert report["num_threads"] == 2 and sorted(report["thread"]) == ["0", "1"]
    for thread in report["thread"].values():
        assert thread["cycles"] > 0 and thread["histogram"]  # the values are emulated: no bounds
    assert report["sysinfo"]["release"] == guest.image.kernel_release
    assert report["sysinfo"]["realtime"] == int(guest.image.preempt_rt)


@pytest.mark.parametrize(
    "command",
    [
        "hackbench -s 128 -l 100 -g 2",
        "stressapptest -M 16 -m 2 -s 2",
        "stressapptest -M 16 -m 1 -s 2 -f /tmp/sat.file",  # a disk thread, on the guest's tmpfs
        "stress-ng --cpu 1 -t 2",
    ],
)
def test_loads_run_in_the_guest(guest, command):
    res = sh(guest, f"cd /tmp && {command}")
    assert res.exit_status == 0, f"{command}: {res.stdout[-2000:]}{res.stderr[-2000:]}"


def test_a_wrapped_cyclictest_is_tracked_and_stops_on_term(guest):
    """The station's wrapper (processes.wrap) around a probe: pid file, tag in /proc/PID/environ, pgrep
    finds it, and SIGTERM to its group makes cyclictest write its JSON before it ends."""
    pidfile = "/tmp/loads/cyclictest.pid"
    probe = "cyclictest -m -p 80 -i 1000 -t -a -q -D 60 --json=/tmp/wrapped.json"

    async def go() -> tuple[str, str, asyncssh.SSHCompletedProcess]:
        async with asyncssh.connect(**guest.connect_options()) as conn:
            await conn.run("mkdir -p /tmp/loads", check=True)
            proc = await conn.create_process(wrap(probe, pidfile, 120))
            pid = int(await asyncio.wait_for(proc.stdout.readline(), 10))
            await asyncio.sleep(1)
            tag = (await conn.run(f"tr '\\0' '\\n' < /proc/{pid}/environ | grep {TAG_VARIABLE}=")).stdout
            # anchored: busybox timeout's watchdog child and the shells also hold "cyclictest" in their cmdline
            found = (await conn.run(f"cat {pidfile}; pgrep -x cyclictest; pgrep -f '^cyclictest .*-D 60'")).stdout
            await conn.run(f"kill -TERM -{pid}")
            await asyncio.wait_for(proc.wait_closed(), 20)
            gone = await conn.run(f"kill -0 -{pid} 2>/dev/null; echo $?; cat /tmp/wrapped.json")
            return tag, found + f"pid {pid}", gone

    tag, found, gone = asyncio.run(go())
    assert tag.strip() == f"{TAG_VARIABLE}={pidfile}"
    pids = found.split()
    assert pids[0] == pids[-1] and pids.count(pids[0]) >= 3, found  # pid file, pgrep -x, pgrep -f, the pid line
    status, _, report = gone.stdout.partition("\n")
    assert status == "1", "the group outlived SIGTERM"
    assert json.loads(report)["num_threads"] == 2


# -- a traced module run on both kernels (docs/decomposition.md) ----------------------------------
def test_a_traced_run_puts_each_injected_hold_in_its_stage_with_its_culprit(guest, tmp_path, record_property):
    """A hard handler (IRQF_NO_THREAD, so also on PREEMPT_RT), the LPT module on QEMU's parallel port
    and the PCIe module on its edu device: the module's timer writes, the injector's hard hrtimer runs
    before the IRQ is taken: the hold is in delivery, under the injector's callback's name; the
    module's own test_hold_us holds its handler before the timestamp: in dispatch, under the
    module's name; and what tracing cost, from the same run's untraced blocks."""
    from tests.test_vm_campaign import _check_handler_holds, _check_overhead, _check_traced_run, _traced_campaign

    out, report = _traced_campaign(guest, tmp_path, "hard", ["hrtimer"], threaded=False, interfaces=("lpt", "pcie"),
                                   handler_hold=True)
    assert {r["interface"] for r in report["runs"]} == {"lpt", "pcie"}
    for run in report["runs"]:
        _check_traced_run(guest, out, run, "delivery", record_property)
        _check_handler_holds(out, run, record_property)
        _check_overhead(out / "runs" / run["id"], run, record_property)
    html = (out / "report.html").read_text()
    assert "Where t_SW went" in html and "What made it large" in html and "What tracing cost" in html



def test_a_competing_handler_delays_an_irq_thread_in_dispatch(guest, tmp_path, record_property):
    """An IRQ thread (threaded=1): the injector's edu handler, a hard handler on another line of the
    same CPU, runs between the kernel's entry for the module's line and the thread's timestamp: the
    holds are in dispatch, under the injector's handler's name; the thread is named as a task."""
    from tests.test_vm_campaign import _check_traced_run, _traced_campaign

    out, report = _traced_campaign(guest, tmp_path, "threaded", ["edu"], threaded=True)
    [run] = report["runs"]
    _check_traced_run(guest, out, run, "dispatch", record_property)
    # the thread's own time and the idle task before it are named as tasks, not as "nothing traced"
    labels = {c["label"] for c in run["decomposition"]["credited"]["dispatch"]}
    assert any(label.startswith("task irq/") for label in labels), labels


# -- the guest watched by `station monitor` across its kernel update (docs/lab.md) ---------------
@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """One monitor store and one address for the board (a TCP relay to whichever guest is up) across
    both flavours: the same board, its kernel updated between them (pytest runs every regular test
    before booting the RT guest). `kernels` is what the test itself booted, in order: the truth."""
    from tests.fault_proxy import FaultyLink

    home = tmp_path_factory.mktemp("monitor")
    (home / "schedule.yaml").write_text(json.dumps({
        "name": "board", "store": "store", "every": "20s", "window": "1s", "false_alarm": 0.005,
        "min_free_mib": 1, "retry": {"first": "200ms", "for": "1s"},
        "phases": [{"name": "idle", "campaign": "idle.yaml", "windows": 2}],
    }))
    with FaultyLink(upstream_port=0) as link:
        yield {"home": home, "link": link, "kernels": []}


def _watch_campaign(home, link, vm: VirtualMachine) -> None:
    known = home / "known_hosts"  # the board's address is the relay's; its key is the booted image's
    known.write_text(f"[127.0.0.1]:{link.port} {vm.image.host_key_pub}\n")
    (home / "idle.yaml").write_text(json.dumps({
        "name": "idle",
        "bench": {"target": {"kind": "ssh", "host": "127.0.0.1", "port": link.port, "user": "root",
                             "identity_file": str(vm.image.identity_file), "known_hosts": str(known),
                             "connect_timeout": "5s"},
                  "scope": {"kind": "none"}},
        "matrix": {"kind": "cyclictest", "loads": ["none"], "duration": "1s", "max_duration": "2min"},
        "cyclictest": {"threads": "per-cpu", "priority": 80, "interval": "1ms"},
    }))


def _ledger(home) -> list[dict]:
    path = home / "store" / "monitor-ledger.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def test_the_monitor_watches_the_guest_through_a_lost_link_and_marks_its_kernel_update(guest, watched, chromium):  # noqa: F811
    """On the regular kernel: a measured cycle, then the link cut (a gap, and the monitor ends its
    cycle). On the RT kernel, minutes later: the monitor, started again and stopped with SIGTERM as
    systemd stops it, records the periods it missed as gaps, measures the new kernel, and its page
    marks the change. The kernel change is checked when both flavours ran (as in CI), else that
    none is marked."""
    from tests.conftest import run_station, station_cmd

    home, link, flavour = watched["home"], watched["link"], guest.image.kernel_release
    link.upstream_port = guest.ssh_port
    link.restore()
    _watch_campaign(home, link, guest)
    schedule = str(home / "schedule.yaml")
    before = _ledger(home)
    cycle = max((e["cycle"] for e in before), default=-1) + 1
    if not guest.image.preempt_rt:
        res = run_station("monitor", schedule, "--cycles", str(cycle + 1), timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        link.cut()
        res = run_station("monitor", schedule, "--cycles", str(cycle + 2), timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        link.restore()
        new = _ledger(home)[len(before):]
        assert [(e["cycle"], e["window"], e["status"]) for e in new] == \
            [(cycle, 0, "complete"), (cycle, 1, "complete"), (cycle + 1, 0, "gap"), (cycle + 1, 1, "gap")], new
        assert all(e["kernel"] == flavour and e["target"] == "irq-vm" for e in new[:2]), new
        assert all(str(link.port) in e["reason"] for e in new[2:]), new
    else:
        started = time.time()
        monitor = subprocess.Popen(station_cmd("monitor", schedule), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        try:
            deadline = time.monotonic() + 300
            while not any(e["status"] == "complete" and e["kernel"] == flavour for e in _ledger(home)):
                assert monitor.poll() is None and time.monotonic() < deadline, monitor.stderr.read()
                time.sleep(0.5)
        finally:
            monitor.send_signal(signal.SIGTERM)
            err = monitor.communicate(timeout=120)[1]
        assert monitor.returncode == 130 and "interrupted" in err, err[-3000:]
        left = sh(guest, "pgrep -x cyclictest || echo none")
        assert left.stdout.strip() == "none", "the stopped monitor left cyclictest running"
        new = _ledger(home)[len(before):]
        measured = [e for e in new if e["status"] == "complete"]
        assert measured and all(e["kernel"] == flavour and e["target"] == "irq-vm" for e in measured), new
        # the periods that passed whole while no monitor ran are gaps (in CI the RT guest's other tests ran
        # in between: minutes, several 20 s periods); none when it followed at once (the test's own clock)
        missed = [e for e in new if e["status"] == "gap" and "not running" in e["reason"]]
        idle = started - watched["ended"] if watched["kernels"] else 0.0
        if idle >= 2 * 20:
            assert missed, (idle, new)
        elif idle < 20:
            assert not missed, (idle, new)
    watched["kernels"].append(flavour)
    watched["ended"] = time.time()
    entries = _ledger(home)
    keys = [(e["cycle"], e["phase"], e["window"]) for e in entries]
    assert len(keys) == len(set(keys)), "a window recorded twice"
    page = home / "store" / "overview" / "irq-vm.html"
    summary = json.loads(page.with_suffix(".json").read_text())
    changes = [(a, b) for _, a, b in summary["kernel_changes"]]
    assert changes == list(zip(watched["kernels"], watched["kernels"][1:], strict=False))
    dom = _run(chromium, home, "--dump-dom", page.as_uri()).stdout
    assert dom.count("<svg") >= 2 and "Gaps" in dom
    assert ("Kernel changes" in dom) == (len(watched["kernels"]) == 2)
    assert all(k in dom for k in watched["kernels"])


def _module_dir(tmp_path: Path) -> str:
    """A module directory of this test's own in the guest (other tests upload to the default)."""
    return f"/tmp/irq-station/build-{tmp_path.name}"


def _module_campaign(guest: VirtualMachine, tmp_path: Path, module: str) -> Path:
    """A short module campaign on the booted guest, its module files to come from an empty
    directory (so only a build can provide them)."""
    empty = tmp_path / "no-modules"
    empty.mkdir(exist_ok=True)
    path = tmp_path / "build.yaml"
    path.write_text(
        "name: vm-build\nbench:\n"
        f"  target: {{kind: ssh, family: mainline, host: 127.0.0.1, port: {guest.ssh_port}, user: root, "
        f"identity_file: '{guest.image.identity_file}', known_hosts: '{guest.known_hosts_file}', "
        f"upload_modules: '{empty}', module_dir: {_module_dir(tmp_path)}}}\n"
        "  scope: {kind: none}\n"
        f"module: {module}\n"
        "matrix: {interfaces: [lpt], variants: [inb], loads: [none], period: 1ms, samples: 300, max_duration: 2min, "
        "module_params: {lpt: {trigger: emulated}}}\n"
        "loads: {none: []}\n")
    return path


def test_modules_are_built_for_the_guest_kernel_and_the_other_kernel_refused(guest, tmp_path, monkeypatch):
    """Issue 49: `station modules build` with the other VM kernel's headers (Debian's, on this host)
    builds modules whose vermagic names that kernel: refused before upload, both releases named; a
    campaign with module.build: auto and no module files builds them against the guest's own headers
    (found on this host by its release) and runs end to end, campaign.json saying what was built."""
    monkeypatch.setenv("IRQ_STATION_MODULES_DIR", str(tmp_path / "cache"))
    release = guest.image.kernel_release
    regular = release.replace("-rt-", "-")  # Debian's two builds of one version: 6.1.0-57-amd64, 6.1.0-57-rt-amd64
    other = kernel.flavour_release(regular, "rt") if release == regular else regular
    assert other != release and Path(f"/usr/src/linux-headers-{other}/Makefile").is_file()
    refused = run_station("modules", "build", str(_module_campaign(
        guest, tmp_path, f"{{kdir: /usr/src/linux-headers-{other}}}")), timeout=600)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"are for kernel {other}" in refused.stderr and f"the target runs {release}" in refused.stderr
    assert "refused before upload" in refused.stderr
    assert "lpt_latency" not in sh(guest, f"ls {_module_dir(tmp_path)} 2>/dev/null").stdout

    out = tmp_path / "out"
    run = run_station("run", str(_module_campaign(guest, tmp_path, "{build: auto}")), "--out", str(out), timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    built = json.loads((out / "campaign.json").read_text())["modules_build"]
    assert built["release"] == release
    assert Path(built["kdir"]).resolve() == Path(f"/usr/src/linux-headers-{release}").resolve()
    assert built["built_for"]["lpt_latency.ko"].split()[0] == release
    (manifest,) = out.glob("runs/*/manifest.json")
    assert json.loads(manifest.read_text())["status"] == "complete"
