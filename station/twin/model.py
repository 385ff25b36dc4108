"""The twin's event model: one source of truth for the software records and the
scope's pulses, so every record the emulated target streams has its pulse on
the emulated scope's waveform.

Per event i of a loaded module (all on the target clock, ns):

    ts   = t_load + i * period + wake jitter          timestamp before the write
    rise = ts + d_sw + t_rw                           pin goes high
    h    = rise + L + d_irq                           handler entry (IRQ latency L)
    t_SW = h - ts = d_sw + t_rw + L + d_irq           what the module records
    fall = h + (1 + check) * t_rw + d_bus             inb check adds one access
    t_HW = fall - rise = L + d_irq + (1 + check) * t_rw + d_bus   what the scope measures

Three rare outlier kinds, each at its own fraction with a uniform [low, high] ns:
d_sw is a software-side delay between timestamp and write (an SMI, say): it
inflates t_SW but not t_HW; d_irq a late handler entry (`irq_delay`): both
sides see it; d_bus a stretch of the clearing access on the bus (`bus_stretch`):
the fall comes late, so only the scope (and the board's counter) sees it.
d_irq and d_bus come from generators of their own, so at fraction 0 (the
presets' default) every other draw is what it was before they existed.

Stray IRQs (`stray_fraction` per event, from a generator of their own): a foreign
interrupt on the module's line (a device sharing it, a noisy line) at a uniform
random time. The handler runs (IRQ latency L after it), finds the device says
"not mine" and writes a NOT_OURS record whose latency is measured from the last
write, an unrelated one, as the modules do; the record takes a sequence number,
so seq = event + the strays before it. It makes no pulse. A stray that would
arrive while an event is pending (between its write and its handler) is served
right after that handler: the model never lets one steal an event.
L is a shifted gamma calibrated so that t_SW
has the preset's min/mean/std, plus a rare exponential tail that both sides see.
Running loads switch L to the loaded distribution (the preset's figures are the
seed's, measured under load); with no load it is narrower.

Time structure (issue 46): a bench's latency is not a new independent draw per event.
L also carries, each logged in the truth table:
  phase      while loaded, the load's phases (the seed's dd loop: write, sync, md5sum,
             rm, sync; the preset's `load_phases`), each cycle's durations drawn anew:
             a phase shifts L and scales its gamma part's spread;
  carryover  an autoregressive component (caches, frequency: what one event leaves the
             next), correlation time `carryover_ms`;
  run offset one draw per module load: two runs of one condition meet different
             machine states;
  drift      a slow sinusoid of the twin's own clock (period `drift_period_s`): runs taken
             minutes apart differ the more, the further apart.
Phase and carry-over variances come out of the gamma's, so a loaded run still has the
preset's mean and std. `Preset.independent()` switches all four off: the twin before them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from station.common.lazy_import import lazy_module
from station.twin import echoer

# only the twin's start-up fits its preset (config imports this module)
stats = lazy_module("scipy.stats")
optimize = lazy_module("scipy.optimize")
signal = lazy_module("scipy.signal")

PRESET_DIR = Path(__file__).with_name("presets")
CHUNK_EVENTS = 1000


@dataclass(frozen=True)
class InterfaceParams:
    t_rw: float
    t_rw_jitter: float
    sw_min: float
    sw_mean: float
    sw_std: float
    idle_spread: float
    tail_fraction: float
    tail_scale: float
    outlier_fraction: float
    outlier_delay: tuple[float, float]
    timer_jitter: float
    clock_hz: float
    # hardware-side outlier kinds (issue 12); 0 leaves the event stream as it was
    irq_delay_fraction: float = 0.0
    irq_delay: tuple[float, float] = (0.0, 0.0)
    bus_stretch_fraction: float = 0.0
    bus_stretch: tuple[float, float] = (0.0, 0.0)
    # foreign IRQs on the module's line, per event (issue 27); 0 leaves the event stream as it was
    stray_fraction: float = 0.0
    # time structure (issue 46); every one 0 is the independent twin
    phase_shift_std: float = 0.0  # ns: std of the load phases' shifts of L, weighted by their time
    phase_cycle_scale: float = 1.0  # the load phases' durations times this
    phase_jitter: float = 0.25  # log-std of each phase's duration, drawn anew every cycle
    carryover_std: float = 0.0  # ns: std of the autoregressive component
    carryover_ms: float = 20.0  # its correlation time
    run_offset_std: float = 0.0  # ns: std of one module load's offset
    drift_std: float = 0.0  # ns: amplitude/√2 of the slow drift (a sinusoid: its std)
    drift_period_s: float = 900.0
    # a fault (issue 47): the module numbers its records from 0 again every this many sequence
    # numbers, as one reloaded while its reader ran (the events go on unchanged); 0: never
    restart_every: float = 0.0


#: the parameters that shape time structure; Preset.independent() sets the ns ones to 0
TIME_STRUCTURE = ("phase_shift_std", "carryover_std", "run_offset_std", "drift_std")


@dataclass(frozen=True)
class LoadPhase:
    """One phase of the loaded target's cycle: its mean duration, its shift of L in units of
    phase_shift_std (normalised: time-weighted mean 0, std 1) and its gamma spread factor
    (normalised: time-weighted mean square 1, so the loaded variance is kept)."""

    name: str
    seconds: float
    shift: float
    spread: float


def with_load_effect(params: InterfaceParams, shift_ns: float = 0.0,
                     tail_fraction: float | None = None) -> InterfaceParams:
    """The interface's parameters while a load of this effect runs: its loaded distribution
    shifted whole by `shift_ns` (floor and mean; the spread kept), its tail share replaced."""
    return replace(params, sw_min=params.sw_min + shift_ns, sw_mean=params.sw_mean + shift_ns,
                   tail_fraction=params.tail_fraction if tail_fraction is None
                   else tail_fraction)


def normalised_phases(phases: tuple[LoadPhase, ...]) -> tuple[LoadPhase, ...]:
    if not phases:
        return ()
    w = np.array([ph.seconds for ph in phases], float)
    if np.any(w <= 0):
        raise ValueError("load_phases: every phase needs a positive duration")
    w = w / w.sum()
    z = np.array([ph.shift for ph in phases], float)
    z = z - np.dot(w, z)
    sd = math.sqrt(float(np.dot(w, z * z)))
    z = z / sd if sd > 0 else z
    sp = np.array([ph.spread for ph in phases], float)
    if np.any(sp <= 0):
        raise ValueError("load_phases: every spread must be positive")
    sp = sp / math.sqrt(float(np.dot(w, sp * sp)))
    return tuple(replace(ph, shift=float(a), spread=float(b)) for ph, a, b in zip(phases, z, sp,
                                                                                  strict=True))


# the parameters that are [low, high] ranges in ns; every other one is a number
RANGE_PARAMS = frozenset({"outlier_delay", "irq_delay", "bus_stretch"})


def _param(name: str, value: Any) -> float | tuple[float, float]:
    if name in RANGE_PARAMS:
        low, high = (float(v) for v in value)
        return low, high
    return float(value)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    calibration_samples: int
    interfaces: dict[str, InterfaceParams]
    load_phases: tuple[LoadPhase, ...] = ()

    def independent(self) -> Preset:
        """The same preset with every event an independent draw: no phases, carry-over, run
        offset or drift (the twin before issue 46; tests whose truth assumes independence)."""
        zero = dict.fromkeys(TIME_STRUCTURE, 0.0)
        return replace(self, interfaces={k: replace(v, **zero) for k, v in self.interfaces.items()})

    def with_overrides(self, overrides: dict[str, dict[str, Any]]) -> Preset:
        known = {f.name for f in fields(InterfaceParams)}
        ifaces = dict(self.interfaces)
        for iface, values in overrides.items():
            if iface not in ifaces:
                raise ValueError(f"twin override for unknown interface {iface!r} (have: "
                                 f"{', '.join(ifaces)})")
            unknown = set(values) - known
            if unknown:
                raise ValueError(
                    f"twin override {iface}.{sorted(unknown)[0]} is not a model parameter "
                    f"(have: {', '.join(sorted(known))})"
                )
            clean = {k: _param(k, v) for k, v in values.items()}
            ifaces[iface] = replace(ifaces[iface], **clean)
        return replace(self, interfaces=ifaces)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calibration_samples": self.calibration_samples,
            "interfaces": {k: asdict(v) for k, v in self.interfaces.items()},
            "load_phases": [asdict(ph) for ph in self.load_phases],
        }


def load_preset(name: str) -> Preset:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.exists():
        have = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
        raise ValueError(f"no twin preset {name!r} (have: {have})")
    raw = yaml.safe_load(path.read_text())
    ifaces = {}
    for iface, values in raw["interfaces"].items():
        ifaces[iface] = InterfaceParams(**{k: _param(k, v) for k, v in values.items()})
    phases = tuple(LoadPhase(str(ph["name"]), float(ph["seconds"]), float(ph["shift"]),
                             float(ph["spread"]))
                   for ph in raw.get("load_phases") or [])
    return Preset(name, raw.get("description", ""), int(raw["calibration_samples"]), ifaces,
                  normalised_phases(phases))


@cache
def _gamma_shape(excess_mean_over_std: float, quantile: float) -> float:
    """Shape k of a gamma whose `quantile` lies (mean - min)/std standard deviations
    below its mean: the minimum of the calibration sample count then matches."""

    def gap(k: float) -> float:
        return np.sqrt(k) - stats.gamma.ppf(quantile, k) / np.sqrt(k) - excess_mean_over_std

    return float(optimize.brentq(gap, 0.05, 1e6))


@dataclass(frozen=True)
class LatencyShape:
    floor: float  # ns added to the gamma draw
    shape: float
    scale: float


def structured_variance(p: InterfaceParams, loaded: bool) -> float:
    """What the time structure adds to a run's variance of L (ns²): carry-over, and the
    load phases while loaded (a run's offset and the drift are constant within a run)."""
    return p.carryover_std**2 + (p.phase_shift_std**2 if loaded else 0.0)


def latency_shape(p: InterfaceParams, calibration_samples: int,
                  spread: float = 1.0) -> LatencyShape:
    """IRQ latency L = floor + Gamma(shape, scale), so that t_SW = t_rw + L has the
    preset's mean and std and its minimum over the calibration sample count; the time
    structure's variance (loaded: spread 1) comes out of the gamma's."""
    left = (spread * p.sw_std) ** 2 - structured_variance(p, loaded=spread == 1.0)
    if left <= (0.1 * spread * p.sw_std) ** 2:
        raise ValueError("phase_shift_std and carryover_std leave the gamma part of sw_std "
                         f"({p.sw_std:g} ns, spread {spread:g}) less than a tenth: make them "
                         "smaller")
    ratio = (p.sw_mean - p.sw_min) / p.sw_std
    k = _gamma_shape(ratio, 1.0 / calibration_samples)
    scale = math.sqrt(left) / np.sqrt(k)
    mean_l = p.sw_min + spread * (p.sw_mean - p.sw_min) - p.t_rw
    return LatencyShape(floor=mean_l - k * scale, shape=k, scale=scale)


@dataclass
class EventChunk:
    """CHUNK_EVENTS consecutive events of one module load, all times in target ns."""

    first: int
    ts: np.ndarray  # int64 timestamp before the write
    rise: np.ndarray  # int64
    fall: np.ndarray  # int64
    sw: np.ndarray  # int64 t_SW
    d_sw: np.ndarray  # int64 software-side delay (truth)
    d_irq: np.ndarray  # int64 handler-entry delay, both sides see it (truth)
    d_bus: np.ndarray  # int64 stretch of the clearing access, the scope sees it (truth)
    latency: np.ndarray  # int64 IRQ latency L (truth)
    t_rw: np.ndarray  # int64 (truth) per-access bus time used for this event
    loaded: bool
    # time structure (truth): the load phase of each event (-1: no phase), the carry-over and the
    # drift it carries, and the load's offset
    phase: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))
    carryover: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    drift: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    run_offset: int = 0
    # stray IRQs among these events, in time order: when their handler ran, the write their record
    # measures from, and the own event whose record comes right after theirs
    stray_handler: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    stray_t_write: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    stray_before: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # event index
    strays_earlier: int = 0  # strays in every chunk before this one

    @property
    def entry(self) -> np.ndarray:
        """Handler entry of each event (its record's moment)."""
        return self.ts + self.sw

    def seq_of_events(self, lo: int, hi: int) -> np.ndarray:
        """The sequence numbers of events first+lo .. first+hi-1: each after the strays before
        it."""
        events = np.arange(self.first + lo, self.first + hi)
        return events + self.strays_earlier + np.searchsorted(self.stray_before, events,
                                                              side="right")

    def seq_of_strays(self) -> np.ndarray:
        return self.stray_before + self.strays_earlier + np.arange(len(self.stray_before))

    @property
    def hw(self) -> np.ndarray:
        return self.fall - self.rise


def board_width_ns(rise: np.ndarray, fall: np.ndarray, clock_hz: float) -> np.ndarray:
    """The width the PCIe module puts in its records: the echoer's WIDTH register
    (counter at the clearing read minus counter at the write) converted as the
    kernel converts it. One definition, station/twin/echoer.py, for both."""
    hz = int(clock_hz)
    return echoer.cycles_to_ns(echoer.width_cycles(rise, fall, hz), hz).astype(np.int64)


class ModuleSession:
    """The events of one insmod .. rmmod of one latency module."""

    def __init__(
        self,
        params: InterfaceParams,
        calibration_samples: int,
        period_ns: int,
        check: bool,
        t_load_ns: int,
        seed_material: str,
        keep_truth: bool = False,
        phases: tuple[LoadPhase, ...] = (),
        drift_seed: int = 0,
    ) -> None:
        """`phases`: the loaded target's cycle (Preset.load_phases, normalised); `drift_seed`:
        the twin's, so every load of one twin sees the same slow drift of its clock."""
        self.params = params
        self.period_ns = period_ns
        self.check = check
        self.t_load_ns = t_load_ns
        self._loaded_shape = latency_shape(params, calibration_samples)
        self._idle_shape = latency_shape(params, calibration_samples, spread=params.idle_spread)
        self._seed = int.from_bytes(hashlib.sha256(seed_material.encode()).digest()[:8], "little")
        self._chunks: dict[int, EventChunk] = {}
        self.keep_truth = keep_truth
        # every chunk, for ground truth (only when asked: it grows)
        self.generated: list[EventChunk] = []
        self._stray_cumulative = [0]  # strays before chunk i
        self.phases = phases if params.phase_shift_std > 0 else ()
        structure = np.random.default_rng([self._seed, 7])
        self.run_offset_ns = (
            int(round(structure.normal(0.0, params.run_offset_std))) if params.run_offset_std else 0
        )
        mean_cycle = sum(ph.seconds for ph in self.phases) * params.phase_cycle_scale * 1e9
        # the load's loop was somewhere in its cycle when the module came: a uniform start
        self._phase_edges = [t_load_ns - int(structure.uniform(0.0,
                                                               mean_cycle))] if self.phases else []
        self._phase_of_edge: list[int] = []
        self._drift_phase = float(np.random.default_rng([drift_seed, 8]).uniform(0.0, 2 * math.pi))
        tau_ns = params.carryover_ms * 1e6
        self._phi = (
            math.exp(-period_ns / tau_ns) if params.carryover_std > 0 and tau_ns > 0 else 0.0
        )
        # chunks of innovations before a chunk that still weigh more than 1e-6 of its first event
        self._lookback = (min(64, math.ceil(math.log(1e-6) / (CHUNK_EVENTS * math.log(self._phi))))
                          if 0 < self._phi < 1 else 0)

    def chunk(self, index: int, loaded: bool) -> EventChunk:
        """Chunk `index`, generated on first use with the load state of that moment."""
        if index not in self._chunks:
            self._chunks[index] = self._generate(index, loaded)
            if self.keep_truth:
                self.generated.append(self._chunks[index])
            for old in [k for k in self._chunks if k < index - 200]:
                del self._chunks[old]  # keep memory flat; truth keeps the arrays it needs
        return self._chunks[index]

    def _generate(self, index: int, loaded: bool) -> EventChunk:
        p = self.params
        rng = np.random.default_rng([self._seed, index])
        n = CHUNK_EVENTS
        first = index * n
        seq = np.arange(first, first + n, dtype=np.int64)
        jitter = rng.exponential(p.timer_jitter, n) if p.timer_jitter > 0 else np.zeros(n)
        ts = self.t_load_ns + self.period_ns * (seq + 1) + jitter.astype(np.int64)
        shape = self._loaded_shape if loaded else self._idle_shape
        lat = shape.floor + rng.gamma(shape.shape, shape.scale, n)
        phase = self._phase_at(ts) if loaded and self.phases else np.full(n, -1, np.int8)
        if loaded and self.phases:  # a phase scales the gamma part around its mean and shifts it
            spread = np.array([ph.spread for ph in self.phases])[phase]
            shift = np.array([ph.shift for ph in self.phases])[phase] * p.phase_shift_std
            centre = shape.floor + shape.shape * shape.scale
            lat = centre + spread * (lat - centre) + shift
        carry = self._carryover(index)
        drift = self._drift(ts)
        lat = lat + carry + drift + self.run_offset_ns
        tail = rng.random(n) < p.tail_fraction
        lat[tail] += rng.exponential(p.tail_scale, int(tail.sum()))
        d_sw = np.zeros(n)
        out = rng.random(n) < p.outlier_fraction
        d_sw[out] = rng.uniform(p.outlier_delay[0], p.outlier_delay[1], int(out.sum()))
        t_rw = np.maximum(rng.normal(p.t_rw, p.t_rw_jitter, n), 0.0)
        d_irq = self._rare(index, 1, p.irq_delay_fraction, p.irq_delay)
        d_bus = self._rare(index, 2, p.bus_stretch_fraction, p.bus_stretch)
        rise = ts + np.round(d_sw + t_rw).astype(np.int64)
        entry = rise + np.round(lat).astype(np.int64) + d_irq
        fall = entry + np.round((1 + int(self.check)) * t_rw).astype(np.int64) + d_bus
        strays = self._strays(index, ts, entry, shape)
        return EventChunk(
            first=first,
            ts=ts,
            rise=rise,
            fall=fall,
            sw=entry - ts,
            d_sw=np.round(d_sw).astype(np.int64),
            d_irq=d_irq,
            d_bus=d_bus,
            latency=np.round(lat).astype(np.int64),
            t_rw=np.round(t_rw).astype(np.int64),
            loaded=loaded,
            phase=phase,
            carryover=np.round(carry).astype(np.int64),
            drift=np.round(drift).astype(np.int64),
            run_offset=self.run_offset_ns,
            **strays,
        )

    def _phase_at(self, ts: np.ndarray) -> np.ndarray:
        """The load phase at each time: cycles laid out from the start, each cycle's durations
        from a generator of its own (so a phase never depends on which chunk asked first)."""
        edges, owner = self._phase_edges, self._phase_of_edge
        mean = np.array([ph.seconds for ph in self.phases]) * self.params.phase_cycle_scale * 1e9
        while edges[-1] <= int(ts[-1]):
            cycle = len(owner) // len(self.phases)
            jitter = np.random.default_rng([self._seed, cycle, 6]).lognormal(
                0.0, self.params.phase_jitter, len(self.phases)
            )
            for k, d in enumerate(np.maximum(mean * jitter, 1.0).astype(np.int64)):
                owner.append(k)
                edges.append(edges[-1] + int(d))
        at = np.searchsorted(np.asarray(edges), ts, side="right") - 1
        return np.asarray(owner, np.int8)[np.clip(at, 0, len(owner) - 1)]

    def _carryover(self, index: int) -> np.ndarray:
        """The autoregressive component of chunk `index`'s events: AR(1) at the event period with
        innovations drawn per chunk, run over the chunks before it that still matter."""
        p, n = self.params, CHUNK_EVENTS
        if self._phi <= 0:
            return np.zeros(n)
        sigma = p.carryover_std * math.sqrt(1.0 - self._phi**2)
        shocks = np.concatenate([np.random.default_rng([self._seed, j + 2**20, 5]).normal(0.0,
                                                                                          sigma, n)
                                 for j in range(index - self._lookback, index + 1)])
        return signal.lfilter([1.0], [1.0, -self._phi], shocks)[-n:]

    def _drift(self, ts: np.ndarray) -> np.ndarray:
        p = self.params
        if p.drift_std <= 0 or p.drift_period_s <= 0:
            return np.zeros(len(ts))
        angle = 2 * math.pi * ts.astype(np.float64) / (p.drift_period_s * 1e9) + self._drift_phase
        # whole ns, so the drift the truth logs is exactly what each latency carries (a run measured
        # at another time differs from itself by that column alone)
        return np.round(p.drift_std * math.sqrt(2.0) * np.sin(angle))

    def stray_count(self, index: int) -> int:
        """How many stray IRQs chunk `index` holds: drawn alone, so the strays before any chunk are
        known without generating the chunks themselves."""
        if self.params.stray_fraction <= 0:
            return 0
        rng = np.random.default_rng([self._seed, index, 3])
        return int(rng.poisson(self.params.stray_fraction * (CHUNK_EVENTS - 1)))

    def strays_before_chunk(self, index: int) -> int:
        known = self._stray_cumulative
        while len(known) <= index:
            known.append(known[-1] + self.stray_count(len(known) - 1))
        return known[index]

    def _strays(self, index: int, ts: np.ndarray, entry: np.ndarray,
                shape: LatencyShape) -> dict[str, Any]:
        """Chunk `index`'s stray IRQs, between its first and last handler: a uniform arrival, its
        handler L later (or right after the event then pending), the last write before it."""
        count = self.stray_count(index)
        earlier = self.strays_before_chunk(index)
        if not count:
            return {"strays_earlier": earlier}
        rng = np.random.default_rng([self._seed, index, 4])
        arrival = np.sort(rng.uniform(entry[0], entry[-1], count))
        handler = arrival + shape.floor + rng.gamma(shape.shape, shape.scale, count)
        handler = np.round(handler).astype(np.int64)
        # pending: the last write before it has not had its handler yet; served right after that one
        last_write = np.searchsorted(ts, handler, side="right") - 1
        pending = handler <= entry[last_write]
        handler[pending] = entry[last_write[pending]] + 1
        # the chunk's last record stays an event's
        handler = np.minimum(np.sort(handler), entry[-1] - 1)
        last_write = np.searchsorted(ts, handler, side="right") - 1
        return {
            "stray_handler": handler,
            "stray_t_write": ts[last_write],
            "stray_before": self._first(index) + np.searchsorted(entry, handler, side="right"),
            "strays_earlier": earlier,
        }

    @staticmethod
    def _first(index: int) -> int:
        return index * CHUNK_EVENTS

    def _rare(self, index: int, stream: int, fraction: float, delay: tuple[float,
                                                                           float]) -> np.ndarray:
        """A rare delay (int64 ns, 0 for most events) from a generator of its own: the main
        stream's draws stay those of a model without this kind, whatever its fraction."""
        n = CHUNK_EVENTS
        if fraction <= 0:
            return np.zeros(n, np.int64)
        rng = np.random.default_rng([self._seed, index, stream])
        d = np.zeros(n)
        hit = rng.random(n) < fraction
        d[hit] = rng.uniform(delay[0], delay[1], int(hit.sum()))
        return np.round(d).astype(np.int64)

    def index_at(self, t_ns: int) -> int:
        """Index of the last event whose scheduled write is before t_ns (-1 if none)."""
        return (t_ns - self.t_load_ns) // self.period_ns - 1

    def truth_table(self) -> dict[str, np.ndarray]:
        chunks = sorted(self.generated, key=lambda c: c.first)
        if not chunks:
            return {}
        cat = lambda name: np.concatenate([getattr(c, name) for c in chunks])  # noqa: E731
        table = {
            "seq": np.concatenate([c.seq_of_events(0, CHUNK_EVENTS) for c in chunks]),
            "event": np.concatenate([np.arange(c.first, c.first + CHUNK_EVENTS) for c in chunks]),
            "t_write_ns": cat("ts"),
            "rise_ns": cat("rise"),
            "fall_ns": cat("fall"),
            "sw_ns": cat("sw"),
            "hw_ns": cat("fall") - cat("rise"),
            "d_sw_ns": cat("d_sw"),
            "irq_delay_ns": cat("d_irq"),
            "bus_stretch_ns": cat("d_bus"),
            "irq_latency_ns": cat("latency"),
            "t_rw_ns": cat("t_rw"),
            "loaded": np.concatenate([np.full(CHUNK_EVENTS, c.loaded) for c in chunks]),
            "stray": np.zeros(CHUNK_EVENTS * len(chunks), bool),
            "phase": cat("phase"),
            "carryover_ns": cat("carryover"),
            "drift_ns": cat("drift"),
            "run_offset_ns": np.concatenate([np.full(CHUNK_EVENTS, c.run_offset) for c in chunks]),
        }
        n = sum(len(c.stray_handler) for c in chunks)
        if n:  # stray IRQs' rows: their record (sw_ns: the latency it holds), no event (NaN, -1)
            strays = {"seq": np.concatenate([c.seq_of_strays() for c in chunks]),
                      "event": np.full(n, -1),
                      "t_write_ns": cat("stray_t_write"),
                      "sw_ns": cat("stray_handler") - cat("stray_t_write"),
                      "loaded": np.zeros(n, bool), "stray": np.ones(n, bool)}
            table = {name: np.concatenate([col, strays.get(name, np.full(n, np.nan))])
                     for name, col in table.items()}
            order = np.argsort(table["seq"], kind="stable")
            table = {name: col[order] for name, col in table.items()}
        return table
