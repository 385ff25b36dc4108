"""What `rtla osnoise top -q` prints at its end: the kernel's osnoise tracer's per-CPU summary
(rtla 6.x). The table is drawn with ANSI colours; its columns, in µs and counts:

    CPU Period Runtime Noise % CPU Aval Max Noise Max Single HW NMI IRQ Softirq Thread
      1 #5     5000196 121677  97.56655   26414       482     1828  0  1265     0     139

HW counts the noise the tracer could tie to no interrupt, NMI, softirq or thread: the
hardware, firmware (SMI) or a hypervisor — what the station's detector calls unexplained."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HEADER = re.compile(
    r"^\s*CPU\s+Period\s+Runtime\s+Noise\s+%\s*CPU\s+Aval\s+Max\s+Noise\s+Max\s+Single\s+HW\s+NMI"
    r"\s+IRQ\s+Softirq\s+Thread\s*$"
)
_ROW = re.compile(
    r"^\s*(\d+)\s+#(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
    r"\s+(\d+)\s+(\d+)\s*$"
)
# the seconds end the figure: "00:00:0#3" is no duration, not 0 s
_DURATION = re.compile(r"duration:\s+(\d+)\s+(\d+):(\d+):(\d+)(?=\s|\||$)")


class RtlaOutputError(ValueError):
    """rtla printed something that is not its osnoise summary."""


@dataclass(frozen=True)
class OsnoiseRow:
    cpu: int
    periods: int
    runtime_us: int
    noise_us: int
    available_pct: float
    max_noise_us: int
    max_single_us: int
    hw: int
    nmi: int
    irq: int
    softirq: int
    thread: int


@dataclass(frozen=True)
class OsnoiseTop:
    duration_s: int | None
    rows: list[OsnoiseRow]


def parse_osnoise_top(text: str) -> OsnoiseTop:
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if header is None:
        raise RtlaOutputError("no osnoise summary table (rtla osnoise top -q) in its output")
    rows = []
    for line in lines[header + 1:]:
        if m := _ROW.match(line):
            g = m.groups()
            rows.append(OsnoiseRow(int(g[0]), int(g[1]), int(g[2]), int(g[3]), float(g[4]),
                                   *(int(x) for x in g[5:])))
        elif line.strip():
            break
    duration = None
    for line in lines[:header]:
        if d := _DURATION.search(line):
            days, h, mi, sec = (int(x) for x in d.groups())
            duration = ((days * 24 + h) * 60 + mi) * 60 + sec
    return OsnoiseTop(duration, rows)
