"""Oscilloscopes for the station: the Scope interface, dialects, pulse extraction, a sim.

`station` uses this package; it never imports `station`.
"""

from instruments.pulses import Pulses, auto_threshold, extract_pulses, find_edges
from instruments.scope import (
    InstrumentError,
    InstrumentTimeout,
    Scope,
    ScopeDataError,
    ScopeError,
    ScopeSettings,
    ScopeTimeout,
    Waveform,
    open_scope,
)

__all__ = [
    "InstrumentError",
    "InstrumentTimeout",
    "Pulses",
    "Scope",
    "ScopeDataError",
    "ScopeError",
    "ScopeSettings",
    "ScopeTimeout",
    "Waveform",
    "auto_threshold",
    "extract_pulses",
    "find_edges",
    "open_scope",
]
