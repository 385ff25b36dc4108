"""Function generators: the stimulus side of a delay run (seed 002, GPIO response timing).

A generator drives a GPIO input of the device under test with pulses while a
scope times the device's answer. `FunctionGenerator` is the interface the
station programs against, `GeneratorSettings` what it asks for, and
`open_generator` connects through the dialect named in the configuration
(`instruments.dialects.GENERATORS`), as `open_scope` does for scopes.

The stimulus must never phase-lock with a periodic interrupt on the device
(a timer tick would then always, or never, delay the answer, and the
measured distribution would say more about the beat than about the device):
its period carries a random jitter, `GeneratorSettings.jitter`, a fraction
of the period.

Dialect `keysight_33500` (Keysight/Agilent 33500B and 33600A, SCPI over a raw
socket on port 5025): a pulse carrier whose frequency is modulated by the
instrument's internal noise source, which is the one random timing source
these instruments have (BURSt with TRIGger:SOURce TIMer repeats at a fixed
interval; FM by a sine or ramp is periodic and would lock at its own beat):

    OUTPut<n>:LOAD INFinity               levels as seen by a high-impedance GPIO input
    SOURce<n>:FUNCtion PULSe
    SOURce<n>:FUNCtion:PULSe:HOLD WIDTh   the width stays in seconds while FM moves the period
    SOURce<n>:FREQuency <f>
    SOURce<n>:FUNCtion:PULSe:WIDTh <w>
    SOURce<n>:VOLTage:HIGH <v> / :LOW <v> (in whichever order keeps HIGH above LOW)
    SOURce<n>:FM:SOURce INTernal
    SOURce<n>:FM:INTernal:FUNCtion NOISe
    SOURce<n>:FM:DEViation <jitter · f>
    SOURce<n>:FM:STATe ON                 (OFF when jitter is 0)
    OUTPut<n> ON|OFF

Mapping jitter → deviation. FM makes the instantaneous frequency
f(t) = f + d·m(t), m the modulating waveform scaled to ±1 at its peaks
(33500 Operating and Service Guide, "Waveform Generation Tutorial", FM:
y(t) = A·sin[(ωc + d·m(t))·t]). With d = jitter·f a period lasts
1/(f·(1 + jitter·m)): between T/(1 + jitter) and T/(1 − jitter) for the
nominal period T = 1/f, i.e. ±jitter·T to first order, and the mean
*frequency* stays f. The instrument limits d to the carrier frequency, so
`jitter` ≤ 0.5 keeps well inside it and keeps the longest period ≤ 2·T. The
width must fit the shortest period, T/(1 + jitter) (checked by the settings).
How the per-period frequencies are correlated depends on the bandwidth of the
instrument's modulating noise, which this driver leaves at its default:
check the period spread with the scope on a new bench (docs/function-generator.md).

Errors follow the scope drivers' discipline, from the same code
(`instruments.scpi.ScpiInstrument`, which `Keysight33500` and the SCPI scope
dialects subclass): every setting travels as "CMD;*ESR?", a set error bit is
reported with the SYSTem:ERRor? queue's text (``-222,"Data out of range"``),
and configure() reads the queue once more at the end (the queue alone, no
*ESR? first: the 33500 logs every error there). Everything raises
`GeneratorError`/`GeneratorTimeout` (the package's instrument errors, InstrumentError's
kind for a generator: command, instrument text, resource), never a VISA exception.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from dataclasses import dataclass

from instruments.dialects import generator_class
from instruments.scope import (
    Instrument,
    InstrumentError,
    InstrumentTimeout,
    open_instrument,
    shorten,
)
from instruments.scpi import (
    Control,
    ScpiInstrument,
    ScpiSession,
    flag,
    from_keyword,
    keyword,
    on_off,
    positive,
    real,
)

CHANNELS = (1, 2)
MAX_JITTER = 0.5


@dataclass(kw_only=True)
class GeneratorSettings:
    """A pulse stimulus (units: Hz, s, V). `jitter` is the period's random spread as a fraction
    of the nominal period 1/frequency_hz, 0 (strictly periodic) to 0.5."""

    channel: int = 1
    frequency_hz: float
    width_s: float
    low_v: float = 0.0
    high_v: float = 3.3  # a Raspberry Pi's GPIO; 5.0 for an Arduino Uno
    jitter: float = 0.0
    # what the instrument makes the pulses with (read back): a PULSe carrier holds width_s fixed;
    # the SQUare fallback (a firmware that refuses FM on a pulse) holds the duty cycle, so with
    # jitter each pulse lasts width_s·(its period / the nominal period)
    carrier: str = "pulse"

    def __post_init__(self) -> None:
        if self.carrier not in ("pulse", "square"):
            raise ValueError(f"carrier must be pulse or square, got {self.carrier!r}")
        if self.channel not in CHANNELS:
            raise ValueError(f"channel must be one of {CHANNELS}, got {self.channel!r}")
        for name in ("frequency_hz", "width_s", "low_v", "high_v", "jitter"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not self.frequency_hz > 0:
            raise ValueError(f"frequency_hz must be > 0, got {self.frequency_hz!r}")
        if not 0.0 <= self.jitter <= MAX_JITTER:
            raise ValueError(f"jitter must be a fraction of the period from 0 to {MAX_JITTER}, got "
                             f"{self.jitter!r}")
        if not self.width_s > 0:
            raise ValueError(f"width_s must be > 0, got {self.width_s!r}")
        if not self.width_s < self.shortest_period_s:
            raise ValueError(
                f"width_s {self.width_s:g} s must be shorter than the shortest period, "
                f"1/(frequency_hz·(1 + jitter)) = {self.shortest_period_s:g} s: "
                "lower the frequency, the jitter or the width"
            )
        if not self.high_v > self.low_v:
            raise ValueError(f"high_v ({self.high_v!r} V) must be above low_v ({self.low_v!r} V)")

    @property
    def period_s(self) -> float:
        return 1.0 / self.frequency_hz

    @property
    def shortest_period_s(self) -> float:
        """The period at the highest instantaneous frequency, f·(1 + jitter)."""
        return 1.0 / (self.frequency_hz * (1.0 + self.jitter))

    @property
    def longest_period_s(self) -> float:
        return 1.0 / (self.frequency_hz * (1.0 - self.jitter))

    @property
    def deviation_hz(self) -> float:
        """The FM peak deviation that realises the jitter: jitter · frequency."""
        return self.jitter * self.frequency_hz


class GeneratorError(InstrumentError):
    """A command the generator rejected, or its session failed."""

    noun = "generator"


class GeneratorTimeout(InstrumentTimeout, GeneratorError):
    """The generator did not answer, or did not finish, in time."""


class FunctionGenerator(Instrument):
    """A function generator seen as: configure a pulse stimulus, switch its output on and off."""

    error = GeneratorError
    timeout_error = GeneratorTimeout

    @abstractmethod
    def reset(self) -> None:
        """Factory settings (output off), cleared status."""

    @abstractmethod
    def configure(self, settings: GeneratorSettings) -> GeneratorSettings:
        """Apply `settings` (the output state is left alone); return what the instrument applied."""

    @property
    @abstractmethod
    def applied(self) -> GeneratorSettings | None:
        """Settings read back after the last configure()."""

    @abstractmethod
    def set_output(self, on: bool) -> None:
        """Switch the configured channel's output on or off."""

    @abstractmethod
    def output_enabled(self) -> bool:
        """Whether the configured channel's output is on, as the instrument says."""


def open_generator(
    resource: str,
    dialect: str = "keysight_33500",
    timeout_s: float = 5.0,
    visa_library: str = "@py",
) -> FunctionGenerator:
    """Open `resource` (a VISA resource string) and return the dialect's driver.

    `dialect` is a name from `instruments.dialects.GENERATORS` (ValueError if
    unknown). The instrument must answer *IDN? within `timeout_s` and match
    the dialect; otherwise GeneratorTimeout/GeneratorError names the resource and what
    to check.
    """
    return open_instrument(
        generator_class(dialect),
        FunctionGenerator,
        resource,
        dialect=dialect,
        timeout_s=timeout_s,
        visa_library=visa_library,
        device="generator",
    )


# --- the Keysight/Agilent 33500B / 33600A dialect ----------------------------------------------
FUNCTIONS = {
    "sine": "SINusoid",
    "square": "SQUare",
    "triangle": "TRIangle",
    "ramp": "RAMP",
    "pulse": "PULSe",
    "prbs": "PRBS",
    "noise": "NOISe",
    "arb": "ARB",
    "dc": "DC",
}
MODULATING = {k: v for k, v in FUNCTIONS.items() if k not in ("pulse", "dc")}
FM_SOURCES = {"internal": "INTernal", "external": "EXTernal", "ch1": "CH1", "ch2": "CH2"}
HOLD = {"width": "WIDTh", "duty": "DCYCle"}
INFINITE_OHMS = 9e37  # OUTPut:LOAD? answers 9.9E+37 for INFinity
_ERROR = re.compile(r'([+-]?\d+),"((?:[^"]|"")*)"')
MAX_ERRORS = 20  # the 33500's error queue holds no more than this


def load_ohms(reply: str) -> float:
    """OUTPut:LOAD? reply -> ohms, math.inf for high impedance (9.9E+37); ValueError otherwise."""
    value = positive(reply)
    return math.inf if value >= INFINITE_OHMS else value


def load_argument(ohms: float) -> str:
    if ohms == math.inf:
        return "INFinity"
    if not (math.isfinite(ohms) and 1.0 <= ohms <= 10_000.0):
        raise ValueError(f"load {ohms!r} Ω is outside 1..10000 Ω (or infinite)")
    return f"{ohms:.9g}"


class Keysight33500(FunctionGenerator, ScpiInstrument):
    """A 33500B/33600A series waveform generator over any VISA session.

    `ScpiInstrument` supplies the session, the write-then-check discipline and
    `connect`, `identify`, `check_errors`, `close` (`Instrument`'s abstract ones).
    """

    identity_pattern = r"^(KEYSIGHT|AGILENT) TECHNOLOGIES,\s*33[56]\d\d"

    function = Control(
        "SOURce{ch}:FUNCtion?", "SOURce{ch}:FUNCtion {value}", from_keyword(FUNCTIONS),
        keyword(FUNCTIONS)
    )
    pulse_hold = Control(
        "SOURce{ch}:FUNCtion:PULSe:HOLD?", "SOURce{ch}:FUNCtion:PULSe:HOLD {value}",
        from_keyword(HOLD), keyword(HOLD)
    )
    frequency_hz = Control("SOURce{ch}:FREQuency?", "SOURce{ch}:FREQuency {value:.12g}", positive)
    width_s = Control("SOURce{ch}:FUNCtion:PULSe:WIDTh?",
                      "SOURce{ch}:FUNCtion:PULSe:WIDTh {value:.12g}", positive)
    high_v = Control("SOURce{ch}:VOLTage:HIGH?", "SOURce{ch}:VOLTage:HIGH {value:.9g}", real)
    low_v = Control("SOURce{ch}:VOLTage:LOW?", "SOURce{ch}:VOLTage:LOW {value:.9g}", real)
    load = Control("OUTPut{ch}:LOAD?", "OUTPut{ch}:LOAD {value}", load_ohms, load_argument)
    output = Control("OUTPut{ch}?", "OUTPut{ch} {value}", flag, on_off)
    fm_enabled = Control("SOURce{ch}:FM:STATe?", "SOURce{ch}:FM:STATe {value}", flag, on_off)
    fm_source = Control(
        "SOURce{ch}:FM:SOURce?", "SOURce{ch}:FM:SOURce {value}", from_keyword(FM_SOURCES),
        keyword(FM_SOURCES)
    )
    fm_function = Control(
        "SOURce{ch}:FM:INTernal:FUNCtion?",
        "SOURce{ch}:FM:INTernal:FUNCtion {value}",
        from_keyword(MODULATING),
        keyword(MODULATING),
    )
    fm_deviation_hz = Control("SOURce{ch}:FM:DEViation?", "SOURce{ch}:FM:DEViation {value:.12g}",
                              real)
    duty_pct = Control("SOURce{ch}:FUNCtion:SQUare:DCYCle?",
                       "SOURce{ch}:FUNCtion:SQUare:DCYCle {value:.12g}",
                       positive)

    def __init__(self, session: ScpiSession) -> None:
        super().__init__(session)
        self._applied: GeneratorSettings | None = None

    # --- errors: the SYSTem:ERRor? queue -------------------------------------------------------
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        """Read (and so clear) SYSTem:ERRor? until "+0,No error"; "" if it was empty."""
        errors = []
        for _ in range(MAX_ERRORS + 1):
            reply = self.session.query("SYSTem:ERRor?", timeout_s)
            m = _ERROR.match(reply)
            if m is None:
                errors.append(shorten(reply))
                break
            if int(m.group(1)) == 0:
                break
            errors.append(m.group(0))
        return " | ".join(errors)

    def _pending_errors(self, timeout_s: float | None = None) -> str:
        """The queue alone, without *ESR? first: the 33500 logs every error there.

        check_errors() and a query that timed out (-113 for an unknown query) read it so.
        """
        return self._error_queue_text(timeout_s)

    # --- FunctionGenerator -------------------------------------------------------------------
    def reset(self) -> None:
        self.write("*RST;*CLS")
        self._applied = None

    @property
    def applied(self) -> GeneratorSettings | None:
        return self._applied

    def configure(self, settings: GeneratorSettings) -> GeneratorSettings:
        s = settings
        # half-way between two configurations, no settings describe the instrument
        self._applied = None
        self.channel = s.channel
        # levels are programmed as the load sees them: say the load first, or they would be halved
        self.load = math.inf
        # FM off while the carrier changes: the deviation may not exceed the carrier frequency
        self.fm_enabled = False
        # the width must fit the period at every step: the present state fits and so does the
        # new one, so growing the width after the frequency, or shrinking it before, always does
        if self.width_s <= s.width_s:
            self.frequency_hz = s.frequency_hz
            self.width_s = s.width_s
        else:
            self.width_s = s.width_s
            self.frequency_hz = s.frequency_hz
        self.function = "pulse"
        self.pulse_hold = "width"  # the width stays in seconds while FM moves the period
        # the instrument keeps HIGH above LOW at every step: HIGH first unless the present LOW is
        # not below the new HIGH (then the new LOW is below the present HIGH, so LOW first works)
        if self.low_v < s.high_v:
            self.high_v = s.high_v
            self.low_v = s.low_v
        else:
            self.low_v = s.low_v
            self.high_v = s.high_v
        if s.jitter > 0:
            self.fm_source = "internal"
            self.fm_function = "noise"
            self.fm_deviation_hz = s.deviation_hz
            try:
                self.fm_enabled = True
            except GeneratorError as exc:
                if "-221" not in str(exc):
                    raise
                self._square_fallback(s)
        self.check_errors()
        self._applied = self._reported(s)
        return self._applied

    def _square_fallback(self, s: GeneratorSettings) -> None:
        """FM refused on the pulse carrier (-221 Settings conflict): no reference confirms that
        every 33500 firmware takes it (docs/function-generator.md). A SQUare carrier with the same
        nominal duty cycle takes FM: the edges jitter as asked, and each pulse's width follows its
        period (width_s at the nominal period), which the read-back says (carrier "square")."""
        self.function = "square"
        self.duty_pct = 100.0 * s.width_s * s.frequency_hz
        self.fm_enabled = True

    def _reported(self, s: GeneratorSettings) -> GeneratorSettings:
        """`s` with what the instrument reports; GeneratorError if that is no pulse stimulus we
        asked for."""
        if self.load != math.inf:
            raise GeneratorError(
                f"OUTPut{s.channel}:LOAD?",
                resource=self.resource_name,
                detail="the output load is not high impedance (INFinity)",
            )
        function = self.function
        if function not in ("pulse", "square") or (function == "square" and not self.fm_enabled):
            raise GeneratorError(
                f"SOURce{s.channel}:FUNCtion?", resource=self.resource_name,
                detail="the instrument makes no pulses"
            )
        frequency = self.frequency_hz
        jitter = 0.0
        if self.fm_enabled:
            if self.fm_source != "internal" or self.fm_function != "noise":
                raise GeneratorError(
                    f"SOURce{s.channel}:FM:INTernal:FUNCtion?",
                    resource=self.resource_name,
                    detail="FM is on with another modulating waveform than the internal noise: "
                    "the period would not be random",
                )
            jitter = self.fm_deviation_hz / frequency
        width = self.width_s if function == "pulse" else self.duty_pct / 100.0 / frequency
        return self._read_back(
            s, frequency_hz=frequency, width_s=width, high_v=self.high_v, low_v=self.low_v,
            jitter=jitter,
            carrier=function,
        )

    def set_output(self, on: bool) -> None:
        self.output = on

    def output_enabled(self) -> bool:
        return self.output
