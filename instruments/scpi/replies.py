"""Replies parsed and commands formatted: numbers (finite, positive, counts), flags, compound
replies split at ';' outside quotes, preambles checked field by field (ReplyFields)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from instruments.scope import (
    ScopeDataError,
)


# --- replies: parsing what the instrument says, formatting what we send ----------------------
def real(reply: str) -> float:
    """A numeric reply that must be a finite number (NR2/NR3); ValueError otherwise."""
    value = float(reply)
    if not math.isfinite(value):
        raise ValueError(f"{reply!r} is not a finite number")
    return value


def positive(reply: str) -> float:
    """A scale read back (volts or seconds per division): finite and > 0; ValueError otherwise."""
    value = real(reply)
    if not value > 0:
        raise ValueError(f"{reply!r} is not a positive number")
    return value


def nr1(reply: str) -> int:
    """Integer replies; some instruments send them as NR3 (1.2E+5). ValueError if not finite."""
    return int(round(real(reply)))


def count(reply: str) -> int:
    """A length read back (record length, points): a whole number >= 1; ValueError otherwise."""
    value = nr1(reply)
    if value < 1:
        raise ValueError(f"{reply!r} is not a count of at least 1")
    return value


def flag(reply: str) -> bool:
    """A boolean reply: ON/OFF or a number (1/0, +1/+0), any case; ValueError otherwise."""
    word = reply.strip().upper()
    if word in ("ON", "OFF"):
        return word == "ON"
    return nr1(word) != 0


def on_off(value: bool) -> str:
    """A boolean argument as ON/OFF (Tektronix style)."""
    return "ON" if value else "OFF"


def one_zero(value: bool) -> str:
    """A boolean argument as 1/0 (Keysight style)."""
    return "1" if value else "0"


class ReplyFields:
    """The named fields of one reply (a preamble), each parsed with an error that says which.

    Every failure is a ScopeDataError naming `command`, the field and the text
    it held: a missing field, a non-number, a non-finite number, a scale that
    cannot be (zero or negative where only a positive value makes sense), a
    count that is not a whole number within bounds.
    """

    def __init__(self, command: str, fields: Mapping[str, str]) -> None:
        self.command = command
        self.fields = fields

    def error(self, name: str, value: str | None, detail: str) -> ScopeDataError:
        return ScopeDataError(self.command, field=name, value=value, detail=detail)

    def text(self, name: str) -> str:
        try:
            return self.fields[name].strip()
        except KeyError:
            raise self.error(name, None, "missing from the reply") from None

    def real(self, name: str, meaning: str, *, positive: bool = False,
             nonzero: bool = False) -> float:
        """A finite number; `positive`: > 0, `nonzero`: != 0. `meaning` names it for a user."""
        text = self.text(name)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if positive and not (math.isfinite(value) and value > 0):
            raise self.error(name, text, f"{meaning} must be a positive finite number")
        if nonzero and not (math.isfinite(value) and value != 0):
            raise self.error(name, text, f"{meaning} must be a finite number other than 0")
        if not math.isfinite(value):
            raise self.error(name, text, f"{meaning} must be a finite number")
        return value

    def integer(self, name: str, meaning: str, low: int, high: int) -> int:
        """A whole number in low..high (sent as NR1, or as NR3 such as 1.0E+3)."""
        text = self.text(name)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value.is_integer() and low <= value <= high):
            raise self.error(name, text, f"{meaning} must be a whole number from {low} to {high}")
        return int(value)

    def check_finite(self, name: str, detail: str, *results: float) -> None:
        """Values derived from fields (sample times, voltages) must be finite too; `name` is
        blamed."""
        if not all(math.isfinite(r) for r in results):
            raise self.error(name, self.text(name), detail)




def split_fields(reply: str) -> list[str]:
    """Split a compound reply at ';' outside quoted strings, keeping empty fields in place.

    ("a;;b" is three fields: dropping the empty one would shift every later
    field into the wrong name.)
    """
    fields: list[str] = []
    start, quoted = 0, False
    for i, c in enumerate(reply):
        if c == '"':
            quoted = not quoted  # '""' inside a string toggles twice
        elif c == ";" and not quoted:
            fields.append(reply[start:i].strip())
            start = i + 1
    fields.append(reply[start:].strip())
    return fields


def unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return text
