"""The neutral base of every simulated oscilloscope (instruments/sim/tds.py, mso.py,
infiniivision.py): a state machine fed by edge sources that runs program messages against the
model's command tree, keeps the standard event status register, and acquires single sequences
and segmented frames as a digitizer would (the trigger's crossing and its error, the free-running
sample clock, the probe's signal, noise and quantization). What a model adds: its command tree
and spelling, its error reporting, its record lengths and ranges, its waveform transfer.

- A query that fails produces no reply at all: the client times out, as it would with a real
  instrument. The server itself never blocks on it.
- The probe is on `probe_channel`; `channel_sources` puts more probes on other channels (a
  stimulus and a response, say), on the same clock; displayed channels without a probe see 0 V
  + noise.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

import numpy as np

from instruments.sim.commands import OPC, PON, Fault, Node, esr_bit, resolve, split_units
from instruments.sim.signal import LogicSignal, digitize
from instruments.sim.source import EdgeSource

log = logging.getLogger(__name__)

CHANNELS = (1, 2, 3, 4)
POLL_S = 0.0005  # how often a waiting acquisition looks at the source
AUTO_TRIGGER_NS = 100_000_000  # the trigger's AUTO mode fires by itself after this
# Where the scope puts its time zero against the true crossing of the trigger level: a normal error
# of this rms, acquisition by acquisition (and frame by frame). Tektronix's TDS7000 service manual
# gives a trigger jitter of σ = 8 ps and a trigger position error of ±(1 sample + 1 ns) in sample
# mode; the sample part is the sample clock's free-running phase (modelled apart), so 0.5 ns puts
# the rest at 2σ. An assumption for the older and cheaper models, documented in docs/twin.md.
TRIGGER_ERROR_NS = 0.5
MEASURE_HYSTERESIS = 0.1  # of the amplitude, around the measurement's 50 % reference


def _mode(values: np.ndarray) -> float:
    """The most common digitizer code (a histogram mode: a level, as the scope finds it)."""
    v = np.rint(values).astype(np.int64)
    counts = np.bincount(v - v.min())
    return float(np.argmax(counts) + v.min())


def _crossings(codes: np.ndarray, ref: float, hyst: float) -> tuple[np.ndarray, np.ndarray]:
    """Rising and falling crossings of `ref` (fractional sample indices, linear between the two
    samples around each), counted only once the signal has gone `hyst` past `ref` on the other
    side (noise near the reference makes no extra edge), and only after the record's first
    settled state: a pulse already running at sample 0 is not complete."""
    above, below = codes > ref + hyst, codes < ref - hyst
    settled = np.flatnonzero(above | below)
    if not len(settled):
        return np.empty(0), np.empty(0)
    side = np.where(above[settled], 1, -1)
    change = np.flatnonzero(np.diff(side)) + 1  # where the settled side flips
    ups, downs = [], []
    for i, new in zip(settled[change], side[change], strict=True):
        j = i  # back to the last sample on the other side of ref: the crossing lies after it
        while j > 0 and (codes[j - 1] > ref) == (new == 1):
            j -= 1
        a, b = codes[j - 1], codes[j]
        t = (j - 1) + (ref - a) / (b - a) if b != a else float(j)
        (ups if new == 1 else downs).append(t)
    return np.asarray(ups), np.asarray(downs)


@dataclass
class Channel:
    scale: float = 0.1
    position: float = 0.0  # divisions
    offset: float = 0.0  # volts at centre screen (position 0)
    displayed: bool = False
    coupling: str = "DC"


def _default_channels() -> dict[int, Channel]:
    return {n: Channel(displayed=(n == 1)) for n in CHANNELS}


@dataclass
class Settings:
    """What every model's *RST restores (a model's own settings subclass it)."""

    channels: dict[int, Channel] = field(default_factory=_default_channels)
    time_per_div: float = 500e-6
    record_length: int = 500
    trigger_position_pct: float = 50.0
    trigger_source: int = 1
    trigger_slope: str = "RISE"
    trigger_level: float = 0.0
    trigger_mode: str = "AUTO"
    data_source: int = 1
    measure_source: int = 1


@dataclass(frozen=True)
class AcquisitionInfo:
    """Ground truth of one completed acquisition, on the source's clock."""

    number: int  # 1, 2, ... since the server started
    # the scope's time zero: where it placed its trigger (the crossing + its error)
    trigger_ns: float
    first_sample_ns: float  # time of sample 0
    dt_ns: float
    record_length: int  # points per frame
    pt_off: int  # sample index of the trigger point (the sample just after it)
    # a segmented acquisition: every frame's trigger (trigger_ns is the first's); None: one record
    frame_triggers_ns: np.ndarray | None = None
    # truth: when the trigger level was really crossed (each frame's, if segmented)
    crossing_ns: float | np.ndarray = math.nan

    @property
    def frames(self) -> int:
        return 1 if self.frame_triggers_ns is None else len(self.frame_triggers_ns)

    def sample_times_ns(self) -> np.ndarray:
        return self.first_sample_ns + self.dt_ns * np.arange(self.record_length)


@dataclass
class Record:
    """A completed acquisition as the waveform transfer commands see it."""

    info: AcquisitionInfo
    xzero_s: float
    time_per_div: float
    channels: dict[int, Channel]  # vertical settings at acquisition time
    # displayed channel -> int8 digitizer levels ((frames, points) if segmented)
    codes: dict[int, np.ndarray]
    frame_xzero_s: np.ndarray | None = None  # segmented: each frame's first sample from its trigger


class ScopeModel:
    """What every simulated scope shares: program messages run against a command tree (each
    model builds its own, `_build_table`), the standard event status register, and the
    acquisition engine (single sequences and segmented frames, rendered from the edge sources
    with the model's trigger, noise and sample clock). TdsModel, MsoModel and InfiniiVisionModel
    are its models."""

    settings_type: type[Settings] = Settings
    default_idn = ""
    default_bus = "gpib"  # its own interface (instruments/sim/bus.py)

    def __init__(
        self,
        source: EdgeSource,
        signal: LogicSignal,
        rng: np.random.Generator,
        probe_channel: int = 1,
        max_record_length: int | None = None,
        idn: str | None = None,
        channel_sources: Mapping[int, EdgeSource] | None = None,
    ) -> None:
        self.source = source
        # what each probed channel sees; all sources must share the probe channel's clock
        self.sources = {**(channel_sources or {}), probe_channel: source}
        if not set(self.sources) <= set(CHANNELS):
            raise ValueError(f"channel sources must be on channels {CHANNELS}, got "
                             f"{sorted(self.sources)}")
        self.signal = signal
        self.rng = rng
        self.probe_channel = probe_channel
        self.record_lengths = self._record_lengths(max_record_length)
        self.trigger_error_ns = TRIGGER_ERROR_NS
        # a time base that stops short of what is asked (the twin's `short_record` fault): None
        # offers the model's whole range
        self.slowest_time_per_div: float | None = None
        # its own stream, spawned (not drawn) from the model's: noise and phases stay as they were
        self._trigger_rng = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0])
        self.idn = idn or self.default_idn
        self.header = True
        self.verbose = True
        self.s = self.settings_type()
        self.esr = PON
        self._pending: list[tuple[int, str]] = []  # logged, awaiting *ESR?
        self._events: list[tuple[int, str]] = []  # readable by ALLEv?/EVMsg?
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._trigger_state = "SAVE"
        self._numacq = 0
        self.record: Record | None = None
        # the last data block built, and its key
        self._encoded: tuple[Hashable, bytes] | None = None
        self.acquisitions: list[AcquisitionInfo] = []
        self._table = self._build_table()

    def _record_lengths(self, largest: int | None) -> tuple[int, ...]:
        """The record lengths the model offers, up to `largest` (None: all)."""
        raise NotImplementedError

    # --- message execution --------------------------------------------------------------------

    async def execute(self, message: str) -> bytes | None:
        """Run one program message; the reply to its queries, or None if none."""
        replies: list[bytes] = []
        path: list[str] = []
        for i, unit in enumerate(split_units(message)):
            try:
                reply, path = await self._unit(unit, path if i else [])
            except Fault as f:
                self.log_event(f.code, f"{f.text}; {unit}")
                continue
            except Exception:  # a bug in the sim: report it as the instrument would, go on
                log.exception("sim scope failed on %r", unit)
                self.log_event(300, f"Device-specific error; {unit}")
                continue
            if reply is not None:
                replies.append(reply)
        return b";".join(replies) if replies else None

    async def _unit(self, unit: str, path: list[str]) -> tuple[bytes | None, list[str]]:
        node, suffixes, arg, query, path = resolve(self._table, unit, path,
                                                   "Undefined header; Command not found")
        return await self._run(node, suffixes, arg, query), path

    async def _run(self, node: Node, suffixes: list[int], arg: str, query: bool) -> bytes | None:
        if any(n not in CHANNELS for n in suffixes):  # every <n> in the tree is a channel
            raise Fault(113, "Undefined header; Command not found")
        if query:
            if node.get is None:
                raise Fault(113, "Undefined header; Command not found")
            value = node.get(arg, *suffixes) if node.query_arg else node.get(*suffixes)
            if inspect.isawaitable(value):
                value = await value
            data = value if isinstance(value, bytes) else str(value).encode("latin-1")
            if self.header and node.headers and not node.pattern.startswith("*"):
                data = node.header(suffixes, self.verbose).encode() + b" " + data
            return data
        if node.set is None:
            raise Fault(113, "Undefined header; Command not found")
        result = node.set(arg, *suffixes)
        if inspect.isawaitable(result):
            await result
        return None

    def log_event(self, code: int, text: str) -> None:
        self.esr |= esr_bit(code)
        self._pending.append((code, text))

    # --- the command tree ---------------------------------------------------------------------

    def _common_nodes(self) -> list[Node]:
        """The IEEE 488.2 common commands every model answers."""
        s = self  # handlers read self.s at call time: *RST replaces it
        return [
            Node("*IDN", get=lambda: s.idn),
            Node("*RST", set=lambda a: s.reset()),
            Node("*CLS", set=lambda a: s._clear_status()),
            Node("*ESR", get=s._read_esr),
            Node("*OPC", get=s._opc_query, set=lambda a: s._opc()),
            Node("*WAI", set=lambda a: s.idle()),
        ]

    def _build_table(self) -> list[Node]:
        """The model's command tree: the common commands and its own."""
        raise NotImplementedError

    # --- helpers ------------------------------------------------------------------------------

    def _bool(self, value: bool) -> str:
        return "1" if value else "0"

    def _channel(self, n: int) -> Channel:
        return self.s.channels[n]

    # --- status -------------------------------------------------------------------------------

    def _clear_status(self) -> None:
        self.esr = 0
        self._pending.clear()
        self._events.clear()

    def _read_esr(self) -> str:
        value, self.esr = self.esr, 0
        self._events.extend(self._pending)
        self._pending.clear()
        return str(value)

    def reset(self) -> None:
        self._cancel()
        self._running = False
        self.s = self.settings_type()

    # --- acquisition --------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    async def idle(self) -> None:
        """Wait for a pending single sequence (what *OPC? and *WAI wait for)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task])

    async def _opc_query(self) -> str:
        await self.idle()
        return "1"

    def _opc(self) -> None:
        def done(_: object = None) -> None:
            self.esr |= OPC
            self._pending.append((402, "Operation complete"))

        if self.busy:
            assert self._task is not None
            self._task.add_done_callback(done)
        else:
            done()

    def _start_sequence(self) -> None:
        self._cancel()
        self._numacq = 0
        self._task = asyncio.get_running_loop().create_task(self._acquire())

    def _cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None
        self._trigger_state = "SAVE"

    def shutdown(self) -> None:
        self._cancel()

    # --- segmented memory (the MSO's FastFrame, the InfiniiVision's segments) -----------------

    # a segmented model's shortest time from a frame's last sample to the next trigger
    rearm_ns = 0.0

    def frames_requested(self, s: Settings) -> int:
        """Frames the armed settings ask for: 1 (a single record) on a scope without segments."""
        return 1

    async def _acquire(self) -> None:
        s = copy.deepcopy(self.s)  # a sequence uses the settings it was armed with
        count = self.frames_requested(s)
        if count > 1:
            await self._acquire_frames(s, count)
            return
        n = s.record_length
        dt_ns = 10.0 * s.time_per_div / n * 1e9
        pt_off = min(int(round(self._trigger_position(s) / 100.0 * n)), n - 1)
        # the scope fills the pre-trigger part of the record before it accepts a trigger
        self._trigger_state = "ARMED"
        search_from = self.source.now_ns() + int(math.ceil(pt_off * dt_ns))
        auto_at = search_from + AUTO_TRIGGER_NS
        trigger_ns: float | None = None
        self._trigger_state = "READY"
        while trigger_ns is None:
            now = self.source.now_ns()
            if now > search_from:
                trigger_ns = self._find_trigger(s, search_from, now)
                if trigger_ns is None and s.trigger_mode == "AUTO" and now >= auto_at:
                    trigger_ns = float(now)
                search_from = now
            if trigger_ns is None:
                await asyncio.sleep(POLL_S)
        self._trigger_state = "TRIGGER"
        crossing_ns, trigger_ns = trigger_ns, trigger_ns + self._trigger_error()

        # the sample clock free-runs: the trigger falls somewhere between two samples
        xzero_ns = float(self.rng.uniform(0.0, dt_ns))
        anchor = int(math.floor(trigger_ns))
        first_rel = (trigger_ns - anchor) + xzero_ns - pt_off * dt_ns
        last_rel = first_rel + (n - 1) * dt_ns
        settle = max(self.signal.ramp_ns(True), self.signal.ramp_ns(False))
        while (now := self.source.now_ns()) < anchor + last_rel + settle:
            await asyncio.sleep(max((anchor + last_rel + settle - now) / 1e9, POLL_S))

        t0 = anchor + int(math.floor(first_rel - settle))
        t1 = anchor + int(math.ceil(last_rel + settle)) + 1
        codes: dict[int, np.ndarray] = {}
        for c, chan in s.channels.items():
            if not chan.displayed:
                continue
            probe = self._channel_pulses(c, t0, t1, anchor)
            volts = self.signal.render(probe, first_rel, dt_ns, n, self.rng)
            codes[c] = self._digitize(volts, chan)

        info = AcquisitionInfo(
            number=len(self.acquisitions) + 1,
            trigger_ns=trigger_ns,
            first_sample_ns=anchor + first_rel,
            dt_ns=dt_ns,
            record_length=n,
            pt_off=pt_off,
            crossing_ns=crossing_ns,
        )
        self.acquisitions.append(info)
        self.record = Record(info, xzero_ns * 1e-9, s.time_per_div, s.channels, codes)
        self._numacq += 1
        self._trigger_state = "SAVE"

    async def _acquire_frames(self, s: Settings, count: int) -> None:
        """`count` frames, each triggered on its own: after a frame's last sample the scope
        re-arms (`rearm_ns`) and fills the next frame's pre-trigger part before it accepts a
        trigger. Edges are looked for only in the past, as in a single sequence; frames are
        digitized as soon as their time has passed, as the instrument's memory fills."""
        n = s.record_length
        dt_ns = 10.0 * s.time_per_div / n * 1e9
        pt_off = min(int(round(self._trigger_position(s) / 100.0 * n)), n - 1)
        pre_ns, post_ns = pt_off * dt_ns, (n - 1 - pt_off) * dt_ns
        settle = max(self.signal.ramp_ns(True), self.signal.ramp_ns(False))
        channels = {c: chan for c, chan in s.channels.items() if chan.displayed}
        self._trigger_state = "READY"
        search_from = self.source.now_ns() + int(math.ceil(pre_ns))
        triggers: list[float] = []  # the crossings
        placed: list[float] = []  # each frame's trigger error: its time zero is the crossing + this
        xzero_ns = self.rng.uniform(0.0, dt_ns, count)  # the sample clock's phase, frame by frame
        rendered: dict[int, list[np.ndarray]] = {c: [] for c in channels}
        done = 0  # frames digitized
        while True:
            now = self.source.now_ns()
            if len(triggers) < count and now > search_from:
                # every crossing since the last look at once; each frame's dead time skips some
                for found in self._trigger_crossings(s, search_from, now):
                    if found >= search_from:
                        triggers.append(found)
                        placed.append(self._trigger_error())
                        search_from = int(math.ceil(found + post_ns + self.rearm_ns + pre_ns))
                        if len(triggers) == count:
                            break
                search_from = max(search_from, now)
            ready = sum(1 for t, e in zip(triggers[done:], placed[done:], strict=True)
                        if t + e + post_ns + dt_ns + settle < now)
            if ready:
                zeros = np.asarray(triggers[done : done + ready]) + np.asarray(
                    placed[done : done + ready]
                )
                self._render_frames(channels, rendered, zeros,
                                    xzero_ns[done:done + ready], pt_off, dt_ns, n, settle)
                done += ready
            if done == count:
                break
            await asyncio.sleep(POLL_S)
        self._trigger_state = "TRIGGER"
        crossings = np.asarray(triggers)
        trig = crossings + np.asarray(placed)
        anchors = np.floor(trig).astype(np.int64)
        first_rel = (trig - anchors) + xzero_ns - pt_off * dt_ns
        info = AcquisitionInfo(
            number=len(self.acquisitions) + 1, trigger_ns=float(trig[0]),
            first_sample_ns=anchors[0] + first_rel[0],
            dt_ns=dt_ns, record_length=n, pt_off=pt_off, frame_triggers_ns=trig,
            crossing_ns=crossings,
        )
        self.acquisitions.append(info)
        codes = {c: np.concatenate(batches) for c, batches in rendered.items()}
        self.record = Record(info, xzero_ns[0] * 1e-9, s.time_per_div, s.channels, codes,
                             frame_xzero_s=(xzero_ns - pt_off * dt_ns) * 1e-9)
        self._numacq += 1
        self._trigger_state = "SAVE"

    def _render_frames(self, channels: Mapping[int, Channel], rendered: dict[int, list[np.ndarray]],
                       trig: np.ndarray, xzero_ns: np.ndarray, pt_off: int, dt_ns: float, n: int,
                       settle: float) -> None:
        """Digitize the frames triggered at `trig` on every displayed channel (one edges() call
        and one render per channel for them all), appending an (F, n) batch to `rendered`."""
        anchors = np.floor(trig).astype(np.int64)
        first_rel = (trig - anchors) + xzero_ns - pt_off * dt_ns
        t0 = anchors[0] + int(np.floor(first_rel[0] - settle))
        t1 = anchors[-1] + int(np.ceil(first_rel[-1] + (n - 1) * dt_ns + settle)) + 1
        # frame times from here: float64 keeps sub-ns room over a long acquisition
        base = anchors[0]
        frame_t0 = (anchors - base).astype(np.float64) + first_rel
        for c, chan in channels.items():
            source = self.sources.get(c)
            pulses = (np.empty((0, 2), np.int64) if source is None
                      else np.asarray(source.edges(int(t0), int(t1)), dtype=np.int64).reshape(-1,
                                                                                              2))
            volts = self.signal.render_frames((pulses - base).astype(np.float64), frame_t0, dt_ns,
                                              n, self.rng)
            rendered[c].append(self._digitize(volts, chan))

    def _channel_pulses(self, channel: int, t0: int, t1: int, anchor: int) -> np.ndarray:
        """Rows [lead, trail] (ns after `anchor`) of the pulses channel `channel` sees in [t0,
        t1)."""
        source = self.sources.get(channel)
        if source is None:
            return np.empty((0, 2))  # no probe: 0 V and noise
        pulses = np.asarray(source.edges(t0, t1), dtype=np.int64).reshape(-1, 2)
        return (pulses - anchor).astype(np.float64)

    def _digitize(self, volts: np.ndarray, chan: Channel) -> np.ndarray:
        return digitize(volts, chan.scale, chan.position, chan.offset)

    def _time_base(self, time_per_div: float) -> float:
        """The time/div the model applies for one within its range: no slower than
        `slowest_time_per_div` where one is set."""
        slowest = self.slowest_time_per_div
        return time_per_div if slowest is None else min(time_per_div, slowest)

    def _trigger_position(self, s: Settings) -> float:
        """Where in the record (percent) the trigger sits, as the acquisition places it."""
        return s.trigger_position_pct

    def _trigger_error(self) -> float:
        return (
            float(self._trigger_rng.normal(0.0, self.trigger_error_ns))
            if self.trigger_error_ns > 0
            else 0.0
        )

    def _trigger_level(self, s: Settings) -> float:
        return s.trigger_level

    def _find_trigger(self, s: Settings, t0: int, t1: int) -> float | None:
        cross = self._trigger_crossings(s, t0, t1)
        return float(cross[0]) if len(cross) else None

    def _trigger_crossings(self, s: Settings, t0: int, t1: int) -> np.ndarray:
        """The times in [t0, t1) at which the trigger source crosses the level with the slope, in
        order."""
        source = self.sources.get(s.trigger_source)
        if source is None:
            return np.empty(0)  # a channel without a probe carries only noise around 0 V
        margin = int(math.ceil(max(self.signal.ramp_ns(True), self.signal.ramp_ns(False))))
        pulses = np.asarray(source.edges(t0 - margin, t1), dtype=np.int64).reshape(-1, 2)
        if not len(pulses):
            return np.empty(0)
        anchor = t0
        rel = (pulses - anchor).astype(np.float64)
        cross = self.signal.crossings(rel, self._trigger_level(s), s.trigger_slope == "RISE")
        cross = np.sort(cross[(cross >= 0) & (cross < t1 - anchor)])
        return anchor + cross

    # --- the instrument's own measurements ----------------------------------------------------

    def measured_widths_ns(self, channel: int) -> np.ndarray:
        """The positive widths (ns) of the complete pulses of the last record on `channel`, in
        order, as the instrument's measurement finds them in its own digitized record (not from
        the true edges): the low and high levels are the histogram modes of the record's lower
        and upper halves, the reference is 50 % between them with a hysteresis of
        MEASURE_HYSTERESIS of the amplitude, and each crossing is interpolated linearly between
        the two samples around it, the method the vendors document for their pulse-width
        measurement. So the measurement carries the record's noise, quantization and sample
        phase, as a real one does. A segmented record is measured on its first frame."""
        rec = self.record
        if rec is None:
            raise Fault(221, "Settings conflict; no waveform acquired")
        if channel not in rec.codes:
            return np.empty(0)
        codes = rec.codes[channel]
        codes = (codes[0] if codes.ndim == 2 else codes).astype(np.float64)
        if codes.size < 3:
            return np.empty(0)
        mid_code = (codes.min() + codes.max()) / 2
        low = _mode(codes[codes <= mid_code])
        high = _mode(codes[codes > mid_code]) if (codes > mid_code).any() else low
        if high - low < 2:  # no pulse: a flat record (noise only)
            return np.empty(0)
        ref, hyst = (low + high) / 2, MEASURE_HYSTERESIS * (high - low)
        up, down = _crossings(codes, ref, hyst)
        if not len(up) or not len(down):
            return np.empty(0)
        down = down[down > up[0]]
        n = min(len(up), len(down))
        return (down[:n] - up[:n]) * rec.info.dt_ns

    # --- waveform transfer --------------------------------------------------------------------

    def _source_record(self, n: int | None) -> tuple[Record, int]:
        channel = self.s.data_source if n is None else n
        rec = self.record
        if rec is None:
            raise Fault(221, "Settings conflict; no waveform acquired")
        if channel not in rec.codes or not self._channel(channel).displayed:
            raise Fault(221, "Settings conflict; waveform requested is not on")
        return rec, channel

    def _block(self, key: Hashable, build: Callable[[], bytes]) -> bytes:
        """The reply `build()` makes, built once per `key` and kept until the key changes.

        A long record takes longer to encode than to send, and a client may
        transfer it more than once. The key holds everything the bytes depend
        on (the acquisition's number, the source, the transfer settings), so a
        new acquisition or any change of those (*RST included) builds anew.
        """
        if self._encoded is None or self._encoded[0] != key:
            self._encoded = None  # let the old block go before the new one is built
            self._encoded = (key, build())
        return self._encoded[1]
