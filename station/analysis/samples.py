"""The per-run distributions a report draws its figures from."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field

import numpy as np

from station.analysis.distribution import Distribution


@dataclass(frozen=True)
class ThreadHistogram:
    """One cyclictest thread's latency histogram (cyclictest ``-h``), 1 µs buckets.

    ``bucket_us[i]`` is a latency in whole µs and ``counts[i]`` how many cycles
    fell in it; only non-empty buckets are listed, in ascending order. Samples
    beyond the histogram's range are not here: ``overflows`` counts them and ``max_us`` is
    cyclictest's own maximum, wherever it lies.
    ``label`` names the curve, e.g. ``"thread 0 (CPU 0)"``: repetitions of one
    target × case are pooled by label.
    """

    label: str
    bucket_us: np.ndarray
    counts: np.ndarray
    max_us: float | None = None  # cyclictest's own maximum (beyond the range when it overflowed)
    overflows: int = 0  # cycles beyond the histogram's range

    def __post_init__(self) -> None:
        buckets = np.asarray(self.bucket_us, dtype=np.int64).ravel()
        counts = np.asarray(self.counts, dtype=np.int64).ravel()
        if buckets.shape != counts.shape:
            raise ValueError(f"{self.label}: {buckets.size} buckets but {counts.size} counts")
        object.__setattr__(self, "bucket_us", buckets)
        object.__setattr__(self, "counts", counts)


@dataclass(frozen=True)
class RunSamples:
    """Latency samples of one run, in nanoseconds, as distributions (values and counts).

    ``sw_ns`` are the software latencies streamed by the target module, ``hw_ns`` the
    oscilloscope pulse widths of the same run, or None when no scope was attached: each a
    sample array or its Distribution, kept as ``sw`` and ``hw``. A cyclictest run has an empty
    ``sw`` and one ``ThreadHistogram`` per measuring thread in ``histograms``.
    """

    sw_ns: InitVar[np.ndarray | Distribution]
    hw_ns: InitVar[np.ndarray | Distribution | None] = None
    histograms: tuple[ThreadHistogram, ...] = ()
    #: t_SW against time: (seconds from the run's first record, median, p99) per stretch of events
    over_time: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    sw: Distribution = field(init=False)
    hw: Distribution | None = field(init=False)

    def __post_init__(self, sw_ns: np.ndarray | Distribution,
                      hw_ns: np.ndarray | Distribution | None) -> None:
        object.__setattr__(self, "sw", _distribution(sw_ns, np.int64))
        object.__setattr__(self, "hw", None if hw_ns is None else _distribution(hw_ns, np.float64))
        object.__setattr__(self, "histograms", tuple(self.histograms))


def _distribution(values: np.ndarray | Distribution, dtype: type) -> Distribution:
    if isinstance(values, Distribution):
        return values
    return Distribution.of(np.asarray(values, dtype=dtype).ravel())
