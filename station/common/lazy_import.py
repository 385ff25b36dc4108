"""A module imported on first use: scipy.stats and scipy.optimize cost over a second to import,
and most commands (a cyclictest, gpio or avrsim report, `station validate`) never call them."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module `name`; the first attribute read imports it (then Python's own cache)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attr)

    def load(self) -> None:
        """Import it now (a process with time to spare: see station/analysis/run_pool.py)."""
        importlib.import_module(self._name)

    def __repr__(self) -> str:
        return f"<lazy module {self._name}>"


def lazy_module(name: str) -> Any:
    """`stats = lazy_module("scipy.stats")`: used as the module, imported when first used."""
    return LazyModule(name)
