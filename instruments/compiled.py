"""A function compiled with numba on first use, or the reason the numpy path runs instead.

numba is a dependency of the station, but every compiled function has a numpy twin that gives
the same result to the bit (each tested against it): where numba cannot be imported, or with
IRQ_STATION_KERNEL=numpy (a bench comparing the paths, a user ruling out the compiler), the numpy
path runs and `available()` says why.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


class Compiled:
    def __init__(self, build: Callable[[], Callable[..., Any]]) -> None:
        """build: imports numba and returns the jitted function (cache=True: compiled once per
        install)."""
        self._build = build
        self._fn: Callable[..., Any] | None = None
        self._why: str | None = None
        self._lock = threading.Lock()  # runs analysed in threads ask at once: one build

    def available(self) -> str | None:
        """None if the compiled function runs, else why the numpy path runs."""
        if os.environ.get("IRQ_STATION_KERNEL", "").lower() == "numpy":
            return "IRQ_STATION_KERNEL=numpy"
        if self._fn is None and self._why is None:
            with self._lock:
                if self._fn is None and self._why is None:
                    try:
                        self._fn = self._build()
                    except ImportError as exc:
                        self._why = f"numba is not installed ({exc})"
        return self._why

    def __call__(self, *args: Any) -> Any:
        assert self._fn is not None, "available() said the compiled function cannot run"
        return self._fn(*args)
