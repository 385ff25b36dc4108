"""The SCPI instrument base (write, then check the error queue) that every dialect and the function
generator share, and the SCPI scope base the scope dialects subclass."""

from __future__ import annotations

import contextlib
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Self

import numpy as np

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
from instruments.scpi.replies import nr1, real
from instruments.scpi.session import S, ScpiSession, open_session


# --- the SCPI instrument base --------------------------------------------------------------
class ScpiInstrument(Instrument):
    """An `Instrument` over SCPI with the write-then-check discipline: scope dialects and
    generators.

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
        # its failures are ours
        session.error, session.timeout_error = self.error, self.timeout_error
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

    def query_block(self, command: str, datatype: str, points: int,
                    big_endian: bool = True) -> np.ndarray:
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
            raise self.error(command, resource=self.resource_name,
                             detail=f"unexpected *ESR? reply {reply!r}") from None

    def _error_text(self, esr: int, timeout_s: float | None = None) -> str:
        return self._error_queue_text(timeout_s) or f"*ESR? = {esr}"

    def _pending_errors(self, timeout_s: float | None = None) -> str:
        """What the instrument has logged ("" if nothing): *ESR?, then the queue if an error bit is
        set."""
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
    """The SCPI scope: `ScpiInstrument`'s discipline plus single sequences (arm, poll `busy()`,
    `fetch()`)."""

    busy_poll_s = (0.001, 0.005)  # polling interval while a sequence runs: first, largest
    arm_command = ""  # starts one single sequence
    stop_command = ""  # abandons it

    def __init__(self, session: ScpiSession) -> None:
        super().__init__(session)
        self._applied: ScopeSettings | None = None
        self._acquisitions = 0
        # the number of the acquisition the instrument holds (what fetch() labels)
        self._in_hand = 0
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
        """`_single_sequence` for a scope configured with segments, refused before arming
        otherwise."""
        s = self._applied
        if s is not None and s.segments < 2:
            raise ScopeError("", resource=self.resource_name,
                             detail=f"configure with segments > 1 for {feature}")
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
