"""Tektronix MSO 4/5/6 series dialect (raw socket, port 4000).

The MSO keeps the TDS conventions this package relies on (HEADer OFF, *ESR?
then ALLEv?, ACQuire:STOPAfter SEQuence + ACQuire:STATE RUN, BUSY?, DATa:* and
CURVe?), so the driver is the TDS driver with the MSO's command tree: the A
trigger with a level per source (TRIGger:A:LEVel:CH<n>), HORizontal:SCAle and
HORizontal:POSition, HORizontal:MODe MANual so that the record length is kept
as set, DISplay:GLObal:CH<n>:STATE, CH<n>:OFFSet, SRIbinary (little-endian
signed) transfers, and the WFMOutpre? preamble:

BYT_NR;BIT_NR;ENCDG;BN_FMT;BYT_OR;WFID;NR_PT;PT_FMT;PT_ORDER;XUNIT;XINCR;XZERO;
PT_OFF;YUNIT;YMULT;YOFF;YZERO[;DOMAIN;WFMTYPE;CENTERFREQUENCY;SPAN;REFLEVEL]

with Xn = XZEro + XINcr·(n − PT_Off) (XZEro changes with every acquisition)
and Yn = YZEro + YMUlt·(yn − YOFf) (YOFf is 0, YZEro carries offset and position).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from instruments.scope import ScopeDataError, ScopeSettings
from instruments.scpi import Control, flag, from_keyword, in_range, keyword, on_off, positive, real, split_fields
from instruments.tektronix_tds import SLOPES, TRIGGER_MODES, Preamble, TektronixTDS

HORIZONTAL_MODES = {"auto": "AUTO", "manual": "MANual"}
# WFMOutpre? fields in the documented order (the first 17 are all the driver needs)
FIELDS = (
    "BYT_NR",
    "BIT_NR",
    "ENCDG",
    "BN_FMT",
    "BYT_OR",
    "WFID",
    "NR_PT",
    "PT_FMT",
    "PT_ORDER",
    "XUNIT",
    "XINCR",
    "XZERO",
    "PT_OFF",
    "YUNIT",
    "YMULT",
    "YOFF",
    "YZERO",
)


@dataclass(frozen=True)
class OutputPreamble(Preamble):
    """WFMOutpre? fields, read by header name (HEADer ON) or in the documented order,
    and checked as the TDS preamble's are."""

    query: ClassVar[str] = "WFMOutpre?"
    # the MSO 5's standard record length; long-record options hold more: raise it for them
    max_points: ClassVar[int] = 62_500_000

    @classmethod
    def parse(cls, reply: str) -> Self:
        f = split_fields(reply.strip())
        if f and f[0].startswith(":"):  # ":WFMOUTPRE:BYT_NR 1": drop the compound header's path
            f[0] = f[0].rsplit(":", 1)[-1]
        if all(" " in x for x in f):  # every field named
            values = {k.upper(): v.strip() for k, _, v in (x.partition(" ") for x in f)}
        else:
            if len(f) < len(FIELDS):
                raise ScopeDataError(
                    cls.query,
                    field="reply",
                    value=reply,
                    detail=f"at least {len(FIELDS)} ';'-separated fields expected, got {len(f)}",
                )
            values = dict(zip(FIELDS, f, strict=False))
        return cls.from_fields(values)


class TektronixMSO(TektronixTDS):
    """An MSO 4/5/6 series oscilloscope over any VISA session."""

    identity_pattern = r"^TEKTRONIX,\s*MSO[456]"
    encoding = "SRIbinary"
    preamble_type = OutputPreamble

    displayed = Control("DISplay:GLObal:CH{ch}:STATE?", "DISplay:GLObal:CH{ch}:STATE {value}", flag, on_off)
    offset_v = Control("CH{ch}:OFFSet?", "CH{ch}:OFFSet {value:.9g}")
    horizontal_mode = Control(
        "HORizontal:MODe?", "HORizontal:MODe {value}", from_keyword(HORIZONTAL_MODES), keyword(HORIZONTAL_MODES)
    )
    time_per_div = Control("HORizontal:SCAle?", "HORizontal:SCAle {value:.9g}", positive)
    trigger_position_pct = Control(
        "HORizontal:POSition?", "HORizontal:POSition {value:.9g}", real, in_range(0.0, 100.0)
    )
    trigger_source = Control("TRIGger:A:EDGE:SOUrce?", "TRIGger:A:EDGE:SOUrce {value}", str)
    trigger_slope = Control(
        "TRIGger:A:EDGE:SLOpe?", "TRIGger:A:EDGE:SLOpe {value}", from_keyword(SLOPES), keyword(SLOPES)
    )
    trigger_level_v = Control("TRIGger:A:LEVel:CH{ch}?", "TRIGger:A:LEVel:CH{ch} {value:.9g}")
    trigger_mode = Control(
        "TRIGger:A:MODe?", "TRIGger:A:MODe {value}", from_keyword(TRIGGER_MODES), keyword(TRIGGER_MODES)
    )

    def _configure_vertical(self, s: ScopeSettings) -> None:
        super()._configure_vertical(s)
        self.offset_v = 0.0  # the trace is placed by position alone, as on the TDS

    def _configure_horizontal(self, s: ScopeSettings) -> None:
        self.horizontal_mode = "manual"  # record length and scale as set, not traded for each other
        super()._configure_horizontal(s)
