"""Where VM images and their state live by default."""

from __future__ import annotations

import os
from pathlib import Path


def default_vm_dir() -> Path:
    """$IRQ_STATION_VM_DIR, else ~/.cache/irq-station/vm: a cache, never the repository."""
    env = os.environ.get("IRQ_STATION_VM_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "irq-station" / "vm"
