"""The bench's instruments for the station: the Scope interface (scope.py) and its dialects
(dialects.py: Tektronix TDS and MSO, Keysight InfiniiVision), the function generator (funcgen.py),
SCPI plumbing (scpi/), pulse and delay extraction from waveforms (pulses.py, schmitt_kernel.py,
compiled.py, rise_time.py, delays.py), and sim/: every instrument simulated behind a real SCPI
socket.

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
