"""The oscilloscope interface the station programs against, and its value types.

A dialect module (one per instrument family) implements `Scope`; `open_scope`
opens a VISA resource and hands it to the dialect named in the configuration,
so swapping a real bench for the twin, or one scope family for another,
changes a string, not a code path.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

import numpy as np

Slope = Literal["rise", "fall"]


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

    def __post_init__(self) -> None:
        if not 1 <= self.channel <= 4:
            raise ValueError(f"channel must be 1..4, got {self.channel}")
        if self.trigger_slope not in ("rise", "fall"):
            raise ValueError(f"trigger_slope must be 'rise' or 'fall', got {self.trigger_slope!r}")
        for name in ("volts_per_div", "time_per_div", "acquire_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.record_length < 1:
            raise ValueError(f"record_length must be >= 1, got {self.record_length}")
        if not 0.0 <= self.trigger_position_pct <= 100.0:
            raise ValueError(f"trigger_position_pct must be 0..100, got {self.trigger_position_pct}")

    @property
    def sample_interval_s(self) -> float:
        """A record spans ten horizontal divisions."""
        return 10.0 * self.time_per_div / self.record_length


@dataclass(eq=False)
class Waveform:
    """One acquired record in volts; time 0 is the trigger."""

    t0_s: float  # time of sample 0 relative to the trigger (negative: pre-trigger)
    dt_s: float
    volts: np.ndarray = field(repr=False)  # float64
    channel: int = 1
    index: int = 0  # acquisition number since the scope was opened
    resolution_v: float = 0.0  # digitizer step in volts (YMUlt), 0 if unknown

    def times(self) -> np.ndarray:
        return self.t0_s + self.dt_s * np.arange(len(self.volts), dtype=np.float64)

    def __len__(self) -> int:
        return len(self.volts)


class ScopeError(Exception):
    """A command the instrument rejected, or a session that failed.

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

    def _what(self) -> str:
        return f"{self.command!r} failed" if self.command else "scope error"

    def _message(self) -> str:
        parts = [f"{self.resource}: " if self.resource else "", self._what()]
        if self.instrument_text:
            parts.append(f"; instrument says: {self.instrument_text}")
        if self.detail:
            parts.append(f" ({self.detail})")
        return "".join(parts)


class ScopeTimeout(ScopeError):
    """The instrument did not answer, or did not finish, in time."""

    def _what(self) -> str:
        return f"{self.command!r} timed out" if self.command else "timed out"


class Scope(ABC):
    """An oscilloscope seen as: configure once, then acquire single records.

    Implementations are synchronous (VISA is); an asyncio caller runs them in a
    worker thread.
    """

    resource_name: str = ""
    # regex an *IDN? answer must match for this dialect ("" accepts any instrument)
    identity_pattern: str = ""

    @abstractmethod
    def identify(self) -> str:
        """The instrument's *IDN? answer."""

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
    def check_errors(self) -> None:
        """Raise ScopeError if the instrument has logged an error."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Scope:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# dialect name -> "module:Class"; imported lazily so dialects may import this module
DIALECTS: dict[str, str] = {
    "tektronix_tds": "instruments.tektronix_tds:TektronixTDS",
    "tektronix_mso": "instruments.tektronix_mso:TektronixMSO",
    "keysight_infiniivision": "instruments.keysight_infiniivision:KeysightInfiniiVision",
}


def _dialect_class(dialect: str) -> type:
    try:
        target = DIALECTS[dialect]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ValueError(f"unknown scope dialect {dialect!r} (known: {known})") from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def open_scope(
    resource: str,
    dialect: str = "tektronix_tds",
    timeout_s: float = 5.0,
    visa_library: str = "@py",
) -> Scope:
    """Open `resource` (a VISA resource string) and return the dialect's driver.

    The instrument must answer *IDN? within `timeout_s`; otherwise
    ScopeTimeout/ScopeError names the resource and what to check.
    """
    from instruments import scpi  # the VISA layer; kept out of import time of the types

    cls = _dialect_class(dialect)
    session = scpi.open_session(resource, timeout_s=timeout_s, visa_library=visa_library)
    try:
        scope = cls(session)
        try:
            idn = scope.identify()
        except ScopeError as exc:
            what = f"nothing within {timeout_s:g} s" if isinstance(exc, ScopeTimeout) else exc.detail
            raise type(exc)(
                "*IDN?",
                exc.instrument_text,
                resource=resource,
                detail=f"{what}: check that the instrument is on and connected, the address "
                "and port in the resource string, and that no other program holds its session",
            ) from None
        if cls.identity_pattern and not re.search(cls.identity_pattern, idn, re.IGNORECASE):
            raise ScopeError(
                "*IDN?",
                idn,
                resource=resource,
                detail=f"dialect {dialect!r} expects an instrument matching "
                f"{cls.identity_pattern!r}: choose the dialect of this instrument",
            )
    except BaseException:
        session.close()
        raise
    return scope
