"""What the monitor did, one JSON line per window (or gap), appended as it happens: the store's
memory across restarts (a restarted monitor resumes its schedule from it, never measuring a window
twice) and what the overview pages are drawn from."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LEDGER = "monitor-ledger.jsonl"


@dataclass(frozen=True)
class Entry:
    cycle: int
    phase: str
    window: int  # 0-based within the phase's cycle
    status: str  # complete | incomplete | failed | gap
    started: float  # unix time
    ended: float
    target: str = "target"
    campaign_dir: str | None = None  # relative to the store
    run_id: str | None = None
    max_ns: float | None = None  # the window's latency maximum
    kernel: str | None = None  # uname -r of the target
    reason: str | None = None  # a gap's or a failure's

    @property
    def key(self) -> tuple[int, str, int]:
        return self.cycle, self.phase, self.window


class Ledger:
    def __init__(self, store: Path) -> None:
        self.path = Path(store) / LEDGER

    def entries(self) -> list[Entry]:
        """Every entry written; a line cut by a crash (the last one) is skipped."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                data: dict[str, Any] = json.loads(line)
                out.append(Entry(**data))
            except (ValueError, TypeError):
                continue
        return out

    def append(self, entry: Entry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():  # a line cut by a crash is ended first: it never swallows this one
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write((json.dumps(asdict(entry), sort_keys=True) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())
