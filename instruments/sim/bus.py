"""How long a simulated instrument's replies take to cross its bus.

On the loopback a 120 000-point record arrives in a millisecond; over a TDS 460A's GPIB it
takes about a second, and that second is when the scope sees nothing. So a twin that should
give realistic capture ratios holds each reply back for the time its bus would take:
`BusProfile.reply_s(n)` = a fixed cost per reply (addressing, the instrument's turnaround)
+ n bytes at the bus's sustained rate. Messages to the instrument are short and not charged.

The figures are planning figures with their sources in docs/scopes/ (the page of each family,
"Limits"); where no measurement exists they are marked unverified there. A user who has timed
their own scope passes a `BusProfile` of their own (or `bench.scope.bus_rate` in a campaign).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BusProfile:
    """A bus as the host sees it: `overhead_s` per reply, then `bytes_per_s` (inf: no limit)."""

    name: str
    overhead_s: float
    bytes_per_s: float

    def __post_init__(self) -> None:
        if not (self.overhead_s >= 0 and math.isfinite(self.overhead_s)):
            raise ValueError(f"bus {self.name}: overhead must be a finite time >= 0, not "
                             f"{self.overhead_s}")
        if not self.bytes_per_s > 0:
            raise ValueError(f"bus {self.name}: rate must be > 0 bytes/s, not {self.bytes_per_s}")

    def reply_s(self, size: int) -> float:
        """Seconds a reply of `size` bytes (its terminator included) takes to reach the host."""
        return self.overhead_s + (
            size / self.bytes_per_s if math.isfinite(self.bytes_per_s) else 0.0
        )

    def with_rate(self, bytes_per_s: float) -> BusProfile:
        return BusProfile(f"{self.name} at {bytes_per_s:.3g} B/s", self.overhead_s, bytes_per_s)


BUSES: dict[str, BusProfile] = {
    # no bus: replies leave as fast as the host's loopback takes them (unit tests, quick demos)
    "loopback": BusProfile("loopback", 0.0, math.inf),
    # IEEE 488.1 as a TDS-era scope drives it: a Tektronix FAQ's 120 waveforms/s of 512 points
    # and 78/s of 1024 fit 4 ms a transfer + 9 µs a byte (docs/scopes/tektronix-tds.md, [S6])
    "gpib": BusProfile("gpib", 4e-3, 115e3),
    # USBTMC on an InfiniiVision: 2.5 M points in ≈ 17 s (docs/scopes/keysight-infiniivision.md,
    # [K9])
    "usb": BusProfile("usb", 1e-3, 150e3),
    # an InfiniiVision 3000 X: ≈ 3 M points/s on top of a per-acquisition cost ([K4], interface
    # unstated)
    "lan": BusProfile("lan", 0.5e-3, 3.3e6),
    # a gigabit scope (the MSO 4/5/6): a tenth of the link's 125 MB/s; no measurement with width 1
    # and large reads was found, so this is an assumption (docs/scopes/tektronix-mso.md): time your
    # own
    "gigabit": BusProfile("gigabit", 0.5e-3, 12.5e6),
}


def bus_profile(name: str) -> BusProfile:
    try:
        return BUSES[name]
    except KeyError:
        raise ValueError(f"unknown bus {name!r}: one of {', '.join(BUSES)}") from None
