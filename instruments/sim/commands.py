"""Instrument-side SCPI grammar: headers matched against a command tree.

Mnemonics are written as in the manuals ("HORizontal:RECOrdlength",
"CH<n>:SCAle"): the capitals are the short form, and, as Tektronix
instruments do, any spelling from the short to the long form is accepted,
in any case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"^(\*?[A-Za-z_]+?)(\d*)$")
_UNITS = re.compile(r'(?:"(?:[^"]|"")*"|[^;"])+')


# the standard event status register's bits (IEEE 488.2), which *ESR? reads and clears
OPC, QYE, DDE, EXE, CME, PON = 1, 4, 8, 16, 32, 128


def esr_bit(code: int) -> int:
    """The *ESR? bit an error or event code sets: ±1xx command, ±2xx execution, ±3xx device, ±4xx
    query (SCPI's codes are negative, Tektronix's event codes positive)."""
    return {1: CME, 2: EXE, 3: DDE, 4: QYE}.get(abs(code) // 100, 0)


class Fault(Exception):
    """A command the instrument refuses: an event code and its text."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code}: {text}")
        self.code = code
        self.text = text


def short_form(long: str) -> str:
    return "".join(c for c in long if not c.islower()).upper()


def accepts(long: str, word: str) -> bool:
    w = word.upper()
    return w.startswith(short_form(long)) and long.upper().startswith(w)


@dataclass(frozen=True)
class Mnemonic:
    long: str  # manual spelling, capitals = short form
    suffix: bool  # takes a numeric suffix: CH<n>

    def match(self, token: str) -> int | None | bool:
        """The suffix (int), None if matched without one, False if no match."""
        m = _TOKEN.match(token)
        if not m:
            return False
        word, digits = m.groups()
        if self.suffix:
            return int(digits) if digits and accepts(self.long, word) else False
        if digits:
            # mnemonics may end in digits of their own; try the whole token
            return None if accepts(self.long, token) else False
        return None if accepts(self.long, word) else False

    def spell(self, suffix: int | None, verbose: bool) -> str:
        text = self.long.upper() if verbose else short_form(self.long)
        return f"{text}{suffix}" if self.suffix and suffix is not None else text


@dataclass
class Node:
    """One command: `get(*suffixes)` answers the query, `set(arg, *suffixes)` acts."""

    pattern: str
    get: Callable[..., Any] | None = None
    set: Callable[..., Any] | None = None
    headers: bool = True  # False: the handler formats its own reply headers
    query_arg: bool = False  # the query takes an argument: get(arg, *suffixes)

    def __post_init__(self) -> None:
        self.mnemonics = tuple(Mnemonic(p.removesuffix("<n>"),
                                        p.endswith("<n>")) for p in self.pattern.split(":"))

    def match(self, tokens: Sequence[str]) -> list[int] | None:
        if len(tokens) != len(self.mnemonics):
            return None
        suffixes: list[int] = []
        for m, tok in zip(self.mnemonics, tokens, strict=True):
            r = m.match(tok)
            if r is False:
                return None
            if r is not None:
                suffixes.append(int(r))
        return suffixes

    def header(self, suffixes: Sequence[int], verbose: bool) -> str:
        it = iter(suffixes)
        parts = [m.spell(next(it) if m.suffix else None, verbose) for m in self.mnemonics]
        return ":" + ":".join(parts)


def split_units(message: str) -> list[str]:
    """A message's ';'-separated units, ignoring ';' inside quoted strings."""
    return [u.strip() for u in _UNITS.findall(message) if u.strip()]


# --- arguments -----------------------------------------------------------------------
def number(arg: str) -> float:
    if not arg:
        raise Fault(109, "Missing parameter")
    try:
        return float(arg)
    except ValueError:
        raise Fault(104, "Data type error") from None


def bounded(arg: str, limits: tuple[float, float]) -> float:
    """A number within `limits` (inclusive), else "Data out of range"."""
    v = number(arg)
    if not limits[0] <= v <= limits[1]:
        raise Fault(222, "Data out of range")
    return v


def integer(arg: str) -> int:
    return int(round(number(arg)))


def choice(arg: str, choices: Sequence[str]) -> str:
    """The canonical (long, upper-case) spelling of a keyword argument."""
    if not arg:
        raise Fault(109, "Missing parameter")
    for c in choices:
        if accepts(c, arg):
            return c.upper()
    raise Fault(141, "Invalid character data")


def boolean(arg: str) -> bool:
    if not arg:
        raise Fault(109, "Missing parameter")
    word = arg.upper()
    if word in ("ON", "OFF"):
        return word == "ON"
    return number(arg) != 0


def tek_nr3(value: float) -> str:
    """Tektronix-style exponent notation, e.g. 2.5E-4."""
    mantissa, exponent = f"{value:.9E}".split("E")
    mantissa = mantissa.rstrip("0")
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{mantissa}E{int(exponent)}"


def quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def resolve(table: Sequence[Node], unit: str, path: list[str], undefined: str) -> tuple[Node,
                                                                                        list[int],
                                                                                        str, bool,
                                                                                     list[str]]:
    """The node a program message unit addresses: (node, its <n> suffixes, argument, is it a query,
    the path the next unit after ';' is relative to). After ';' a header is relative to the
    previous one's path, unless it starts with ':'. Fault(113, `undefined`) if nothing matches."""
    absolute = unit.startswith((":", "*"))
    header, _, arg = unit.lstrip(":").partition(" ")
    query = header.endswith("?")
    tokens = header.removesuffix("?").split(":")
    tries = [tokens] if absolute or not path else [path + tokens, tokens]
    for toks in tries:
        for node in table:
            suffixes = node.match(toks)
            if suffixes is not None:
                return node, suffixes, arg.strip(), query, toks[:-1]
    raise Fault(113, undefined)
