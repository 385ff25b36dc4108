"""Tektronix TDS 400/500/600 dialect (written against the TDS 460A programmer manual).

Single-sequence acquisitions of one channel, transferred as RIBinary width 1
and scaled with the WFMPre? preamble:
Xn = XZEro + XINcr·(n − PT_Off), Yn = YZEro + YMUlt·(yn − YOFf).

The preamble is read in every form a TDS sends it: values in order (HEADer
OFF) or named (HEADer ON, long or short names as VERBose is ON or OFF), the
full WFMPre? or the per-waveform WFMPre:CH<n>? (without the formatting
fields), with or without XZERO. A WFMPre? reply in no form it can read makes
the driver ask WFMPre:CH<n>? once. `named_fields` reads the named form for the
MSO's WFMOutpre? too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

from instruments.scope import (
    CodeScale,
    ScopeDataError,
    ScopeError,
    ScopeSettings,
    Waveform,
    WidthMeasurement,
    shorten,
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
FORMATTING_FIELDS = FIELDS[:5]  # how CURVe? encodes the points: absent from WFMPre:CH<n>?
WAVEFORM_FIELDS = FIELDS[5:]  # the per-waveform form WFMPre:CH<n>?: WFID ... YZERO
# the preamble fields as the manuals spell their headers (capitals: the short form, sent with
# VERBose OFF); PT_ORDER is the MSO's WFMOutpre? only
MNEMONICS = {
    m.upper(): m
    for m in (
        "BYT_Nr", "BIT_Nr", "ENCdg", "BN_Fmt", "BYT_Or", "WFId", "NR_Pt", "PT_Fmt", "PT_ORder",
        "XUNit", "XINcr", "XZEro", "PT_Off", "YUNit", "YMUlt", "YOFf", "YZEro",
    )
}  # fmt: skip
# the per-waveform query of each preamble query that has one (the MSO's WFMOutpre? has none)
PER_WAVEFORM_QUERIES = {"WFMPre?": "WFMPre:CH{ch}?"}
# DATa:ENCdg -> (BN_FMT, BYT_OR) of the binary encodings
BINARY_ENCODINGS = {"RIBINARY": ("RI", "MSB"), "RPBINARY": ("RP", "MSB"), "SRIBINARY": ("RI",
                                                                                        "LSB"),
                    "SRPBINARY": ("RP", "LSB")}
CODE_LIMIT = 1 << 16  # no 1- or 2-byte code lies outside ±this: the volts of all must be finite
# "<header> <value>": a header is mnemonics joined by ':', optionally from the root
# (':WFMPRE:CH1:WFID')
_NAMED = re.compile(r"(:?[A-Za-z][A-Za-z0-9_]*(?::[A-Za-z][A-Za-z0-9_]*)*)\s+(.*)", re.DOTALL)


class PreambleFormError(ScopeDataError):
    """A preamble reply whose form cannot be read: a count of fields no form has, a field
    without a header among named ones, a field missing or named twice with two values.

    Unlike a field whose value is refused (the instrument's own statement about the
    waveform), such a reply says nothing about the waveform: another form of the
    query may still be read.
    """


def named_fields(command: str, reply: str, fields: Sequence[str]) -> dict[str, str] | None:
    """The `fields` of a reply sent with headers (HEADer ON), by name; None if it has none.

    A reply has headers when its first field reads "<header> <value>"; then every
    field must. A header may carry a path (":WFMPRE:BYT_NR", "CH1:WFID",
    ":WFMPRE:CH1:WFID") and be spelt in any form from the short to the long one
    (VERBose OFF or ON), in any case: ":WFMP:BYT_N 1" is BYT_NR. Each of
    `fields` (long names, upper case) found is returned under its long name,
    its value stripped; other fields are skipped. PreambleFormError (naming
    `command`) for a field without a header, or a field of `fields` named twice
    with different values.
    """
    parts = split_fields(reply.strip())
    if _NAMED.fullmatch(parts[0]) is None:
        return None
    shorts = {name: _short_form(name) for name in fields}
    values: dict[str, str] = {}
    for i, part in enumerate(parts):
        m = _NAMED.fullmatch(part)
        if m is None:
            raise PreambleFormError(
                command,
                field="reply",
                value=part,
                detail=f"field {i + 1} has no header, where the others read '<header> <value>'",
            )
        word = m.group(1).rsplit(":", 1)[-1].upper()
        name = next((n for n, short in shorts.items()
                     if word.startswith(short) and n.startswith(word)), None)
        if name is None:
            continue
        value = m.group(2).strip()
        if values.setdefault(name, value) != value:
            raise PreambleFormError(
                command, field=name, value=value,
                detail=f"named twice, the first time as {shorten(values[name])!r}"
            )
    return values


def _short_form(name: str) -> str:
    """BYT_NR -> BYT_N (a name MNEMONICS does not spell has no shorter form)."""
    return "".join(c for c in MNEMONICS.get(name, name) if not c.islower()).upper()


def _without_resource(exc: ScopeError) -> str:
    """`exc`'s message without the resource prefix (for quoting one error inside another)."""
    bare = copy.copy(exc)
    bare.resource = ""
    return str(bare)


@dataclass(frozen=True)
class Preamble:
    """The WFMPre? fields needed to turn a CURVe? block into volts and seconds.

    `parse` reads every form a TDS sends (see its docstring) and accepts only
    what can be used: NR_PT a whole number from 1 to `max_points`, XINCR finite
    and > 0, YMULT finite and non-zero, the other numbers finite, and every
    sample's time and voltage a finite number; anything else is a
    ScopeDataError naming the query, the field and its text (a
    PreambleFormError when the reply's form cannot be read at all).
    """

    query: ClassVar[str] = "WFMPre?"
    max_points: ClassVar[int] = 10_000_000  # more than any TDS holds: a bound, not a feature
    # the formatting fields WFMPre:CH<n>? leaves out, as the driver sets them (RIBinary, width 1)
    formatting: ClassVar[Mapping[str, str]] = {"BYT_NR": "1", "BIT_NR": "8", "ENCDG": "BIN",
                                               "BN_FMT": "RI",
                                               "BYT_OR": "MSB"}

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
    def parse(
        cls, reply: str, *, command: str | None = None, formatting: Mapping[str, str] | None = None
    ) -> Self:
        """The preamble from a WFMPre? or WFMPre:CH<n>? reply, with or without headers.

        Values in order (HEADer OFF): BYT_NR;BIT_NR;ENCDG;BN_FMT;BYT_OR; then
        WFID;NR_PT;PT_FMT;XUNIT;XINCR;[XZERO;]PT_OFF;YUNIT;YMULT;YOFF;YZERO (16
        fields, 15 from older firmware without XZERO, taken as 0), or only the
        waveform's part from WFID on (WFMPre:CH<n>?: 11 or 10 fields). Named
        (HEADer ON): ":WFMPRE:BYT_NR 1;BIT_NR 8;...;:WFMPRE:CH1:WFID ...", long or
        short names in any order (see `named_fields`), XZERO again optional.
        The formatting fields a per-waveform reply leaves out come from
        `formatting` (what the driver set; `Preamble.formatting` if None).
        Errors name `command` (the query, if None).
        """
        command = command or cls.query
        values = named_fields(command, reply, FIELDS)
        values = cls._positional(command, reply) if values is None else cls._named(command, values)
        if not any(name in values for name in FORMATTING_FIELDS):  # the per-waveform form
            values.update(cls.formatting if formatting is None else formatting)
        return cls.from_fields(values, command)

    @classmethod
    def _positional(cls, command: str, reply: str) -> dict[str, str]:
        f = split_fields(reply)
        if len(f) in (15, 10):  # no XZERO: it comes before PT_OFF;YUNIT;YMULT;YOFF;YZERO
            f.insert(len(f) - 5, "0")
        if len(f) not in (16, 11):
            raise PreambleFormError(
                command,
                field="reply",
                value=reply,
                detail=f"15 or 16 ';'-separated fields expected (10 or 11 in the per-waveform form "
                f"WFMPre:CH<n>?), got {len(f)}",
            )
        return dict(zip(FIELDS if len(f) == 16 else WAVEFORM_FIELDS, f, strict=True))

    @classmethod
    def _named(cls, command: str, values: dict[str, str]) -> dict[str, str]:
        values.setdefault("XZERO", "0")  # older firmware has no XZERO
        # the formatting fields all missing is the per-waveform form; BIT_NR and the units are not
        # used
        skipped = {"BIT_NR", "PT_FMT", "XUNIT", "YUNIT"}
        if not any(name in values for name in FORMATTING_FIELDS):
            skipped.update(FORMATTING_FIELDS)
        missing = next((name for name in FIELDS if name not in values and name not in skipped),
                       None)
        if missing is not None:
            raise PreambleFormError(command, field=missing, detail="missing from the reply")
        return values

    @classmethod
    def from_fields(cls, values: Mapping[str, str], command: str | None = None) -> Self:
        """The preamble from its fields by name (FIELDS), each checked; errors name `command`
        (the query, if None)."""
        r = ReplyFields(command or cls.query, values)
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
            f"with YOFF {pre.y_off:g} and YZERO {pre.y_zero:g}, the volts of every code must be "
            "finite numbers",
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
    transfer_width = 1  # DATa:WIDth: bytes per point
    preamble_type: type[Preamble] = Preamble  # its `query` fetches it

    # --- settings, declaratively (templates use {ch} = the configured channel) ---
    displayed = Control("SELect:CH{ch}?", "SELect:CH{ch} {value}", flag, on_off)
    volts_per_div = Control("CH{ch}:SCAle?", "CH{ch}:SCAle {value:.9g}", positive, in_range(1e-3,
                                                                                            10.0))
    position_div = Control("CH{ch}:POSition?", "CH{ch}:POSition {value:.9g}", real, in_range(-5.0,
                                                                                             5.0))
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
    acquire_mode = Control("ACQuire:MODe?", "ACQuire:MODe {value}", from_keyword(ACQUIRE_MODES),
                           keyword(ACQUIRE_MODES))
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
        # half-way between two configurations, no settings describe the instrument
        self._applied = None
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
        self.trigger_mode = s.trigger_mode  # normal for a run: AUTO would trigger on nothing
        self.acquire_mode = "sample"
        self.stop_after = "sequence"
        self.data_source = f"CH{s.channel}"
        self.data_encoding = self.encoding
        self.data_width = self.transfer_width
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
        pre = self._read_preamble()
        datatype = DATATYPES.get((pre.bn_fmt, pre.byte_nr))
        if pre.encoding != "BIN" or datatype is None or pre.byte_or not in ("MSB", "LSB"):
            raise ScopeError(
                command,
                resource=self.resource_name,
                detail=f"unsupported data format {pre.encoding}/{pre.bn_fmt}/{pre.byte_nr} "
                       f"byte(s)/{pre.byte_or}",
            )
        return pre, datatype

    def _read_preamble(self) -> Preamble:
        """The preamble query's reply, parsed; if its form cannot be read (PreambleFormError),
        once more with the per-waveform query of the data source channel (WFMPre:CH<n>?),
        whose missing formatting fields are what configure() set. A field whose value is
        refused is not asked again: the other form would report the same waveform."""
        kind = self.preamble_type
        try:
            return self.query_value(kind.query, kind.parse)
        except PreambleFormError as exc:
            first = exc
            per_waveform = PER_WAVEFORM_QUERIES.get(kind.query)
            if per_waveform is None:
                raise
        command = per_waveform.format(ch=self.channel)
        formatting = self._transfer_format()
        tried = f"{kind.query} then {command}"
        try:
            return self.query_value(command, lambda reply: kind.parse(reply, command=command,
                                                                      formatting=formatting))
        except ScopeDataError as exc:
            raise ScopeDataError(
                command,
                resource=self.resource_name,
                field=exc.field,
                value=exc.value,
                detail=f"{exc.detail} [tried {tried}; {_without_resource(first)}]",
            ) from None
        except ScopeError as exc:  # refused or not answered: the first reply's fault is the news
            raise ScopeDataError(
                first.command,
                resource=self.resource_name,
                field=first.field,
                value=first.value,
                detail=f"{first.detail} [tried {tried}; {_without_resource(exc)}]",
            ) from None

    def _transfer_format(self) -> dict[str, str]:
        """The preamble's formatting fields as configure() set them (DATa:ENCdg, DATa:WIDth)."""
        bn_fmt, byte_or = BINARY_ENCODINGS[self.encoding.upper()]
        width = self.transfer_width
        return {"BYT_NR": str(width), "BIT_NR": str(8 * width), "ENCDG": "BIN", "BN_FMT": bn_fmt,
                "BYT_OR": byte_or}

    # --- errors: after *ESR?, the event queue --------------------------------------------
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        events = [
            f'{code},"{text}"'
            for code, text in _EVENT.findall(self.session.query("ALLEv?", timeout_s))
            if int(code) not in _QUIET_EVENTS
        ]
        return " | ".join(events)
