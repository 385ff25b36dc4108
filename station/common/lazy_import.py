"""What the station imports on first use, the one way it does so: a module (scipy.stats and
scipy.optimize cost over a second to import, and most commands — a cyclictest, gpio or avrsim
report, `station validate` — never call them), a package's re-exported names (station.api,
station.target: a command that needs none of them does not pay for the SSH or VISA stack), and a
registry's "module:attribute" entries (a run kind's heavy parts)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from types import ModuleType
from typing import Any


def import_named(spec: str) -> Any:
    """`"package.module:attribute"`: the attribute, its module imported now."""
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def lazy_exports(
    package: str, where: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level `__getattr__` and `__dir__` (PEP 562) for the names `where` maps to
    the module defining each, imported when a name is first asked for and kept in `namespace` (the
    package's globals()) from then on."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        namespace[name] = value  # asked once
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__


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
