"""Keysight InfiniiVision 2000/3000/4000 X dialect (raw socket, port 5025).

Single acquisitions (:SINGle, then :OPERegister:CONDition? until the Run bit,
bit 3, clears) of one channel, transferred as unsigned BYTE data in RAW points
mode and scaled with :WAVeform:PREamble?
(format,type,points,count,xinc,xorig,xref,yinc,yorig,yref):
t = (i − xref)·xinc + xorig, V = (d − yref)·yinc + yorig. Code 0x00 marks a
hole (no sample in that time bucket) and is filled with the previous sample;
0x01/0xFF (clipped low/high) are kept as the screen limits they stand for.
Errors come from :SYSTem:ERRor? (``-113,"Undefined header"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from instruments.scope import (
    CodeScale,
    Frames,
    ScopeDataError,
    ScopeError,
    ScopeSettings,
    ScopeTimeout,
    Waveform,
    WidthMeasurement,
)
from instruments.scpi import (
    Control,
    ReplyFields,
    ScpiScope,
    count,
    flag,
    from_keyword,
    in_range,
    keyword,
    nr1,
    one_zero,
    positive,
    real,
)

SLOPES = {"rise": "POSitive", "fall": "NEGative"}
SWEEPS = {"auto": "AUTO", "normal": "NORMal"}
REFERENCES = {"left": "LEFT", "center": "CENTer", "right": "RIGHt"}
ACQUIRE_TYPES = {"normal": "NORMal"}
ACQUIRE_MODES = {"realtime": "RTIMe", "segmented": "SEGMented"}
TIME_TAGS = ":WAVeform:SEGMented:XLISt? TTAG"
POINTS_MODES = {"normal": "NORMal", "maximum": "MAXimum", "raw": "RAW"}
RUN_BIT = 8  # :OPERegister:CONDition? bit 3: the scope is running (armed or acquiring)
HOLE = 0x00
_ERROR = re.compile(r'([+-]?\d+),"((?:[^"]|"")*)"')
MAX_ERRORS = 30  # the instrument's error queue holds no more than this
# :WAVeform:PREamble? fields, named as in the programmer's guide
FIELDS = ("format", "type", "points", "count", "xincrement", "xorigin", "xreference")
FIELDS += ("yincrement", "yorigin", "yreference")
CODE_LIMIT = 1 << 16  # no BYTE or WORD code lies outside ±this: the volts of all must be finite


@dataclass(frozen=True)
class Preamble:
    """The :WAVeform:PREamble? fields."""

    query: ClassVar[str] = ":WAVeform:PREamble?"
    # the largest :WAVeform:POINts of the 2000/3000/4000 X (and of the sim): a bound on garbage
    max_points: ClassVar[int] = 8_000_000

    format: int  # 0 BYTE, 1 WORD, 4 ASCii
    type: int  # 0 NORMal, 1 PEAK, 2 AVERage, 3 HRESolution
    points: int
    count: int
    x_increment: float
    x_origin: float
    x_reference: float
    y_increment: float
    y_origin: float
    y_reference: float

    @classmethod
    def parse(cls, reply: str) -> Preamble:
        """Ten comma-separated fields (FIELDS), each checked: points a whole number from 1 to
        `max_points`, xincrement finite and > 0, yincrement finite and non-zero, the other
        numbers finite, every sample's time and voltage finite; else ScopeDataError."""
        f = reply.split(",")
        if len(f) != len(FIELDS):
            raise ScopeDataError(
                cls.query,
                field="reply",
                value=reply,
                detail=f"{len(FIELDS)} comma-separated fields expected, got {len(f)}",
            )
        r = ReplyFields(cls.query, dict(zip(FIELDS, f, strict=True)))
        pre = cls(
            format=r.integer("format", "the data format (0 BYTE, 1 WORD, 4 ASCii)", 0, 4),
            type=r.integer("type", "the acquisition type", 0, 3),
            points=r.integer("points", "the number of points", 1, cls.max_points),
            count=r.integer("count", "the average count", 0, 1 << 32),
            x_increment=r.real("xincrement", "the sample interval", positive=True),
            x_origin=r.real("xorigin", "the time of the first point"),
            x_reference=r.real("xreference", "the reference point"),
            y_increment=r.real("yincrement", "the volts per digitizer code", nonzero=True),
            y_origin=r.real("yorigin", "the volts at yreference"),
            y_reference=r.real("yreference", "the reference code"),
        )
        t0 = pre.times_origin()
        r.check_finite(
            "xincrement",
            f"with xorigin {pre.x_origin:g}, xreference {pre.x_reference:g} and {pre.points} "
            "points, the record's sample times must be finite numbers",
            t0,
            t0 + (pre.points - 1) * pre.x_increment,
        )
        r.check_finite(
            "yincrement",
            f"with yorigin {pre.y_origin:g} and yreference {pre.y_reference:g}, "
            "the volts of every code must be finite numbers",
            *((code - pre.y_reference) * pre.y_increment + pre.y_origin for code in (-CODE_LIMIT,
                                                                                     CODE_LIMIT)),
        )
        return pre

    def times_origin(self) -> float:
        """t of sample 0: (0 − xref)·xinc + xorig."""
        return self.x_origin - self.x_reference * self.x_increment


def fill_holes(codes: np.ndarray) -> np.ndarray:
    """Replace hole codes (0x00) by the sample before them (the first valid one at the start).

    A 2-D array is a segmented acquisition, a segment a row: each row is filled on its own, so
    a hole at a segment's start takes that segment's first valid sample, never the previous
    segment's last (whether the segments came in one transfer or one by one).
    """
    rows = np.atleast_2d(codes)
    holes = rows == HOLE
    if not holes.any():
        return codes
    idx = np.where(holes, -1, np.arange(rows.shape[1]))
    np.maximum.accumulate(idx, axis=1, out=idx)
    first = np.argmax(~holes, axis=1)  # a row of holes only stays as it is (its index 0 is a hole)
    idx = np.where(idx < 0, first[:, None], idx)
    filled = np.take_along_axis(rows, idx, axis=1)
    return filled.reshape(codes.shape)


class KeysightInfiniiVision(ScpiScope):
    """An InfiniiVision 2000/3000/4000 X oscilloscope over any VISA session."""

    identity_pattern = r"^(KEYSIGHT|AGILENT) TECHNOLOGIES,\s*[DM]SO-?X"
    arm_command = ":SINGle"
    stop_command = ":STOP"

    displayed = Control(":CHANnel{ch}:DISPlay?", ":CHANnel{ch}:DISPlay {value}", flag, one_zero)
    volts_per_div = Control(":CHANnel{ch}:SCALe?", ":CHANnel{ch}:SCALe {value:.9g}", positive,
                            in_range(1e-3, 5.0))
    offset_v = Control(":CHANnel{ch}:OFFSet?", ":CHANnel{ch}:OFFSet {value:.9g}")
    time_per_div = Control(":TIMebase:SCALe?", ":TIMebase:SCALe {value:.9g}", positive)
    time_reference = Control(
        ":TIMebase:REFerence?", ":TIMebase:REFerence {value}", from_keyword(REFERENCES),
        keyword(REFERENCES)
    )
    time_position_s = Control(":TIMebase:POSition?", ":TIMebase:POSition {value:.9g}")
    trigger_type = Control(":TRIGger:MODE?", ":TRIGger:MODE {value}", str)
    trigger_source = Control(":TRIGger:EDGE:SOURce?", ":TRIGger:EDGE:SOURce {value}", str)
    trigger_slope = Control(
        ":TRIGger:EDGE:SLOPe?", ":TRIGger:EDGE:SLOPe {value}", from_keyword(SLOPES), keyword(SLOPES)
    )
    trigger_level_v = Control(":TRIGger:EDGE:LEVel?", ":TRIGger:EDGE:LEVel {value:.9g}")
    trigger_sweep = Control(":TRIGger:SWEep?", ":TRIGger:SWEep {value}", from_keyword(SWEEPS),
                            keyword(SWEEPS))
    acquire_type = Control(
        ":ACQuire:TYPE?", ":ACQuire:TYPE {value}", from_keyword(ACQUIRE_TYPES),
        keyword(ACQUIRE_TYPES)
    )
    data_source = Control(":WAVeform:SOURce?", ":WAVeform:SOURce {value}", str)
    data_format = Control(":WAVeform:FORMat?", ":WAVeform:FORMat {value}", str)
    unsigned = Control(":WAVeform:UNSigned?", ":WAVeform:UNSigned {value}", flag, one_zero)
    points_mode = Control(
        ":WAVeform:POINts:MODE?",
        ":WAVeform:POINts:MODE {value}",
        from_keyword(POINTS_MODES),
        keyword(POINTS_MODES),
    )
    points = Control(":WAVeform:POINts?", ":WAVeform:POINts {value:d}", count)
    acquire_mode = Control(
        ":ACQuire:MODE?", ":ACQuire:MODE {value}", from_keyword(ACQUIRE_MODES),
        keyword(ACQUIRE_MODES)
    )
    segment_count = Control(":ACQuire:SEGMented:COUNt?", ":ACQuire:SEGMented:COUNt {value:d}",
                            count)
    segments_all = Control(":WAVeform:SEGMented:ALL?", ":WAVeform:SEGMented:ALL {value}", flag,
                           one_zero)
    _all_segments = False  # :WAVeform:DATA? answers every segment at once (3000T, 4000 X)

    # --- Scope ---------------------------------------------------------------------------
    def reset(self) -> None:
        self.write("*RST;*CLS")
        self._applied = None

    def configure(self, settings: ScopeSettings) -> ScopeSettings:
        s = settings
        # half-way between two configurations, no settings describe the instrument
        self._applied = None
        self.channel = s.channel
        for c in s.channels:
            with self._on_channel(c):
                self.displayed = True
                self.volts_per_div = s.volts_per_div
                # a trace `position_div` divisions above centre: centre screen shows −position·V/div
                self.offset_v = -s.position_div * s.volts_per_div
        self.time_per_div = s.time_per_div
        self.time_reference = "center"
        # the time from the trigger to centre screen puts the trigger at trigger_position_pct
        self.time_position_s = (50.0 - s.trigger_position_pct) / 100.0 * 10.0 * s.time_per_div
        self.trigger_type = "EDGE"
        self.trigger_source = f"CHANnel{s.channel}"
        self.trigger_slope = s.trigger_slope
        self.trigger_level_v = s.trigger_level_v
        self.trigger_sweep = s.trigger_mode  # normal for a run: AUTO would trigger on nothing
        self.acquire_type = "normal"
        self.data_source = f"CHANnel{s.channel}"
        self.data_format = "BYTE"
        # codes 0-255 around yreference 128: set, not left to *RST or to whoever used it last (a
        # BYTE left signed reads every level 128 codes off)
        self.unsigned = True
        self.points_mode = "raw"  # the acquisition record, not ~1000 screen points
        self.points = s.record_length
        # stopped before the record length is read back: a running scope answers with what its
        # screen holds (Keysight's guide: read :WAVeform:POINts? once the acquisition is done)
        self.write(self.stop_command)
        volts_per_div = self.volts_per_div
        time_per_div = self.time_per_div
        applied = self._read_back(
            s,
            volts_per_div=volts_per_div,
            position_div=-self.offset_v / volts_per_div,
            time_per_div=time_per_div,
            record_length=self.points,
            trigger_position_pct=50.0 - 100.0 * self.time_position_s / (10.0 * time_per_div),
            trigger_level_v=self.trigger_level_v,
        )
        if s.segments > 1:
            applied = self._configure_segments(applied)
        else:  # single records, whatever an earlier configure() or the front panel left
            self.acquire_mode = "realtime"
        if s.measurement:
            self.write(f":MEASure:SOURce CHANnel{s.channel}")
        self._applied = applied
        return applied

    def acquire_measurement(self) -> WidthMeasurement:
        """:MEASure:PWIDth?: the positive width of the record's first pulse (9.9E37: none)."""
        s = self._single_sequence()
        value = self.query_value(f":MEASure:PWIDth? CHANnel{s.channel}", real)
        self._acquisitions += 1
        return WidthMeasurement.single(value, self._acquisitions - 1)

    def _configure_segments(self, s: ScopeSettings) -> ScopeSettings:
        self.acquire_mode = "segmented"
        self.segment_count = s.segments
        segments = self.segment_count  # the instrument clamps to what its memory holds
        try:
            self.segments_all = True
            self._all_segments = True
        except ScopeTimeout:
            raise
        except ScopeError:  # a 2000 X has no :WAVeform:SEGMented:ALL: segment by segment then
            self._all_segments = False
        return self._read_back(s, segments=segments)

    def acquire_frames(self) -> Frames:
        """One segmented :SINGle; the segments and their time tags in one transfer each where
        the model can (:WAVeform:SEGMented:ALL), else segment by segment."""
        self._segmented_sequence("segmented memory")
        n = self.query_value(":WAVeform:SEGMented:COUNt?", count)
        if self._all_segments:
            pre = self._byte_preamble()
            tags = self.query_value(TIME_TAGS, _time_tags)
            if len(tags) != n:
                raise ScopeDataError(TIME_TAGS, field="reply", value=f"{len(tags)} time tags",
                                     resource=self.resource_name,
                                     detail=f":WAVeform:SEGMented:COUNt? announced {n} segments")
            codes = fill_holes(
                self.query_block(":WAVeform:DATA?", "B", pre.points * n).reshape(n, pre.points)
            )
        else:
            rows, tag_list = [], []
            for k in range(1, n + 1):
                self.write(f":ACQuire:SEGMented:INDex {k}")
                tag_list.append(self.query_value(":WAVeform:SEGMented:TTAG?", real))
                if k == 1:
                    pre = self._byte_preamble()
                rows.append(fill_holes(self.query_block(":WAVeform:DATA?", "B", pre.points)))
            codes, tags = np.stack(rows), np.asarray(tag_list)
        self._acquisitions += 1
        scale = CodeScale(volts_per_code=pre.y_increment, offset_code=pre.y_reference,
                          offset_v=pre.y_origin)
        return Frames(pre.times_origin(), pre.x_increment, codes, scale, tags - tags[0],
                      channel=self.channel,
                      index=self._acquisitions - 1)

    def _byte_preamble(self) -> Preamble:
        pre = self.query_value(Preamble.query, Preamble.parse)
        if pre.format != 0:
            raise ScopeError(Preamble.query, resource=self.resource_name,
                             detail=f"unsupported data format {pre.format}")
        return pre

    def _select_data_source(self) -> None:
        self.data_source = f"CHANnel{self.channel}"

    def busy(self) -> bool:
        return self.query_value(":OPERegister:CONDition?", nr1) & RUN_BIT != 0

    def fetch(self) -> Waveform:
        pre = self._byte_preamble()
        codes = fill_holes(self.query_block(":WAVeform:DATA?", "B", pre.points))
        scale = CodeScale(volts_per_code=pre.y_increment, offset_code=pre.y_reference,
                          offset_v=pre.y_origin)
        return self._waveform(pre.times_origin(), pre.x_increment, codes, scale)

    # --- errors: the SCPI error queue ----------------------------------------------------
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        errors = []
        for _ in range(MAX_ERRORS):
            m = _ERROR.match(self.session.query(":SYSTem:ERRor?", timeout_s))
            if m is None or int(m.group(1)) == 0:
                break
            errors.append(m.group(0))
        return " | ".join(errors)


def _time_tags(reply: str) -> np.ndarray:
    """:WAVeform:SEGMented:XLISt? TTAG: each segment's time tag (s), comma-separated inside an
    IEEE 488.2 block (#<n><length><list>); a bare list is read too."""
    text = reply.strip()
    if text.startswith("#") and len(text) > 1 and text[1].isdigit():
        digits = int(text[1])
        text = text[2 + digits:] if digits else text[2:]
    try:
        tags = np.array([float(x) for x in text.split(",")])
    except ValueError:
        raise ScopeDataError(TIME_TAGS, field="reply", value=reply,
                             detail="comma-separated numbers expected") from None
    if not len(tags) or not np.all(np.isfinite(tags)):
        raise ScopeDataError(TIME_TAGS, field="reply", value=reply,
                             detail="finite time tags expected")
    return tags
