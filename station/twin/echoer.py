"""Behavioural model of the DE4 PCIe IRQ echoer (fpga/src/IrqEchoer.bsv), register by register.

The twin's emulated PCIe device: the same register map (loaded at run time from
fpga/registers.yaml, or from the byte-identical copy shipped beside this module) and
the same rules as the hardware, which the Bluesim testbench and
tests/test_register_map.py check sequence by sequence:

- SEND write: store the value, count it in EVENTS, raise the IRQ; T_WRITE latches
  the counter only on the rising edge (no IRQ pending), so WIDTH is the pulse a
  scope sees even when SENDs pile up.
- RECV read: the stored value; if an IRQ was pending, clear it and latch T_CLEAR
  and WIDTH = T_CLEAR - T_WRITE modulo 2^32.
- STATUS read: the IRQ bit, no side effect. CYCLES_LO read latches CYCLES_HI.
- Writes to anything but SEND are ignored; reads of SEND or unlisted offsets give
  OTHER_VALUE. Offsets alias modulo the slave's span, as only the word-address bits
  are decoded.

`cycle` arguments are the board's 64-bit cycle counter in the cycle the access is
accepted (0 at reset). `cycle_at`/`width_cycles` map nanosecond times onto that
counter, elementwise on numpy arrays too, for twins that compute widths vectorised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import yaml

_HERE = Path(__file__).resolve().parent
_CANONICAL = _HERE.parents[1] / "fpga" / "registers.yaml"
_PACKAGED = _HERE / "echoer_registers.yaml"

MASK32 = 0xFFFF_FFFF
NS_PER_S = 1_000_000_000

T = TypeVar("T")  # int or a numpy integer array


@dataclass(frozen=True)
class RegisterMap:
    offsets: dict[str, int]  # register name -> byte offset on the BAR
    span: int  # bytes decoded by the slave; offsets alias modulo this
    other_value: int
    version: int  # (major << 16) | minor of the design
    version_major_timestamps: int
    clock_hz_default: int
    status_irq: int  # STATUS bit mask of the pending IRQ


def registers_yaml_path() -> Path:
    """The repository's canonical file when present, else the packaged copy."""
    return _CANONICAL if _CANONICAL.is_file() else _PACKAGED


@lru_cache(maxsize=4)
def load_register_map(path: Path | None = None) -> RegisterMap:
    raw: dict[str, Any] = yaml.safe_load((path or registers_yaml_path()).read_text())
    regs = {r["name"]: r for r in raw["registers"]}
    consts = {c["name"]: int(c["value"]) for c in raw["constants"]}
    irq_field = next(f for f in regs["STATUS"]["fields"] if f["name"] == "IRQ")
    return RegisterMap(
        offsets={name: int(r["offset"]) for name, r in regs.items()},
        span=(1 << int(raw["address_width"])) * int(raw["data_width"]) // 8,
        other_value=consts["OTHER_VALUE"],
        version=(int(raw["version"]["major"]) << 16) | int(raw["version"]["minor"]),
        version_major_timestamps=consts["VERSION_MAJOR_TIMESTAMPS"],
        clock_hz_default=int(raw["clock_hz_default"]),
        status_irq=1 << int(irq_field["bits"][1]),
    )


class Echoer:
    """Register-level model of one echoer; ~1 µs per access, plenty for 10 000 events/s."""

    def __init__(self, regmap: RegisterMap | None = None, clock_hz: int | None = None) -> None:
        self.map = regmap or load_register_map()
        self.clock_hz = clock_hz if clock_hz is not None else self.map.clock_hz_default
        o = self.map.offsets
        self._send, self._recv, self._status = o["SEND"], o["RECV"], o["STATUS"]
        self._cycles_lo = o["CYCLES_LO"]
        # Registers whose read is a plain value without side effects.
        self._plain: dict[int, Callable[[], int]] = {
            o["VERSION"]: lambda: self.map.version,
            o["CLOCK_HZ"]: lambda: self.clock_hz & MASK32,
            o["CYCLES_HI"]: lambda: self.cycles_hi,
            o["T_WRITE"]: lambda: self.t_write,
            o["T_CLEAR"]: lambda: self.t_clear,
            o["WIDTH"]: lambda: self.width,
            o["EVENTS"]: lambda: self.events,
        }
        self.reset()

    def reset(self) -> None:
        self._irq = False
        self.value = 0
        self.cycles_hi = 0
        self.t_write = 0
        self.t_clear = 0
        self.width = 0
        self.events = 0

    @property
    def irq(self) -> bool:
        """The IRQ line, identical to the irqflagtap conduit the scope probes."""
        return self._irq

    def _decode(self, offset: int) -> int:
        if offset % 4:
            raise ValueError(f"unaligned echoer access at {offset:#x}: 32-bit words only")
        return offset % self.map.span

    def write(self, offset: int, value: int, cycle: int) -> None:
        if self._decode(offset) != self._send:
            return  # read-only and unused offsets ignore writes
        self.value = value & MASK32
        self.events = (self.events + 1) & MASK32
        if not self._irq:
            self._irq = True
            self.t_write = cycle & MASK32

    def read(self, offset: int, cycle: int) -> int:
        off = self._decode(offset)
        if off == self._recv:
            if self._irq:
                self._irq = False
                self.t_clear = cycle & MASK32
                self.width = (self.t_clear - self.t_write) & MASK32
            return self.value
        if off == self._status:
            return self.map.status_irq if self._irq else 0
        if off == self._cycles_lo:
            self.cycles_hi = (cycle >> 32) & MASK32
            return cycle & MASK32
        plain = self._plain.get(off)
        return self.map.other_value if plain is None else plain()  # SEND, unlisted: constant


def cycle_at(t_ns: T, clock_hz: int) -> T:
    """Counter value at time t_ns (counter 0 at t = 0): floor(t_ns * clock_hz / 1e9).

    Split into whole seconds and the remainder so int64 arrays cannot overflow for
    any realistic uptime and the result is exact (no floating point)."""
    sec, rem = divmod(t_ns, NS_PER_S)  # type: ignore[operator]
    return sec * clock_hz + rem * clock_hz // NS_PER_S  # type: ignore[operator,return-value]


def width_cycles(t_write_ns: T, t_clear_ns: T, clock_hz: int) -> T:
    """WIDTH the hardware reports for a SEND at t_write_ns cleared at t_clear_ns: the
    difference of the two counter samples modulo 2^32, as the 32-bit timestamps wrap."""
    start, end = cycle_at(t_write_ns, clock_hz), cycle_at(t_clear_ns, clock_hz)
    return (end - start) & MASK32  # type: ignore[operator,return-value]


def cycles_to_ns(cycles: T, clock_hz: int) -> T:
    """WIDTH in ns as the PCIe kernel module converts it: floor(cycles * 1e9 / clock_hz)."""
    return cycles * NS_PER_S // clock_hz  # type: ignore[operator,return-value]
