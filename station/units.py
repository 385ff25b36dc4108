"""Quantities written as people write them: "100us", "14 min", "2.5V", "500 mV".

Each parser returns SI base units (seconds, volts) as a float. Bare numbers are
accepted and taken as the base unit, so a YAML `period: 0.0001` still works.
"""

from __future__ import annotations

import re

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
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


def _parse(text: str | float | int, table: dict[str, float], what: str, fold_case: bool) -> float:
    if isinstance(text, bool):
        raise ValueError(f"expected a {what}, got {text!r}")
    if isinstance(text, int | float):
        return float(text)
    m = _QUANTITY.match(str(text))
    if not m:
        raise ValueError(f"cannot read {text!r} as a {what}")
    value, unit = float(m.group(1)), m.group(2)
    key = unit.lower() if fold_case else unit
    if key not in table:
        units = ", ".join(u for u in table if u)
        raise ValueError(f"unknown unit {unit!r} in {text!r} for a {what} (use one of: {units})")
    return value * table[key]


def parse_duration(text: str | float | int) -> float:
    """Seconds from "100us", "14min", "2 h", "0.5 s" or a bare number of seconds."""
    return _parse(text, _TIME, "duration", fold_case=False)


def parse_voltage(text: str | float | int) -> float:
    """Volts from "2.5V", "500 mV" or a bare number of volts."""
    return _parse(text, _VOLT, "voltage", fold_case=True)


def format_duration(seconds: float) -> str:
    """The shortest readable form, used when configs are written back."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.6g}{unit}"
    raise AssertionError("unreachable")
