"""The raw per-run arrays a report draws its figures from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ThreadHistogram:
    """One cyclictest thread's latency histogram (cyclictest ``-h``), 1 µs buckets.

    ``bucket_us[i]`` is a latency in whole µs and ``counts[i]`` how many cycles
    fell in it; only non-empty buckets are listed, in ascending order. Samples
    beyond the histogram's range are not here (the run's ``overflows`` counts them).
    ``label`` names the curve, e.g. ``"thread 0 (CPU 0)"``: repetitions of one
    target × case are pooled by label.
    """

    label: str
    bucket_us: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        buckets = np.asarray(self.bucket_us, dtype=np.int64).ravel()
        counts = np.asarray(self.counts, dtype=np.int64).ravel()
        if buckets.shape != counts.shape:
            raise ValueError(f"{self.label}: {buckets.size} buckets but {counts.size} counts")
        object.__setattr__(self, "bucket_us", buckets)
        object.__setattr__(self, "counts", counts)


@dataclass(frozen=True)
class RunSamples:
    """Latency samples of one run, in nanoseconds.

    ``sw_ns`` are the software latencies streamed by the target module (int64);
    ``hw_ns`` the oscilloscope pulse widths of the same run (float64), or None
    when no scope was attached. A cyclictest run has an empty ``sw_ns`` and one
    ``ThreadHistogram`` per measuring thread in ``histograms``.
    """

    sw_ns: np.ndarray
    hw_ns: np.ndarray | None = None
    histograms: tuple[ThreadHistogram, ...] = ()

    def __post_init__(self) -> None:
        # Normalise dtypes once so figures never have to guess.
        object.__setattr__(self, "sw_ns", np.asarray(self.sw_ns, dtype=np.int64).ravel())
        if self.hw_ns is not None:
            object.__setattr__(self, "hw_ns", np.asarray(self.hw_ns, dtype=np.float64).ravel())
        object.__setattr__(self, "histograms", tuple(self.histograms))
