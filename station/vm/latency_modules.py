"""Our latency modules (target_modules/), built for exactly the guest's kernel release.

Their sources ship inside the package as station/_target_modules/ (pyproject.toml maps the
repository's target_modules/ there), so an installed station builds them too; a checkout, or an
editable install of one, uses target_modules/ itself.
"""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from station.vm.errors import VmError

# in the station package; pyproject.toml's package-dir puts it there
PACKAGED_DIR = "_target_modules"
CHECKOUT_MODULES = Path(__file__).resolve().parents[2] / "target_modules"
# irqgap_inject and gpio_testchip: test only
MODULES = ("lpt_latency.ko", "pcie_latency.ko", "irqgap_inject.ko", "gpio_responder.ko",
           "gpio_testchip.ko")
BUILD_LOG = "make.log"  # beside the built modules
# build products and the user-space tool: not inputs (pyproject.toml's exclude-package-data
# keeps them out of the wheel too); nor are hidden files (.gitignore, kbuild's .*.cmd)
_IGNORE = ("*.o", "*.ko", "*.mod", "*.mod.c", "Module.symvers", "modules.order", "irqs-dump",
           "irqgap", "irqgap-static",
           "gpio_responder_user", "gpio_responder_user-static")


def module_sources() -> Path:
    """The module source tree: the installed package's copy, else the checkout's target_modules/."""
    packaged = resources.files("station") / PACKAGED_DIR
    # a zipped install has no tree make can use
    candidates = [packaged] if isinstance(packaged, Path) else []
    candidates.append(CHECKOUT_MODULES)
    for src in candidates:
        if (src / "Makefile").is_file():
            return src
    raise VmError(
        f"no kernel module sources at {packaged} (installed package) or {CHECKOUT_MODULES} "
        "(checkout): reinstall irq-station (its wheel ships them) or run from a checkout"
    )


def _is_source(rel: Path) -> bool:
    if any(part.startswith(".") for part in rel.parts):
        return False
    return not any(fnmatch.fnmatchcase(rel.name, pattern) for pattern in _IGNORE)


def _sources(src: Path) -> list[Path]:
    """Every source file under src, sorted: the inputs of the build, and what the wheel ships."""
    return [p for p in sorted(src.rglob("*")) if p.is_file() and _is_source(p.relative_to(src))]


def sources_hash(src: Path | None = None) -> str:
    """sha256 over every source file's path and bytes: a change anywhere triggers a rebuild."""
    src = src or module_sources()
    h = hashlib.sha256()
    for p in _sources(src):
        h.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def prepare_tree(build_dir: Path, src: Path | None = None) -> Path:
    """A fresh copy of the sources (exactly the files sources_hash() hashes) in
    build_dir/target_modules."""
    src = src or module_sources()
    if not (src / "Makefile").is_file():
        raise VmError(f"no kernel module sources at {src}")
    tree = build_dir / "target_modules"
    if tree.exists():
        shutil.rmtree(tree)
    for p in _sources(src):
        dest = tree / p.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dest)
    return tree


def sources_tarball(src: Path | None = None) -> bytes:
    """The same files prepare_tree() copies, under target_modules/, as a gzipped tar (a build
    elsewhere: on the target)."""
    import io
    import tarfile

    src = src or module_sources()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for p in _sources(src):
            tar.add(p, arcname=f"target_modules/{p.relative_to(src)}", recursive=False)
    return buffer.getvalue()


def build(kdir: Path, build_dir: Path, out_dir: Path, src: Path | None = None,
          make_args: tuple[str, ...] = ()) -> list[Path]:
    """make W=1 in a copy under build_dir (the sources stay clean); the .ko files land in
    out_dir, make's output in out_dir/make.log. `make_args`: more of make's variables (ARCH=…,
    CROSS_COMPILE=…), as arguments."""
    tree = prepare_tree(build_dir, src)
    res = subprocess.run(
        ["make", "-C", str(tree), f"KDIR={kdir}", "W=1", *make_args], capture_output=True,
        text=True, check=False
    )
    if res.returncode != 0:
        raise VmError(f"module build against {kdir} failed:\n{(res.stdout + res.stderr)[-3000:]}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    # make's own words beside what it made: a warning W=1 printed stays readable (and testable)
    (out_dir / BUILD_LOG).write_text(res.stdout + res.stderr)
    built = []
    for name in MODULES:
        ko = tree / "linux" / name
        if not ko.is_file():
            raise VmError(f"make succeeded but produced no {name}")
        shutil.copy2(ko, out_dir / name)
        built.append(out_dir / name)
    shutil.rmtree(tree)
    return built
