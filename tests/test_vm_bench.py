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
    cfg = yaml.safe_load((REPO / "configs/vm.yaml").read_text())
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
