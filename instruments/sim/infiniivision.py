"""A Keysight InfiniiVision 2000/3000/4000 X scope as a state machine, fed by an edge source.

It shares the TDS model's engine (program messages, *ESR?, *OPC?, the single
sequence task and the signal model) and answers the InfiniiVision tree the
station uses:

- :CHANnel<n>:SCALe/OFFSet/DISPlay (OFFSet is the voltage at centre screen),
  :TIMebase:SCALe/POSition/REFerence (POSition is the time from the trigger to
  the reference point, REFerence LEFT/CENTer/RIGHt sits 1, 5 or 9 divisions
  from the left), :TRIGger:MODE EDGE, :TRIGger:SWEep, :TRIGger:EDGE:SOURce/
  SLOPe/LEVel, :ACQuire:TYPE, :SINGle, :STOP, :RUN, :OPERegister:CONDition?
  (bit 3, value 8, set while running), :TER? (1 once triggered, cleared by the
  read), :WAVeform:SOURce/FORMat/POINts:MODE/POINts/PREamble?/DATA?.
- Errors go to the SCPI error queue read by :SYSTem:ERRor? (``-113,"Undefined
  header"``; ``+0,"No error"`` when empty) and set the *ESR? bits; a query that
  fails gets no reply.
- BYTE data: unsigned codes, 32 per division, 128 at centre screen; 0x01 and
  0xFF are clipped low/high (0x00, a hole, never occurs here). Preamble:
  format,type,points,count,xinc,xorig,xref,yinc,yorig,yref with
  t = (i − xref)·xinc + xorig and V = (d − yref)·yinc + yorig.

Segmented memory: :ACQuire:MODE SEGMented with :ACQuire:SEGMented:COUNt (2 up to
`max_segments`, clamped) makes :SINGle fill that many segments, each around a trigger of its
own; after a segment's last sample the model re-arms for `rearm_ns`. Then
:WAVeform:SEGMented:COUNt? is the number acquired, :ACQuire:SEGMented:INDex <k> chooses the
segment :WAVeform:PREamble?, :WAVeform:DATA? and :WAVeform:SEGMented:TTAG? (its trigger time
from segment 1's, in seconds) describe. With :WAVeform:SEGMented:ALL 1 (models with
`segments_all`, the 3000T and 4000 X; an IDN naming a DSO-X/MSO-X 2000 model makes a 2000 X,
which has not), :WAVeform:DATA? answers every segment in one block
(the preamble's points stay per segment) and :WAVeform:SEGMented:XLISt? TTAG lists every
segment's time tag (comma-separated, in an IEEE 488.2 block); a model without it answers those with
"Undefined header".

Simplified: the acquisition memory depth is what :WAVeform:POINts asked for
(rounded up to 100, 250, 500, 1000, 2000, 5000, 10000 ... 8000000 and clamped to the largest),
where a real scope's depth follows its sample rate and :POINts decimates it;
headers are matched as on the TDS model (any spelling from the short to the
long form); only NORMal acquisitions and BYTE transfers are simulated; a trigger
position outside the record is clamped to its ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from instruments.sim.commands import (
    Fault,
    Node,
    boolean,
    bounded,
    choice,
    esr_bit,
    integer,
    number,
    short_form,
)
from instruments.sim.scope_model import CHANNELS, Channel, Record, ScopeModel, Settings

DEFAULT_IDN = "KEYSIGHT TECHNOLOGIES,DSOX3034T,MY00000001,07.50.2021102830"
# :WAVeform:POINts values (RAW mode)
POINTS = (100, 250, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000)
POINTS += (1_000_000, 2_000_000, 4_000_000, 8_000_000)
DEFAULT_MAX_POINTS = 1_000_000
CODES_PER_DIV = 32  # 8 divisions over 256 codes
Y_REFERENCE = 128  # the code at centre screen
CLIPPED_LOW, CLIPPED_HIGH = 0x01, 0xFF
RUN_BIT = 8  # :OPERegister:CONDition? bit 3
REFERENCES = {"LEFT": 10.0, "CENTER": 50.0, "RIGHT": 90.0}  # % of the screen from the left
TIME_PER_DIV_RANGE = (1e-9, 50.0)
VOLTS_PER_DIV_RANGE = (1e-3, 5.0)
OFFSET_RANGE = (-40.0, 40.0)
KEYWORDS = ("CENTer", "RIGHt", "LEFT", "EDGE", "AUTO", "NORMal", "RAW", "MAXimum", "RTIMe",
            "SEGMented")
MAX_SEGMENTS = 1000  # the 3000T X's segmented memory (see docs/scopes/)
# shortest time from a segment's end to the next trigger (see docs/scopes/)
SEGMENT_REARM_NS = 1_000.0
_CHANNEL = re.compile(r"(?:CHAN|CHANNEL)(\d+)", re.IGNORECASE)


def _default_channels() -> dict[int, Channel]:
    return {n: Channel(scale=1.0, displayed=(n == 1)) for n in CHANNELS}


@dataclass
class KeysightSettings(Settings):
    channels: dict[int, Channel] = field(default_factory=_default_channels)
    time_per_div: float = 100e-6
    time_position: float = 0.0
    reference: str = "CENTER"
    trigger_type: str = "EDGE"
    acquire_type: str = "NORMAL"
    points_mode: str = "NORMAL"
    points: int = 1000
    wave_format: str = "BYTE"
    unsigned: bool = True  # :WAVeform:UNSigned; a BYTE left signed (0) comes out as code - 128
    acquire_mode: str = "RTIME"
    segment_count: int = 2
    segment_index: int = 1
    segments_all: bool = False


def infiniivision_nr3(value: float) -> str:
    """InfiniiVision numbers: +1.000000000E+00."""
    return f"{value:+.9E}"


class InfiniiVisionModel(ScopeModel):
    settings_type = KeysightSettings
    default_idn = DEFAULT_IDN
    default_bus = "lan"  # its own interface (instruments/sim/bus.py)

    rearm_ns = SEGMENT_REARM_NS
    max_segments = MAX_SEGMENTS
    segments_all = True  # :WAVeform:SEGMented:ALL and :XLISt? (3000T, 4000 X; not the 2000 X)

    def __init__(self, *args: object, **kwargs: object) -> None:
        # a 2000 X (model DSOX2…/DSO-X 2…/MSO-X 2…) has no :WAVeform:SEGMented:ALL: segment by
        # segment
        if re.search(r",\s*(?:DSO|MSO)-?X\s*2\d{3}", str(kwargs.get("idn") or "")):
            self.segments_all = False
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.header = False  # InfiniiVision replies carry no headers
        self._ter_mark = 0

    def frames_requested(self, s: Settings) -> int:
        assert isinstance(s, KeysightSettings)
        return s.segment_count if s.acquire_mode == "SEGMENTED" else 1

    @property
    def ks(self) -> KeysightSettings:
        assert isinstance(self.s, KeysightSettings)
        return self.s

    def _record_lengths(self, largest: int | None) -> tuple[int, ...]:
        return tuple(n for n in POINTS if n <= (largest or DEFAULT_MAX_POINTS))

    # --- errors: the SCPI error queue --------------------------------------------------
    def log_event(self, code: int, text: str) -> None:
        self.esr |= esr_bit(abs(code))
        # "Undefined header; Command not found; FOO:BAR" -> -113,"Undefined header"
        self._events.append((-abs(code), text.split(";")[0]))

    def _system_error(self) -> str:
        if not self._events:
            return '+0,"No error"'
        code, text = self._events.pop(0)
        return f'{code:+d},"{text}"'

    # --- the command tree --------------------------------------------------------------
    def _build_table(self) -> list[Node]:
        s = self
        ch = self._channel
        return [
            *self._common_nodes(),
            Node("SYSTem:ERRor", get=s._system_error),
            Node("CHANnel<n>:SCALe", get=lambda n: infiniivision_nr3(ch(n).scale),
                 set=s._set_scale),
            Node("CHANnel<n>:OFFSet", get=lambda n: infiniivision_nr3(ch(n).offset),
                 set=s._set_offset),
            Node(
                "CHANnel<n>:DISPlay",
                get=lambda n: s._bool(ch(n).displayed),
                set=lambda a, n: setattr(ch(n), "displayed", boolean(a)),
            ),
            Node("TIMebase:SCALe", get=lambda: infiniivision_nr3(s.ks.time_per_div),
                 set=s._set_tdiv),
            Node("TIMebase:POSition", get=lambda: infiniivision_nr3(s.ks.time_position),
                 set=s._set_time_position),
            Node(
                "TIMebase:REFerence",
                get=lambda: _short(s.ks.reference),
                set=lambda a: setattr(s.ks, "reference", choice(a, ("LEFT", "CENTer", "RIGHt"))),
            ),
            Node(
                "TRIGger:MODE",
                get=lambda: _short(s.ks.trigger_type),
                set=lambda a: setattr(s.ks, "trigger_type", choice(a, ("EDGE",))),
            ),
            Node(
                "TRIGger:SWEep",
                get=lambda: _short(s.ks.trigger_mode),
                set=lambda a: setattr(s.ks, "trigger_mode", choice(a, ("AUTO", "NORMal"))),
            ),
            Node(
                "TRIGger:EDGE:SOURce",
                get=lambda: f"CHAN{s.ks.trigger_source}",
                set=lambda a: setattr(s.ks, "trigger_source", _channel_arg(a)),
            ),
            Node("TRIGger:EDGE:SLOPe", get=s._get_slope, set=s._set_slope),
            Node(
                "TRIGger:EDGE:LEVel",
                get=lambda: infiniivision_nr3(s.ks.trigger_level),
                set=lambda a: setattr(s.ks, "trigger_level", number(a)),
            ),
            Node("ACQuire:TYPE", get=lambda: _short(s.ks.acquire_type), set=s._set_acquire_type),
            Node("SINGle", set=lambda a: s._single()),
            Node("RUN", set=lambda a: setattr(s, "_running", True)),
            Node("STOP", set=lambda a: s._stop()),
            Node("OPERegister:CONDition",
                 get=lambda: f"{RUN_BIT if s.busy or s._running else 0:+d}"),
            Node("TER", get=s._ter),
            Node(
                "WAVeform:SOURce",
                get=lambda: f"CHAN{s.ks.data_source}",
                set=lambda a: setattr(s.ks, "data_source", _channel_arg(a)),
            ),
            Node("WAVeform:FORMat", get=lambda: s.ks.wave_format, set=s._set_format),
            Node("WAVeform:UNSigned", get=lambda: s._bool(s.ks.unsigned),
                 set=lambda a: setattr(s.ks, "unsigned", boolean(a))),
            Node(
                "WAVeform:POINts:MODE",
                get=lambda: _short(s.ks.points_mode),
                set=lambda a: setattr(s.ks, "points_mode", choice(a, ("NORMal", "MAXimum", "RAW"))),
            ),
            Node("WAVeform:POINts", get=lambda: f"{s.ks.points:+d}", set=s._set_points),
            Node(
                "ACQuire:MODE",
                get=lambda: _short(s.ks.acquire_mode),
                set=lambda a: setattr(s.ks, "acquire_mode", choice(a, ("RTIMe", "SEGMented"))),
            ),
            Node("ACQuire:SEGMented:COUNt", get=lambda: f"{s.ks.segment_count:+d}",
                 set=s._set_segment_count),
            Node("ACQuire:SEGMented:INDex", get=lambda: f"{s.ks.segment_index:+d}",
                 set=s._set_segment_index),
            Node("WAVeform:SEGMented:COUNt", get=lambda: f"{s._segments_acquired():+d}"),
            Node("WAVeform:SEGMented:TTAG", get=s._time_tag),
            *([Node("WAVeform:SEGMented:ALL", get=lambda: s._bool(s.ks.segments_all),
                    set=lambda a: setattr(s.ks, "segments_all", boolean(a))),
               Node("WAVeform:SEGMented:XLISt", get=s._time_tags,
                    query_arg=True)] if self.segments_all else []),
            Node("MEASure:SOURce", get=lambda: f"CHAN{s.ks.measure_source}",
                 set=lambda a: setattr(s.ks, "measure_source", _channel_arg(a))),
            Node("MEASure:PWIDth", get=s._pulse_width, query_arg=True),
            Node("WAVeform:PREamble", get=s._preamble_reply),
            Node("WAVeform:DATA", get=s._data),
        ]

    # --- settings ------------------------------------------------------------------------
    def _set_scale(self, arg: str, n: int) -> None:
        self._channel(n).scale = bounded(arg, VOLTS_PER_DIV_RANGE)

    def _set_offset(self, arg: str, n: int) -> None:
        self._channel(n).offset = bounded(arg, OFFSET_RANGE)

    def _set_tdiv(self, arg: str) -> None:
        self.ks.time_per_div = self._time_base(bounded(arg, TIME_PER_DIV_RANGE))

    def _set_time_position(self, arg: str) -> None:
        self.ks.time_position = bounded(arg, (-500.0, 500.0))

    def _get_slope(self) -> str:
        return "POS" if self.ks.trigger_slope == "RISE" else "NEG"

    def _set_slope(self, arg: str) -> None:
        word = choice(arg, ("POSitive", "NEGative", "EITHer", "ALTernate"))
        if word not in ("POSITIVE", "NEGATIVE"):
            raise Fault(221, "Settings conflict")
        self.ks.trigger_slope = "RISE" if word == "POSITIVE" else "FALL"

    def _set_acquire_type(self, arg: str) -> None:
        if choice(arg, ("NORMal", "AVERage", "HRESolution", "PEAK")) != "NORMAL":
            raise Fault(221, "Settings conflict")
        self.ks.acquire_type = "NORMAL"

    def _set_format(self, arg: str) -> None:
        if choice(arg, ("BYTE", "WORD", "ASCii")) != "BYTE":
            raise Fault(221, "Settings conflict")
        self.ks.wave_format = "BYTE"

    def _set_points(self, arg: str) -> None:
        largest = self.record_lengths[-1]
        if arg.upper().startswith("MAX"):
            self.ks.points = largest
            return
        v = integer(arg)
        if v < 1:
            raise Fault(222, "Data out of range")
        self.ks.points = next((n for n in self.record_lengths if n >= v), largest)

    def _pulse_width(self, arg: str) -> str:
        """:MEASure:PWIDth? [CHANnel<n>]: the record's first positive pulse width (9.9E37: none)."""
        channel = _channel_arg(arg) if arg else self.ks.measure_source
        widths = self.measured_widths_ns(channel)
        return infiniivision_nr3(widths[0] * 1e-9) if len(widths) else "+9.9E+37"

    def _set_segment_count(self, arg: str) -> None:
        v = integer(arg)
        if v < 2:
            raise Fault(222, "Data out of range")
        # the instrument clamps: no more segments than its memory holds at the record's points
        self.ks.segment_count = min(
            v, self.max_segments, max(2, self.record_lengths[-1] // self.ks.points)
        )

    def _set_segment_index(self, arg: str) -> None:
        v = integer(arg)
        if not 1 <= v <= max(self._segments_acquired(), 1):
            raise Fault(222, "Data out of range")
        self.ks.segment_index = v

    def _segments_acquired(self) -> int:
        return 0 if self.record is None else self.record.info.frames

    def _tags_s(self) -> np.ndarray:
        rec, _ = self._source_record(None)
        triggers = rec.info.frame_triggers_ns
        if triggers is None:
            raise Fault(221, "Settings conflict; no segmented acquisition")
        return (triggers - triggers[0]) * 1e-9

    def _time_tag(self) -> str:
        return infiniivision_nr3(float(self._tags_s()[self.ks.segment_index - 1]))

    def _time_tags(self, arg: str) -> bytes:
        if choice(arg, ("RELXorigin", "ABSXorigin", "TTAG")) != "TTAG":
            raise Fault(221, "Settings conflict; only TTAG is simulated")
        text = ",".join(infiniivision_nr3(float(t)) for t in self._tags_s()).encode()
        return b"#8" + f"{len(text):08d}".encode() + text  # an IEEE 488.2 block around the list

    # --- acquisition ---------------------------------------------------------------------
    def _single(self) -> None:
        s = self.ks
        s.record_length = s.points
        screen = 10.0 * s.time_per_div
        pct = REFERENCES[s.reference] - 100.0 * s.time_position / screen
        s.trigger_position_pct = min(max(pct, 0.0), 100.0)
        self._running = False
        self._start_sequence()

    def _stop(self) -> None:
        self._cancel()
        self._running = False

    def _ter(self) -> str:
        fired = len(self.acquisitions) > self._ter_mark or self._trigger_state == "TRIGGER"
        if fired:
            self._ter_mark = len(self.acquisitions)
        return "+1" if fired else "+0"

    def _digitize(self, volts: np.ndarray, chan: Channel) -> np.ndarray:
        codes = np.rint((volts - chan.offset) / chan.scale * CODES_PER_DIV + Y_REFERENCE)
        return np.clip(codes, CLIPPED_LOW, CLIPPED_HIGH).astype(np.uint8)

    # --- waveform transfer ----------------------------------------------------------------
    def _segment(self, rec: Record) -> int:
        """The segment (0-based) the transfer commands describe."""
        return 0 if rec.info.frames == 1 else min(self.ks.segment_index, rec.info.frames) - 1

    def _preamble_reply(self) -> str:
        rec, channel = self._source_record(None)
        info, vert = rec.info, rec.channels[channel]
        xorigin = (info.first_sample_ns - info.trigger_ns) * 1e-9
        if rec.frame_xzero_s is not None:
            xorigin = float(rec.frame_xzero_s[self._segment(rec)])
        fields = [
            "+0",  # format: BYTE
            "+0",  # type: NORMal
            f"{info.record_length:+d}",
            "+1",  # count
            infiniivision_nr3(info.dt_ns * 1e-9),
            infiniivision_nr3(xorigin),  # sample 0 from the trigger
            "+0",  # xreference
            infiniivision_nr3(vert.scale / CODES_PER_DIV),
            infiniivision_nr3(vert.offset),
            f"{Y_REFERENCE:+d}",
        ]
        return ",".join(fields)

    def _data(self) -> bytes:
        rec, channel = self._source_record(None)
        codes = rec.codes[channel]
        if codes.ndim == 2 and not self.ks.segments_all:
            k = self._segment(rec)
            codes = codes[k]
            key: tuple = (rec.info.number, channel, k)
        else:
            key = (rec.info.number, channel, "all")
        if not self.ks.unsigned:  # two's complement: the same levels, 128 lower as signed bytes
            codes = (codes.astype(np.int16) - 128).astype(np.int8)
            key = (*key, "signed")
        return self._block(key, lambda: b"#8" + f"{codes.size:08d}".encode() + codes.tobytes())


def _short(stored: str) -> str:
    """Keysight replies with the short form of a keyword: CENTER -> CENT."""
    for word in KEYWORDS:
        if word.upper() == stored:
            return short_form(word)
    return stored


def _channel_arg(arg: str) -> int:
    m = _CHANNEL.fullmatch(arg.strip())
    if m and int(m.group(1)) in CHANNELS:
        return int(m.group(1))
    raise Fault(141, "Invalid character data")
