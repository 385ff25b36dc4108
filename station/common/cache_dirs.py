"""Where the station keeps its caches: never the repository, never a campaign's own folder."""

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
