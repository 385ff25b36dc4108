"""Where VM images and their state live by default."""

from __future__ import annotations

import os
from pathlib import Path


def station_cache(variable: str, name: str) -> Path:
    """$`variable`, else ~/.cache/irq-station/`name` ($XDG_CACHE_HOME honoured): a cache, never
    the repository."""
    env = os.environ.get(variable)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "irq-station" / name


def default_vm_dir() -> Path:
    """$IRQ_STATION_VM_DIR, else ~/.cache/irq-station/vm."""
    return station_cache("IRQ_STATION_VM_DIR", "vm")


def image_dir(vm_dir: Path | None = None, kernel: str = "regular") -> Path:
    """Where the image of a kernel flavour lives: the regular one in vm_dir itself (as before
    flavours existed), every other flavour in its own subdirectory (<vm_dir>/rt), so the images
    coexist."""
    root = Path(vm_dir or default_vm_dir())
    return root if kernel == "regular" else root / kernel
