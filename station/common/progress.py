"""A run's progress as it happens: counts and running statistics, the phase, and
the sinks that show it (the terminal's is station/campaign/terminal.py)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class RunningStats:
    count: int = 0
    min: float = math.inf
    max: float = -math.inf
    total: float = 0.0

    def add(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        self.count += int(values.size)
        self.min = min(self.min, float(values.min()))
        self.max = max(self.max, float(values.max()))
        self.total += float(values.sum(dtype=np.float64))

    def add_summary(self, count: int, mean: float, low: float, high: float) -> None:
        """`count` values known only by their mean and extremes (a scope's own statistics)."""
        if count <= 0:
            return
        self.count += count
        self.min, self.max = min(self.min, low), max(self.max, high)
        self.total += mean * count

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan


@dataclass
class RunProgress:
    run_id: str
    index: int
    total_runs: int
    sw: RunningStats = field(default_factory=RunningStats)
    hw: RunningStats = field(default_factory=RunningStats)
    acquisitions: int = 0
    started: float = field(default_factory=time.monotonic)
    sw_target: int | None = None
    hw_target: int = 0
    duration_target: float | None = None
    phase: str = "starting"
    position: int | None = None  # its place in the file's order (reports list runs so); None: index
    # a probe run (e.g. "cyclictest"): no live samples, its results come at the end
    probe: str | None = None
    # the session's runs around this one (a campaign-wide ETA): when the first began, how many
    # were done before this one, how many come after it
    session_started: float | None = None
    session_done: int = 0
    session_left: int = 0
    # what measured each row, as the display names it (a gpio run's delays come from the scope)
    sw_label: str = "software t_SW"
    hw_label: str | None = "scope t_HW"  # None: the run has no second quantity

    def campaign_left_s(self, run_left_s: float) -> float:
        """Seconds until the session's last run ends: this run's rest, then each later run as long
        as the finished ones took on average (this one's whole, estimated, before any finished)."""
        if run_left_s != run_left_s or self.session_started is None:
            return float("nan")
        now = time.monotonic()
        if self.session_done:
            per_run = (self.started - self.session_started) / self.session_done
        else:
            per_run = now - self.started + run_left_s
        return run_left_s + self.session_left * per_run

    def fraction_done(self) -> float:
        """Every target must be met, so the run is as far along as its slowest one."""
        parts = []
        if self.sw_target:
            parts.append(self.sw.count / self.sw_target)
        if self.duration_target:
            parts.append((time.monotonic() - self.started) / self.duration_target)
        if self.hw_target:
            parts.append(self.hw.count / self.hw_target)
        return min(min(parts), 1.0) if parts else 0.0


class ProgressSink(Protocol):
    def update(self, progress: RunProgress) -> None: ...
    def message(self, text: str) -> None: ...


class QuietProgress:
    """A progress sink that keeps messages and prints nothing (notebooks, tests)."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.last: RunProgress | None = None

    def update(self, progress: RunProgress) -> None:
        self.last = progress

    def message(self, text: str) -> None:
        self.messages.append(text)
