"""The SCPI session under every instrument: a PyVISA resource (pyvisa-py: TCP sockets, USB) whose
failures are translated into the instrument's own error class, naming the resource and the command;
block reads straight from the socket past pyvisa-py's 4 KiB receives."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator
from typing import Any, TypeVar

import numpy as np
import pyvisa
from pyvisa import constants, errors, rname

from instruments.scope import (
    InstrumentError,
    InstrumentTimeout,
    ScopeDataError,
    ScopeError,
    ScopeTimeout,
)
from instruments.scpi.blocks import read_block

TERMINATION = "\n"
S = TypeVar("S")  # a settings dataclass (ScopeSettings, GeneratorSettings)


class ScpiSession:
    """A VISA message-based resource with errors translated and a known timeout."""

    def __init__(self, resource: Any, name: str, timeout_s: float,
                 error: type[InstrumentError] = ScopeError,
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

    def query_block(self, command: str, datatype: str, points: int,
                    big_endian: bool = True) -> np.ndarray:
        """`points` samples of `datatype` in an IEEE 488.2 block (MSB first unless told
        otherwise)."""
        return self.query_blocks(command, datatype, points, 1, big_endian)[0]

    def query_blocks(self, command: str, datatype: str, points: int, count: int,
                     big_endian: bool = True) -> np.ndarray:
        """`count` blocks of `points` samples each, back to back in one reply (a FastFrame
        CURVe?: one block per frame, one terminator after the last), as a (count, points) array.

        See `read_block`. A rejected reply is flushed so that the next query is
        not answered by its remains; a reply that stops half-way times out
        saying how far it got. On a pyvisa-py SOCKET resource the block is read
        from the socket itself, straight into the array (`SocketReader`);
        on any other resource through VISA, up to BLOCK_CHUNK bytes per VISA read.
        """
        received = pending = 0  # bytes read; bytes of the read under way
        sock = self._raw_socket()
        reader = None if sock is None else SocketReader(sock, self._pyvisa_py_session(),
                                                        self.timeout_s)

        def read(count: int) -> bytes:
            nonlocal received, pending
            pending = count
            # chunk_size=count: one VISA read per call, not one per 20 KiB (PyVISA's default)
            data = self._res.read_bytes(count,
                                        chunk_size=count) if reader is None else reader.read(count)
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
            arrived = (
                f" ({reader.arrived} of them arrived)"
                if reader is not None and reader.arrived
                else ""
            )
            raise self.timeout_error(
                command,
                resource=self.name,
                detail=f"{exc.detail}, {received} bytes into the reply, while {pending} more were "
                f"due{arrived}: the block is shorter than its header says",
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
            raise self.error("", resource=self.name,
                             detail=f"the connection was lost: {exc}") from None

    def _pyvisa_py_session(self) -> Any:
        return self._res.visalib.sessions[self._res.session]

    def _raw_socket(self) -> socket.socket | None:
        """The TCP socket under a pyvisa-py SOCKET resource (None for any other resource or
        backend)."""
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
        """VISA and socket exceptions -> the instrument's error/timeout; optional per-call
        timeout."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        if timeout_s is not None:
            self._res.timeout = timeout_s * 1000.0
        try:
            yield
        except errors.VisaIOError as exc:
            if exc.error_code == constants.StatusCode.error_timeout:
                raise self.timeout_error(command, resource=self.name,
                                         detail=f"within {limit:g} s") from None
            raise self.error(command, resource=self.name,
                             detail=f"I/O error: {_one_line(exc)}") from None
        except (errors.Error, OSError, ValueError) as exc:
            # pyvisa-py reports a refused connection at the first I/O, as a bare OSError
            raise self.error(command, resource=self.name,
                             detail=f"I/O error: {_one_line(exc)}") from None
        finally:
            if timeout_s is not None:
                self._res.timeout = self.timeout_s * 1000.0


_DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)  # 0 where the platform has no such flag (Windows)


class SocketReader:
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
        """Fill `view`; fewer bytes only if the peer closed. VisaIOError (timeout) if the data
        stops."""
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
            detail=f"{_one_line(exc)}: check the resource string and that the instrument is "
                   "reachable",
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
            # PyVISA turns VISA's termination character (LF) on with it
            res.read_termination = TERMINATION
            if ends == "END":
                res.set_visa_attribute(constants.ResourceAttribute.termchar_enabled,
                                       constants.VI_FALSE)
        # a backend refusing the attribute (pyvisa-py's sessions raise UnknownAttribute)
        except Exception:
            pass  # PyVISA's defaults, as before: text I/O works, a block's LF is left unread
    return ScpiSession(res, resource, timeout_s, error, timeout_error)
