"""cyclictest's text: the histogram and summary that -h/-H print on stdout, and the live status
lines; rt-tests 0.66 to 2.10 (the formats in station/parsers/cyclictest/__init__.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from station.parsers.cyclictest.model import (
    _ANSI,
    _DMA,
    _STATUS,
    _THREAD_LINE,
    _UINT,
    HIST_MAX,
    MAX_BUCKET,
    MAX_COUNT,
    MAX_THREADS,
    CyclictestOutputError,
    CyclictestThread,
    HistogramOutput,
    StatusLine,
)

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
        raise CyclictestOutputError(f"{what}: {len(toks)} columns, more than {MAX_THREADS} threads",
                                    line=line)
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
            raise CyclictestOutputError("expected '# N others' after the overflow cycle numbers",
                                        line=line)
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
    start = next((i for i, ln in enumerate(lines) if _ANSI.sub("", ln).rstrip() == "# Histogram"),
                 None)
    if start is None:
        raise CyclictestOutputError("no '# Histogram' line: not the stdout of cyclictest -h",
                                    line=len(lines))
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
                    raise CyclictestOutputError("a histogram row needs a bucket and a count",
                                                line=lineno)
                if len(toks) > MAX_THREADS + 2:
                    raise CyclictestOutputError(f"{len(toks) - 1} columns: more than {MAX_THREADS} "
                                                "threads",
                                                line=lineno)
                bucket = _uint(toks[0], lineno, "bucket", MAX_BUCKET)
                if bucket <= last_bucket:
                    raise CyclictestOutputError(f"bucket {bucket} after bucket {last_bucket}",
                                                line=lineno)
                vals = [_uint(t, lineno, "count") for t in toks[1:]]
                if width is None:
                    width = len(vals)
                    col_b, col_c, col_sum = [[] for _ in vals], [[] for _ in vals], [0] * width
                elif len(vals) != width:
                    raise CyclictestOutputError(f"{len(vals)} counts in a row of {width}",
                                                line=lineno)
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
                    raise CyclictestOutputError("'# Thread N:' line outside the overflow list",
                                                line=lineno)
                overflow_lines.append(_overflow_line(m, lineno))
                rank = _RANK["thread"]
                continue
            key = next((k for k, prefixes in _FOOTER for p in prefixes if line.startswith(p)), None)
            if key is not None:
                if key in footer or _RANK[key] < rank:
                    raise CyclictestOutputError(f"'{line[:40]}' repeated or out of order",
                                                line=lineno)
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
            raise CyclictestOutputError(f"unexpected line after the histogram: {line[:60]!r}",
                                        line=lineno)

    return _histogram_output(lines, preamble, footer, overflow_lines, trailer, width, n_rows,
                             last_bucket,
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
        raise CyclictestOutputError(f"{n} threads (1 to {MAX_THREADS} expected)",
                                    line=footer["max"][0])
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
            raise CyclictestOutputError(f"{len(footer[key][1])} figures where {want} belong",
                                        line=footer[key][0])
    # 2.7+ print the rows' summary column with -H even for one thread, but not the Max/Overflows one
    row_summary = histofall or (n == 1 and width == 2)
    if width is not None and width != n + row_summary:
        raise CyclictestOutputError(f"histogram rows have {width} counts, {n + row_summary} "
                                    "expected", line=end)
    if width is None:
        col_b, col_c, col_sum = [[] for _ in range(cols)], [[] for _ in range(cols)], [0] * cols
    ovf_line, ovfs = footer["overflows"]
    if row_summary and first_not_summary is not None and n_rows:
        raise CyclictestOutputError("the summary column is not the sum of the threads",
                                    line=first_not_summary)
    if histofall:
        if maxes[n] != max(maxes[:n]):
            raise CyclictestOutputError("the summary maximum is not the largest", line=max_line)
        if ovfs[n] != sum(ovfs[:n]):
            raise CyclictestOutputError("the summary overflow count is not the sum", line=ovf_line)
    totals = None
    if "total" in footer:
        total_line, totals_list = footer["total"]
        if totals_list != col_sum[:cols]:
            raise CyclictestOutputError(f"'# Total:' {totals_list[:8]} is not the sum of the rows "
                                        f"{col_sum[:8]}",
                                        line=total_line)
        totals = tuple(totals_list)
    if "overflow_at" in footer and len(overflow_lines) != n:
        raise CyclictestOutputError(
            f"{len(overflow_lines)} '# Thread N:' overflow lines for {n} threads",
            line=overflow_lines[-1].line if overflow_lines else footer["overflow_at"][0],
        )
    for j, ol in enumerate(overflow_lines):
        if ol.index != j:
            raise CyclictestOutputError(f"overflow line of thread {ol.index} where thread {j} "
                                        "belongs", line=ol.line)
        if len(ol.cycles) + ol.omitted != ovfs[j]:
            raise CyclictestOutputError(
                f"thread {j}: {len(ol.cycles)} cycle numbers + {ol.omitted} others != {ovfs[j]} "
                "overflows",
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
                raise CyclictestOutputError(f"thread {j}: bucket {col_b[j][0]} below the minimum "
                                            f"{tmin}",
                                            line=footer["min"][0])
            if col_b[j][-1] > tmax:
                raise CyclictestOutputError(f"thread {j}: bucket {col_b[j][-1]} above the maximum "
                                            f"{tmax}",
                                            line=max_line)
        if ran and hist_range is not None and ovfs[j] and tmax < hist_range:
            raise CyclictestOutputError(f"thread {j}: overflows, yet the maximum {tmax} is within "
                                        f"-h {hist_range}",
                                        line=ovf_line)
        ol = overflow_lines[j] if overflow_lines else None
        threads.append(CyclictestThread(
            index=j, cycles=cycles, min=tmin,
            avg=float(avgs[j]) if avgs is not None and ran else None,
            max=tmax, buckets=col_b[j], counts=col_c[j], has_histogram=True,
            unit_ns=1 if nsecs else 1000,
            avg_truncated=True, overflows=ovfs[j],
            overflow_cycles=tuple(ol.cycles) if ol else None,
            overflow_cycles_omitted=ol.omitted if ol else None,
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
        status=tuple(sorted(_status(preamble, strict=False, first_line=1).values(),
                            key=lambda s: s.index)),
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
                raise CyclictestOutputError(f"malformed status line {line[:60]!r}",
                                            line=first_line + k)
            continue
        g = [int(x) if x is not None else None for x in m.groups()]
        if g[0] >= MAX_THREADS:
            if strict:
                raise CyclictestOutputError(f"thread {g[0]}: more than {MAX_THREADS} threads",
                                            line=first_line + k)
            continue
        last[g[0]] = StatusLine(*g)  # type: ignore[arg-type]
    return last


def parse_status_lines(data: str | bytes) -> dict[int, StatusLine]:
    """The last ``T: N (...)`` status line of each thread, from live (not quiet) stdout or the final
    lines of ``-q`` without -h. ANSI escapes, the ``policy:`` lines, spikes and everything else
    are skipped; a garbled status line is an error unless it is the last, unfinished, line (a
    finished last line ends with a newline, after which _lines() yields one more, empty, line)."""
    return _status(_lines(_text(data)), strict=True, first_line=1)
