"""What cyclictest (rt-tests) really prints, parsed: the ``--json=FILE`` file, the histogram
that ``-h``/``-H`` print on stdout, and the live status lines.

Formats, as read in the rt-tests sources and seen in the fixtures of
tests/fixtures/cyclictest/ (captured from rt-tests 0.66, 0.83, 1.10, 2.4, 2.8 and 2.10-dev):

* Histogram text: ``# Histogram``, then one row per bucket, ``%06d`` bucket index and one
  ``%06lu`` count per thread (tab separated), plus a summary column with ``-H``/``--histofall``
  when there is more than one thread (from 2.7 the rows have it with one thread too). Up to
  2.6 every bucket of the range is printed and a ``# Total:`` line (per column: the sum of the
  printed rows, overflows excluded) follows; from 2.7 rows whose counts are all zero are left
  out and there is no ``# Total:``. Then ``# Min Latencies:`` and ``# Avg Latencies:`` (per
  thread; since 0.74), ``# Max Latencies:`` (``Latencys`` up to 0.72) and
  ``# Histogram Overflows:`` (both with the summary column under -H),
  ``# Histogram Overflow at cycle number:`` (since 0.85) with one ``# Thread N:`` line per
  thread listing the 0-based cycle numbers of at most ``-h`` overflows and `` # NNNNN others``
  for the rest (2.7+ also print ``# 00000 others`` when exactly ``-h`` overflowed),
  ``# SMIs:`` with --smi, a blank line (0.85+); with -b: ``# Thread Ids:``,
  ``# Break thread:`` and ``# Break value:`` (since 0.76).
  Every cycle lands either in a bucket or among the overflows, so a thread's cycles are
  sum(counts) + overflows. The text does not print the cycle count: it is derived that way.
* Units: µs, or ns with ``-N``, for the figures and the bucket indices alike; cyclictest
  truncates a latency to the unit (sample in bucket k: latency in [k, k+1) units). The text
  does not say which: ``parse_histogram(..., nsecs=True)`` for output of ``-N``. The JSON says
  it in ``resolution_in_ns``, which is the -N flag (0 or 1), not a resolution.
* The JSON: ``"cmdline:"`` and ``"rt_test_version:"`` have the colon inside the key;
  ``rt_test_version`` is ``printf("%1.2f")`` of the version (2.4 → "2.40", 2.10 → "2.10").
  The command line is written unescaped (a ``"`` in an argument makes the file invalid JSON)
  and a thread without cycles has ``"avg": -nan``: both are repaired here, and the report
  lists the repairs. Histogram keys are bucket indices, non-zero buckets only; up to 2.6 the
  ``"histogram"`` object is there (empty) even without -h, from 2.7 only with -h. There is no
  overflow count in the JSON: with -h it is cycles - sum(histogram). The JSON is written
  before the threads are joined, the text after; they agree in practice.
* The average: JSON has it with two decimals (rounded), text and status lines have its
  integer part (C cast to long): ``avg_truncated`` says which.
* A thread that never ran (-b stopped the run first) prints cyclictest's initial values
  (min 1000000, max 0 or -1000000, avg -nan or 0): with cycles == 0 they become None here.

Everything malformed raises :class:`CyclictestOutputError` (a ValueError) with the line
(text) or the JSON path; absurd sizes are refused the same way (more than ``MAX_THREADS``
threads, bucket indices above ``MAX_BUCKET``, counts of 2**63 or more).
"""

from __future__ import annotations

import datetime as dt
import json
import math
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
    """Output that is not what cyclictest prints; ``line`` (1-based, text) or ``path`` (JSON) says where."""

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
        object.__setattr__(self, "in_range", sum(self.counts.tolist()))  # Python ints: no int64 overflow

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


# ---------------------------------------------------------------------------------- text


def _text(data: str | bytes) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        # lenient: undecodable bytes become U+FFFD and then fail whatever line they are in
        return bytes(data).decode("utf-8", errors="replace")
    raise TypeError(f"cyclictest output must be str or bytes, not {type(data).__name__}")


def _lines(text: str) -> list[str]:
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]


def _uint(tok: str, line: int, what: str, limit: int = MAX_COUNT) -> int:
    if not _UINT.fullmatch(tok):
        raise CyclictestOutputError(f"{what}: {tok[:40]!r} is not an unsigned number", line=line)
    v = int(tok)
    if v > limit:
        raise CyclictestOutputError(f"{what}: {tok} is out of range (at most {limit})", line=line)
    return v


def _latency(tok: str, line: int, what: str) -> int:
    """A min/avg/max figure: C longs printed with %lu, so a negative one shows as 2**64 - x."""
    v = _uint(tok, line, what, 2**64 - 1)
    return v - 2**64 if v > MAX_COUNT else v


def _ints(rest: str, line: int, what: str, *, signed: bool = False) -> list[int]:
    toks = rest.split()
    if len(toks) > MAX_THREADS + 1:
        raise CyclictestOutputError(f"{what}: {len(toks)} columns, more than {MAX_THREADS} threads", line=line)
    return [_latency(t, line, what) if signed else _uint(t, line, what) for t in toks]


# footer lines in the order cyclictest prints them (rank), the first prefix is today's spelling
_FOOTER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("total", ("# Total:",)),
    ("min", ("# Min Latencies:",)),
    ("avg", ("# Avg Latencies:",)),
    ("max", ("# Max Latencies:", "# Max Latencys:")),
    ("overflows", ("# Histogram Overflows:",)),
    ("overflow_at", ("# Histogram Overflow at cycle number:",)),
    ("thread", ()),  # "# Thread N: ..." lines, matched by _THREAD_LINE
    ("smis", ("# SMIs:",)),
)
_RANK = {k: i for i, (k, _) in enumerate(_FOOTER)}
_SIGNED = {"min", "avg", "max"}


@dataclass
class _ThreadOverflowLine:
    line: int
    index: int
    cycles: list[int]
    omitted: int


def _overflow_line(m: re.Match[str], line: int) -> _ThreadOverflowLine:
    toks = m.group(2).split()
    omitted = 0
    if "#" in toks:
        k = toks.index("#")
        tail = toks[k + 1 :]
        if len(tail) != 2 or tail[1] != "others":
            raise CyclictestOutputError("expected '# N others' after the overflow cycle numbers", line=line)
        omitted = _uint(tail[0], line, "overflows not listed")
        toks = toks[:k]
    if len(toks) > HIST_MAX:
        raise CyclictestOutputError(f"more than {HIST_MAX} overflow cycle numbers", line=line)
    cycles = [_uint(t, line, "overflow cycle number") for t in toks]
    if any(b <= a for a, b in zip(cycles, cycles[1:], strict=False)):
        raise CyclictestOutputError("overflow cycle numbers must increase", line=line)
    return _ThreadOverflowLine(line, int(m.group(1)), cycles, omitted)


def parse_histogram(data: str | bytes, *, nsecs: bool = False) -> HistogramOutput:
    """Parse stdout of ``cyclictest -h N`` / ``-H N`` / ``--histofall`` (any version seen: see the
    module doc). Lines before ``# Histogram`` (status lines, spikes, notes) are not checked, except
    that the last status line per thread is kept. ``nsecs``: the run used -N (figures in ns)."""
    lines = _lines(_text(data))
    start = next((i for i, ln in enumerate(lines) if _ANSI.sub("", ln).rstrip() == "# Histogram"), None)
    if start is None:
        raise CyclictestOutputError("no '# Histogram' line: not the stdout of cyclictest -h", line=len(lines))
    preamble = lines[:start]

    width: int | None = None  # columns of the rows
    last_bucket = -1
    n_rows = 0
    col_b: list[list[int]] = []
    col_c: list[list[int]] = []
    col_sum: list[int] = []
    first_not_summary: int | None = None  # first row whose last column is not the sum of the others
    footer: dict[str, tuple[int, list[int]]] = {}
    overflow_lines: list[_ThreadOverflowLine] = []
    rank = -1
    phase = "rows"
    trailer: dict[str, tuple[int, list[int]]] = {}

    for lineno, raw in enumerate(lines[start + 1 :], start=start + 2):
        line = raw.rstrip(" \t")
        if phase == "rows":
            if line and not line.startswith("#"):
                toks = line.split()
                if len(toks) < 2:
                    raise CyclictestOutputError("a histogram row needs a bucket and a count", line=lineno)
                if len(toks) > MAX_THREADS + 2:
                    raise CyclictestOutputError(f"{len(toks) - 1} columns: more than {MAX_THREADS} threads",
                                                line=lineno)
                bucket = _uint(toks[0], lineno, "bucket", MAX_BUCKET)
                if bucket <= last_bucket:
                    raise CyclictestOutputError(f"bucket {bucket} after bucket {last_bucket}", line=lineno)
                vals = [_uint(t, lineno, "count") for t in toks[1:]]
                if width is None:
                    width = len(vals)
                    col_b, col_c, col_sum = [[] for _ in vals], [[] for _ in vals], [0] * width
                elif len(vals) != width:
                    raise CyclictestOutputError(f"{len(vals)} counts in a row of {width}", line=lineno)
                for j, v in enumerate(vals):
                    if v:
                        col_b[j].append(bucket)
                        col_c[j].append(v)
                        col_sum[j] += v
                if first_not_summary is None and (len(vals) < 2 or sum(vals[:-1]) != vals[-1]):
                    first_not_summary = lineno
                last_bucket = bucket
                n_rows += 1
                continue
            phase = "footer"
        if phase == "footer":
            if not line.strip():
                phase = "trailer"
                continue
            m = _THREAD_LINE.fullmatch(line)
            if m:
                if "overflow_at" not in footer or rank > _RANK["thread"]:
                    raise CyclictestOutputError("'# Thread N:' line outside the overflow list", line=lineno)
                overflow_lines.append(_overflow_line(m, lineno))
                rank = _RANK["thread"]
                continue
            key = next((k for k, prefixes in _FOOTER for p in prefixes if line.startswith(p)), None)
            if key is not None:
                if key in footer or _RANK[key] < rank:
                    raise CyclictestOutputError(f"'{line[:40]}' repeated or out of order", line=lineno)
                prefix = next(p for p in dict(_FOOTER)[key] if line.startswith(p))
                rest = line[len(prefix) :]
                if key == "overflow_at" and rest.strip():
                    raise CyclictestOutputError("text after the overflow list header", line=lineno)
                footer[key] = (lineno, _ints(rest, lineno, prefix[2:-1], signed=key in _SIGNED))
                rank = _RANK[key]
                continue
            phase = "trailer"  # old versions print the -b lines without a blank line first
        if not line.strip():
            continue
        for key, prefix in (("thread_ids", "# Thread Ids:"), ("break_thread", "# Break thread:"),
                            ("break_value", "# Break value:")):
            if line.startswith(prefix) and key not in trailer:
                trailer[key] = (lineno, _ints(line[len(prefix) :], lineno, prefix[2:-1]))
                break
        else:
            raise CyclictestOutputError(f"unexpected line after the histogram: {line[:60]!r}", line=lineno)

    return _histogram_output(lines, preamble, footer, overflow_lines, trailer, width, n_rows, last_bucket,
                             col_b, col_c, col_sum, first_not_summary, nsecs)


def _histogram_output(
    lines: list[str],
    preamble: list[str],
    footer: dict[str, tuple[int, list[int]]],
    overflow_lines: list[_ThreadOverflowLine],
    trailer: dict[str, tuple[int, list[int]]],
    width: int | None,
    n_rows: int,
    last_bucket: int,
    col_b: list[list[int]],
    col_c: list[list[int]],
    col_sum: list[int],
    first_not_summary: int | None,
    nsecs: bool,
) -> HistogramOutput:
    end = len(lines)
    for key, name in (("max", "# Max Latencies"), ("overflows", "# Histogram Overflows")):
        if key not in footer:
            raise CyclictestOutputError(f"no '{name}:' line", line=end)
    if "min" in footer:
        n = len(footer["min"][1])
    elif overflow_lines:
        n = len(overflow_lines)
    else:  # 0.66: no Min line, and no -H either
        n = len(footer["max"][1])
    if not 1 <= n <= MAX_THREADS:
        raise CyclictestOutputError(f"{n} threads (1 to {MAX_THREADS} expected)", line=footer["max"][0])
    max_line, maxes = footer["max"]
    if len(maxes) == n + 1 and n > 1:
        histofall = True
    elif len(maxes) == n:
        histofall = False
    else:
        raise CyclictestOutputError(f"{len(maxes)} maxima for {n} threads", line=max_line)
    cols = n + 1 if histofall else n
    for key, want in (("total", cols), ("min", n), ("avg", n), ("overflows", cols), ("smis", n)):
        if key in footer and len(footer[key][1]) != want:
            raise CyclictestOutputError(f"{len(footer[key][1])} figures where {want} belong", line=footer[key][0])
    # 2.7+ print the rows' summary column with -H even for one thread, but not the Max/Overflows one
    row_summary = histofall or (n == 1 and width == 2)
    if width is not None and width != n + row_summary:
        raise CyclictestOutputError(f"histogram rows have {width} counts, {n + row_summary} expected", line=end)
    if width is None:
        col_b, col_c, col_sum = [[] for _ in range(cols)], [[] for _ in range(cols)], [0] * cols
    ovf_line, ovfs = footer["overflows"]
    if row_summary and first_not_summary is not None and n_rows:
        raise CyclictestOutputError("the summary column is not the sum of the threads", line=first_not_summary)
    if histofall:
        if maxes[n] != max(maxes[:n]):
            raise CyclictestOutputError("the summary maximum is not the largest", line=max_line)
        if ovfs[n] != sum(ovfs[:n]):
            raise CyclictestOutputError("the summary overflow count is not the sum", line=ovf_line)
    totals = None
    if "total" in footer:
        total_line, totals_list = footer["total"]
        if totals_list != col_sum[:cols]:
            raise CyclictestOutputError(f"'# Total:' {totals_list[:8]} is not the sum of the rows {col_sum[:8]}",
                                        line=total_line)
        totals = tuple(totals_list)
    if "overflow_at" in footer and len(overflow_lines) != n:
        raise CyclictestOutputError(f"{len(overflow_lines)} '# Thread N:' overflow lines for {n} threads",
                                    line=overflow_lines[-1].line if overflow_lines else footer["overflow_at"][0])
    for j, ol in enumerate(overflow_lines):
        if ol.index != j:
            raise CyclictestOutputError(f"overflow line of thread {ol.index} where thread {j} belongs", line=ol.line)
        if len(ol.cycles) + ol.omitted != ovfs[j]:
            raise CyclictestOutputError(
                f"thread {j}: {len(ol.cycles)} cycle numbers + {ol.omitted} others != {ovfs[j]} overflows",
                line=ol.line)
    # up to 2.6 (the versions with '# Total:') every bucket of -h is printed: the rows are the range
    hist_range = n_rows if totals is not None and n_rows and last_bucket == n_rows - 1 else None

    threads = []
    mins = footer.get("min", (0, None))[1]
    avgs = footer.get("avg", (0, None))[1]
    for j in range(n):
        in_range = col_sum[j]
        cycles = in_range + ovfs[j]
        if cycles > MAX_COUNT:
            raise CyclictestOutputError(f"thread {j}: {cycles} cycles", line=ovf_line)
        ran = cycles > 0  # cyclictest prints its initial values for a thread that never ran
        tmin = mins[j] if mins is not None and ran else None
        tmax = maxes[j] if ran else None
        if ran and in_range:
            if tmin is not None and col_b[j][0] < tmin:
                raise CyclictestOutputError(f"thread {j}: bucket {col_b[j][0]} below the minimum {tmin}",
                                            line=footer["min"][0])
            if col_b[j][-1] > tmax:
                raise CyclictestOutputError(f"thread {j}: bucket {col_b[j][-1]} above the maximum {tmax}",
                                            line=max_line)
        if ran and hist_range is not None and ovfs[j] and tmax < hist_range:
            raise CyclictestOutputError(f"thread {j}: overflows, yet the maximum {tmax} is within -h {hist_range}",
                                        line=ovf_line)
        ol = overflow_lines[j] if overflow_lines else None
        threads.append(CyclictestThread(
            index=j, cycles=cycles, min=tmin, avg=float(avgs[j]) if avgs is not None and ran else None,
            max=tmax, buckets=col_b[j], counts=col_c[j], has_histogram=True, unit_ns=1 if nsecs else 1000,
            avg_truncated=True, overflows=ovfs[j],
            overflow_cycles=tuple(ol.cycles) if ol else None, overflow_cycles_omitted=ol.omitted if ol else None,
        ))

    tids = trailer.get("thread_ids")
    if tids is not None and len(tids[1]) != n:
        raise CyclictestOutputError(f"{len(tids[1])} thread ids for {n} threads", line=tids[0])
    single = {}
    for key in ("break_thread", "break_value"):
        if key in trailer:
            if len(trailer[key][1]) != 1:
                raise CyclictestOutputError("one number expected", line=trailer[key][0])
            single[key] = trailer[key][1][0]
    dma = None
    for ln in preamble:
        m = _DMA.fullmatch(ln.strip())
        if m:
            dma = int(m.group(1))
    return HistogramOutput(
        threads=tuple(threads), unit_ns=1 if nsecs else 1000, histofall=row_summary, totals=totals,
        histogram_range=hist_range, smis=tuple(footer["smis"][1]) if "smis" in footer else None,
        thread_ids=tuple(tids[1]) if tids else None, break_thread=single.get("break_thread"),
        break_value=single.get("break_value"), dma_latency_us=dma,
        status=tuple(sorted(_status(preamble, strict=False, first_line=1).values(), key=lambda s: s.index)),
    )


def _status(lines: list[str], *, strict: bool, first_line: int) -> dict[int, StatusLine]:
    last: dict[int, StatusLine] = {}
    for k, raw in enumerate(lines):
        line = _ANSI.sub("", raw).strip()
        if not line.startswith("T:") or "Spike:" in line:
            continue
        m = _STATUS.fullmatch(line)
        if m is None:
            # the last line of a live stream may be half written
            if strict and k != len(lines) - 1:
                raise CyclictestOutputError(f"malformed status line {line[:60]!r}", line=first_line + k)
            continue
        g = [int(x) if x is not None else None for x in m.groups()]
        if g[0] >= MAX_THREADS:
            if strict:
                raise CyclictestOutputError(f"thread {g[0]}: more than {MAX_THREADS} threads", line=first_line + k)
            continue
        last[g[0]] = StatusLine(*g)  # type: ignore[arg-type]
    return last


def parse_status_lines(data: str | bytes) -> dict[int, StatusLine]:
    """The last ``T: N (...)`` status line of each thread, from live (not quiet) stdout or the final
    lines of ``-q`` without -h. ANSI escapes, the ``policy:`` lines, spikes and everything else
    are skipped; a garbled status line is an error unless it is the last, unfinished, line (a
    finished last line ends with a newline, after which _lines() yields one more, empty, line)."""
    return _status(_lines(_text(data)), strict=True, first_line=1)


# ---------------------------------------------------------------------------------- JSON

_BAD_NUMBER = re.compile(r"(:[ \t]*)-?(?:nan|inf(?:inity)?)\b", re.IGNORECASE)
_STRING_LINE = re.compile(r'^([ \t]*"[^"\\\n]*"[ \t]*:[ \t]*")(.*)("[ \t]*,?[ \t]*)$')


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise CyclictestOutputError(f"duplicate key {k[:40]!r}")
        d[k] = v
    return d


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_no_duplicates)


def _repair(text: str) -> tuple[str, list[str]]:
    """Fix what cyclictest itself gets wrong: unescaped strings (the command line) and NaN."""
    repairs = []
    out = []
    for ln in text.split("\n"):
        m = _STRING_LINE.match(ln)
        if m:
            try:
                json.loads('"' + m.group(2) + '"')
            except ValueError:
                ln = m.group(1) + json.dumps(m.group(2), ensure_ascii=False)[1:-1] + m.group(3)
                repairs.append(f"escaped the string of {m.group(1).strip()[:-1].strip()}")
        out.append(ln)
    fixed, k = _BAD_NUMBER.subn(r"\1null", "\n".join(out))
    if k:
        repairs.append(f"read {k} nan/inf number(s) as null")
    return fixed, repairs


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if re.fullmatch(r"[A-Za-z0-9_:]+", key) else f"{parent}[{json.dumps(key)}]"


def _get(obj: dict, key: str, parent: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    if key not in obj:
        if optional:
            return None
        raise CyclictestOutputError(f"missing key {key!r}", path=parent)
    v = obj[key]
    ok = (type(v) is int) if kind is int else isinstance(v, kind) and not isinstance(v, bool)
    if not ok:
        raise CyclictestOutputError(f"{type(v).__name__} where {getattr(kind, '__name__', kind)} belongs",
                                    path=_path(parent, key))
    return v


def _bounded(v: int, path: str, lo: int, hi: int) -> int:
    if not lo <= v <= hi:
        raise CyclictestOutputError(f"{v} is out of range ({lo}..{hi})", path=path)
    return v


def _either(obj: dict, keys: tuple[str, str], parent: str) -> str:
    present = [k for k in keys if k in obj]
    if len(present) != 1:
        raise CyclictestOutputError(f"expected one of the keys {keys}", path=parent)
    return _get(obj, present[0], parent, str)


def _atoi(s: str) -> int:
    m = re.match(r"\s*([+-]?[0-9]{1,12})", s, re.ASCII)
    return int(m.group(1)) if m else 0


def histogram_option(cmdline: str) -> int | None:
    """The -h/-H/--histogram/--histofall value of a cyclictest command line (the last one, as
    cyclictest takes it, clamped to its HIST_MAX), or None. The line's quoting is lost: best effort."""
    toks = cmdline.split()
    hist = None
    i = 1
    while i < len(toks):
        tok = toks[i]
        i += 1
        if tok == "--":
            break
        if tok.startswith("--"):
            name, eq, val = tok[2:].partition("=")
            if name in ("histogram", "histofall"):
                if not eq:
                    if i >= len(toks):
                        break
                    val, i = toks[i], i + 1
                hist = _atoi(val)
        elif tok.startswith("-") and len(tok) > 1:
            for j in range(1, len(tok)):
                c = tok[j]
                if c in _SHORT_WITH_ARG:
                    val = tok[j + 1 :]
                    if not val and i < len(toks):
                        val, i = toks[i], i + 1
                    if c in "hH":
                        hist = _atoi(val)
                    break
    return min(hist, HIST_MAX) if hist is not None and hist > 0 else None


def parse_json(data: str | bytes) -> CyclictestReport:
    """Parse the file of ``cyclictest --json=FILE`` (rt-tests 2.0 and later)."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise CyclictestOutputError(f"not UTF-8 (byte {e.start})",
                                        line=bytes(data)[: e.start].count(b"\n") + 1) from None
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"cyclictest JSON must be str or bytes, not {type(data).__name__}")
    repairs: list[str] = []
    try:
        doc = _loads(text)
    except CyclictestOutputError:
        raise
    except (ValueError, RecursionError) as first:
        fixed, repairs = _repair(text)
        try:
            if not repairs:
                raise
            doc = _loads(fixed)
        except CyclictestOutputError:
            raise
        except (ValueError, RecursionError):
            if isinstance(first, json.JSONDecodeError):
                raise CyclictestOutputError(f"not JSON: {first.msg} (column {first.colno})",
                                            line=first.lineno) from None
            raise CyclictestOutputError(f"not JSON: {str(first)[:80] or type(first).__name__}") from None
    return _report(doc, tuple(repairs))


def _report(doc: Any, repairs: tuple[str, ...]) -> CyclictestReport:
    if not isinstance(doc, dict):
        raise CyclictestOutputError(f"{type(doc).__name__} where the object belongs", path="$")
    cmdline = _either(doc, ("cmdline:", "cmdline"), "$")
    version = _either(doc, ("rt_test_version:", "rt_test_version"), "$")
    si = _get(doc, "sysinfo", "$", dict)
    realtime = _get(si, "realtime", "$.sysinfo", int)
    sysinfo = SysInfo(
        release=_get(si, "release", "$.sysinfo", str), version=_get(si, "version", "$.sysinfo", str),
        realtime=bool(_bounded(realtime, "$.sysinfo.realtime", 0, 1)),
        sysname=_get(si, "sysname", "$.sysinfo", str, optional=True),
        nodename=_get(si, "nodename", "$.sysinfo", str, optional=True),
        machine=_get(si, "machine", "$.sysinfo", str, optional=True),
    )
    n = _bounded(_get(doc, "num_threads", "$", int), "$.num_threads", 0, MAX_THREADS)
    res = _get(doc, "resolution_in_ns", "$", int)
    if res not in (0, 1, 1000):  # it is the -N flag; 1000 read as "µs" should a version write the unit
        raise CyclictestOutputError(f"{res}: expected 0 or 1 (the -N flag)", path="$.resolution_in_ns")
    nsecs = res == 1
    unit = 1 if nsecs else 1000
    hist_range = histogram_option(cmdline)
    tobj = _get(doc, "thread", "$", dict)
    want = {str(i) for i in range(n)}
    if set(tobj) != want:
        odd = sorted(set(tobj) ^ want, key=lambda k: (len(k), k))[:3]
        raise CyclictestOutputError(f"thread keys must be 0..{n - 1} (num_threads {n}); odd: {odd}", path="$.thread")
    threads = tuple(_json_thread(tobj[str(i)], i, f"$.thread.{i}", unit, hist_range) for i in range(n))
    return CyclictestReport(
        file_version=_bounded(_get(doc, "file_version", "$", int), "$.file_version", 1, 10**6),
        cmdline=cmdline, rt_test_version=version,
        start_time=_get(doc, "start_time", "$", str), end_time=_get(doc, "end_time", "$", str),
        return_code=_bounded(_get(doc, "return_code", "$", int), "$.return_code", -(2**31), 2**31 - 1),
        sysinfo=sysinfo, num_threads=n, nsecs=nsecs, unit_ns=unit, histogram_range=hist_range,
        threads=threads, repairs=repairs,
    )


def _json_thread(t: Any, index: int, path: str, unit: int, hist_range: int | None) -> CyclictestThread:
    if not isinstance(t, dict):
        raise CyclictestOutputError(f"{type(t).__name__} where an object belongs", path=path)
    cycles = _bounded(_get(t, "cycles", path, int), f"{path}.cycles", 0, MAX_COUNT)
    tmin = _bounded(_get(t, "min", path, int), f"{path}.min", -MAX_COUNT, MAX_COUNT)
    tmax = _bounded(_get(t, "max", path, int), f"{path}.max", -MAX_COUNT, MAX_COUNT)
    if "avg" not in t:
        raise CyclictestOutputError("missing key 'avg'", path=path)
    avg = t["avg"]
    if avg is not None and (type(avg) not in (int, float) or not math.isfinite(avg)):
        if type(avg) is float:  # a NaN spelled the JSON way
            avg = None
        else:
            raise CyclictestOutputError(f"{type(avg).__name__} where a number belongs", path=f"{path}.avg")
    cpu = _bounded(_get(t, "cpu", path, int), f"{path}.cpu", -1, 2**31 - 1)
    node = _bounded(_get(t, "node", path, int), f"{path}.node", -1, 2**31 - 1)
    hobj = _get(t, "histogram", path, dict, optional=True)
    buckets: list[int] = []
    counts: list[int] = []
    if hobj is not None:
        hpath = f"{path}.histogram"
        items = []
        for k, v in hobj.items():
            if not _UINT.fullmatch(k) or int(k) > MAX_BUCKET:
                raise CyclictestOutputError(f"bucket {k[:40]!r} is not an index 0..{MAX_BUCKET}", path=hpath)
            if type(v) is not int or not 0 <= v <= MAX_COUNT:
                raise CyclictestOutputError(f"count {str(v)[:40]} out of range", path=_path(hpath, k))
            if v:
                items.append((int(k), v))
        items.sort()
        if any(a[0] == b[0] for a, b in zip(items, items[1:], strict=False)):
            raise CyclictestOutputError("a bucket appears twice", path=hpath)
        buckets = [b for b, _ in items]
        counts = [c for _, c in items]
    if cycles:
        if avg is None:
            raise CyclictestOutputError(f"no average for {cycles} cycles", path=f"{path}.avg")
        if not tmin - 0.005 <= avg <= tmax + 0.005:  # avg is printed with %.2f
            raise CyclictestOutputError(f"avg {avg} outside min {tmin} .. max {tmax}", path=path)
        if buckets and (buckets[0] < tmin or buckets[-1] > tmax):
            raise CyclictestOutputError(f"buckets {buckets[0]}..{buckets[-1]} outside min {tmin} .. max {tmax}",
                                        path=f"{path}.histogram")
    thread = CyclictestThread(
        index=index, cycles=cycles, min=tmin if cycles else None, avg=float(avg) if cycles else None,
        max=tmax if cycles else None, buckets=buckets, counts=counts,
        has_histogram=hobj is not None and (bool(buckets) or hist_range is not None),
        unit_ns=unit, avg_truncated=False, cpu=cpu, node=node,
    )
    if thread.in_range > cycles:
        raise CyclictestOutputError(f"{thread.in_range} samples in the histogram, {cycles} cycles",
                                    path=f"{path}.histogram")
    return thread
