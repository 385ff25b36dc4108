"""The oscilloscope interface the station programs against, and its value types.

A dialect module (one per instrument family) implements `Scope`; `open_scope`
connects to a resource through the dialect named in the configuration, so
swapping a real bench for the twin, or one scope family for another, changes a
string, not a code path. `Instrument` (what scopes and function generators
share: connect, *IDN?, error check, close) and `open_instrument` (the
connect-identify-check step behind `open_scope`) serve `instruments.funcgen`
too. This module depends on no other module of the package but
`instruments.dialects`, the registry of dialect names (which imports
nothing): the VISA layer (`instruments.scpi`) and the dialects depend on it,
never the reverse.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Literal, Self, TypeVar

import numpy as np

from instruments.dialects import dialect_class

Slope = Literal["rise", "fall"]
TriggerMode = Literal["normal", "auto"]
InstrumentT = TypeVar("InstrumentT", bound="Instrument")


@dataclass(kw_only=True)
class ScopeSettings:
    """What the station asks of the scope for one run (units: V, divisions, s)."""

    channel: int = 1
    volts_per_div: float
    position_div: float  # trace offset from centre screen, in divisions
    time_per_div: float
    record_length: int
    trigger_level_v: float
    trigger_slope: Slope
    trigger_position_pct: float = 10.0  # share of the record before the trigger
    acquire_timeout_s: float = 10.0  # how long acquire_single waits for a trigger
    # channels recorded beside `channel` (which triggers), with its vertical settings
    extra_channels: tuple[int, ...] = ()
    # frames per acquisition in segmented memory (Tektronix FastFrame, Keysight segmented):
    # each frame is `record_length` points around a trigger of its own; 1: single records
    segments: int = 1
    # set up the instrument's own positive pulse-width measurement on `channel`
    measurement: bool = False
    # normal: wait for a real edge (every run); auto: trigger by itself when none comes, so a
    # first look at a bench not yet wired right still shows what each channel carries
    trigger_mode: TriggerMode = "normal"

    def __post_init__(self) -> None:
        self.extra_channels = tuple(self.extra_channels)
        for c in self.channels:
            if not 1 <= c <= 4:
                raise ValueError(f"channel must be 1..4, got {c}")
        if len(set(self.channels)) != len(self.channels):
            raise ValueError(f"channels must differ, got {self.channels}")
        if self.trigger_mode not in ("normal", "auto"):
            raise ValueError(f"trigger_mode must be 'normal' or 'auto', got {self.trigger_mode!r}")
        if self.trigger_slope not in ("rise", "fall"):
            raise ValueError(f"trigger_slope must be 'rise' or 'fall', got {self.trigger_slope!r}")
        for name in ("volts_per_div", "time_per_div", "acquire_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.record_length < 1:
            raise ValueError(f"record_length must be >= 1, got {self.record_length}")
        if self.segments < 1:
            raise ValueError(f"segments must be >= 1, got {self.segments}")
        if not 0.0 <= self.trigger_position_pct <= 100.0:
            raise ValueError(
                f"trigger_position_pct must be 0..100, got {self.trigger_position_pct}"
            )

    @property
    def channels(self) -> tuple[int, ...]:
        """Every channel acquired: the triggering one first."""
        return (self.channel, *self.extra_channels)

    @property
    def sample_interval_s(self) -> float:
        """A record spans ten horizontal divisions."""
        return 10.0 * self.time_per_div / self.record_length


@dataclass(frozen=True)
class CodeScale:
    """How a digitizer's codes become volts: volts = (code - offset_code) * volts_per_code +
    offset_v.

    Every dialect's preamble has this form (TDS/MSO: YZEro + YMUlt·(code − YOFf);
    InfiniiVision: (code − yreference)·yincrement + yorigin), and the evaluation order
    here gives the same float64 bits as either.
    """

    volts_per_code: float
    offset_code: float = 0.0
    offset_v: float = 0.0

    def volts(self, codes: np.ndarray) -> np.ndarray:
        """float64 volts of `codes` (in place on one new array: no second full-size temporary)."""
        v = np.asarray(codes).astype(np.float64)
        v -= self.offset_code
        v *= self.volts_per_code
        v += self.offset_v
        return v


class Waveform:
    """One acquired record; time 0 is the trigger.

    Built from float64 `volts`, or from the digitizer's integer `codes` and their `scale`
    (what a scope transfers): then `volts` is computed on first use and kept, and pulse
    extraction reads the codes themselves, 1 or 2 bytes a sample instead of 8.
    """

    def __init__(
        self,
        t0_s: float,  # time of sample 0 relative to the trigger (negative: pre-trigger)
        dt_s: float,
        volts: np.ndarray | None = None,
        channel: int = 1,
        index: int = 0,  # acquisition number since the scope was opened
        resolution_v: float = 0.0,  # digitizer step in volts (YMUlt), 0 if unknown
        *,
        codes: np.ndarray | None = None,
        scale: CodeScale | None = None,
    ) -> None:
        if (volts is None) == (codes is None):
            raise TypeError("a Waveform needs either volts or codes")
        if codes is not None:
            if scale is None:
                raise TypeError("codes need their scale (CodeScale) to mean volts")
            codes = np.asarray(codes)
            if codes.ndim != 1 or codes.dtype.kind not in "iu":
                raise TypeError(f"codes must be a 1-D integer array, got {codes.ndim}-D "
                                f"{codes.dtype}")
            resolution_v = resolution_v or abs(scale.volts_per_code)
        self.t0_s = t0_s
        self.dt_s = dt_s
        self.channel = channel
        self.index = index
        self.resolution_v = resolution_v
        self.codes = codes
        self.scale = scale
        self._volts = volts

    @property
    def volts(self) -> np.ndarray:
        """The record in volts (float64), converted from the codes on first use."""
        if self._volts is None:
            assert self.codes is not None and self.scale is not None
            self._volts = self.scale.volts(self.codes)
        return self._volts

    def times(self) -> np.ndarray:
        return self.t0_s + self.dt_s * np.arange(len(self), dtype=np.float64)

    def __len__(self) -> int:
        return len(self.codes if self.codes is not None else self.volts)

    def __repr__(self) -> str:
        data = f"codes={self.codes.dtype}" if self.codes is not None else "volts"
        return (
            f"Waveform(t0_s={self.t0_s!r}, dt_s={self.dt_s!r}, {data}[{len(self)}], "
            f"channel={self.channel}, index={self.index}, resolution_v={self.resolution_v!r})"
        )


class Frames:
    """One segmented acquisition: frames of equal length, each around a trigger of its own.

    `codes` is (frames, points); every frame's sample k lies at t0_s + k·dt_s from its own
    trigger, and `trigger_s[i]` is frame i's trigger time from frame 0's (the scope's time
    tags): sample k of frame i is at trigger_s[i] + t0_s + k·dt_s on the acquisition's clock.
    """

    def __init__(self, t0_s: float, dt_s: float, codes: np.ndarray, scale: CodeScale,
                 trigger_s: np.ndarray,
                 channel: int = 1, index: int = 0) -> None:
        codes = np.asarray(codes)
        trigger_s = np.asarray(trigger_s, dtype=np.float64)
        if codes.ndim != 2 or codes.dtype.kind not in "iu":
            raise TypeError(f"frame codes must be a 2-D integer array, got {codes.ndim}-D "
                            f"{codes.dtype}")
        if trigger_s.shape != (len(codes),):
            raise ValueError(f"{len(codes)} frames need as many time tags, got {trigger_s.shape}")
        self.t0_s, self.dt_s, self.codes, self.scale = t0_s, dt_s, codes, scale
        self.trigger_s, self.channel, self.index = trigger_s, channel, index

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def points(self) -> int:
        return self.codes.shape[1]

    def frame(self, i: int) -> Waveform:
        """Frame i alone, its time 0 its own trigger."""
        return Waveform(self.t0_s, self.dt_s, codes=self.codes[i], scale=self.scale,
                        channel=self.channel,
                        index=self.index)

    def joined(self) -> Waveform:
        """Every frame end to end as one record (no copy): for edge finding in one pass."""
        return Waveform(self.t0_s, self.dt_s, codes=self.codes.reshape(-1), scale=self.scale,
                        channel=self.channel, index=self.index)

    def live_s(self) -> float:
        """The time the frames cover (the scope saw nothing between them)."""
        return len(self) * self.points * self.dt_s

    def __repr__(self) -> str:
        return (f"Frames({len(self)} x {self.points} {self.codes.dtype}, dt_s={self.dt_s!r}, "
                f"channel={self.channel}, index={self.index})")


@dataclass(frozen=True)
class WidthMeasurement:
    """The instrument's own positive pulse-width measurement of one acquisition.

    `count` pulses measured: the population of a scope that measures every pulse of the record
    (MSO), 1 or 0 for one that measures the first (TDS MEASUrement:IMMed, InfiniiVision
    :MEASure:PWIDth); 0 when the scope had no valid measurement (9.9E37), the widths then NaN.
    """

    count: int
    mean_s: float
    min_s: float
    max_s: float
    index: int = 0  # the acquisition (as Waveform.index)
    scope: str = "all"  # which pulses the scope measures: "all" of the record, or its "first"

    @classmethod
    def single(cls, value_s: float, index: int) -> WidthMeasurement:
        """One measured value (NO_MEASUREMENT or beyond: none)."""
        if not (math.isfinite(value_s) and 0.0 <= value_s < NO_MEASUREMENT / 10):
            return cls(0, math.nan, math.nan, math.nan, index, "first")
        return cls(1, value_s, value_s, value_s, index, "first")


NO_MEASUREMENT = 9.9e37  # what SCPI scopes answer when a measurement has no valid value


class InstrumentError(Exception):
    """A command the instrument rejected, or a session that failed (ScopeError, GeneratorError).

    `command` is the SCPI command concerned and `instrument_text` the
    instrument's own words from its error/event queue; `str()` is one line that
    names both, so the CLI can print it instead of a traceback.
    """

    def __init__(
        self,
        command: str,
        instrument_text: str = "",
        *,
        resource: str = "",
        detail: str = "",
    ) -> None:
        self.command = command
        self.instrument_text = instrument_text
        self.resource = resource
        self.detail = detail
        super().__init__(command, instrument_text)

    def __str__(self) -> str:
        return self._message()

    def __reduce__(self) -> tuple[object, ...]:  # keyword arguments survive pickling
        return (type(self), (self.command, self.instrument_text), self.__dict__)

    noun = "instrument"  # what "<noun> error" says when no command is concerned

    def _what(self) -> str:
        return f"{self.command!r} failed" if self.command else f"{self.noun} error"

    def _message(self) -> str:
        parts = [f"{self.resource}: " if self.resource else "", self._what()]
        if self.instrument_text:
            parts.append(f"; instrument says: {self.instrument_text}")
        if self.detail:
            parts.append(f" ({self.detail})")
        return "".join(parts)


class InstrumentTimeout(InstrumentError):
    """The instrument did not answer, or did not finish, in time."""

    def _what(self) -> str:
        return f"{self.command!r} timed out" if self.command else "timed out"


class ScopeError(InstrumentError):
    """A command the scope rejected, or its session failed."""

    noun = "scope"


class ScopeTimeout(InstrumentTimeout, ScopeError):
    """The scope did not answer, or did not finish, in time."""


class ScopeDataError(ScopeError):
    """A reply that arrived but cannot be used: a malformed data block or preamble field.

    `field` names the part of the reply at fault (a preamble field such as
    "XINCR", or "block header", "block length", "block data"), `value` is the
    text received there (shortened; None if there was none), `detail` says
    what was expected. `str()` reads "<resource>: WFMPre?: XINCR is '0' — the
    sample interval must be a positive finite number".
    """

    def __init__(
        self,
        command: str,
        instrument_text: str = "",
        *,
        resource: str = "",
        detail: str = "",
        field: str = "",
        value: str | None = None,
    ) -> None:
        super().__init__(command, instrument_text, resource=resource, detail=detail)
        self.field = field
        self.value = None if value is None else shorten(value)

    def _message(self) -> str:
        where = f"{self.resource}: " if self.resource else ""
        what = self.field or "reply rejected"
        if self.value is not None:
            what += f" is {self.value!r}"
        why = f" — {self.detail}" if self.detail else ""
        return f"{where}{self.command}: {what}{why}"


def shorten(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters (an instrument's garbage can be megabytes long)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Instrument(ABC):
    """What every instrument driver is: connected by `connect`, identified by *IDN?, checked
    for logged errors, closed (also as a context manager). `Scope` and
    `instruments.funcgen.FunctionGenerator` add what their kind of instrument does.

    Implementations are synchronous (VISA is); an asyncio caller runs them in a
    worker thread.
    """

    resource_name: str = ""
    # what its errors are raised as: ScopeError/ScopeTimeout for a scope, GeneratorError/... for a
    # generator, so a caller catches the instrument it means (InstrumentError: either)
    error: ClassVar[type[InstrumentError]] = InstrumentError
    timeout_error: ClassVar[type[InstrumentTimeout]] = InstrumentTimeout
    # regex an *IDN? answer must match for this dialect ("" accepts any instrument)
    identity_pattern: str = ""
    # instruments the pattern's family name also covers that speak another command tree:
    # (pattern, why), refused by name before anything else is sent
    refused_identities: tuple[tuple[str, str], ...] = ()

    @classmethod
    @abstractmethod
    def connect(cls, resource: str, *, timeout_s: float, visa_library: str) -> Self:
        """A driver with a session open on `resource`; nothing is sent yet (see
        `open_instrument`)."""

    @abstractmethod
    def identify(self) -> str:
        """The instrument's *IDN? answer."""

    @abstractmethod
    def check_errors(self) -> None:
        """Raise the instrument's error if it has logged one."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Scope(Instrument):
    """An oscilloscope seen as: configure once, then acquire single records."""

    error = ScopeError
    timeout_error = ScopeTimeout

    @abstractmethod
    def reset(self) -> None:
        """Factory settings, cleared status, replies without headers."""

    @abstractmethod
    def configure(self, settings: ScopeSettings) -> ScopeSettings:
        """Apply `settings`; return what the instrument actually applied."""

    @property
    @abstractmethod
    def applied(self) -> ScopeSettings | None:
        """Settings read back after the last configure() (real scopes round)."""

    @abstractmethod
    def acquire_single(self) -> Waveform:
        """Arm a single sequence, wait for it to complete, fetch the channel."""

    @abstractmethod
    def acquire_channels(self) -> dict[int, Waveform]:
        """One single sequence, every channel of the settings fetched (same `index`)."""

    def acquire_frames(self) -> Frames:
        """One segmented sequence of `settings.segments` frames of the triggering channel."""
        raise ScopeError("", resource=self.resource_name,
                         detail=f"{type(self).__name__} has no segmented acquisition (FastFrame / "
                                "segmented memory)")

    @abstractmethod
    def acquire_measurement(self) -> WidthMeasurement:
        """One single sequence, then the instrument's own pulse-width measurement of it (settings
        with `measurement`); the record stays in the scope, `fetch()` transfers it if wanted."""

    @abstractmethod
    def fetch(self) -> Waveform:
        """Transfer the last acquisition of the configured channel."""


def open_scope(
    resource: str,
    dialect: str = "tektronix_tds",
    timeout_s: float = 5.0,
    visa_library: str = "@py",
) -> Scope:
    """Open `resource` (a VISA resource string) and return the dialect's driver.

    `dialect` is a name from `instruments.dialects.DIALECTS` (ValueError if
    unknown). The instrument must answer *IDN? within `timeout_s`; otherwise
    ScopeTimeout/ScopeError names the resource and what to check.
    """
    return open_instrument(
        dialect_class(dialect), Scope, resource, dialect=dialect, timeout_s=timeout_s,
        visa_library=visa_library
    )


def open_instrument(
    cls: type,
    interface: type[InstrumentT],
    resource: str,
    *,
    dialect: str,
    timeout_s: float,
    visa_library: str,
    device: str = "instrument",
) -> InstrumentT:
    """`cls.connect` to `resource`, then *IDN? must answer and match `cls.identity_pattern`.

    The step `open_scope` and `open_generator` share: `cls` is the class
    registered as `dialect` and must be a subclass of `interface` (TypeError
    otherwise); `cls.connect(resource, timeout_s=..., visa_library=...)` opens
    the session and the driver's `identify()` and `close()` are used. An
    *IDN? that fails or times out raises the class's error (`cls.error`, `cls.timeout_error`) naming
    the resource and what to check on the `device` ("instrument", "generator"); an answer that
    does not match raises `cls.error` asking for the right dialect.
    The session is closed on any failure.
    """
    if not (isinstance(cls, type) and issubclass(cls, interface)):
        raise TypeError(f"dialect {dialect!r} is registered as {cls!r}, which is no "
                        f"{interface.__name__}")
    instrument = cls.connect(resource, timeout_s=timeout_s, visa_library=visa_library)
    try:
        try:
            idn = instrument.identify()
        except InstrumentError as exc:
            what = (
                f"nothing within {timeout_s:g} s"
                if isinstance(exc, InstrumentTimeout)
                else exc.detail
            )
            raise type(exc)(
                "*IDN?",
                exc.instrument_text,
                resource=resource,
                detail=f"{what}: check that the {device} is on and connected, the address "
                "and port in the resource string, and that no other program holds its session",
            ) from None
        for pattern, why in getattr(cls, "refused_identities", ()):
            if re.search(pattern, idn, re.IGNORECASE):
                raise cls.error("*IDN?", idn, resource=resource,
                                detail=f"dialect {dialect!r}: {why}")
        if cls.identity_pattern and not re.search(cls.identity_pattern, idn, re.IGNORECASE):
            raise cls.error(
                "*IDN?",
                idn,
                resource=resource,
                detail=f"dialect {dialect!r} expects an instrument matching "
                f"{cls.identity_pattern!r}: choose the dialect of this instrument",
            )
    except BaseException:
        instrument.close()
        raise
    return instrument
