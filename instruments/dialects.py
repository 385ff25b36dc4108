"""The scope dialects `open_scope` knows, by the name a campaign configuration uses.

A new dialect is one new module (a `Scope` subclass, usually an
`instruments.scpi.ScpiScope`) plus one line here. Entries name where the class
lives rather than importing it: the dialect modules import `instruments.scope`,
which looks dialects up here, so this module imports none of them (no import
cycle) and the VISA layer is loaded only when a scope is opened.
"""

from __future__ import annotations

import importlib

# dialect name -> "module:Class"
DIALECTS: dict[str, str] = {
    "tektronix_tds": "instruments.tektronix_tds:TektronixTDS",
    "tektronix_mso": "instruments.tektronix_mso:TektronixMSO",
    "keysight_infiniivision": "instruments.keysight_infiniivision:KeysightInfiniiVision",
}


def dialect_class(dialect: str) -> type:
    """The driver class registered as `dialect`; ValueError naming the known ones if none is."""
    try:
        target = DIALECTS[dialect]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ValueError(f"unknown scope dialect {dialect!r} (known: {known})") from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
