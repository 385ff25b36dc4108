"""Quantities written as people write them: "100us", "14 min", "2.5V", "500 mV".

Each parser returns SI base units (seconds, volts) as a finite float, or raises
ValueError with a message that quotes (a shortened form of) the input.

Bare numbers (``0.0001``, ``"100"``) are taken as the base unit when a Python
caller passes them, so ``Matrix(period=100e-6, ...)`` keeps working. A campaign
*file* must say its unit: the config loader passes ``require_unit=True`` and a
bare ``period: 100`` is refused ("write a unit, e.g. 100us"), since nobody can
tell whether 100 seconds or 100 microseconds was meant. A bare ``0`` is the one
exception: zero is zero in every unit (the field's range then decides whether
zero is allowed).
"""

from __future__ import annotations

import math
import re

MAX_TEXT = 64  # longer strings are not quantities; refusing them early keeps errors short

_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµμ]*)\s*$")

_TIME = {
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
    "ps": 1e-12,
    "min": 60.0,
    "h": 3600.0,
}
_VOLT = {"": 1.0, "v": 1.0, "mv": 1e-3, "uv": 1e-6, "µv": 1e-6, "μv": 1e-6, "kv": 1e3}

_EXAMPLE = {"duration": ("us", "s"), "voltage": ("V", "mV")}


def shorten(value: object, limit: int = 40) -> str:
    """repr() of a value, cut to `limit` characters so error messages stay one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _no_unit(number: str, what: str) -> ValueError:
    big, small = _EXAMPLE[what]
    return ValueError(f"{number} has no unit: write a unit, e.g. {number}{big} or {number}{small}")


def _finite(value: float, text: object, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{shorten(text)} is not a finite {what}")
    return value


def _parse(text: object, table: dict[str, float], what: str, fold_case: bool,
           require_unit: bool) -> float:
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"expected a {what} such as 100{_EXAMPLE[what][0]}, got {shorten(text)}")
    if isinstance(text, int | float):
        try:
            value = float(text)
        except OverflowError:
            raise ValueError(f"{shorten(text)} is not a finite {what}") from None
        _finite(value, text, what)
        if require_unit and value != 0:
            raise _no_unit(f"{text:g}" if isinstance(text, float) else str(text), what)
        return value
    if len(text) > MAX_TEXT:
        raise ValueError(f"cannot read {shorten(text)} as a {what} (too long)")
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"cannot read {shorten(text)} as a {what}")
    number, unit = m.group(1), m.group(2)
    value = _finite(float(number), text, what)
    key = unit.lower() if fold_case else unit
    if key not in table:
        units = ", ".join(u for u in table if u)
        raise ValueError(f"unknown unit {unit!r} in {shorten(text)} for a {what} (use one of: "
                         f"{units})")
    if not unit and require_unit and value != 0:
        raise _no_unit(number, what)
    return _finite(value * table[key], text, what)


def parse_duration(text: str | float | int, *, require_unit: bool = False) -> float:
    """Seconds from "100us", "14min", "2 h", "0.5 s" or a bare number of seconds
    (the bare number only when require_unit is false, or when it is 0)."""
    return _parse(text, _TIME, "duration", fold_case=False, require_unit=require_unit)


def parse_voltage(text: str | float | int, *, require_unit: bool = False) -> float:
    """Volts from "2.5V", "500 mV" or a bare number of volts (as for parse_duration)."""
    return _parse(text, _VOLT, "voltage", fold_case=True, require_unit=require_unit)


def format_duration(seconds: float) -> str:
    """The shortest readable form, used when configs are written back."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.6g}{unit}"
    raise AssertionError("unreachable")


def format_voltage(volts: float) -> str:
    for unit, scale in (("kV", 1e3), ("V", 1.0), ("mV", 1e-3), ("uV", 1e-6)):
        if abs(volts) >= scale or unit == "uV":
            return f"{volts / scale:.6g}{unit}"
    raise AssertionError("unreachable")


def decimal_int(text: str) -> int | None:
    """`text` (stripped) as a non-negative decimal integer, else None: ASCII digits only, since
    str.isdigit() is also true of '¹' and '٣', which int() refuses or reads otherwise."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None
