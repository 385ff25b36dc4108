"""Declarative settings: an instrument setting as an attribute (Control, in the spirit of
PyMeasure's `Instrument.control`), with its range or keyword map."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from instruments.scpi.replies import real


# --- declarative settings ----------------------------------------------------------------
class Control:
    """One instrument setting as an attribute: reading queries, assigning commands.

    Templates may use `{ch}` (the owner's `channel`) and, for `set`, `{value}`.
    `to_scpi` validates/maps a Python value before it is sent; `from_scpi`
    parses the reply.
    """

    def __init__(
        self,
        get: str,
        set: str,
        from_scpi: Callable[[str], Any] = real,
        to_scpi: Callable[[Any], Any] | None = None,
        doc: str = "",
    ) -> None:
        self.get, self.set = get, set
        self.from_scpi, self.to_scpi = from_scpi, to_scpi
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.query_value(self.get.format(ch=obj.channel), self.from_scpi)

    def __set__(self, obj: Any, value: Any) -> None:
        if self.to_scpi is not None:
            value = self.to_scpi(value)
        obj.write(self.set.format(value=value, ch=obj.channel))


def in_range(low: float, high: float) -> Callable[[float], float]:
    def check(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(f"{value!r} is outside {low:g}..{high:g}")
        return value

    return check


def keyword(mapping: Mapping[str, str]) -> Callable[[str], str]:
    """Python word -> SCPI keyword, rejecting anything else before it reaches the wire."""

    def check(value: str) -> str:
        try:
            return mapping[value]
        except KeyError:
            raise ValueError(f"{value!r} is not one of {sorted(mapping)}") from None

    return check


def from_keyword(mapping: Mapping[str, str]) -> Callable[[str], str]:
    """SCPI reply (short or long form, any case) -> Python word."""

    def parse(reply: str) -> str:
        word = reply.strip().upper()
        for py, scpi in mapping.items():
            short = "".join(c for c in scpi if not c.islower()).upper()
            if word.startswith(short) and scpi.upper().startswith(word):
                return py
        raise ValueError(reply)

    return parse
