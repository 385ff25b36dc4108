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
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Self, TypeVar

import numpy as np
import pyvisa
from pyvisa import constants, errors, rname

from instruments.scope import (
    CodeScale,
    Instrument,
    InstrumentError,
    InstrumentTimeout,
    Scope,
    ScopeDataError,
    ScopeError,
    ScopeSettings,
    ScopeTimeout,
    Waveform,
    shorten,
)

TERMINATION = "\n"
S = TypeVar("S")  # a settings dataclass (ScopeSettings, GeneratorSettings)


class ScpiSession:
    """A VISA message-based resource with errors translated and a known timeout."""

    def __init__(self, resource: Any, name: str, timeout_s: float, error: type[InstrumentError] = ScopeError,
                 timeout_error: type[InstrumentTimeout] = ScopeTimeout) -> None:
        self._res = resource
        self.name = name
        self.timeout_s = timeout_s
        self.error = error  # the instrument's own error classes (Instrument.error, .timeout_error)
        self.timeout_error = timeout_error

    # --- I/O -------------------------------------------------------------------------
    def write(self, command: str) -> None:
        with self._translated(command):
            self._res.write(command)

    def query(self, command: str, timeout_s: float | None = None) -> str:
        with self._translated(command, timeout_s):
            return self._res.query(command).strip()

    def query_block(self, command: str, datatype: str, points: int, big_endian: bool = True) -> np.ndarray:
        """`points` samples of `datatype` in an IEEE 488.2 block (MSB first unless told otherwise)."""
        return self.query_blocks(command, datatype, points, 1, big_endian)[0]

    def query_blocks(self, command: str, datatype: str, points: int, count: int,
                     big_endian: bool = True) -> np.ndarray:
        """`count` blocks of `points` samples each, back to back in one reply (a FastFrame
        CURVe?: one block per frame, one terminator after the last), as a (count, points) array.

        See `read_block`. A rejected reply is flushed so that the next query is
        not answered by its remains; a reply that stops half-way times out
        saying how far it got. On a pyvisa-py SOCKET resource the block is read
        from the socket itself, straight into the array (`_SocketReader`);
        on any other resource through VISA, up to BLOCK_CHUNK bytes per VISA read.
        """
        received = pending = 0  # bytes read; bytes of the read under way
        sock = self._raw_socket()
        reader = None if sock is None else _SocketReader(sock, self._pyvisa_py_session(), self.timeout_s)

        def read(count: int) -> bytes:
            nonlocal received, pending
            pending = count
            # chunk_size=count: one VISA read per call, not one per 20 KiB (PyVISA's default)
            data = self._res.read_bytes(count, chunk_size=count) if reader is None else reader.read(count)
            received += len(data)
            return data

        def read_into(view: memoryview) -> int:
            nonlocal received, pending
            assert reader is not None
            pending = len(view)
            got = reader.read_into(view)
            received += got
            return got

        terminator = self._res.read_termination
        end = terminator.encode("ascii") if terminator else b""
        try:
            with self._translated(command):
                self._res.write(command)
                blocks = [
                    read_block(
                        read,
                        command,
                        datatype,
                        points,
                        big_endian=big_endian,
                        termination=end if i == count - 1 else b"",
                        read_into=None if reader is None else read_into,
                        separator=b";" if i else b"",
                    )
                    for i in range(count)
                ]
                return blocks[0][None, :] if count == 1 else np.stack(blocks)
        except ScopeDataError as exc:
            self.clear()
            exc.resource = self.name
            raise
        except InstrumentTimeout as exc:
            if not received:
                raise
            # the socket reader knows what came of the read under way; VISA's read_bytes drops it
            arrived = f" ({reader.arrived} of them arrived)" if reader is not None and reader.arrived else ""
            raise self.timeout_error(
                command,
                resource=self.name,
                detail=f"{exc.detail}, {received} bytes into the reply, while {pending} more were due{arrived}: "
                "the block is shorter than its header says",
            ) from None

    def clear(self) -> None:
        """Drop a late reply so the next query is not answered by the previous one."""
        sock = self._raw_socket()
        if sock is None:
            with contextlib.suppress(errors.Error, OSError, NotImplementedError):
                self._res.clear()
            return
        # pyvisa-py's own clear() spins for ever on a socket the instrument closed (select
        # says readable, recv returns b""): drain it here, bounded, and say when it is closed
        self._pyvisa_py_session()._pending_buffer.clear()
        deadline = time.monotonic() + max(self.timeout_s, 0.5)
        try:
            while time.monotonic() < deadline:
                readable, _, _ = select.select([sock], [], [], 0.1)
                if not readable:
                    return
                if not sock.recv(65536):
                    raise ConnectionResetError("closed by the peer")
        except OSError as exc:
            raise self.error("", resource=self.name, detail=f"the connection was lost: {exc}") from None

    def _pyvisa_py_session(self) -> Any:
        return self._res.visalib.sessions[self._res.session]

    def _raw_socket(self) -> socket.socket | None:
        """The TCP socket under a pyvisa-py SOCKET resource (None for any other resource or backend)."""
        if not isinstance(self._res, pyvisa.resources.TCPIPSocket):
            return None  # a Prologix adapter's session has a socket too, but speaks through it
        try:
            session = self._pyvisa_py_session()
            sock = getattr(session, "interface", None)
        except (AttributeError, KeyError, TypeError, errors.Error):
            return None
        if not isinstance(getattr(session, "_pending_buffer", None), bytearray):
            return None  # not the pyvisa-py socket session this module knows
        return sock if isinstance(sock, socket.socket) else None

    def close(self) -> None:
        with contextlib.suppress(errors.Error, OSError):
            self._res.close()

    # --- error translation ---------------------------------------------------------------
    @contextlib.contextmanager
    def _translated(self, command: str, timeout_s: float | None = None) -> Iterator[None]:
        """VISA and socket exceptions -> the instrument's error/timeout; optional per-call timeout."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        if timeout_s is not None:
            self._res.timeout = timeout_s * 1000.0
        try:
            yield
        except errors.VisaIOError as exc:
            if exc.error_code == constants.StatusCode.error_timeout:
                raise self.timeout_error(command, resource=self.name, detail=f"within {limit:g} s") from None
            raise self.error(command, resource=self.name, detail=f"I/O error: {_one_line(exc)}") from None
        except (errors.Error, OSError, ValueError) as exc:
            # pyvisa-py reports a refused connection at the first I/O, as a bare OSError
            raise self.error(command, resource=self.name, detail=f"I/O error: {_one_line(exc)}") from None
        finally:
            if timeout_s is not None:
                self._res.timeout = self.timeout_s * 1000.0


_DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)  # 0 where the platform has no such flag (Windows)


class _SocketReader:
    """Block reads from the socket under a pyvisa-py SOCKET session, past its 4 KiB receives.

    pyvisa-py receives 4096 bytes at a time into a buffer it re-slices on every
    read, and read_bytes reads chunk_size (20 KiB) per call: a 10 MB block costs
    thousands of calls and copies. Here bytes go from the kernel into the
    caller's buffer (recv_into), after those pyvisa-py already holds, which
    belong to the same reply. The timeout bounds each wait for more data, as
    pyvisa-py's bounds each of its reads, so a long block on a slow link is
    not cut short.
    """

    def __init__(self, sock: socket.socket, session: Any, timeout_s: float) -> None:
        self._sock = sock
        self._session = session
        self._timeout_s = timeout_s
        self.arrived = 0  # bytes of the read under way received so far

    def read_into(self, view: memoryview) -> int:
        """Fill `view`; fewer bytes only if the peer closed. VisaIOError (timeout) if the data stops."""
        held = self._session._pending_buffer  # pyvisa-py rebinds it: fetch it on every read
        got = min(len(held), len(view))
        view[:got] = held[:got]
        del held[:got]
        self.arrived = got
        first = True
        while got < len(view):
            count = self._recv_into(view[got:], first)
            if not count:
                break
            got += count
            self.arrived = got
            first = False
        return got

    def _recv_into(self, view: memoryview, first: bool) -> int:
        # the first receive of a read may find its bytes there already (the rest of a header, the
        # data behind it): no select then; after a receive that emptied the socket, wait first
        if first and _DONT_WAIT:
            with contextlib.suppress(BlockingIOError):
                return self._sock.recv_into(view, 0, _DONT_WAIT)
        readable, _, _ = select.select([self._sock], [], [], self._timeout_s)
        if not readable:
            raise errors.VisaIOError(constants.StatusCode.error_timeout)
        return self._sock.recv_into(view)

    def read(self, count: int) -> bytes:
        buffer = bytearray(count)
        return bytes(buffer[: self.read_into(memoryview(buffer))])


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def resource_kind(resource: str) -> tuple[str, str]:
    """A VISA resource string's (interface type, resource class), e.g. ("GPIB", "INSTR");
    empty strings where PyVISA cannot parse it."""
    try:
        parsed = rname.parse_resource_name(resource)
    except (errors.Error, ValueError):
        return "", ""
    return parsed.interface_type, parsed.resource_class


def open_session(resource: str, timeout_s: float, visa_library: str = "@py",
                 error: type[InstrumentError] = ScopeError,
                 timeout_error: type[InstrumentTimeout] = ScopeTimeout) -> ScpiSession:
    """Open a VISA resource with the "\\n" read and write terminations SCPI instruments use.

    Every message-based resource an instrument is reached through gets them:

    - ``TCPIP::host::port::SOCKET`` (raw socket) and ``ASRL…::INSTR`` (serial) have no END
      indicator: the LF is what ends a reply, so VISA's termination character stays on
      (without it a SOCKET query times out although the reply arrived; field notes).
    - ``TCPIP::host::inst0::INSTR`` (VXI-11, also ``…::gpib0,5::INSTR`` through a gateway),
      ``TCPIP::host::hislip0::INSTR`` (HiSLIP), ``GPIB0::5::INSTR``, ``USB0::…::INSTR``
      (USBTMC) and ``VICP::host::INSTR`` end every reply with END (EOI on GPIB) sent with its
      last byte, the LF. PyVISA leaves their read termination unset, so the LF after a
      binary block (read to its exact length) stayed unread and answered the next query
      (an IEEE 488.2 instrument then logs Query INTERRUPTED); with it set, `read_block`
      reads the LF and checks it. END alone ends their reads: the termination character
      PyVISA turns on with the read termination is turned off again, so that no read of
      a block's data stops at a 0x0A data byte (VISA would otherwise end a read there
      and `read_bytes` need another for the rest).

    Anything else (register-based VXI/PXI INSTR, INTFC, BACKPLANE, MEMACC) is left as PyVISA
    opens it. A backend that refuses the attributes (pyvisa-py's Prologix GPIB sessions) keeps
    PyVISA's defaults rather than failing to open.
    """
    try:
        rm = pyvisa.ResourceManager(visa_library)
    except (errors.Error, OSError, ValueError) as exc:
        raise error(
            "open",
            resource=resource,
            detail=f"cannot load VISA library {visa_library!r}: {_one_line(exc)}",
        ) from None
    ms = timeout_s * 1000.0
    try:
        res = rm.open_resource(resource, open_timeout=int(ms), timeout=ms)
    except (errors.Error, OSError, ValueError) as exc:
        raise error(
            "open",
            resource=resource,
            detail=f"{_one_line(exc)}: check the resource string and that the instrument is reachable",
        ) from None
    # what ends a reply: END (an INSTR on an interface that has it), the LF (SOCKET, serial INSTR)
    interface, kind = resource_kind(resource)
    ends = (
        "END" if kind == "INSTR" and interface in ("TCPIP", "GPIB", "USB", "VICP")
        else "LF" if kind == "SOCKET" or (kind == "INSTR" and interface == "ASRL")
        else None
    )  # fmt: skip
    if ends is not None:
        res.write_termination = TERMINATION
        try:
            res.read_termination = TERMINATION  # PyVISA turns VISA's termination character (LF) on with it
            if ends == "END":
                res.set_visa_attribute(constants.ResourceAttribute.termchar_enabled, constants.VI_FALSE)
        except Exception:  # a backend refusing the attribute (pyvisa-py's sessions raise UnknownAttribute)
            pass  # PyVISA's defaults, as before: text I/O works, a block's LF is left unread
    return ScpiSession(res, resource, timeout_s, error, timeout_error)


# --- IEEE 488.2 blocks --------------------------------------------------------------------
BLOCK_CHUNK = 1 << 20  # bytes asked of `read` at once (`read_into` is handed all that is due)
MAX_BLOCK_BYTES = 1 << 31  # no dialect's preamble bound comes near: a last guard for direct callers


def read_block(
    read: Callable[[int], bytes],
    command: str,
    datatype: str,
    points: int,
    *,
    big_endian: bool = True,
    termination: bytes = b"\n",
    read_into: Callable[[memoryview], int] | None = None,
    separator: bytes = b"",
) -> np.ndarray:
    """Read `#<n><length><data>` (or `#0<data>`) holding exactly `points` samples of `datatype`;
    `separator` (one byte) may come first: it is skipped (a FastFrame reply may separate its
    frames' blocks with ';', as program message units are; back to back is taken too).

    `read(count)` returns up to `count` bytes of the reply (VISA's read_bytes
    returns them all or times out); fewer means the reply ended. `read_into`,
    if given, reads the data instead: it fills the memoryview it is handed and
    returns how many bytes it wrote (fewer: the reply ended), so the samples
    land in the returned array's memory without a copy. `datatype` is
    a struct/numpy code ("b", "B", "h", "H"). The header is checked before any
    data is read: '#', a digit, that many decimal digits, a byte count that is
    a whole number of samples and equals `points` of them (the preamble's
    count), so a header number alone never decides how much is read or
    allocated. An indefinite block (#0) holds `points` samples. `termination`
    must follow the data. Anything else raises ScopeDataError naming
    `command`, the part at fault and what it held.
    """
    dtype = np.dtype(datatype).newbyteorder(">" if big_endian else "<")
    width = dtype.itemsize
    if not 1 <= points <= MAX_BLOCK_BYTES // width:
        raise ScopeDataError(
            command,
            field="points",
            value=str(points),
            detail=f"a block of 1 to {MAX_BLOCK_BYTES // width} {width}-byte samples was expected",
        )
    expected = points * width
    # one byte at a time: an empty or short reply must not leave us waiting for a second one
    head = _read_exactly(read, 1, command, "block header")
    if separator and head == separator:
        head = _read_exactly(read, 1, command, "block header")
    if head != b"#":
        raise ScopeDataError(
            command,
            field="block header",
            value=_latin1(head),
            detail="an IEEE 488.2 block starts with '#' (are replies sent with headers?)",
        )
    head += _read_exactly(read, 1, command, "block header")
    if not head[1:].isdigit():
        raise ScopeDataError(
            command,
            field="block header",
            value=_latin1(head),
            detail="'#' must be followed by the number of length digits, 0 to 9",
        )
    digits = int(head[1:])
    if digits == 0:  # indefinite length: the data runs to the terminator
        length = expected
    else:
        text = _read_exactly(read, digits, command, "block length")
        if not text.isdigit():  # ASCII digits only: no sign, space, point or exponent
            raise ScopeDataError(
                command,
                field="block length",
                value=_latin1(text),
                detail=f"'#{digits}' must be followed by {digits} decimal digits",
            )
        length = int(text)
        if length % width:
            raise ScopeDataError(
                command,
                field="block length",
                value=str(length),
                detail=f"{length} bytes are not a whole number of {width}-byte samples",
            )
        if length != expected:
            raise ScopeDataError(
                command,
                field="block length",
                value=str(length),
                detail=f"the block holds {length // width} samples, the preamble announced {points}",
            )
    data = _read_data(read, read_into, length, command)
    if termination:
        end = _read_exactly(read, len(termination), command, "block end")
        if end != termination:
            raise ScopeDataError(
                command,
                field="block end",
                value=_latin1(end),
                detail=f"the message terminator {_latin1(termination)!r} must follow the {length} data bytes: "
                "the block is longer than its header says",
            )
    samples = data.view(dtype)
    if not dtype.isnative:  # swap where the bytes are rather than into a second array
        samples.byteswap(inplace=True)
    return samples.view(dtype.newbyteorder("="))


def _read_data(
    read: Callable[[int], bytes], read_into: Callable[[memoryview], int] | None, count: int, command: str
) -> np.ndarray:
    """The `count` data bytes of a block in one array allocated up front (no joining of chunks)."""
    data = np.empty(count, np.uint8)
    view = memoryview(data)
    got = 0
    while got < count:
        if read_into is not None:
            n = read_into(view[got:])
        else:
            chunk = read(min(count - got, BLOCK_CHUNK))
            n = min(len(chunk), count - got)
            view[got : got + n] = chunk[:n]
        if not n:
            raise ScopeDataError(
                command,
                field="block data",
                detail=f"the reply ended after {got} of {count} bytes",
            )
        got += n
    return data


def _read_exactly(read: Callable[[int], bytes], count: int, command: str, part: str) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < count:
        chunk = read(min(count - got, BLOCK_CHUNK))
        if not chunk:
            raise ScopeDataError(
                command,
                field=part,
                detail=f"the reply ended after {got} of {count} bytes",
            )
        chunks.append(chunk[: count - got])
        got += len(chunks[-1])
    return b"".join(chunks)


def _latin1(data: bytes) -> str:
    return data.decode("latin-1")


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

    def real(self, name: str, meaning: str, *, positive: bool = False, nonzero: bool = False) -> float:
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
        """Values derived from fields (sample times, voltages) must be finite too; `name` is blamed."""
        if not all(math.isfinite(r) for r in results):
            raise self.error(name, self.text(name), detail)


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


# --- the SCPI instrument base --------------------------------------------------------------
class ScpiInstrument(Instrument):
    """An `Instrument` over SCPI with the write-then-check discipline: scope dialects and generators.

    Every configuration command travels with an IEEE 488.2 status query in the
    same message ("CMD;*ESR?"), so a rejected command is reported as itself,
    with the instrument's text, rather than as a confusing failure later; one
    message per command also keeps TCP from holding a second small segment
    back for the first one's ACK (Nagle). A query that times out is followed
    by a short look at the error queue, since an instrument that does not
    answer usually logged why. A dialect says how its error queue is read
    (`_error_queue_text`); `Control`s use `write`, `query_value` and `channel`.
    """

    channel: int = 1  # what a Control's {ch} stands for
    error_bits = 32 | 16 | 8 | 4  # *ESR?: command, execution, device, query errors
    error_check_timeout_s = 1.0

    def __init__(self, session: ScpiSession) -> None:
        self.session = session
        session.error, session.timeout_error = self.error, self.timeout_error  # its failures are ours
        self.resource_name = session.name
        self._last_command = ""

    @classmethod
    def connect(cls, resource: str, *, timeout_s: float, visa_library: str = "@py") -> Self:
        """The driver on a new VISA session to `resource` (see `open_session`)."""
        return cls(open_session(resource, timeout_s=timeout_s, visa_library=visa_library,
                                error=cls.error, timeout_error=cls.timeout_error))

    # --- dialect hook ----------------------------------------------------------------------
    @abstractmethod
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        """Read (and so clear) the instrument's error/event queue; "" if nothing to report."""

    # --- raw SCPI ------------------------------------------------------------------------
    def write(self, command: str, check: bool = True) -> None:
        self._last_command = command
        if not check:
            self.session.write(command)
            return
        esr = self._esr(self.session.query(f"{command};*ESR?"), command)
        if esr & self.error_bits:
            raise self.error(command, self._error_text(esr), resource=self.resource_name)

    def query(self, command: str, explain_timeout: bool = True) -> str:
        self._last_command = command
        try:
            return self.session.query(command)
        except InstrumentTimeout as exc:
            if not explain_timeout:
                raise
            raise self._explained(exc) from None

    def query_value(self, command: str, parse: Callable[[str], Any] = real) -> Any:
        """A query whose reply must parse (e.g. not ":BUSY 0" after someone set HEADer ON).

        `parse` raises ValueError, or a ScopeDataError that names the field at fault.
        """
        reply = self.query(command)
        try:
            return parse(reply)
        except ScopeDataError as exc:
            exc.resource = self.resource_name
            raise
        except ValueError:
            raise self.error(
                command, resource=self.resource_name, detail=f"unexpected reply {shorten(reply)!r}"
            ) from None

    def query_block(self, command: str, datatype: str, points: int, big_endian: bool = True) -> np.ndarray:
        return self.query_blocks(command, datatype, points, 1, big_endian)[0]

    def query_blocks(self, command: str, datatype: str, points: int, count: int,
                     big_endian: bool = True) -> np.ndarray:
        """`count` blocks of `points` samples in one reply, as a (count, points) array."""
        self._last_command = command
        try:
            return self.session.query_blocks(command, datatype, points, count, big_endian)
        except InstrumentTimeout as exc:
            raise self._explained(exc) from None

    # --- errors --------------------------------------------------------------------------
    def _esr(self, reply: str, command: str) -> int:
        try:
            return nr1(reply)
        except ValueError:
            raise self.error(command, resource=self.resource_name, detail=f"unexpected *ESR? reply {reply!r}") from None

    def _error_text(self, esr: int, timeout_s: float | None = None) -> str:
        return self._error_queue_text(timeout_s) or f"*ESR? = {esr}"

    def _pending_errors(self, timeout_s: float | None = None) -> str:
        """What the instrument has logged ("" if nothing): *ESR?, then the queue if an error bit is set."""
        esr = self._esr(self.session.query("*ESR?", timeout_s), "*ESR?")
        return self._error_text(esr, timeout_s) if esr & self.error_bits else ""

    def _explained(self, exc: InstrumentTimeout) -> InstrumentTimeout:
        """The same timeout, with what the instrument logged meanwhile (often the reason)."""
        self.session.clear()
        try:
            text = self._pending_errors(min(self.error_check_timeout_s, self.session.timeout_s))
        except InstrumentError:
            text = ""
        return self.timeout_error(exc.command, text, resource=exc.resource, detail=exc.detail)

    def _read_back(self, settings: S, **applied: Any) -> S:
        """`settings` (a settings dataclass) with what the instrument reports it applied;
        the instrument's error if that is no valid setting."""
        try:
            return replace(settings, **applied)
        except ValueError as exc:
            raise self.error(
                self._last_command,
                resource=self.resource_name,
                detail=f"the instrument reports settings that cannot be: {exc}",
            ) from None

    # --- common to every instrument --------------------------------------------------------
    def identify(self) -> str:
        return self.query("*IDN?", explain_timeout=False)

    def check_errors(self) -> None:
        text = self._pending_errors()
        if text:
            raise self.error(self._last_command, text, resource=self.resource_name)

    def close(self) -> None:
        self.session.close()


# --- the SCPI scope base -------------------------------------------------------------------
class ScpiScope(Scope, ScpiInstrument):
    """The SCPI scope: `ScpiInstrument`'s discipline plus single sequences (arm, poll `busy()`, `fetch()`)."""

    busy_poll_s = (0.001, 0.005)  # polling interval while a sequence runs: first, largest
    arm_command = ""  # starts one single sequence
    stop_command = ""  # abandons it

    def __init__(self, session: ScpiSession) -> None:
        super().__init__(session)
        self._applied: ScopeSettings | None = None
        self._acquisitions = 0
        self._in_hand = 0  # the number of the acquisition the instrument holds (what fetch() labels)
        self._source_moved = False  # the waveform transfer points at another channel

    # --- dialect hooks (and ScpiInstrument's `_error_queue_text`) ----------------------------
    @abstractmethod
    def busy(self) -> bool:
        """True while the armed single sequence has not completed."""

    @abstractmethod
    def fetch(self) -> Waveform:
        """Transfer the last acquisition of the configured channel."""

    # --- Scope ---------------------------------------------------------------------------
    @property
    def applied(self) -> ScopeSettings | None:
        return self._applied

    def acquire_single(self) -> Waveform:
        """Arm, poll busy() with a growing interval until done or the settings' timeout, fetch."""
        self._single_sequence()
        if self._source_moved:  # an acquire_channels() failed half-way
            self._select_data_source()
            self._source_moved = False
        waveform = self.fetch()
        self._acquisitions += 1
        return waveform

    def acquire_channels(self) -> dict[int, Waveform]:
        """Arm and wait as acquire_single does, then fetch each channel of the settings."""
        s = self._single_sequence()
        waveforms = {}
        # the triggering channel last: the transfer source ends where configure() put it
        for c in (*s.extra_channels, s.channel):
            self._source_moved = True
            with self._on_channel(c):
                self._select_data_source()
                waveforms[c] = self.fetch()
        self._source_moved = False
        self._acquisitions += 1
        return {c: waveforms[c] for c in s.channels}

    @contextlib.contextmanager
    def _on_channel(self, channel: int) -> Iterator[None]:
        """Controls' {ch} (and Waveform.channel) mean `channel` for a while."""
        kept, self.channel = self.channel, channel
        try:
            yield
        finally:
            self.channel = kept

    @abstractmethod
    def _select_data_source(self) -> None:
        """Point the waveform transfer at `self.channel`."""

    def _segmented_sequence(self, feature: str) -> ScopeSettings:
        """`_single_sequence` for a scope configured with segments, refused before arming otherwise."""
        s = self._applied
        if s is not None and s.segments < 2:
            raise ScopeError("", resource=self.resource_name, detail=f"configure with segments > 1 for {feature}")
        return self._single_sequence()

    def _single_sequence(self) -> ScopeSettings:
        s = self._applied
        if s is None:
            raise RuntimeError("configure() the scope before acquiring")
        self.write(self.arm_command)
        deadline = time.monotonic() + s.acquire_timeout_s
        poll, largest = self.busy_poll_s
        while self.busy():
            if time.monotonic() > deadline:
                self.write(self.stop_command, check=False)
                raise ScopeTimeout(
                    self.arm_command,
                    resource=self.resource_name,
                    detail=f"no complete acquisition within {s.acquire_timeout_s:g} s: check "
                    f"the probe on CH{s.channel}, the trigger ({s.trigger_slope} through "
                    f"{s.trigger_level_v:g} V) and that the target produces pulses",
                )
            time.sleep(poll)
            poll = min(poll * 1.5, largest)
        self._in_hand = self._acquisitions
        return s

    def _waveform(self, t0_s: float, dt_s: float, codes: np.ndarray, scale: CodeScale) -> Waveform:
        """A Waveform of the acquisition in hand (numbered since the scope was opened).

        It keeps the codes as transferred (int8/int16/uint8...): volts (8 bytes a sample)
        are computed only if asked for, and pulse extraction works on the codes.
        """
        return Waveform(
            t0_s=t0_s,
            dt_s=dt_s,
            channel=self.channel,
            index=self._in_hand,
            resolution_v=abs(scale.volts_per_code),
            codes=codes,
            scale=scale,
        )
