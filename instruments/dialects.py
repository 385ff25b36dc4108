"""The instrument dialects the station knows, by the name a campaign configuration uses.

A new scope dialect is one new module (a `Scope` subclass, usually an
`instruments.scpi.ScpiScope`) plus one line in `DIALECTS`; a function
generator dialect is a `FunctionGenerator` subclass plus one line in
`GENERATORS`. Entries name where the class lives rather than importing it: the
dialect modules import `instruments.scope` (or `instruments.funcgen`), which
look dialects up here, so this module imports none of them (no import cycle)
and the VISA layer is loaded only when an instrument is opened.
"""

from __future__ import annotations

import importlib

# scope dialect name -> "module:Class"
DIALECTS: dict[str, str] = {
    "tektronix_tds": "instruments.tektronix_tds:TektronixTDS",
    "tektronix_mso": "instruments.tektronix_mso:TektronixMSO",
    "keysight_infiniivision": "instruments.keysight_infiniivision:KeysightInfiniiVision",
}

# function generator dialect name -> "module:Class"
GENERATORS: dict[str, str] = {
    "keysight_33500": "instruments.funcgen:Keysight33500",
}


def dialect_class(dialect: str) -> type:
    """The scope driver class registered as `dialect`; ValueError naming the known ones if none
    is."""
    return _load(DIALECTS, "scope", dialect)


def generator_class(dialect: str) -> type:
    """The function generator driver class registered as `dialect`; ValueError naming the known
    ones."""
    return _load(GENERATORS, "function generator", dialect)


def _load(registry: dict[str, str], kind: str, dialect: str) -> type:
    try:
        target = registry[dialect]
    except KeyError:
        known = ", ".join(sorted(registry))
        raise ValueError(f"unknown {kind} dialect {dialect!r} (known: {known})") from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
