"""Events of one CPU's tracefs buffer, with their nanosecond timestamps.

tracefs prints an event's time in microseconds (`sec.usec`, rounded) whatever the clock's
resolution; with `options/raw` it prints the same events, in the same order, as
`<pid> <cpu> <ns> type: <id>` with the timestamp in nanoseconds but without the event's fields.
Read both (station.target.irqtrace.TraceSession.read_exact) and this module puts them together:
the fields from the printed form, the time from the raw form, event by event, after checking that
the two agree (same count, each raw type id the printed event's, each time the same to the
rounding). Where they do not, the printed microseconds are kept and the resolution says so.

A printed line looks like
    `          <idle>-0       [001] d.h1.   123.456789: local_timer_entry: vector=236`
(the flags column and a `(tgid)` column come and go with trace options); a buffer that
overflowed says `CPU:1 [LOST 12 EVENTS]` where events are missing. Lines this parser does not
know are skipped: tracefs output is the kernel's. Imports nothing of the station."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LINE = re.compile(
    r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>\S{4,8})\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d{1,9}):\s+(?P<event>\w+):\s?(?P<args>.*)$"
)
LOST = re.compile(r"CPU:?\s*\d+\s*\[LOST (\d+) EVENTS\]")
_RAW = re.compile(r"^(?P<pid>\d+) (?P<cpu>\d+) (?P<ns>\d+) (?:type: (?P<type>\d+)|# [0-9a-f]+ .*)$")
# a write to trace_marker: its raw form is "# <ip> <text>", no type id
MARKER_EVENT = "tracing_mark_write"
_COLUMN = re.compile(r"^#.*=>\s*(?P<name>\S.*?)\s*$")  # a flags column's line in the header
CONTEXT_COLUMN = "hardirq/softirq"
_ID = re.compile(r"^(?:.*/)?(?P<system>\w+)/(?P<event>\w+)/id:(?P<id>\d+)$")
MAX_TS_NS = 1 << 63


def printed_ns(sec: str, frac: str) -> int:
    return int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


@dataclass(frozen=True)
class Event:
    ts_ns: int
    name: str  # the event's name (irq_handler_entry)
    args: str  # its printed fields
    comm: str
    pid: int
    # the flags' hardirq/softirq letter (its column from the header: PREEMPT_RT adds columns before
    # it): h/H hard IRQ, s softirq, z NMI, . none ("": unknown)
    context: str = ""


@dataclass
class TraceEvents:
    events: list[Event] = field(default_factory=list)  # in the buffer's order (time order)
    # positions in `events` before which the buffer lost events, with how many
    lost: list[tuple[int, int]] = field(default_factory=list)
    resolution_ns: int = 1000  # 1: the raw form's nanoseconds; 1000: the printed microseconds
    note: str | None = None  # why the resolution is the printed one

    @property
    def lost_events(self) -> int:
        return sum(n for _, n in self.lost)


def _printed(text: str) -> TraceEvents:
    got = TraceEvents()
    columns: list[str] = []  # the flags columns the header names, in order (PREEMPT_RT has more)
    for line in text.splitlines():
        if line.startswith("#"):
            if m := _COLUMN.match(line):
                columns.append(m["name"])
            continue
        if lost := LOST.search(line):
            got.lost.append((len(got.events), int(lost.group(1))))
            continue
        m = LINE.match(line)
        if not m:
            continue
        ts = printed_ns(m["sec"], m["frac"])
        if ts >= MAX_TS_NS:
            continue
        flags = m["flags"] or ""
        at = columns.index(CONTEXT_COLUMN) if CONTEXT_COLUMN in columns else 2
        got.events.append(Event(ts, m["event"], m["args"], m["comm"], int(m["pid"]),
                                flags[at:at + 1]))
    return got


def _event_ids(ids: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for line in ids.splitlines():
        if m := _ID.match(line.strip()):
            out[int(m["id"])] = m["event"]
    return out


def parse(text: str, raw: str = "", ids: str = "") -> TraceEvents:
    """The events of a per-CPU `trace` file; nanoseconds from its raw form where the two agree."""
    got = _printed(text)
    if not got.events:
        return got
    if not raw:
        got.note = "no raw form of the trace was read: times at the printed microsecond"
        return got
    names = _event_ids(ids)
    stamps: list[tuple[int, int | None]] = []
    for line in raw.splitlines():
        if m := _RAW.match(line.strip()):
            stamps.append((int(m["ns"]), int(m["type"]) if m["type"] is not None else None))
    if len(stamps) != len(got.events):
        got.note = (f"the raw form has {len(stamps)} events and the printed one {len(got.events)} "
                    "(read apart while the buffer changed?): times at the printed microsecond")
        return got
    exact = []
    for event, (ns, type_id) in zip(got.events, stamps, strict=True):
        name = names.get(type_id) if type_id is not None else MARKER_EVENT
        if name != event.name or abs(ns - event.ts_ns) >= 1000 or ns >= MAX_TS_NS:
            got.note = (f"the raw form's event at {ns} ns (type {type_id}: "
                        f"{names.get(type_id, 'unknown')}) is not the printed {event.name} at "
                        f"{event.ts_ns} ns: times at the printed microsecond")
            return got
        exact.append(Event(ns, event.name, event.args, event.comm, event.pid, event.context))
    got.events = exact
    got.resolution_ns = 1
    return got
