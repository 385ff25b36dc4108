"""Our latency modules (target_modules/), built for exactly the guest's kernel release."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from station.vm.errors import VmError

REPO_MODULES = Path(__file__).resolve().parents[2] / "target_modules"
MODULES = ("lpt_latency.ko", "pcie_latency.ko")
# build products and the user-space tool: not inputs
_IGNORE = ("*.o", "*.ko", "*.mod", "*.mod.c", ".*.cmd", "Module.symvers", "modules.order", "irqs-dump")


def _sources(src: Path) -> list[Path]:
    skip = shutil.ignore_patterns(*_IGNORE)
    out = []
    for p in sorted(src.rglob("*")):
        if p.is_file() and not skip(str(p.parent), [p.name]):
            out.append(p)
    return out


def sources_hash(src: Path = REPO_MODULES) -> str:
    """sha256 over every source file's path and bytes: a change anywhere triggers a rebuild."""
    h = hashlib.sha256()
    for p in _sources(src):
        h.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def build(kdir: Path, build_dir: Path, out_dir: Path, src: Path = REPO_MODULES) -> list[Path]:
    """make W=1 in a copy under build_dir (the repository stays clean); the .ko files land in out_dir."""
    if not (src / "Makefile").is_file():
        raise VmError(f"no kernel module sources at {src}")
    tree = build_dir / "target_modules"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns(*_IGNORE))
    res = subprocess.run(
        ["make", "-C", str(tree), f"KDIR={kdir}", "W=1"], capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise VmError(f"module build against {kdir} failed:\n{(res.stdout + res.stderr)[-3000:]}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    built = []
    for name in MODULES:
        ko = tree / "linux" / name
        if not ko.is_file():
            raise VmError(f"make succeeded but produced no {name}")
        shutil.copy2(ko, out_dir / name)
        built.append(out_dir / name)
    shutil.rmtree(tree)
    return built
