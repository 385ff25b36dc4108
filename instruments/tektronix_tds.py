"""Tektronix TDS 400/500/600 dialect (written against the TDS 460A programmer manual).

Single-sequence acquisitions of one channel, transferred as RIBinary width 1
and scaled with the WFMPre? preamble:
Xn = XZEro + XINcr·(n − PT_Off), Yn = YZEro + YMUlt·(yn − YOFf).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Self

from instruments.scope import CodeScale, ScopeDataError, ScopeError, ScopeSettings, Waveform, WidthMeasurement
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
    on_off,
    positive,
    real,
    split_fields,
    unquote,
)

SLOPES = {"rise": "RISe", "fall": "FALL"}
TRIGGER_MODES = {"auto": "AUTO", "normal": "NORMal"}
STOP_AFTER = {"runstop": "RUNSTop", "sequence": "SEQuence"}
ACQUIRE_MODES = {"sample": "SAMple"}
DATATYPES = {("RI", 1): "b", ("RI", 2): "h", ("RP", 1): "B", ("RP", 2): "H"}
_EVENT = re.compile(r'(-?\d+),"((?:[^"]|"")*)"')
_QUIET_EVENTS = {0, 1, 402}  # "no events", "pending *ESR?", "operation complete"
# WFMPre? fields in the documented order; older TDS firmware omits XZERO
FIELDS = (
    "BYT_NR",
    "BIT_NR",
    "ENCDG",
    "BN_FMT",
    "BYT_OR",
    "WFID",
    "NR_PT",
    "PT_FMT",
    "XUNIT",
    "XINCR",
    "XZERO",
    "PT_OFF",
    "YUNIT",
    "YMULT",
    "YOFF",
    "YZERO",
)
CODE_LIMIT = 1 << 16  # no 1- or 2-byte code lies outside ±this: the volts of all must be finite


@dataclass(frozen=True)
class Preamble:
    """The WFMPre? fields needed to turn a CURVe? block into volts and seconds.

    `parse` accepts only what can be used: NR_PT a whole number from 1 to
    `max_points`, XINCR finite and > 0, YMULT finite and non-zero, the other
    numbers finite, and every sample's time and voltage a finite number;
    anything else is a ScopeDataError naming `query`, the field and its text.
    """

    query: ClassVar[str] = "WFMPre?"
    max_points: ClassVar[int] = 10_000_000  # more than any TDS holds: a bound, not a feature

    byte_nr: int
    encoding: str  # BIN | ASC
    bn_fmt: str  # RI | RP
    byte_or: str  # MSB | LSB
    wfid: str
    points: int
    x_incr: float
    x_zero: float
    pt_off: int
    y_mult: float
    y_off: float
    y_zero: float

    @classmethod
    def parse(cls, reply: str) -> Self:
        """BYT_NR;BIT_NR;ENCDG;BN_FMT;BYT_OR; then WFID;NR_PT;PT_FMT;XUNIT;XINCR;[XZERO;]
        PT_OFF;YUNIT;YMULT;YOFF;YZERO. Older TDS firmware omits XZERO (taken as 0)."""
        f = split_fields(reply)
        if len(f) == 15:
            f.insert(10, "0")
        if len(f) != 16:
            raise ScopeDataError(
                cls.query,
                field="reply",
                value=reply,
                detail=f"15 or 16 ';'-separated fields expected, got {len(f)}",
            )
        return cls.from_fields(dict(zip(FIELDS, f, strict=True)))

    @classmethod
    def from_fields(cls, values: dict[str, str]) -> Self:
        """The preamble from its fields by name (FIELDS), each checked."""
        r = ReplyFields(cls.query, values)
        pre = cls(
            byte_nr=r.integer("BYT_NR", "the bytes per point", 1, 8),
            encoding=r.text("ENCDG").upper()[:3],
            bn_fmt=r.text("BN_FMT").upper()[:2],
            byte_or=r.text("BYT_OR").upper()[:3],
            wfid=unquote(r.text("WFID")),
            points=r.integer("NR_PT", "the number of points", 1, cls.max_points),
            x_incr=r.real("XINCR", "the sample interval", positive=True),
            x_zero=r.real("XZERO", "the time of the first point"),
            pt_off=r.integer("PT_OFF", "the trigger point", -(1 << 53), 1 << 53),
            y_mult=r.real("YMULT", "the volts per digitizer code", nonzero=True),
            y_off=r.real("YOFF", "the code offset"),
            y_zero=r.real("YZERO", "the volts at YOFF"),
        )
        r.check_finite(
            "XINCR",
            f"with XZERO {pre.x_zero:g}, PT_OFF {pre.pt_off} and NR_PT {pre.points}, "
            "the record's sample times must be finite numbers",
            pre.x_zero - pre.x_incr * pre.pt_off,
            pre.x_zero + pre.x_incr * (pre.points - 1 - pre.pt_off),
        )
        r.check_finite(
            "YMULT",
            f"with YOFF {pre.y_off:g} and YZERO {pre.y_zero:g}, the volts of every code must be finite numbers",
            *(pre.y_zero + pre.y_mult * (code - pre.y_off) for code in (-CODE_LIMIT, CODE_LIMIT)),
        )
        return pre

    def scale(self) -> CodeScale:
        return CodeScale(volts_per_code=self.y_mult, offset_code=self.y_off, offset_v=self.y_zero)


class TektronixTDS(ScpiScope):
    """A TDS 400/500/600 oscilloscope (TDS 460A) over any VISA session."""

    identity_pattern = r"^TEKTRONIX,\s*TDS"
    arm_command = "ACQuire:STATE RUN"
    stop_command = "ACQuire:STATE STOP"
    encoding = "RIBinary"  # DATa:ENCdg for CURVe?
    preamble_type: type[Preamble] = Preamble  # its `query` fetches it

    # --- settings, declaratively (templates use {ch} = the configured channel) ---
    displayed = Control("SELect:CH{ch}?", "SELect:CH{ch} {value}", flag, on_off)
    volts_per_div = Control("CH{ch}:SCAle?", "CH{ch}:SCAle {value:.9g}", positive, in_range(1e-3, 10.0))
    position_div = Control("CH{ch}:POSition?", "CH{ch}:POSition {value:.9g}", real, in_range(-5.0, 5.0))
    time_per_div = Control("HORizontal:MAIn:SCAle?", "HORizontal:MAIn:SCAle {value:.9g}", positive)
    record_length = Control("HORizontal:RECOrdlength?", "HORizontal:RECOrdlength {value:d}", count)
    trigger_position_pct = Control(
        "HORizontal:TRIGger:POSition?",
        "HORizontal:TRIGger:POSition {value:.9g}",
        real,
        in_range(0.0, 100.0),
    )
    trigger_source = Control("TRIGger:MAIn:EDGE:SOUrce?", "TRIGger:MAIn:EDGE:SOUrce {value}", str)
    trigger_slope = Control(
        "TRIGger:MAIn:EDGE:SLOpe?",
        "TRIGger:MAIn:EDGE:SLOpe {value}",
        from_keyword(SLOPES),
        keyword(SLOPES),
    )
    trigger_level_v = Control("TRIGger:MAIn:LEVel?", "TRIGger:MAIn:LEVel {value:.9g}")
    trigger_mode = Control(
        "TRIGger:MAIn:MODe?",
        "TRIGger:MAIn:MODe {value}",
        from_keyword(TRIGGER_MODES),
        keyword(TRIGGER_MODES),
    )
    acquire_mode = Control("ACQuire:MODe?", "ACQuire:MODe {value}", from_keyword(ACQUIRE_MODES), keyword(ACQUIRE_MODES))
    stop_after = Control(
        "ACQuire:STOPAfter?",
        "ACQuire:STOPAfter {value}",
        from_keyword(STOP_AFTER),
        keyword(STOP_AFTER),
    )
    data_source = Control("DATa:SOUrce?", "DATa:SOUrce {value}", str)
    data_encoding = Control("DATa:ENCdg?", "DATa:ENCdg {value}", str)
    data_width = Control("DATa:WIDth?", "DATa:WIDth {value:d}", nr1)
    data_start = Control("DATa:STARt?", "DATa:STARt {value:d}", nr1)
    data_stop = Control("DATa:STOP?", "DATa:STOP {value:d}", nr1)

    # --- Scope ---------------------------------------------------------------------------
    def reset(self) -> None:
        # *CLS: forget what happened before us (power-on bit included)
        self.write("*RST;*CLS;HEADer OFF")
        self._applied = None

    def configure(self, settings: ScopeSettings) -> ScopeSettings:
        s = settings
        self._applied = None  # half-way between two configurations, no settings describe the instrument
        self.channel = s.channel
        self.write("HEADer OFF")  # replies are bare values from here on
        self._configure_vertical(s)
        for c in s.extra_channels:
            with self._on_channel(c):
                self._configure_vertical(s)
        self._configure_horizontal(s)
        self.trigger_source = f"CH{s.channel}"
        self.trigger_slope = s.trigger_slope
        self.trigger_level_v = s.trigger_level_v
        self.trigger_mode = "normal"  # wait for a real edge; AUTO would trigger on nothing
        self.acquire_mode = "sample"
        self.stop_after = "sequence"
        self.data_source = f"CH{s.channel}"
        self.data_encoding = self.encoding
        self.data_width = 1
        self.data_start = 1
        # the instrument rounds record length and time base: keep what it applied
        applied = self._read_back(
            s,
            volts_per_div=self.volts_per_div,
            position_div=self.position_div,
            time_per_div=self.time_per_div,
            record_length=self.record_length,
            trigger_position_pct=self.trigger_position_pct,
            trigger_level_v=self.trigger_level_v,
        )
        self.data_stop = applied.record_length
        applied = self._configure_segments(applied)
        if s.measurement:
            self._configure_measurement(s)
        self._applied = applied
        return applied

    def _configure_measurement(self, s: ScopeSettings) -> None:
        """MEASUrement:IMMed: the positive width of the record's first pulse, no display needed."""
        self.write("MEASUrement:IMMed:TYPe PWIdth")
        self.write(f"MEASUrement:IMMed:SOUrce1 CH{s.channel}")

    def acquire_measurement(self) -> WidthMeasurement:
        self._single_sequence()
        value = self.query_value("MEASUrement:IMMed:VALue?", real)
        self._acquisitions += 1
        return WidthMeasurement.single(value, self._acquisitions - 1)

    def _configure_segments(self, s: ScopeSettings) -> ScopeSettings:
        """FastFrame where the instrument has it; the TDS 400/500/600 has not."""
        if s.segments > 1:
            raise ScopeError(
                "HORizontal:FASTframe:STATE ON",
                resource=self.resource_name,
                detail="the TDS 400/500/600 has no FastFrame: capture with waveform or measurement",
            )
        return s

    def _configure_vertical(self, s: ScopeSettings) -> None:
        self.displayed = True  # the preamble and CURVe? need the channel on
        self.volts_per_div = s.volts_per_div
        self.position_div = s.position_div

    def _configure_horizontal(self, s: ScopeSettings) -> None:
        self.record_length = s.record_length
        self.time_per_div = s.time_per_div
        self.trigger_position_pct = s.trigger_position_pct

    def _select_data_source(self) -> None:
        self.data_source = f"CH{self.channel}"

    def busy(self) -> bool:
        return self.query_value("BUSY?", nr1) == 1

    def fetch(self) -> Waveform:
        """Transfer the last acquisition of the configured channel."""
        pre, datatype = self._preamble()
        codes = self.query_block("CURVe?", datatype, pre.points, big_endian=pre.byte_or == "MSB")
        return self._waveform(pre.x_zero - pre.x_incr * pre.pt_off, pre.x_incr, codes, pre.scale())

    def _preamble(self) -> tuple[Preamble, str]:
        """The transfer's preamble and the numpy type of its samples (ScopeError if unusable)."""
        command = self.preamble_type.query
        pre = self.query_value(command, self.preamble_type.parse)
        datatype = DATATYPES.get((pre.bn_fmt, pre.byte_nr))
        if pre.encoding != "BIN" or datatype is None or pre.byte_or not in ("MSB", "LSB"):
            raise ScopeError(
                command,
                resource=self.resource_name,
                detail=f"unsupported data format {pre.encoding}/{pre.bn_fmt}/{pre.byte_nr} byte(s)/{pre.byte_or}",
            )
        return pre, datatype

    # --- errors: after *ESR?, the event queue --------------------------------------------
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        events = [
            f'{code},"{text}"'
            for code, text in _EVENT.findall(self.session.query("ALLEv?", timeout_s))
            if int(code) not in _QUIET_EVENTS
        ]
        return " | ".join(events)
