"""A `kind: vm` target is a bench part like the twin: the campaign builds (or reuses)
the image, boots the VM on a free port, uploads the modules built for its kernel,
runs, and powers the VM off — on success and on failure alike."""

from __future__ import annotations

import json
import subprocess

import yaml

from tests.conftest import REPO, run_station


def _qemu_processes() -> set[str]:
    out = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True).stdout
    return set(out.split())


def test_the_bench_boots_and_powers_off_its_vm(tmp_path):
    cfg = yaml.safe_load((REPO / "configs/lpt-vs-pcie-qemu.yaml").read_text())
    cfg["matrix"] |= {"interfaces": ["lpt"], "variants": ["inb"], "samples": 500}
    path = tmp_path / "vm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    before = _qemu_processes()
    res = run_station("run", str(path), "--out", str(tmp_path / "out"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "VM up on 127.0.0.1:" in res.stderr
    manifest = json.loads((tmp_path / "out/runs/lpt-inb-io-r0/manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["audit"]["uname"].startswith("Linux")
    assert _qemu_processes() == before  # powered off, not left running

    # a run that fails still powers the VM off
    cfg["matrix"]["module_params"] = {"lpt": {"trigger": "bogus"}}
    path.write_text(yaml.safe_dump(cfg))
    res = run_station("run", str(path), "--out", str(tmp_path / "out2"), timeout=600)
    assert res.returncode == 3 and "Traceback" not in res.stderr
    assert _qemu_processes() == before


def test_a_killed_station_takes_its_vm_with_it(tmp_path):
    """SIGKILL runs no teardown; the VM the bench booted must still not be left running."""
    import signal
    import time

    from tests.conftest import station_cmd

    cfg = yaml.safe_load((REPO / "configs/lpt-vs-pcie-qemu.yaml").read_text())
    cfg["matrix"] |= {"interfaces": ["lpt"], "variants": ["inb"], "samples": 1_000_000, "max_duration": "1h"}
    path = tmp_path / "vm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    before = _qemu_processes()
    run = subprocess.Popen(station_cmd("run", str(path), "--out", str(tmp_path / "out")),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw = tmp_path / "out/runs/lpt-inb-io-r0/sw.raw"
    deadline = time.monotonic() + 300
    while not (raw.exists() and raw.stat().st_size > 0):
        assert run.poll() is None and time.monotonic() < deadline, "the run did not start streaming"
        time.sleep(0.2)
    assert _qemu_processes() - before  # its VM is up
    run.send_signal(signal.SIGKILL)
    run.wait(10)
    deadline = time.monotonic() + 30
    while _qemu_processes() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _qemu_processes() == before
