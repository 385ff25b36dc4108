"""What cyclictest printed, as the parsers give it: its threads, histograms, status lines and
--json report, the limits every value is checked against, and the one error all of them raise."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field, fields
from email.utils import parsedate_to_datetime
from typing import Any

import numpy as np

MAX_THREADS = 4096
MAX_BUCKET = 10_000_000
MAX_COUNT = 2**63 - 1
HIST_MAX = 1_000_000  # cyclictest clamps -h to this

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_UINT = re.compile(r"[0-9]{1,20}", re.ASCII)
_THREAD_LINE = re.compile(r"# Thread ([0-9]{1,6}):(.*)", re.ASCII)
_DMA = re.compile(r"# /dev/cpu_dma_latency set to (-?[0-9]{1,10})us", re.ASCII)
_STATUS = re.compile(
    r"T: *([0-9]{1,6}) \( *([0-9]{1,10})\) P: *(-?[0-9]{1,4}) I:(-?[0-9]{1,19}) C: *([0-9]{1,19})"
    r" Min: *(-?[0-9]{1,19}) Act: *(-?[0-9]{1,19}) Avg: *(-?[0-9]{1,19}) Max: *(-?[0-9]{1,19})"
    r"(?: SMI: *([0-9]{1,19}))?",
    re.ASCII,
)

# Short options that take a required argument, in any rt-tests version: to find -h/-H in a
# command line whose quoting is lost (getopt clusters like "-qh50" included).
_SHORT_WITH_ARG = frozenset("bcdDeFhHilopOTy")


class CyclictestOutputError(ValueError):
    """Output that is not what cyclictest prints; ``line`` (1-based, text) or ``path`` (JSON) says
    where."""

    def __init__(self, reason: str, *, line: int | None = None, path: str | None = None) -> None:
        where = f"line {line}: " if line is not None else f"{path}: " if path else ""
        super().__init__(where + reason)
        self.reason = reason
        self.line = line
        self.path = path


def _frozen_array(values: Any) -> np.ndarray:
    a = np.array(values, dtype=np.int64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False, kw_only=True)
class CyclictestThread:
    """One measurement thread. Figures are in units of ``unit_ns`` ns (1000: µs; 1 with -N).

    ``buckets``/``counts``: read-only int64 arrays of the non-zero buckets, increasing bucket
    index (the truncated latency in units). ``overflows`` is the printed count (text); the JSON
    has none (None): with a histogram it is ``cycles - in_range``. ``cpu``/``node`` are in the
    JSON only (-1: not pinned). ``cycles`` of the text is ``in_range + overflows``.
    """

    index: int
    cycles: int
    min: int | None
    avg: float | None
    max: int | None
    buckets: np.ndarray
    counts: np.ndarray
    has_histogram: bool
    unit_ns: int = 1000
    avg_truncated: bool = False
    overflows: int | None = None
    overflow_cycles: tuple[int, ...] | None = None
    overflow_cycles_omitted: int | None = None
    cpu: int | None = None
    node: int | None = None
    in_range: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "buckets", _frozen_array(self.buckets))
        object.__setattr__(self, "counts", _frozen_array(self.counts))
        if self.buckets.shape != self.counts.shape or self.buckets.ndim != 1:
            raise ValueError("buckets and counts must be 1-D arrays of one length")
        # Python ints: no int64 overflow
        object.__setattr__(self, "in_range", sum(self.counts.tolist()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CyclictestThread):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    @property
    def histogram(self) -> dict[int, int]:
        return {int(b): int(c) for b, c in zip(self.buckets, self.counts, strict=True)}

    @property
    def min_ns(self) -> float | None:
        return None if self.min is None else float(self.min * self.unit_ns)

    @property
    def avg_ns(self) -> float | None:
        return None if self.avg is None else float(self.avg * self.unit_ns)

    @property
    def max_ns(self) -> float | None:
        return None if self.max is None else float(self.max * self.unit_ns)


@dataclass(frozen=True)
class SysInfo:
    release: str
    version: str
    realtime: bool  # /sys/kernel/realtime read "1"
    sysname: str | None = None
    nodename: str | None = None
    machine: str | None = None


@dataclass(frozen=True, kw_only=True)
class CyclictestReport:
    """The ``--json`` file. ``histogram_range`` is -h/-H as found in ``cmdline`` (None: no -h
    found; cyclictest does not write it otherwise); ``repairs`` lists what was fixed to read it."""

    file_version: int
    cmdline: str
    rt_test_version: str
    start_time: str
    end_time: str
    return_code: int
    sysinfo: SysInfo
    num_threads: int
    nsecs: bool
    unit_ns: int
    histogram_range: int | None
    threads: tuple[CyclictestThread, ...]
    repairs: tuple[str, ...] = ()

    @property
    def start(self) -> dt.datetime | None:
        return _rfc2822(self.start_time)

    @property
    def end(self) -> dt.datetime | None:
        return _rfc2822(self.end_time)


@dataclass(frozen=True)
class StatusLine:
    """``T: 0 (1234) P:80 I:1000 C: 10000 Min: 3 Act: 5 Avg: 6 Max: 30 [SMI: n]``: figures so far
    (Avg is the integer part); ``interval_us`` is always µs, the others in the run's unit."""

    index: int
    tid: int
    priority: int
    interval_us: int
    cycles: int
    min: int
    act: int
    avg: int
    max: int
    smi: int | None = None


@dataclass(frozen=True, kw_only=True)
class HistogramOutput:
    """stdout of ``cyclictest -h N`` (or -H). ``histofall``: the rows have a summary column.
    ``totals``: the ``# Total:`` figures as printed
    (None from 2.7); ``histogram_range``: the -h value when every bucket was printed (up to 2.6),
    else None; ``status``: the last status line per thread printed before (not quiet; these lag
    the final figures by up to one refresh)."""

    threads: tuple[CyclictestThread, ...]
    unit_ns: int
    histofall: bool
    totals: tuple[int, ...] | None
    histogram_range: int | None
    smis: tuple[int, ...] | None = None
    thread_ids: tuple[int, ...] | None = None
    break_thread: int | None = None
    break_value: int | None = None
    dma_latency_us: int | None = None
    status: tuple[StatusLine, ...] = ()


def _rfc2822(s: str) -> dt.datetime | None:
    try:
        return parsedate_to_datetime(s)
    except (TypeError, ValueError, IndexError):
        return None
