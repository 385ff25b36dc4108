"""Tektronix TDS 400/500/600 dialect (written against the TDS 460A programmer manual).

Single-sequence acquisitions of one channel, transferred as RIBinary width 1
and scaled with the WFMPre? preamble:
Xn = XZEro + XINcr·(n − PT_Off), Yn = YZEro + YMUlt·(yn − YOFf).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from instruments.scope import ScopeError, ScopeSettings, Waveform
from instruments.scpi import (
    Control,
    ScpiScope,
    from_keyword,
    in_range,
    keyword,
    nr1,
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


def _on_off(value: bool) -> str:
    return "ON" if value else "OFF"


def _flag(reply: str) -> bool:
    return reply.strip().upper() in ("1", "ON")


@dataclass(frozen=True)
class Preamble:
    """The WFMPre? fields needed to turn a CURVe? block into volts and seconds."""

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
    def parse(cls, reply: str) -> Preamble:
        """BYT_NR;BIT_NR;ENCDG;BN_FMT;BYT_OR; then WFID;NR_PT;PT_FMT;XUNIT;XINCR;[XZERO;]
        PT_OFF;YUNIT;YMULT;YOFF;YZERO. Older TDS firmware omits XZERO (taken as 0)."""
        f = split_fields(reply)
        if len(f) == 15:
            f.insert(10, "0")
        if len(f) != 16:
            raise ValueError(f"expected 15 or 16 fields, got {len(f)}")
        return cls(
            byte_nr=nr1(f[0]),
            encoding=f[2].upper()[:3],
            bn_fmt=f[3].upper()[:2],
            byte_or=f[4].upper()[:3],
            wfid=unquote(f[5]),
            points=nr1(f[6]),
            x_incr=float(f[9]),
            x_zero=float(f[10]),
            pt_off=nr1(f[11]),
            y_mult=float(f[13]),
            y_off=float(f[14]),
            y_zero=float(f[15]),
        )


class TektronixTDS(ScpiScope):
    """A TDS 400/500/600 oscilloscope (TDS 460A) over any VISA session."""

    identity_pattern = r"^TEKTRONIX,\s*TDS"
    arm_command = "ACQuire:STATE RUN"
    stop_command = "ACQuire:STATE STOP"
    encoding = "RIBinary"  # DATa:ENCdg for CURVe?
    preamble_query = "WFMPre?"
    preamble_type: type[Preamble] = Preamble

    # --- settings, declaratively (templates use {ch} = the configured channel) ---
    displayed = Control("SELect:CH{ch}?", "SELect:CH{ch} {value}", _flag, _on_off)
    volts_per_div = Control("CH{ch}:SCAle?", "CH{ch}:SCAle {value:.9g}", float, in_range(1e-3, 10.0))
    position_div = Control("CH{ch}:POSition?", "CH{ch}:POSition {value:.9g}", float, in_range(-5.0, 5.0))
    time_per_div = Control("HORizontal:MAIn:SCAle?", "HORizontal:MAIn:SCAle {value:.9g}")
    record_length = Control("HORizontal:RECOrdlength?", "HORizontal:RECOrdlength {value:d}", nr1)
    trigger_position_pct = Control(
        "HORizontal:TRIGger:POSition?",
        "HORizontal:TRIGger:POSition {value:.9g}",
        float,
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
        self.channel = s.channel
        self.write("HEADer OFF")  # replies are bare values from here on
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
        applied = replace(
            s,
            volts_per_div=self.volts_per_div,
            position_div=self.position_div,
            time_per_div=self.time_per_div,
            record_length=self.record_length,
            trigger_position_pct=self.trigger_position_pct,
            trigger_level_v=self.trigger_level_v,
        )
        self.data_stop = applied.record_length
        self._applied = applied
        return applied

    def _configure_vertical(self, s: ScopeSettings) -> None:
        self.displayed = True  # the preamble and CURVe? need the channel on
        self.volts_per_div = s.volts_per_div
        self.position_div = s.position_div

    def _configure_horizontal(self, s: ScopeSettings) -> None:
        self.record_length = s.record_length
        self.time_per_div = s.time_per_div
        self.trigger_position_pct = s.trigger_position_pct

    def busy(self) -> bool:
        return self.query_value("BUSY?", nr1) == 1

    def fetch(self) -> Waveform:
        """Transfer the last acquisition of the configured channel."""
        command = self.preamble_query
        reply = self.query(command)
        try:
            pre = self.preamble_type.parse(reply)
        except ValueError as exc:
            raise ScopeError(command, resource=self.resource_name, detail=f"unreadable preamble: {exc}") from None
        datatype = DATATYPES.get((pre.bn_fmt, pre.byte_nr))
        if pre.encoding != "BIN" or datatype is None or pre.byte_or not in ("MSB", "LSB"):
            raise ScopeError(
                command,
                resource=self.resource_name,
                detail=f"unsupported data format {pre.encoding}/{pre.bn_fmt}/{pre.byte_nr} byte(s)/{pre.byte_or}",
            )
        codes = self.query_block("CURVe?", datatype, pre.points, big_endian=pre.byte_or == "MSB")
        self._check_points("CURVe?", codes, pre.points)
        volts = pre.y_zero + pre.y_mult * (codes.astype(np.float64) - pre.y_off)
        return self._waveform(pre.x_zero - pre.x_incr * pre.pt_off, pre.x_incr, volts, abs(pre.y_mult))

    # --- errors: after *ESR?, the event queue --------------------------------------------
    def _error_queue_text(self, timeout_s: float | None = None) -> str:
        events = [
            f'{code},"{text}"'
            for code, text in _EVENT.findall(self.session.query("ALLEv?", timeout_s))
            if int(code) not in _QUIET_EVENTS
        ]
        return " | ".join(events)
