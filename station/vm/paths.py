"""Where VM images and their state live by default."""

from __future__ import annotations

from pathlib import Path

from station.common.cache_dirs import station_cache


def default_vm_dir() -> Path:
    """$IRQ_STATION_VM_DIR, else ~/.cache/irq-station/vm."""
    return station_cache("IRQ_STATION_VM_DIR", "vm")


def image_dir(vm_dir: Path | None = None, kernel: str = "regular") -> Path:
    """Where the image of a kernel flavour lives: the regular one in vm_dir itself (as before
    flavours existed), every other flavour in its own subdirectory (<vm_dir>/rt), so the images
    coexist."""
    root = Path(vm_dir or default_vm_dir())
    return root if kernel == "regular" else root / kernel
