"""The twin as a badly wired bench, on purpose (`bench.twin.miswire`): each fault is one a new
bench really has in its first hour, played by the twin's scope or target, and logged in its
truth so a test can hold `station bench check` to what the twin did.

The scope's faults change what its probe sees (a channel, a level, a silent line) or what its
time base offers; the target's fault is a module file built for another kernel, which its
insmod refuses as a real kernel does (vermagic). A gpio bench (the twin as a board, a generator
on its input) has two probes and one more cable: its faults move the response probe, or leave
the generator's output off the board's input line (the scope still sees it), and `unplugged`
there is the generator's output reaching nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# the faults' names are config's (station/config/twin.py Miswire): the twin plays each one
TARGET_FAULTS = frozenset({"module_other_kernel"})  # the rest are the scope's

LINE_V = 3.3  # the twin's logic line, active high: (idle, active) = (0, 3.3) V
TRIGGER_ABOVE_SHARE = 0.8  # trigger_above_pulse: the line swings to this share of the trigger
SHORT_TIME_PER_DIV = 2e-6  # short_record: the time base stops here (a 20 µs record)
OTHER_KERNEL = "3.4.0-2-rtai"  # module_other_kernel: what the files on the target were built for


def other_channel(channel: int, taken: frozenset[int] = frozenset()) -> int:
    """Where other_channel puts a probe: the next channel round (1 → 2, …, 4 → 1) that no other
    probe holds."""
    moved = channel % 4 + 1
    return moved if moved not in taken else other_channel(moved, taken)


class Unplugged:
    """An edge source with its clock and no pulses: a probe that is not connected."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def now_ns(self) -> int:
        return self._clock.now_ns()

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        return np.empty((0, 2), dtype=np.int64)


@dataclass(frozen=True)
class Miswiring:
    """The faults a twin plays, against the campaign's scope settings (its channel and trigger
    level: the faults are defined relative to them)."""

    faults: tuple[str, ...] = ()
    channel: int = 1  # the campaign's scope channel (a gpio bench's stimulus)
    trigger_level_v: float = 1.5
    response_channel: int | None = None  # a gpio bench's

    @property
    def probe_channel(self) -> int:
        """Where the (stimulus) probe is."""
        if "other_channel" not in self.faults:
            return self.channel
        return other_channel(self.channel, frozenset({self.response_channel} - {None}))

    @property
    def response_probe_channel(self) -> int | None:
        """Where a gpio bench's response probe is."""
        if self.response_channel is None or "response_other_channel" not in self.faults:
            return self.response_channel
        return other_channel(self.response_channel, frozenset({self.channel, self.probe_channel}))

    @property
    def line_v(self) -> float:
        """The line's active level at the probe tip."""
        if "trigger_above_pulse" in self.faults:
            return round(TRIGGER_ABOVE_SHARE * self.trigger_level_v, 3)
        return LINE_V

    @property
    def levels(self) -> tuple[float, float]:
        """(idle, active) volts the scope's channel shows."""
        idle, active = 0.0, self.line_v
        if "probe_x10" in self.faults:  # the scope, set to ×1, shows a tenth of the line
            active /= 10.0
        if "inverted" in self.faults:
            idle, active = active, idle
        return idle, active

    def scope_options(self) -> dict[str, Any]:
        """SimScopeServer's options for the scope's faults (none: its defaults)."""
        options: dict[str, Any] = {}
        if self.faults and set(self.faults) - TARGET_FAULTS:
            options["levels"] = self.levels
        if "other_channel" in self.faults:
            options["probe_channel"] = self.probe_channel
        if "short_record" in self.faults:
            options["slowest_time_per_div"] = SHORT_TIME_PER_DIV
        return options

    def truth(self) -> dict[str, Any]:
        """What the twin did, fault by fault (campaign.json's twin summary, the check's JSON)."""
        idle, active = self.levels
        said: dict[str, Any] = {}
        for fault in self.faults:
            said[fault] = {
                "other_channel": lambda: {"probe_channel": self.probe_channel,
                                          "configured_channel": self.channel},
                "response_other_channel": lambda: {
                    "response_probe_channel": self.response_probe_channel,
                    "configured_channel": self.response_channel},
                "board_unplugged": lambda: {"board_input_driven": False,
                                            "scope_sees_stimulus": True},
                "probe_x10": lambda: {"line_v": self.line_v, "shown_v": max(idle, active)},
                "inverted": lambda: {"idle_v": idle, "active_v": active},
                "trigger_above_pulse": lambda: {"line_high_v": max(idle, active),
                                                "trigger_level_v": self.trigger_level_v},
                "short_record": lambda: {"slowest_time_per_div_s": SHORT_TIME_PER_DIV},
                "module_other_kernel": lambda: {"built_for": OTHER_KERNEL},
                "unplugged": lambda: {"pulses_on_any_channel": False},  # nor on the board's
            }[fault]()
        return said
