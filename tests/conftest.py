"""Shared fixtures: a twin on a background thread, reached over real SSH/TCP; for the
scope dialect tests (modules that set DIALECT), a pulse source, the simulated scope
speaking that dialect, and a freshly reset driver talking to it over TCP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.local_sshd import start_sshd, stop_sshd
from tests.scope_helpers import pulse_source, reset_scope, sim_scope

REPO = Path(__file__).resolve().parents[1]

# CI draws the same examples every run, so a red CI means the change broke something; runs elsewhere
# draw new ones each time (and replay the failures they found from .hypothesis/), which is where
# new garbage is explored.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


# The modules that boot QEMU guests, marked `vm`: scripts/test.sh runs every other test on all
# cores (pytest-xdist), then these alone, one at a time, so a TCG guest never competes with a
# second guest or with a worker's campaign (its timing tests were written for a quiet host).
VM_MODULES = frozenset({"test_vm_image", "test_vm_campaign", "test_vm_rt", "test_vm_bench",
                        "test_interruptions_campaign", "test_cyclictest_campaign", "test_gpio_campaign",
                        "test_gpio_responder_vm", "test_vm_arm64",
                        # measures this machine's latency: alone, or the other tests' load is its noise
                        "test_monitor"})
assert all((REPO / "tests" / f"{m}.py").is_file() for m in VM_MODULES), "VM_MODULES names a module that is gone"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in VM_MODULES:
            item.add_marker(pytest.mark.vm)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing(what: str) -> None:
    """A tool the test needs is absent: a failure in CI (which installs it), a skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {what}")
    pytest.skip(what)


def station_cmd(*args: str) -> list[str]:
    """The installed console script, as a user runs it."""
    exe = Path(sys.executable).with_name("station")
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "station.cli", *args]


def run_station(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(station_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture
def twin(tmp_path):
    from station.twin.runner import Twin

    tw = Twin(state_dir=tmp_path / "twin", seed=7, truth_dir=tmp_path / "truth", with_scope=False)
    tw.start_in_thread()
    yield tw
    tw.stop_thread()


@pytest.fixture(scope="module")
def source():
    return pulse_source()


@pytest.fixture(scope="module")
def server(request, source):
    with sim_scope(source, request.module.DIALECT) as sim:
        yield sim


@pytest.fixture
def scope(request, server):
    with reset_scope(server, request.module.DIALECT) as s:
        yield s


def running_twin(state: Path, *options: str) -> Iterator[dict]:
    """`station twin` in its own process (with `options`), its endpoints (twin.json) while it runs."""
    state.mkdir(parents=True, exist_ok=True)
    log = state / "twin.log"  # a file, not a pipe: a twin that outlives many tests never blocks on it
    proc = subprocess.Popen(station_cmd("twin", "--state-dir", str(state), *options), stdout=subprocess.DEVNULL,
                            stderr=log.open("w"))
    deadline = time.monotonic() + 60
    while not (state / "twin.json").exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the twin did not start"
        time.sleep(0.1)
    yield json.loads((state / "twin.json").read_text())
    proc.send_signal(signal.SIGINT)
    proc.wait(20)


@pytest.fixture
def standalone_twin(tmp_path):
    yield from running_twin(tmp_path / "twin")


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """This machine as a real target: OpenSSH's sshd on 127.0.0.1 with throw-away keys."""
    state = tmp_path_factory.mktemp("sshd")
    server, target = start_sshd(state)
    yield target
    stop_sshd(server, state)


def this_machine_is_a_guest() -> bool:
    """Whether the machine running the tests is a virtual machine, read here directly (the truth
    the station's own detection is checked against): the CPU's hypervisor flag, or
    systemd-detect-virt naming a hypervisor."""
    import re as _re
    import shutil as _shutil

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if _re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, _re.M):
        return True
    if _shutil.which("systemd-detect-virt"):
        got = subprocess.run(["systemd-detect-virt", "--vm"], capture_output=True, text=True)
        return got.stdout.strip() not in ("", "none")
    return False
