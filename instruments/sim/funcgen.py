"""A simulated Keysight/Agilent 33500B-class waveform generator: a real SCPI server on TCP.

What it plays (the subset `instruments.funcgen.Keysight33500` uses, plus APPLy:PULSe):
[SOURce[1|2]:]FUNCtion, FREQuency, FUNCtion:PULSe:WIDTh/HOLD/PERiod?, VOLTage:HIGH/LOW,
APPLy:PULSe <f>,<Vpp>,<offset> (which also switches the output on, as on the instrument),
FM:STATe/SOURce/INTernal:FUNCtion/INTernal:FREQuency/DEViation, OUTPut[1|2][:STATe],
OUTPut[1|2]:LOAD, *IDN?, *RST, *CLS, *ESR?, *OPC(?), SYSTem:ERRor?. Headers are matched
as on the scope sims (any spelling from the short to the long form, any case). Errors
go to the SCPI error queue as a Keysight writes them (``-113,"Undefined header"``,
``-222,"Data out of range"``, ``-221,"Settings conflict"``; ``+0,"No error"`` when
empty) and set the *ESR? bits; a query that fails gets no reply.

Each channel's pulses are an `EdgeSource` (`PulseTrain`, `SimGeneratorServer.source(n)`),
so the twin scope can be fed by the twin generator. Pulses exist only while the output
is on and the function is PULSe. A change of frequency, width, jitter or output state
applies from the moment it is made: the train is a history of segments, each with
fixed parameters, so `edges()` over the past never changes. Switching the output on
starts a pulse at once; a change while it is on is phase-continuous (the new
parameters start with the next period boundary); a pulse under way when the output
goes off or the settings change is kept whole, followed by at least 16 ns low (the
sim never cuts a pulse short).

Jitter: FM by the internal NOISe source with deviation d on carrier f draws one
instantaneous frequency per period, f·(1 + (d/f)·m), m a Gaussian of σ = 1/3 clipped
to ±1 (the modulating noise's peaks at full deviation). Period k of segment s comes
from a generator seeded with (seed, s, k // BLOCK), so any window asked twice gives
the same pulses. `stimulus_times_ns` is the ground truth.

Simplified: the noise's bandwidth is not modelled (one independent draw per period),
FM by other modulating waveforms is accepted but leaves the period fixed, only the
pulse function produces edges, numbers take no unit suffixes and no MIN/MAX/DEF,
a value that does not fit is refused (the instrument sometimes adjusts it instead),
edge times (FUNCtion:PULSe:TRANsition) are zero.
"""

from __future__ import annotations

import bisect
import collections
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from instruments.sim.commands import (
    OPC,
    Fault,
    Node,
    boolean,
    bounded,
    choice,
    esr_bit,
    number,
    resolve,
    short_form,
    split_units,
)
from instruments.sim.server import SCPIServer, run_in_thread

log = logging.getLogger(__name__)

DEFAULT_IDN = "Agilent Technologies,33522B,MY00000001,4.00-1.19-2.00-58-00"
CHANNELS = (1, 2)
FREQUENCY_RANGE = (1e-6, 30e6)  # pulse on a 33522B
MIN_WIDTH_S = 16e-9  # the 33500B's shortest pulse, and the shortest low time kept between pulses
OPEN_CIRCUIT_MAX_V = 10.0  # ±10 V into high impedance, ±5 V into 50 Ω
LOAD_RANGE = (1.0, 10_000.0)
SOURCE_OHMS = 50.0
MAX_ERRORS = 20
NOISE_SIGMA = 1.0 / 3.0  # the modulating noise's σ as a share of its peak (crest factor 3)
BLOCK = 4096  # periods drawn per generator seed
FUNCTIONS = ("SINusoid", "SQUare", "TRIangle", "RAMP", "PULSe", "PRBS", "NOISe", "ARB", "DC")
MODULATING = ("SINusoid", "SQUare", "TRIangle", "RAMP", "NRAMp", "NOISe", "PRBS", "ARB")
HOLDS = ("WIDTh", "DCYCle")
FM_SOURCES = ("INTernal", "EXTernal", "CH1", "CH2")

# *ESR? bits (IEEE 488.2)


def generator_nr3(value: float) -> str:
    """33500 numbers: +1.000000000000000E+03."""
    return f"{value:+.15E}"


# --- the pulse train: an EdgeSource with a history ------------------------------------------
@dataclass(frozen=True)
class Segment:
    """A stretch of pulses with fixed parameters, [start_ns, end_ns) on the train's clock."""

    index: int
    start_ns: int
    frequency_hz: float
    width_ns: int
    jitter: float  # FM deviation / carrier frequency
    end_ns: int | None = None  # None: still running; pulses lead before it, and end whole
    # a SQUare carrier: each pulse lasts this fraction of its own period (0: width_ns)
    duty: float = 0.0

    @property
    def params(self) -> tuple[float, int, float, float]:
        return (self.frequency_hz, self.width_ns, self.jitter, self.duty)

    @property
    def longest_width_ns(self) -> int:
        if not self.duty:
            return self.width_ns
        return int(math.ceil(self.duty * 1e9 / (self.frequency_hz * (1.0 - self.jitter))))


class PulseTrain:
    """One output's pulses on its own clock (ns): the `EdgeSource` protocol plus ground truth.

    `clock` (ns, monotonic) defaults to time.monotonic_ns() from construction;
    pass the clock of another source to put generator and device on one time base.
    Thread-safe: the server changes it on its loop, scopes and tests read it anywhere.
    """

    def __init__(self, seed: int = 0, clock: Callable[[], int] | None = None) -> None:
        origin = time.monotonic_ns()
        self._clock = clock or (lambda: time.monotonic_ns() - origin)
        self.seed = seed
        self.min_gap_ns = int(round(MIN_WIDTH_S * 1e9))
        self._lock = threading.Lock()
        self._segments: list[Segment] = []
        # per segment: offset (ns) of each block's first pulse
        self._block_starts: list[list[float]] = []

    def now_ns(self) -> int:
        return self._clock()

    @property
    def segments(self) -> tuple[Segment, ...]:
        with self._lock:
            return tuple(self._segments)

    def switch(self, params: tuple[float, int, float] | None, duty: float = 0.0) -> None:
        """From now on produce pulses of (frequency_hz, width_ns, jitter), or none (None); duty > 0:
        a square carrier, each pulse that fraction of its own period (width_ns: at the nominal
        one)."""
        with self._lock:
            now = self._clock()
            last = self._segments[-1] if self._segments else None
            start = now  # the output switched on: the first pulse starts at once
            if last is not None and last.end_ns is None:
                if params is not None and (*params, duty) == last.params:
                    return
                # a change while running is phase-continuous: the period under way completes
                near = self._pulses(last.index, now - self._span(last), now + self._span(last))
                start = int(near[near[:, 0] >= now][0, 0])
                last = self._segments[-1] = replace(last, end_ns=max(now, last.start_ns))
            if params is None:
                return
            if last is not None:  # the last pulse before is kept whole, and a low time after it
                tail = self._pulses(last.index, last.end_ns - self._span(last), last.end_ns)
                if len(tail):
                    start = max(start, int(tail[-1, 1]) + self.min_gap_ns)
            frequency, width_ns, jitter = params
            self._segments.append(Segment(len(self._segments), start, frequency, width_ns, jitter,
                                          duty=duty))
            self._block_starts.append([0.0])

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        """int64 rows [lead_ns, trail_ns] of the pulses overlapping [t0_ns, t1_ns)."""
        with self._lock:
            rows = [
                self._pulses(s.index, t0_ns, t1_ns)
                for s in self._segments
                if s.start_ns < t1_ns
                and (s.end_ns is None or s.end_ns + s.longest_width_ns > t0_ns)
            ]
        rows = [r for r in rows if len(r)]
        return np.concatenate(rows) if rows else np.empty((0, 2), dtype=np.int64)

    def stimulus_times_ns(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        """Ground truth: the leading edges in [t0_ns, t1_ns)."""
        lead = self.edges(t0_ns, t1_ns)[:, 0]
        return lead[lead >= t0_ns]

    # --- inside a segment (callers hold the lock) ------------------------------------------
    def _span(self, seg: Segment) -> int:
        """Longer than any period plus a width: a window this long ending at t holds the pulse
        before t."""
        return (
            int(math.ceil(1e9 / (seg.frequency_hz * (1.0 - seg.jitter)))) + seg.longest_width_ns + 1
        )

    def _periods(self, seg: Segment, block: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, seg.index, block])
        m = np.clip(rng.standard_normal(BLOCK) * NOISE_SIGMA, -1.0, 1.0)
        return 1e9 / (seg.frequency_hz * (1.0 + seg.jitter * m))

    def _pulses(self, index: int, lo: int, hi: int) -> np.ndarray:
        seg = self._segments[index]
        if seg.end_ns is not None:
            hi = min(hi, seg.end_ns)  # a pulse belongs to the segment it leads in
        # leads after this can still overlap [lo, hi)
        rel_lo = lo - seg.start_ns - seg.longest_width_ns
        rel_hi = hi - seg.start_ns
        if rel_hi <= 0:
            return np.empty((0, 2), dtype=np.int64)
        starts = self._block_starts[index]
        while starts[-1] < rel_hi:  # blocks are summed once, in order, so offsets never change
            starts.append(starts[-1] + float(self._periods(seg, len(starts) - 1).sum()))
        first = max(bisect.bisect_right(starts, rel_lo) - 1, 0)
        last = bisect.bisect_left(starts, rel_hi)
        rows = []
        for block in range(first, last):
            periods = self._periods(seg, block)
            offsets = starts[block] + np.concatenate(([0.0], np.cumsum(periods[:-1])))
            lead = seg.start_ns + np.floor(offsets + 0.5).astype(np.int64)
            # a square carrier's high time is its duty cycle of each (frequency-modulated) period
            trail = lead + (
                np.floor(periods * seg.duty + 0.5).astype(np.int64) if seg.duty else seg.width_ns
            )
            keep = (lead - seg.start_ns < rel_hi) & (trail > lo)
            rows.append(np.stack([lead[keep], trail[keep]], axis=1))
        return np.concatenate(rows) if rows else np.empty((0, 2), dtype=np.int64)


# --- the instrument ----------------------------------------------------------------------
@dataclass
class ChannelState:
    """One channel's settings as *RST leaves them."""

    function: str = "SINUSOID"
    frequency: float = 1e3
    width: float = 100e-6
    hold: str = "WIDTH"
    high: float = 0.05  # V at the load
    low: float = -0.05
    load: float = SOURCE_OHMS  # ohms, math.inf for high impedance
    output: bool = False
    fm_state: bool = False
    fm_source: str = "INTERNAL"
    fm_function: str = "SINUSOID"
    fm_frequency: float = 10.0
    fm_deviation: float = 100.0
    duty_pct: float = 50.0  # FUNCtion:SQUare:DCYCle

    @property
    def jitter(self) -> float:
        """The period's random spread the FM settings give (0 unless FM by the internal noise)."""
        if self.fm_state and self.fm_source == "INTERNAL" and self.fm_function == "NOISE":
            return self.fm_deviation / self.frequency
        return 0.0

    @property
    def max_v(self) -> float:
        """The largest level the output reaches into its load (a divider with the 50 Ω source)."""
        return OPEN_CIRCUIT_MAX_V * _divider(self.load)


def _divider(load: float) -> float:
    return 1.0 if load == math.inf else load / (load + SOURCE_OHMS)


class Keysight33500Model:
    """The instrument as a state machine: `handle` runs one program message."""

    def __init__(self, seed: int = 0, idn: str | None = None, clock: Callable[[],
                                                                              int] | None = None,
                 fm_on_pulse: bool = True) -> None:
        """fm_on_pulse False: a firmware that refuses FM with a PULSe carrier (-221 Settings
        conflict); no reference confirms that a 33500 takes it (docs/function-generator.md), so the
        driver's fallback to a SQUare carrier can be exercised."""
        self.idn = idn or DEFAULT_IDN
        self.fm_on_pulse = fm_on_pulse
        self.channels = {n: ChannelState() for n in CHANNELS}
        self.trains = {n: PulseTrain(seed + n - 1, clock) for n in CHANNELS}
        self.esr = 0
        self.errors: collections.deque[tuple[int, str]] = collections.deque()
        self._table = self._build_table()

    # --- message execution ---------------------------------------------------------------
    async def execute(self, message: str) -> bytes | None:
        """`handle`, as `SCPIServer` calls a model."""
        return self.handle(message)

    def handle(self, message: str) -> bytes | None:
        """Run one program message; the reply to its queries, or None if it has none."""
        replies: list[str] = []
        path: list[str] = []
        for i, unit in enumerate(split_units(message)):
            try:
                reply, path = self._unit(unit, path if i else [])
            except Fault as f:
                self.log_error(-abs(f.code), f.text)
                continue
            except Exception:  # a bug in the sim: report it as the instrument would, go on
                log.exception("sim generator failed on %r", unit)
                self.log_error(-300, "Device-specific error")
                continue
            if reply is not None:
                replies.append(reply)
        return ";".join(replies).encode("latin-1") if replies else None

    def _unit(self, unit: str, path: list[str]) -> tuple[str | None, list[str]]:
        node, suffixes, arg, query, path = resolve(self._table, unit, path, "Undefined header")
        if any(n not in CHANNELS for n in suffixes):
            raise Fault(113, "Undefined header")
        if query:
            if node.get is None:
                raise Fault(113, "Undefined header")
            return str(node.get(*suffixes)), path
        if node.set is None:
            raise Fault(113, "Undefined header")
        node.set(arg, *suffixes)
        return None, path

    def log_error(self, code: int, text: str) -> None:
        self.esr |= esr_bit(code)
        if len(self.errors) >= MAX_ERRORS:
            self.errors[-1] = (-350, "Queue overflow")
            return
        self.errors.append((code, text))

    def shutdown(self) -> None:
        """Nothing runs in the background: pulses are computed when asked for."""

    # --- the command tree ----------------------------------------------------------------
    def _build_table(self) -> list[Node]:
        s = self
        common = [
            Node("*IDN", get=lambda: s.idn),
            Node("*RST", set=lambda a: s.reset()),
            Node("*CLS", set=lambda a: s._clear_status()),
            Node("*ESR", get=s._read_esr),
            Node("*OPC", get=lambda: "1", set=lambda a: s._opc()),
            Node("SYSTem:ERRor", get=s._system_error),
        ]
        src = self._channel_nodes
        return common + [
            *src("SOURce", "FUNCtion", lambda c: short_form(_long(c.function, FUNCTIONS)),
                 s._set_function),
            *src("SOURce", "FREQuency", lambda c: generator_nr3(c.frequency), s._set_frequency),
            *src("SOURce", "FUNCtion:PULSe:WIDTh", lambda c: generator_nr3(c.width), s._set_width),
            *src("SOURce", "FUNCtion:PULSe:PERiod", lambda c: generator_nr3(1.0 / c.frequency),
                 None),
            *src("SOURce", "FUNCtion:SQUare:DCYCle", lambda c: generator_nr3(c.duty_pct),
                 s._set_duty),
            *src("SOURce", "FUNCtion:PULSe:HOLD", lambda c: short_form(_long(c.hold, HOLDS)),
                 s._set_hold),
            *src("SOURce", "VOLTage:HIGH", lambda c: generator_nr3(c.high), s._set_high),
            *src("SOURce", "VOLTage:LOW", lambda c: generator_nr3(c.low), s._set_low),
            *src("SOURce", "APPLy:PULSe", None, s._apply_pulse),
            *src("SOURce", "APPLy", s._apply_query, None),
            *src("SOURce", "FM:STATe", lambda c: _bool(c.fm_state), s._set_fm_state),
            *src("SOURce", "FM:SOURce", lambda c: short_form(_long(c.fm_source, FM_SOURCES)),
                 s._set_fm_source),
            *src(
                "SOURce",
                "FM:INTernal:FUNCtion",
                lambda c: short_form(_long(c.fm_function, MODULATING)),
                s._set_fm_function,
            ),
            *src("SOURce", "FM:INTernal:FREQuency", lambda c: generator_nr3(c.fm_frequency),
                 s._set_fm_frequency),
            *src("SOURce", "FM:DEViation", lambda c: generator_nr3(c.fm_deviation),
                 s._set_fm_deviation),
            *src("OUTPut", "", lambda c: _bool(c.output), s._set_output, optional_root=False),
            *src("OUTPut", "STATe", lambda c: _bool(c.output), s._set_output, optional_root=False),
            *src(
                "OUTPut",
                "LOAD",
                lambda c: "+9.900000000000000E+37" if c.load == math.inf else generator_nr3(c.load),
                s._set_load,
                optional_root=False,
            ),
        ]

    def _channel_nodes(
        self,
        root: str,
        tail: str,
        get: Callable[[ChannelState], str] | None,
        set: Callable[[ChannelState, str, int], None] | None,
        optional_root: bool = True,
    ) -> list[Node]:
        """ROOT<n>:TAIL, ROOT:TAIL (channel 1) and, if the root is optional, TAIL alone."""
        patterns = [f"{root}<n>", root] + ([""] if optional_root else [])
        nodes = []
        for head in patterns:
            pattern = ":".join(p for p in (head, tail) if p)
            nodes.append(
                Node(
                    pattern,
                    get=None if get is None else (lambda *n,
                                                  g=get: g(self.channels[n[0] if n else 1])),
                    set=None if set is None else (lambda a, *n, f=set: self._set(f, a,
                                                                                 n[0] if n else 1)),
                )
            )
        return nodes

    def _set(self, handler: Callable[[ChannelState, str, int], None], arg: str, n: int) -> None:
        handler(self.channels[n], arg, n)
        self._update(n)

    def _update(self, n: int) -> None:
        """Tell channel n's pulse train what the output now produces."""
        c = self.channels[n]
        if not c.output or c.function not in ("PULSE", "SQUARE"):
            self.trains[n].switch(None)
        elif c.function == "PULSE":
            self.trains[n].switch((c.frequency, int(round(c.width * 1e9)), c.jitter))
        else:
            duty = c.duty_pct / 100.0
            self.trains[n].switch((c.frequency, int(round(duty * 1e9 / c.frequency)), c.jitter),
                                  duty)

    # --- status ----------------------------------------------------------------------------
    def reset(self) -> None:
        self.channels = {n: ChannelState() for n in CHANNELS}
        for n in CHANNELS:
            self._update(n)

    def _clear_status(self) -> None:
        self.esr = 0
        self.errors.clear()

    def _read_esr(self) -> str:
        value, self.esr = self.esr, 0
        return f"{value:+d}"

    def _opc(self) -> None:
        self.esr |= OPC

    def _system_error(self) -> str:
        if not self.errors:
            return '+0,"No error"'
        code, text = self.errors.popleft()
        return f'{code:+d},"{text}"'

    # --- settings (each checks what the pulse needs before it changes anything) ----------------
    def _check_pulse(self, c: ChannelState) -> None:
        """The width must fit the shortest period with a minimum low time, and FM stay below the
        carrier."""
        if c.fm_state and c.fm_deviation > c.frequency:
            raise Fault(221, "Settings conflict")
        shortest = 1.0 / (c.frequency * (1.0 + c.jitter))
        if c.function == "PULSE" and c.width + MIN_WIDTH_S > shortest:
            raise Fault(221, "Settings conflict")
        if c.function == "PULSE" and c.fm_state and not self.fm_on_pulse:
            raise Fault(221, "Settings conflict")
        if c.function == "SQUARE" and min(c.duty_pct,
                                          100.0 - c.duty_pct) / 100.0 * shortest < MIN_WIDTH_S:
            raise Fault(221, "Settings conflict")

    def _tentatively(self, c: ChannelState, **changes: object) -> None:
        """Apply `changes` to `c` only if the result is a pulse the instrument can make."""
        trial = replace(c, **changes)
        self._check_pulse(trial)
        for name, value in changes.items():
            setattr(c, name, value)

    def _set_function(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, function=choice(arg, FUNCTIONS))

    def _set_frequency(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, frequency=bounded(arg, FREQUENCY_RANGE))

    def _set_width(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, width=bounded(arg, (MIN_WIDTH_S, 1e6)))

    def _set_duty(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, duty_pct=bounded(arg, (0.01, 99.99)))

    def _set_hold(self, c: ChannelState, arg: str, n: int) -> None:
        c.hold = choice(arg, HOLDS)

    def _set_high(self, c: ChannelState, arg: str, n: int) -> None:
        v = bounded(arg, (-c.max_v, c.max_v))
        if not v > c.low:
            raise Fault(221, "Settings conflict")
        c.high = v

    def _set_low(self, c: ChannelState, arg: str, n: int) -> None:
        v = bounded(arg, (-c.max_v, c.max_v))
        if not v < c.high:
            raise Fault(221, "Settings conflict")
        c.low = v

    def _set_load(self, c: ChannelState, arg: str, n: int) -> None:
        word = arg.strip().upper()
        if word and ("INFINITY".startswith(word) and word.startswith("INF")):
            load = math.inf
        else:
            load = bounded(arg, LOAD_RANGE)
        # the open-circuit voltage stays: the levels seen at the new load scale with the divider
        k = _divider(load) / _divider(c.load)
        c.load, c.high, c.low = load, c.high * k, c.low * k

    def _set_output(self, c: ChannelState, arg: str, n: int) -> None:
        c.output = boolean(arg)

    def _set_fm_state(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, fm_state=boolean(arg))

    def _set_fm_source(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, fm_source=choice(arg, FM_SOURCES))

    def _set_fm_function(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, fm_function=choice(arg, MODULATING))

    def _set_fm_frequency(self, c: ChannelState, arg: str, n: int) -> None:
        c.fm_frequency = bounded(arg, (1e-6, 1e6))

    def _set_fm_deviation(self, c: ChannelState, arg: str, n: int) -> None:
        self._tentatively(c, fm_deviation=bounded(arg, (1e-6, FREQUENCY_RANGE[1] / 2)))

    def _apply_pulse(self, c: ChannelState, arg: str, n: int) -> None:
        fields = [f.strip() for f in arg.split(",")] if arg else []
        if len(fields) > 3:
            raise Fault(108, "Parameter not allowed")
        if not fields:
            raise Fault(109, "Missing parameter")
        frequency = bounded(fields[0], FREQUENCY_RANGE)
        amplitude = number(fields[1]) if len(fields) > 1 else c.high - c.low
        offset = number(fields[2]) if len(fields) > 2 else (c.high + c.low) / 2
        high, low = offset + amplitude / 2, offset - amplitude / 2
        if not (amplitude > 0 and -c.max_v <= low and high <= c.max_v):
            raise Fault(222, "Data out of range")
        self._tentatively(c, function="PULSE", frequency=frequency, high=high, low=low)
        c.output = True

    def _apply_query(self, c: ChannelState) -> str:
        what = short_form(_long(c.function, FUNCTIONS))
        numbers = ",".join(generator_nr3(v) for v in (c.frequency, c.high - c.low,
                                                      (c.high + c.low) / 2))
        return f'"{what} {numbers}"'


def _long(stored: str, words: tuple[str, ...]) -> str:
    """The manual spelling of a stored (upper-case long form) keyword."""
    return next((w for w in words if w.upper() == stored), stored)


def _bool(value: bool) -> str:
    return "1" if value else "0"


# --- the server --------------------------------------------------------------------------
class SimGeneratorServer(SCPIServer):
    """A simulated 33500B-class generator on a raw SCPI socket, as PyVISA's SOCKET resources expect.

    The serving (one line per message and per reply, `commands` logging every
    message received, `tamper`, start/stop) is `instruments.sim.server.SCPIServer`'s.
    `source(n)` is channel n's `PulseTrain` (an EdgeSource with ground truth).
    `seed` fixes the jitter; `clock` shares a time base with another source (see `PulseTrain`).
    """

    line_limit = 1 << 16
    thread_name = "sim-generator"
    model: Keysight33500Model

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        seed: int = 0,
        idn: str | None = None,
        clock: Callable[[], int] | None = None,
        command_log_size: int = 100_000,
        fm_on_pulse: bool = True,
    ) -> None:
        model = Keysight33500Model(seed=seed, idn=idn, clock=clock, fm_on_pulse=fm_on_pulse)
        super().__init__(model, host, port, command_log_size=command_log_size)

    def source(self, channel: int = 1) -> PulseTrain:
        return self.model.trains[channel]


# run a generator on a loop of its own, as `run_in_thread` does any SCPIServer (the name docs use)
serve_in_thread = run_in_thread
