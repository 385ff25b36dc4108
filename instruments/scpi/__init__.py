"""SCPI over VISA: the session, declarative settings, reply parsing, and the error discipline.

Everything PyVISA can raise is translated here into the instrument's own error class
(`Instrument.error`/`timeout_error`: ScopeError/ScopeTimeout, GeneratorError/GeneratorTimeout)
naming the resource and the command, so no VISA traceback reaches a user.
`ScpiInstrument` holds the write-then-check discipline every SCPI driver
shares (scope dialects subclass `ScpiScope`, one; function generators are
one too) and drivers describe their settings with `Control` (in the spirit of
PyMeasure's `Instrument.control`, without depending on it).

What an instrument sends is checked before it is used: IEEE 488.2 blocks by
`read_block` (header, length against the points announced, whole samples, the
terminator), preambles through `ReplyFields` (finite numbers, positive counts
within bounds). A reply that fails is a ScopeDataError naming the command, the
field and what it held; nothing is allocated on the word of a header alone.
Dialects share the reply/command helpers defined here (`flag`, `on_off`,
`one_zero`, `real`, `positive`, `nr1`, `count`, ...); they do not define their own.

Its modules, one concept each: session.py (the VISA session and its socket reader), blocks.py
(IEEE 488.2 blocks), replies.py (reply parsing, ReplyFields), controls.py (declarative settings),
instrument.py (the SCPI instrument and scope bases). This package's face re-exports what the
dialects, the station and the tests use.
"""

from __future__ import annotations

import pyvisa  # the module open_session asks for a ResourceManager (a test stands in for it here)

from instruments.scpi.blocks import BLOCK_CHUNK, read_block
from instruments.scpi.controls import Control, from_keyword, in_range, keyword
from instruments.scpi.instrument import ScpiInstrument, ScpiScope
from instruments.scpi.replies import (
    ReplyFields,
    count,
    flag,
    nr1,
    on_off,
    one_zero,
    positive,
    real,
    split_fields,
    unquote,
)
from instruments.scpi.session import ScpiSession, SocketReader, open_session, resource_kind

__all__ = [
    "BLOCK_CHUNK", "Control", "ReplyFields", "ScpiInstrument", "ScpiScope", "ScpiSession",
    "SocketReader", "count", "flag", "from_keyword", "in_range", "keyword", "nr1", "on_off",
    "one_zero", "open_session", "positive", "pyvisa", "read_block", "real", "resource_kind",
    "split_fields", "unquote",
]
