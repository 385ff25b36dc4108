"""Where VM images and their state live by default."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from station.common.cache_dirs import station_cache


def default_vm_dir() -> Path:
    """$IRQ_STATION_VM_DIR, else ~/.cache/irq-station/vm."""
    return station_cache("IRQ_STATION_VM_DIR", "vm")


def image_dir(vm_dir: Path | None = None, kernel: str = "regular", arch: str = "amd64") -> Path:
    """Where the image of a kernel flavour and architecture lives: the amd64 regular one in vm_dir
    itself (as before flavours existed), every other flavour in its own subdirectory (<vm_dir>/rt),
    another architecture's images under <vm_dir>/<arch> the same way (<vm_dir>/arm64,
    <vm_dir>/arm64/rt), so the images coexist."""
    root = Path(vm_dir or default_vm_dir())
    root = root if arch == "amd64" else root / arch
    return root if kernel == "regular" else root / kernel


def foreign_dir(arch: str, vm_dir: Path | None = None) -> Path:
    """Another architecture's Debian packages and their unpacked trees (station/vm/foreign.py):
    <vm_dir>/foreign/<arch>, shared by that architecture's images and its module builds."""
    return Path(vm_dir or default_vm_dir()) / "foreign" / arch


@contextlib.contextmanager
def dir_lock(directory: Path) -> Iterator[None]:
    """One user at a time of a cache directory (the CLI and a test may race, two test workers
    too): an exclusive flock on <directory>/.lock, not re-entrant."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
