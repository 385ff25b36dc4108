"""SCPI over VISA: the session, declarative settings, and the error discipline.

Everything PyVISA can raise is translated here into ScopeError/ScopeTimeout
naming the resource and the command, so no VISA traceback reaches a user.
Dialects subclass `ScpiScope` and describe their settings with `Control`
(in the spirit of PyMeasure's `Instrument.control`, without depending on it).
"""

from __future__ import annotations

import contextlib
import re
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pyvisa
from pyvisa import constants, errors, rname

from instruments.scope import Scope, ScopeError, ScopeSettings, ScopeTimeout, Waveform

TERMINATION = "\n"


class ScpiSession:
    """A VISA message-based resource with errors translated and a known timeout."""

    def __init__(self, resource: Any, name: str, timeout_s: float) -> None:
        self._res = resource
        self.name = name
        self.timeout_s = timeout_s

    # --- I/O -------------------------------------------------------------------------
    def write(self, command: str) -> None:
        with self._translated(command):
            self._res.write(command)

    def query(self, command: str, timeout_s: float | None = None) -> str:
        with self._translated(command, timeout_s):
            return self._res.query(command).strip()

    def query_block(self, command: str, datatype: str, points: int, big_endian: bool = True) -> np.ndarray:
        """An IEEE 488.2 definite-length block (MSB first unless told otherwise)."""
        with self._translated(command):
            return self._res.query_binary_values(
                command,
                datatype=datatype,
                is_big_endian=big_endian,
                container=np.array,
                data_points=points,  # only used if the block turns out indefinite (#0)
                expect_termination=True,
            )

    def clear(self) -> None:
        """Drop a late reply so the next query is not answered by the previous one."""
        with contextlib.suppress(errors.Error, OSError, NotImplementedError):
            self._res.clear()

    def close(self) -> None:
        with contextlib.suppress(errors.Error, OSError):
            self._res.close()

    # --- error translation ---------------------------------------------------------------
    @contextlib.contextmanager
    def _translated(self, command: str, timeout_s: float | None = None) -> Iterator[None]:
        """VISA and socket exceptions -> ScopeError/ScopeTimeout; optional per-call timeout."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        if timeout_s is not None:
            self._res.timeout = timeout_s * 1000.0
        try:
            yield
        except errors.VisaIOError as exc:
            if exc.error_code == constants.StatusCode.error_timeout:
                raise ScopeTimeout(command, resource=self.name, detail=f"within {limit:g} s") from None
            raise ScopeError(command, resource=self.name, detail=f"I/O error: {_one_line(exc)}") from None
        except (errors.Error, OSError, ValueError) as exc:
            # pyvisa-py reports a refused connection at the first I/O, as a bare OSError
            raise ScopeError(command, resource=self.name, detail=f"I/O error: {_one_line(exc)}") from None
        finally:
            if timeout_s is not None:
                self._res.timeout = self.timeout_s * 1000.0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def open_session(resource: str, timeout_s: float, visa_library: str = "@py") -> ScpiSession:
    """Open a VISA resource; raw sockets get the "\\n" terminations SCPI instruments use."""
    try:
        rm = pyvisa.ResourceManager(visa_library)
    except (errors.Error, OSError, ValueError) as exc:
        raise ScopeError(
            "open",
            resource=resource,
            detail=f"cannot load VISA library {visa_library!r}: {_one_line(exc)}",
        ) from None
    ms = timeout_s * 1000.0
    try:
        res = rm.open_resource(resource, open_timeout=int(ms), timeout=ms)
    except (errors.Error, OSError, ValueError) as exc:
        raise ScopeError(
            "open",
            resource=resource,
            detail=f"{_one_line(exc)}: check the resource string and that the instrument is reachable",
        ) from None
    try:
        parsed = rname.parse_resource_name(resource)
    except (errors.Error, ValueError):
        parsed = None
    if parsed is not None and parsed.resource_class == "SOCKET":
        # SOCKET resources have no termination by default and suppress END (field notes)
        res.read_termination = TERMINATION
        res.write_termination = TERMINATION
    return ScpiSession(res, resource, timeout_s)


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
        from_scpi: Callable[[str], Any] = float,
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


def nr1(reply: str) -> int:
    """Integer replies; some instruments send them as NR3 (1.2E+5)."""
    return int(round(float(reply)))


_FIELD = re.compile(r'"(?:[^"]|"")*"|[^;]+')


def split_fields(reply: str) -> list[str]:
    """Split a compound reply at ';' outside quoted strings."""
    return [m.group(0).strip() for m in _FIELD.finditer(reply)]


def unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return text


# --- the SCPI scope base -------------------------------------------------------------------
class ScpiScope(Scope):
    """Write-then-check discipline shared by SCPI dialects.

    Every configuration command travels with an IEEE 488.2 status query in the
    same message ("CMD;*ESR?"), so a rejected command is reported as itself,
    with the instrument's text, rather than as a confusing failure later; one
    message per command also keeps TCP from holding a second small segment
    back for the first one's ACK (Nagle). A query that times out is followed
    by a short look at the error queue, since an instrument that does not
    answer usually logged why.
    """

    channel: int = 1
    error_bits = 32 | 16 | 8 | 4  # *ESR?: command, execution, device, query errors
    error_check_timeout_s = 1.0

    busy_poll_s = (0.001, 0.02)  # polling interval while a sequence runs: first, largest
    arm_command = ""  # starts one single sequence
    stop_command = ""  # abandons it

    def __init__(self, session: ScpiSession) -> None:
        self.session = session
        self.resource_name = session.name
        self._last_command = ""
        self._applied: ScopeSettings | None = None
        self._acquisitions = 0

    # --- dialect hooks ---------------------------------------------------------------------
    @abstractmethod
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        """Read (and so clear) the instrument's error/event queue; "" if nothing to report."""

    @abstractmethod
    def busy(self) -> bool:
        """True while the armed single sequence has not completed."""

    @abstractmethod
    def fetch(self) -> Waveform:
        """Transfer the last acquisition of the configured channel."""

    # --- raw SCPI ------------------------------------------------------------------------
    def write(self, command: str, check: bool = True) -> None:
        self._last_command = command
        if not check:
            self.session.write(command)
            return
        esr = self._esr(self.session.query(f"{command};*ESR?"), command)
        if esr & self.error_bits:
            raise ScopeError(command, self._error_text(esr), resource=self.resource_name)

    def query(self, command: str, explain_timeout: bool = True) -> str:
        self._last_command = command
        try:
            return self.session.query(command)
        except ScopeTimeout as exc:
            if not explain_timeout:
                raise
            raise self._explained(exc) from None

    def query_value(self, command: str, parse: Callable[[str], Any] = float) -> Any:
        """A query whose reply must parse (e.g. not ":BUSY 0" after someone set HEADer ON)."""
        reply = self.query(command)
        try:
            return parse(reply)
        except ValueError:
            raise ScopeError(command, resource=self.resource_name, detail=f"unexpected reply {reply!r}") from None

    def query_block(self, command: str, datatype: str, points: int, big_endian: bool = True) -> np.ndarray:
        self._last_command = command
        try:
            return self.session.query_block(command, datatype, points, big_endian)
        except ScopeTimeout as exc:
            raise self._explained(exc) from None

    # --- errors --------------------------------------------------------------------------
    def _esr(self, reply: str, command: str) -> int:
        try:
            return nr1(reply)
        except ValueError:
            raise ScopeError(command, resource=self.resource_name, detail=f"unexpected *ESR? reply {reply!r}") from None

    def _error_text(self, esr: int, timeout_s: float | None = None) -> str:
        return self._error_queue_text(timeout_s) or f"*ESR? = {esr}"

    def _pending_errors(self, timeout_s: float | None = None) -> str:
        esr = self._esr(self.session.query("*ESR?", timeout_s), "*ESR?")
        return self._error_text(esr, timeout_s) if esr & self.error_bits else ""

    def _explained(self, exc: ScopeTimeout) -> ScopeTimeout:
        """The same timeout, with what the instrument logged meanwhile (often the reason)."""
        self.session.clear()
        try:
            text = self._pending_errors(min(self.error_check_timeout_s, self.session.timeout_s))
        except ScopeError:
            text = ""
        return ScopeTimeout(exc.command, text, resource=exc.resource, detail=exc.detail)

    # --- Scope ---------------------------------------------------------------------------
    def identify(self) -> str:
        return self.query("*IDN?", explain_timeout=False)

    @property
    def applied(self) -> ScopeSettings | None:
        return self._applied

    def acquire_single(self) -> Waveform:
        """Arm, poll busy() with a growing interval until done or the settings' timeout, fetch."""
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
        return self.fetch()

    def _waveform(self, t0_s: float, dt_s: float, volts: np.ndarray, resolution_v: float) -> Waveform:
        """The next acquisition's Waveform (numbered since the scope was opened)."""
        index = self._acquisitions
        self._acquisitions += 1
        return Waveform(t0_s=t0_s, dt_s=dt_s, volts=volts, channel=self.channel, index=index, resolution_v=resolution_v)

    def _check_points(self, command: str, codes: np.ndarray, announced: int) -> None:
        if len(codes) != announced:
            raise ScopeError(
                command,
                resource=self.resource_name,
                detail=f"{len(codes)} points received, the preamble announced {announced}",
            )

    def check_errors(self) -> None:
        text = self._pending_errors()
        if text:
            raise ScopeError(self._last_command, text, resource=self.resource_name)

    def close(self) -> None:
        self.session.close()
