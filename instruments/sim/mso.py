"""A Tektronix MSO 4/5/6 series scope as a state machine: the TDS model with the MSO's tree.

The MSO keeps the TDS's conventions (HEADer/VERBose, *ESR? then ALLEv?, BUSY?,
DATa:* and CURVe?) and differs where the station looks:

- Trigger: TRIGger:A:EDGE:SOUrce/SLOpe, TRIGger:A:MODe and a level per source,
  TRIGger:A:LEVel:CH<n>. Horizontal: HORizontal:SCAle, HORizontal:RECOrdlength,
  HORizontal:POSition (trigger position, % of the record), HORizontal:MODe
  (AUTO|MANual, stored only). Channels: DISplay:GLObal:CH<n>:STATE to show one,
  CH<n>:OFFSet (volts subtracted before CH<n>:POSition is applied).
- WFMOutpre? replaces WFMPre?: BYT_NR;BIT_NR;ENCDG;BN_FMT;BYT_OR;WFID;NR_PT;
  PT_FMT;PT_ORDER;XUNIT;XINCR;XZERO;PT_OFF;YUNIT;YMULT;YOFF;YZERO;DOMAIN;WFMTYPE;
  CENTERFREQUENCY;SPAN;REFLEVEL. PT_OFF is 0 and XZERO is the time of the first
  transferred sample from the trigger (so it changes with every acquisition);
  YOFF is 0 for signed data and YZERO carries offset and position:
  Yn = YZERO + YMULT·(yn − YOFF).
- Record lengths come in 1-1.25-2-2.5-5 steps from 1000 (rounded up, as on the TDS).

- FastFrame: HORizontal:FASTframe:STATE and :COUNt (clamped to :MAXFRames?, what the
  memory holds at the record length), DATa:FRAMESTARt/FRAMESTOP (a frame number or MAX)
  choose the frames transferred; CURVe? then answers one block per frame, back to back, with
  one terminator after the last; WFMOutpre:NR_FR? counts them, NR_PT is per frame, XZEro is
  frame 1's; HORizontal:FASTframe:TIMEStamp:ALL? gives each transferred frame's trigger time
  as "<frame>: DD.MM.YYYY.HH:MM:SS.ffffffffffff" (to the picosecond), comma-separated (the
  4/5/6 series form as documented; its exact punctuation is unverified, see docs/scopes/).
  After a frame's last sample the model re-arms for `rearm_ns` before the next frame's
  pre-trigger part fills.

Not modelled: the sample-rate limits that tie record length to the time base
(any HORizontal:SCAle is kept as sent), measurements, 12-bit data
at DATa:WIDth 2 (the 8-bit codes are scaled by 256, as on the TDS model).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

from instruments.sim.commands import (
    Fault,
    Node,
    boolean,
    bounded,
    choice,
    integer,
    number,
    quoted,
    tek_nr3,
)
from instruments.sim.scope_model import CHANNELS, Record, Settings
from instruments.sim.signal import LEVELS_PER_DIV
from instruments.sim.tds import ENCODINGS, NO_MEASUREMENT, TdsModel, TdsSettings, encode_curve

DEFAULT_IDN = "TEKTRONIX,MSO54,C000001,CF:91.1CT FV:1.44.3.433"
RECORD_STEPS = (1000, 1250, 2000, 2500, 5000)
LARGEST_RECORD = 62_500_000
DEFAULT_MAX_RECORD = 1_000_000  # what the sim renders by default; a real MSO 5 holds 62.5 M
TIME_PER_DIV_RANGE = (200e-12, 1000.0)
OFFSET_RANGE = (-10.0, 10.0)
# shortest time from a frame's end to the next trigger (see docs/scopes/)
FASTFRAME_REARM_NS = 1_000.0
# the time stamps' calendar origin: the source clock's 0 (a stamp carries date and time of day)
STAMP_EPOCH = dt.datetime(2026, 1, 1, 0, 0, 0)
_TDS_ONLY = ("HORizontal:MAIn", "HORizontal:TRIGger", "TRIGger:MAIn", "WFMPre", "MEASUrement:IMMed")
PREAMBLE_FIELDS = (
    "BYT_Nr",
    "BIT_Nr",
    "ENCdg",
    "BN_Fmt",
    "BYT_Or",
    "WFId",
    "NR_Pt",
    "PT_Fmt",
    "PT_ORder",
    "XUNit",
    "XINcr",
    "XZEro",
    "PT_Off",
    "YUNit",
    "YMUlt",
    "YOFf",
    "YZEro",
    "DOMain",
    "WFMTYPe",
    "CENTERFREQuency",
    "SPAN",
    "REFLevel",
)


def _default_levels() -> dict[int, float]:
    return dict.fromkeys(CHANNELS, 0.0)


@dataclass
class MsoSettings(TdsSettings):
    record_length: int = 10_000
    data_stop: int = 10_000
    trigger_levels: dict[int, float] = field(default_factory=_default_levels)
    horizontal_mode: str = "AUTO"
    # HORizontal:DELay:MODe: ON keeps the trigger at 50 % whatever HORizontal:POSition says (the
    # delay moves the record instead); ON after *RST here, so a driver must set it
    delay_mode: bool = True
    fastframe: bool = False
    frame_count: int = 2
    frame_start: int = 1
    frame_stop: int = 0  # 0: MAX, the last frame
    # the measurements that exist: none after *RST (the 4/5/6 Series' MEASUrement:ADDNew makes one)
    measurements: list[str] = field(default_factory=list)


class MsoModel(TdsModel):
    # between a FastFrame CURVe? reply's frame blocks: nothing (back to back) or b";" (how program
    # message units are separated; tm_devices splits multi-frame ASCII replies there): which one the
    # instrument sends is undocumented, so the twin can send either and the driver takes both
    frame_separator: bytes = b""
    # HORizontal:FASTframe:TIMEStamp:ALL?'s form (one of STAMP_FORMS): the 4/5/6 manual's
    # "frame #: time stamp, ..." with its punctuation unverified, so the twin can send each
    # plausible variant, and the older DPO/TDS family's quoted form
    stamp_form: str = "numbered"
    settings_type = MsoSettings
    default_idn = DEFAULT_IDN
    default_bus = "gigabit"  # its own interface (instruments/sim/bus.py)
    rearm_ns = FASTFRAME_REARM_NS

    @property
    def ms(self) -> MsoSettings:
        assert isinstance(self.s, MsoSettings)
        return self.s

    def max_frames(self) -> int:
        """Frames the acquisition memory holds at the record length (what the sim renders)."""
        return max(1, self.record_lengths[-1] // self.ms.record_length)

    def frames_requested(self, s: Settings) -> int:
        assert isinstance(s, MsoSettings)
        return min(s.frame_count, self.max_frames()) if s.fastframe else 1

    def _record_lengths(self, largest: int | None) -> tuple[int, ...]:
        cap = min(largest or DEFAULT_MAX_RECORD, LARGEST_RECORD)
        lengths, decade = [], 1
        while decade * RECORD_STEPS[0] <= cap:
            lengths += [n * decade for n in RECORD_STEPS if n * decade <= cap]
            decade *= 10
        return tuple(lengths)

    def _build_table(self) -> list[Node]:
        s = self
        ch = self._channel
        shared = [
            n
            for n in super()._build_table()
            if not n.pattern.startswith(_TDS_ONLY) and n.pattern != "CURVe"
        ]
        return shared + [
            Node(
                "DISplay:GLObal:CH<n>:STATE",
                get=lambda n: s._bool(ch(n).displayed),
                set=lambda a, n: setattr(ch(n), "displayed", boolean(a)),
            ),
            Node("CH<n>:OFFSet", get=lambda n: tek_nr3(ch(n).offset), set=s._set_offset),
            Node(
                "HORizontal:MODe",
                get=lambda: s._kw(s.s.horizontal_mode),
                set=lambda a: setattr(s.s, "horizontal_mode", choice(a, ("AUTO", "CONStant",
                                                                         "MANual"))),
            ),
            Node("HORizontal:DELay:MODe", get=lambda: s._bool(s.s.delay_mode),
                 set=lambda a: setattr(s.s, "delay_mode", boolean(a))),
            Node(
                "HORizontal:POSition",
                get=lambda: tek_nr3(s.s.trigger_position_pct),
                set=s._set_trigger_position,
            ),
            Node("TRIGger:A:TYPe", get=lambda: s._kw("EDGE"), set=lambda a: choice(a, ["EDGE"])),
            Node(
                "TRIGger:A:EDGE:SOUrce",
                get=lambda: f"CH{s.s.trigger_source}",
                set=lambda a: setattr(s.s, "trigger_source", s._channel_arg(a)),
            ),
            Node(
                "TRIGger:A:EDGE:SLOpe",
                get=lambda: s._kw(s.s.trigger_slope),
                set=lambda a: setattr(s.s, "trigger_slope", choice(a, ("RISe", "FALL"))),
            ),
            Node(
                "TRIGger:A:LEVel:CH<n>",
                get=lambda n: tek_nr3(s.s.trigger_levels[n]),
                set=lambda a, n: s.s.trigger_levels.__setitem__(n, number(a)),
            ),
            Node(
                "TRIGger:A:MODe",
                get=lambda: s._kw(s.s.trigger_mode),
                set=lambda a: setattr(s.s, "trigger_mode", choice(a, ("AUTO", "NORMal"))),
            ),
            Node(
                "HORizontal:FASTframe:STATE",
                get=lambda: s._bool(s.ms.fastframe),
                set=lambda a: setattr(s.ms, "fastframe", boolean(a)),
            ),
            Node("HORizontal:FASTframe:COUNt", get=lambda: str(s.ms.frame_count),
                 set=s._set_frame_count),
            Node("HORizontal:FASTframe:MAXFRames", get=lambda: str(s.max_frames())),
            Node("HORizontal:FASTframe:TIMEStamp:ALL", get=s._time_stamps),
            Node("DATa:FRAMESTARt", get=lambda: str(s.ms.frame_start),
                 set=lambda a: s._set_frame("frame_start", a)),
            Node("DATa:FRAMESTOP", get=lambda: str(s.ms.frame_stop or "MAX"),
                 set=lambda a: s._set_frame("frame_stop", a)),
            Node("WFMOutpre:NR_FR",
                 get=lambda: str(len(s._frame_range(s._source_record(None)[0])))),
            Node("CURVe", get=s._frames_curve),
            Node("MEASUrement:ADDNew", set=s._add_measurement),
            Node("MEASUrement:LIST", get=lambda: ",".join(s.ms.measurements) or "NONE"),
            Node("MEASUrement:MEAS<n>:TYPe", get=lambda n: s._kw(s._measured(n).measure_type),
                 set=lambda a, n: s._measured(n) and s._set_measure_type(a)),
            Node("MEASUrement:MEAS<n>:SOUrce<n>", get=lambda n,
                 m: f"CH{s._measured(n).measure_source}",
                 set=lambda a, n, m: setattr(s._measured(n), "measure_source", s._channel_arg(a))),
            *[Node(f"MEASUrement:MEAS<n>:RESUlts:CURRentacq:{stat}",
                   get=lambda n, stat=stat: s._measured(n) and s._result(stat))
              for stat in ("POPUlation", "MEAN", "MINimum", "MAXimum")],
            Node("WFMOutpre", get=lambda: s._outpre(None), headers=False),
            *[Node(f"WFMOutpre:{f}", get=lambda f=f: s._outpre(f)) for f in PREAMBLE_FIELDS],
        ]

    def _trigger_position(self, s: Settings) -> float:
        assert isinstance(s, MsoSettings)
        return 50.0 if s.delay_mode else s.trigger_position_pct

    def _trigger_level(self, s: Settings) -> float:
        assert isinstance(s, MsoSettings)
        return s.trigger_levels[s.trigger_source]

    def _set_tdiv(self, arg: str) -> None:
        self.s.time_per_div = self._time_base(bounded(arg, TIME_PER_DIV_RANGE))

    def _set_offset(self, arg: str, n: int) -> None:
        self._channel(n).offset = bounded(arg, OFFSET_RANGE)

    def _add_measurement(self, arg: str) -> None:
        name = arg.strip().strip('"').upper()
        if not name.startswith("MEAS") or not name[4:].isdigit():
            raise Fault(222, "Data out of range")
        if name not in self.ms.measurements:
            self.ms.measurements.append(name)

    def _measured(self, n: int) -> MsoSettings:
        """The settings, once MEAS<n> exists; an execution error before (assumed: after *RST no
        measurement exists, and this sim does not create one implicitly; the driver adds it)."""
        if f"MEAS{n}" not in self.ms.measurements:
            raise Fault(221, f"Settings conflict; MEAS{n} does not exist")
        return self.ms

    def _result(self, stat: str) -> str:
        """MEAS1's statistics over every pulse of the last acquisition (9.9E37 without one)."""
        if self.ms.measure_type != "PWIDTH":
            raise Fault(221, "Settings conflict; only PWIdth is simulated")
        widths = self.measured_widths_ns(self.ms.measure_source) * 1e-9
        if stat == "POPUlation":
            return str(len(widths))
        if not len(widths):
            return NO_MEASUREMENT
        value = {"MEAN": np.mean, "MINimum": np.min, "MAXimum": np.max}[stat](widths)
        return tek_nr3(float(value))

    def _set_frame_count(self, arg: str) -> None:
        v = integer(arg)
        if v < 1:
            raise Fault(222, "Data out of range")
        self.ms.frame_count = min(v, self.max_frames())  # the instrument clamps to what fits

    def _set_frame(self, name: str, arg: str) -> None:
        value = 0 if arg.strip().upper().startswith("MAX") else integer(arg)
        if value < 0 or (name == "frame_start" and value < 1):
            raise Fault(222, "Data out of range")
        setattr(self.ms, name, value)

    def _frame_range(self, rec: Record) -> range:
        """The frames DATa:FRAMESTARt/FRAMESTOP choose of `rec` (1-based, within what it has)."""
        frames = rec.info.frames
        stop = min(self.ms.frame_stop or frames, frames)
        start = min(self.ms.frame_start, stop)
        return range(start, stop + 1)

    def _frames_curve(self) -> bytes:
        rec, channel = self._source_record(None)
        if rec.info.frame_triggers_ns is None:
            return self._curve()
        start, stop = self._transfer_range(rec.info.record_length)
        frames = self._frame_range(rec)
        encoding, width = self.s.encoding, self.s.width
        key = (rec.info.number, channel, start, stop, encoding, width, frames.start, frames.stop)
        codes = rec.codes[channel]
        return self._block((*key, self.frame_separator), lambda: self.frame_separator.join(
            encode_curve(codes[f - 1][start - 1 : stop], encoding, width) for f in frames))

    def _time_stamps(self) -> str:
        rec, _ = self._source_record(None)
        triggers = rec.info.frame_triggers_ns
        if triggers is None:
            triggers = np.array([rec.info.trigger_ns])
        frames = self._frame_range(rec)
        return format_time_stamps([float(triggers[f - 1]) for f in frames], frames.start,
                                  self.stamp_form)

    def _outpre(self, field_name: str | None) -> str:
        rec, channel = self._source_record(None)
        info, vert = rec.info, rec.channels[channel]
        start, stop = self._transfer_range(info.record_length)
        enc = ENCODINGS[self.s.encoding]
        width = self.s.width
        scale = 256 if width == 2 else 1
        signed = enc is None or enc[0]
        dt_s = info.dt_ns * 1e-9
        # time of the first transferred sample from the trigger: new with every acquisition
        xzero = (info.first_sample_ns - info.trigger_ns) * 1e-9 + (start - 1) * dt_s
        wfid = (
            f"Ch{channel}, DC coupling, {vert.scale:.4g}V/div, {rec.time_per_div * 1e6:.4g}us/div, "
            f"{info.record_length} points, Sample mode"
        )
        values = [
            str(width),
            str(8 * width),
            "ASC" if enc is None else "BIN",
            "RI" if signed else "RP",
            "MSB" if enc is None or enc[1] else "LSB",
            quoted(wfid),
            str(stop - start + 1),
            "Y",
            "LINEAR",
            quoted("s"),
            tek_nr3(dt_s),
            tek_nr3(xzero),
            "0",
            quoted("V"),
            tek_nr3(vert.scale / LEVELS_PER_DIV / scale),
            tek_nr3(0.0 if signed else 128.0 * scale),
            tek_nr3(vert.offset - vert.position * vert.scale),
            "TIME",
            "ANALOG",
            tek_nr3(0.0),
            tek_nr3(0.0),
            tek_nr3(0.0),
        ]
        names = [f.upper() for f in PREAMBLE_FIELDS]
        if field_name is not None:
            return values[names.index(field_name.upper())]
        if not self.header:
            return ";".join(values)
        return ":WFMOUTPRE:" + ";".join(f"{k} {v}" for k, v in zip(names, values, strict=True))


STAMP_FORMS = ("numbered", "numbered-semicolons", "numbered-quoted", "dpo")


def time_stamp(ns: float, form: str = "numbered") -> str:
    """A FastFrame time stamp of a source-clock time: "01.01.2026.00:00:01.234567890123" (4/5/6
    series), or with form "dpo" the older family's "01 Jan 2026 00:00:01.234 567 890 123"."""
    ps = int(round(ns * 1000.0))
    seconds, ps = divmod(ps, 10**12)
    when = STAMP_EPOCH + dt.timedelta(seconds=seconds)
    if form == "dpo":
        digits = f"{ps:012d}"
        return (
            when.strftime("%d %b %Y %H:%M:%S")
            + "."
            + " ".join(digits[i : i + 3] for i in range(0, 12, 3))
        )
    return when.strftime("%d.%m.%Y.%H:%M:%S") + f".{ps:012d}"


def format_time_stamps(triggers_ns: list[float], first_frame: int, form: str) -> str:
    """TIMEStamp:ALL?'s reply in one of STAMP_FORMS, frames numbered from first_frame."""
    if form not in STAMP_FORMS:
        raise ValueError(f"stamp form {form!r}: one of {STAMP_FORMS}")
    frames = range(first_frame, first_frame + len(triggers_ns))
    if form == "dpo":
        return ",".join(f'"{time_stamp(ns, form)}"' for ns in triggers_ns)
    if form == "numbered-quoted":
        return ",".join(f'"{f}: {time_stamp(ns)}"' for f, ns in zip(frames, triggers_ns,
                                                                    strict=True))
    separator = ";" if form == "numbered-semicolons" else ","
    return separator.join(f"{f}: {time_stamp(ns)}" for f, ns in zip(frames, triggers_ns,
                                                                    strict=True))
