"""Live progress on the terminal: samples and pulses so far, running
min/mean/max, time left. On a terminal it redraws one panel; elsewhere (CI,
pipes) it prints a plain line every few seconds."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from station.common.progress import RunProgress


def _us(ns: float) -> str:
    return "—" if ns != ns or ns in (float("inf"), float("-inf")) else f"{ns / 1000:.2f}"


class TerminalProgress:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.interactive = self.console.is_terminal
        self._live: Live | None = None
        self._last_plain = 0.0

    def __enter__(self) -> TerminalProgress:
        if self.interactive:
            self._live = Live(console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def message(self, text: str) -> None:
        # a message is one line
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def update(self, p: RunProgress) -> None:
        elapsed = time.monotonic() - p.started
        frac = p.fraction_done()
        left = (
            (elapsed / frac - elapsed) if frac > 0.01 and p.phase == "measuring" else float("nan")
        )
        if self._live is not None:
            self._live.update(self._table(p, frac, left))
        elif time.monotonic() - self._last_plain > 5 or p.phase == "teardown":
            self._last_plain = time.monotonic()
            eta = _eta(p, left)
            counts = (f"{p.probe} runs on the target, results at its end" if p.probe else
                      f"{p.sw_label} {p.sw.count} (min/mean/max "
                      f"{_us(p.sw.min)}/{_us(p.sw.mean)}/{_us(p.sw.max)} µs)"
                      + (f", {p.hw_label} {p.hw.count}" if p.hw_label else ""))
            print(f"[{p.index + 1}/{p.total_runs}] {p.run_id} {p.phase}: {counts}, {frac:.0%}"
                  + (f", {eta}" if eta else ""), file=sys.stderr, flush=True)

    @staticmethod
    def _table(p: RunProgress, frac: float, left: float) -> Table:
        t = Table(title=f"run {p.index + 1}/{p.total_runs}: {p.run_id} — {p.phase}",
                  title_justify="left")
        if p.probe:
            t.add_column(p.probe)
            t.add_row("runs on the target; its results come when it ends")
            t.caption = f"{frac:.0%} done" + ("" if left != left else f", about {left:.0f} s left")
            return t
        for col in ("", "count", "min µs", "mean µs", "max µs"):
            t.add_column(col, justify="right")
        t.add_row(p.sw_label, str(p.sw.count), _us(p.sw.min), _us(p.sw.mean), _us(p.sw.max))
        if p.hw_label:
            t.add_row(f"{p.hw_label} ({p.acquisitions} acq.)", str(p.hw.count), _us(p.hw.min),
                      _us(p.hw.mean),
                      _us(p.hw.max))
        t.caption = (
            f"{frac:.0%} done"
            + ("" if left != left else f", about {left:.0f} s left")
            + _eta(p, left, ", ")
        )
        return t


def _eta(p: RunProgress, run_left: float, sep: str = "") -> str:
    """The campaign's time left (runs after this one at the finished runs' pace), or ""."""
    if not p.session_left:
        return ""
    left = p.campaign_left_s(run_left)
    if left != left:
        return ""
    shown = f"{left / 60:.0f} min" if left >= 120 else f"{left:.0f} s"
    return f"{sep}campaign: about {shown} left"
