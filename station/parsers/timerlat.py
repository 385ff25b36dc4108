"""What `rtla timerlat hist` prints (rtla 6.1, Debian 12's, to 6.12 at least): the kernel's timerlat
tracer's per-CPU histograms of the timer IRQ's and the timerlat thread's latency, then their
summary.

    # RTLA timerlat histogram                       (the header: absent with --no-header)
    # Time unit is microseconds (us)                (or nanoseconds (ns), with -n)
    # Duration:   0 00:00:03                        (days, then HH:MM:SS)
    Index   IRQ-000   Thr-000   IRQ-001   Thr-001   (Index absent with --no-index; Usr-NNN with -u)
    3             0         0         1         0   (a bucket's lower bound, then its count per
    column) over:       385       636       475       597   (samples beyond the last bucket)
    count:     2508      2508      2518      2518
    min:         15        43         3        29   ("-" where a column has no sample; with
    --no-index
                                                    the five summary rows come without their labels)
    avg:        264       396       306       391
    max:      11989     12207     13301     13393
    ALL:        IRQ       Thr                       (rtla 6.6 and later: every CPU together)
    count: …  min: …  avg: …  max: …

A run stopped by a threshold (-a, -i, -T) ends with "rtla timerlat hit stop tracing"; rtla 6.3
and later then print their auto-analysis ("## CPU 0 hit stop tracing, analyzing it ##" …), kept
here as text. `parse_hist` is strict: an unknown line before the summary ends, a row whose cells
do not match the columns, or a missing summary raises TimerlatOutputError naming the line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_UNIT = re.compile(r"# Time unit is (microseconds \(us\)|nanoseconds \(ns\))\s*")
_DURATION = re.compile(r"# Duration:\s+(\d+) (\d{2}):(\d{2}):(\d{2})\s*")
_COLUMN = re.compile(r"(IRQ|Thr|Usr)-(\d{3,})")
_UINT = re.compile(r"0|[1-9]\d*")
STAT_ROWS = ("over", "count", "min", "avg", "max")
ALL_ROWS = ("count", "min", "avg", "max")
KIND_NAMES = {"IRQ": "irq", "Thr": "thread", "Usr": "user"}
STOP_LINE = "rtla timerlat hit stop tracing"


class TimerlatOutputError(ValueError):
    """rtla printed something that is not a timerlat histogram."""


@dataclass(frozen=True)
class Column:
    kind: str  # irq, thread or user
    cpu: int


@dataclass(frozen=True)
class Summary:
    """One column's figures, in the output's unit; None where rtla printed "-" (no sample)."""

    count: int
    over: int | None  # samples beyond the last bucket (none in the ALL section)
    min: int | None
    avg: int | None
    max: int | None


@dataclass(frozen=True)
class TimerlatHist:
    unit_ns: int  # 1000 (microseconds) or 1 (nanoseconds, -n)
    duration_s: int | None  # None without the header
    columns: list[Column]
    buckets: list[int]  # each row's lower bound, in the unit (empty with --no-index: unknown)
    counts: list[list[int]]  # per row, per column
    summary: list[Summary]  # per column
    overall: dict[str, Summary] = field(default_factory=dict)  # kind -> every CPU (rtla 6.6+: ALL)
    stopped: bool = False  # a threshold stopped the run
    analysis: str = ""  # what rtla printed after the summary (its auto-analysis, the trace file)

    def by_cpu(self) -> dict[int, dict[str, Summary]]:
        """cpu -> kind -> its summary."""
        out: dict[int, dict[str, Summary]] = {}
        for col, s in zip(self.columns, self.summary, strict=True):
            out.setdefault(col.cpu, {})[col.kind] = s
        return out


def _cells(text: str, n: int, lineno: int, line: str, dash: bool = False) -> list[int | None]:
    cells = text.split()
    if len(cells) != n:
        raise TimerlatOutputError(f"line {lineno}: {len(cells)} values for {n} columns: {line!r}")
    out: list[int | None] = []
    for c in cells:
        if dash and c == "-":
            out.append(None)
        elif _UINT.fullmatch(c) and len(c) <= 20:
            out.append(int(c))
        else:
            raise TimerlatOutputError(f"line {lineno}: {c!r} is not a count: {line!r}")
    return out


def parse_hist(text: str) -> TimerlatHist:
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    unit_ns, duration_s = 1000, None
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        line = lines[i]
        if m := _UNIT.fullmatch(line):
            unit_ns = 1 if m.group(1).startswith("nano") else 1000
        elif m := _DURATION.fullmatch(line):
            d, hh, mm, ss = (int(x) for x in m.groups())
            duration_s = ((d * 24 + hh) * 60 + mm) * 60 + ss
        elif line.strip() and line.strip() != "# RTLA timerlat histogram":
            raise TimerlatOutputError(f"line {i + 1}: not a timerlat header line: {line!r}")
        i += 1
    if i == len(lines):
        raise TimerlatOutputError("no timerlat histogram (rtla timerlat hist) in its output")
    titled = any(line.strip() == "# RTLA timerlat histogram" for line in lines[:i])
    head = lines[i].split()
    indexed = bool(head) and head[0] == "Index"
    names = head[1:] if indexed else head
    columns = []
    for name in names:
        if not (m := _COLUMN.fullmatch(name)):
            if not titled:  # rtla's own error message, most likely
                raise TimerlatOutputError("no timerlat histogram in rtla's output, which says: "
                                          f"{lines[i][:200]!r}")
            raise TimerlatOutputError(f"line {i + 1}: {name!r} is not a timerlat column: "
                                      f"{lines[i]!r}")
        columns.append(Column(KIND_NAMES[m.group(1)], int(m.group(2))))
    if not columns or len(set(columns)) != len(columns):
        raise TimerlatOutputError(f"line {i + 1}: no columns, or one twice: {lines[i]!r}")
    n = len(columns)
    buckets: list[int] = []
    counts: list[list[int]] = []
    stats: dict[str, list[int | None]] = {}
    i += 1
    while indexed and i < len(lines) and len(stats) < len(STAT_ROWS):
        line = lines[i]
        key, _, rest = line.partition(":")
        if key.strip() in STAT_ROWS and not line.startswith(" "):
            key = key.strip()
            if (
                key in stats
                or list(stats) != list(STAT_ROWS[: len(stats)])
                or key != STAT_ROWS[len(stats)]
            ):
                raise TimerlatOutputError(f"line {i + 1}: summary row {key!r} out of order: "
                                          f"{line!r}")
            stats[key] = _cells(rest, n, i + 1, line, dash=key in ("min", "avg", "max"))
        elif stats:
            raise TimerlatOutputError(f"line {i + 1}: not a summary row: {line!r}")
        else:
            if len(line.split()) != n + 1:
                raise TimerlatOutputError(f"line {i + 1}: a bucket row is its index and {n} "
                                          f"counts: {line!r}")
            row = _cells(line, n + 1, i + 1, line)
            if buckets and row[0] <= buckets[-1]:  # type: ignore[operator]
                raise TimerlatOutputError(f"line {i + 1}: bucket {row[0]} after {buckets[-1]}: "
                                          f"{line!r}")
            buckets.append(row[0])  # type: ignore[arg-type]
            counts.append(row[1:])  # type: ignore[arg-type]
        i += 1
    # --no-index drops the summary's labels too: its rows are the last five
    if not indexed and not stats:
        while i < len(lines) and lines[i].strip() and lines[i].split()[0].isdigit():
            counts.append(_cells(lines[i], n, i + 1, lines[i]))  # type: ignore[arg-type]
            i += 1
        if len(counts) >= len(STAT_ROWS):
            stats = dict(zip(STAT_ROWS, counts[-len(STAT_ROWS):],
                             strict=True))  # type: ignore[arg-type]
            counts = counts[:-len(STAT_ROWS)]
    if len(stats) < len(STAT_ROWS):
        raise TimerlatOutputError("the summary (over:, count:, min:, avg:, max:) is missing or cut "
                                  "short: was rtla stopped with SIGKILL, or run with --no-summary?")
    summary = [Summary(stats["count"][c], stats["over"][c], stats["min"][c],
                       stats["avg"][c],  # type: ignore[arg-type]
                       stats["max"][c]) for c in range(n)]
    for c, s in enumerate(summary):
        if sum(row[c] for row in counts) + (s.over or 0) > s.count:
            raise TimerlatOutputError(f"column {names[c]}: its buckets and overflows hold more "
                                      "than its count")
    overall: dict[str, Summary] = {}
    if i < len(lines) and lines[i].startswith("ALL:"):
        kinds = lines[i].split()[1:]
        if not kinds or any(k not in KIND_NAMES for k in kinds):
            raise TimerlatOutputError(f"line {i + 1}: not an ALL: header: {lines[i]!r}")
        rows: dict[str, list[int | None]] = {}
        for key in ALL_ROWS:
            i += 1
            if i >= len(lines) or lines[i].partition(":")[0] != key:
                raise TimerlatOutputError(f"line {i + 1}: the ALL section's {key}: row is missing")
            rows[key] = _cells(lines[i].partition(":")[2], len(kinds), i + 1, lines[i],
                               dash=key != "count")
        overall = {KIND_NAMES[k]: Summary(rows["count"][j], None, rows["min"][j],
                                          rows["avg"][j],  # type: ignore[arg-type]
                                          rows["max"][j]) for j, k in enumerate(kinds)}
        i += 1
    rest = [line for line in lines[i:] if line.strip()]
    stopped = any(line.strip() == STOP_LINE for line in rest)
    return TimerlatHist(unit_ns, duration_s, columns, buckets, counts, summary, overall, stopped,
                        "\n".join(rest))
