"""The raw per-run arrays a report draws its figures from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RunSamples:
    """Latency samples of one run, in nanoseconds.

    ``sw_ns`` are the software latencies streamed by the target module (int64);
    ``hw_ns`` the oscilloscope pulse widths of the same run (float64), or None
    when no scope was attached.
    """

    sw_ns: np.ndarray
    hw_ns: np.ndarray | None = None

    def __post_init__(self) -> None:
        # Normalise dtypes once so figures never have to guess.
        object.__setattr__(self, "sw_ns", np.asarray(self.sw_ns, dtype=np.int64).ravel())
        if self.hw_ns is not None:
            object.__setattr__(self, "hw_ns", np.asarray(self.hw_ns, dtype=np.float64).ravel())
