"""How much of the run the scope saw: the capture ratio and the dead time of a capture strategy.

Between two acquisitions a scope is blind: it re-arms, waits for a trigger, transfers, and the
host extracts the pulses. The events it missed are part of the measurement (the seed's PCIe
question turned on events the scope did not see), so every module run accounts for them:

- the capture window runs from the first acquisition's arming to the last one's transfer;
- the live time is what the records cover (a single record's span; a segmented acquisition's
  frames together: the re-arm gaps between frames are dead too);
- the events emitted in the window come from the software stream itself: the module's own
  event number (sequence number less the stray IRQs' records before it) that had arrived at the
  window's start and at its end (the arrival log, host clock), so a lost record or a late event
  counts as what it is, not as a nominal period, and a foreign IRQ (no pulse) is not an event;
- the capture ratio is the pulses captured over those events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AcquisitionLog:
    """One acquisition, as the run saw it (host clock)."""

    armed_host_s: float
    done_host_s: float  # its record in (the pulses are extracted while the next one runs)
    frames: int
    pulses: int
    live_s: float
    frames_without_pulse: int = 0  # segmented: frames whose pulse was cut by the frame's end


def capture_summary(strategy: str, acquisitions: list[AcquisitionLog], arrival_host_s: np.ndarray,
                    arrival_event: np.ndarray, period_ns: int) -> dict:
    """The manifest's `capture` entry (see docs/report-schema.md).

    The ratio counts the acquisitions the record stream's arrivals span (the stream stops when
    the run has its samples, while the last acquisition may still be transferring): their pulses
    over the events emitted from the first one's arming to the last one's transfer. With no
    such acquisition (a legacy stream without sequence numbers, say), every acquisition counts
    and the events are the window over the nominal period (`events_from` says which).
    """
    summary: dict = {"strategy": strategy, "acquisitions": len(acquisitions),
                     "frames": sum(a.frames for a in acquisitions),
                     "pulses": sum(a.pulses for a in acquisitions),
                     "frames_without_pulse": sum(a.frames_without_pulse for a in acquisitions),
                     "window_s": None, "live_s": None, "dead_time_per_acquisition_s": None,
                     "dead_fraction": None,
                     "acquisitions_counted": 0, "pulses_counted": 0, "events_emitted": None,
                     "events_from": None,
                     "capture_ratio": None}
    if not acquisitions:
        return summary
    host_s, event = np.asarray(arrival_host_s, np.float64), np.asarray(arrival_event, np.float64)
    spanned = [a for a in acquisitions if len(host_s) >= 2 and host_s[0] <= a.armed_host_s
               and a.done_host_s <= host_s[-1]]
    counted = spanned or acquisitions
    begin, end = counted[0].armed_host_s, counted[-1].done_host_s
    window = max(end - begin, 0.0)
    live = min(sum(a.live_s for a in counted), window)
    summary |= {"window_s": window, "live_s": live,
                "dead_time_per_acquisition_s": (window - live) / len(counted),
                "dead_fraction": 1.0 - live / window if window > 0 else None,
                "acquisitions_counted": len(counted),
                "pulses_counted": sum(a.pulses for a in counted)}
    if spanned:
        first, last = np.interp([begin, end], host_s, event)
        # the module's event numbers the window spans: the shift compares the pulses with these
        # records
        summary |= {"events_emitted": int(round(last - first)), "events_from": "record stream",
                    "first_event": int(math.floor(first)), "last_event": int(math.ceil(last))}
    elif period_ns > 0 and window > 0:
        summary |= {"events_emitted": int(round(window * 1e9 / period_ns)),
                    "events_from": "nominal period"}
    if summary["events_emitted"]:
        summary["capture_ratio"] = summary["pulses_counted"] / summary["events_emitted"]
    return summary


class MeasurementTally:
    """The scope's own width measurements over a run (capture: measurement), and where a record
    was transferred too, the host's extraction of the same pulses beside them."""

    def __init__(self) -> None:
        self.acquisitions = self.valid = self.pulses = 0
        self.kind = ""  # "all": the scope measures every pulse of a record; "first": the first
        self._weighted = 0.0
        self.min_s, self.max_s = math.inf, -math.inf
        self.checked = 0  # acquisitions cross-checked
        self.largest_difference_s = 0.0  # |scope − host| over mean, minimum and maximum

    def add(self, count: int, mean_s: float, min_s: float, max_s: float, kind: str,
            host_s: np.ndarray | None) -> tuple[int, float, float, float] | None:
        """One acquisition; returns the host's (count, mean, min, max) of the same pulses, if
        any."""
        self.acquisitions += 1
        self.kind = kind
        if count > 0:
            self.valid += 1
            self.pulses += count
            self._weighted += mean_s * count
            self.min_s, self.max_s = min(self.min_s, min_s), max(self.max_s, max_s)
        if host_s is None:
            return None
        same = host_s if kind == "all" else host_s[:1]
        self.checked += 1
        if not len(same):
            return 0, math.nan, math.nan, math.nan
        host = (len(same), float(same.mean()), float(same.min()), float(same.max()))
        if count > 0:
            diff = max(abs(a - b) for a, b in zip((mean_s, min_s, max_s), host[1:], strict=True))
            self.largest_difference_s = max(self.largest_difference_s, diff)
        return host

    def summary(self) -> dict:
        return {"acquisitions": self.acquisitions, "valid": self.valid, "pulses": self.pulses,
                "scope_measures": self.kind,
                "mean_s": self._weighted / self.pulses if self.pulses else None,
                "min_s": self.min_s if self.pulses else None,
                "max_s": self.max_s if self.pulses else None,
                "cross_checked": self.checked,
                "largest_difference_s": self.largest_difference_s if self.checked else None}
