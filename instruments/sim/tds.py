"""A Tektronix TDS 400/500/600 (TDS 460A) as a state machine, fed by an edge source.

It plays the subset of the TDS programmer manual the station uses (see
`TdsModel._build_table`). Behaviour worth knowing, chosen to match the
instrument:

- Unknown headers, wrong arguments and out-of-range values set *ESR? bits
  (command error 32, execution error 16) and queue events for ALLEv?/EVMsg?,
  in TDS form: ``113,"Undefined header; Command not found; FOO:BAR"``. As on a
  TDS, events become readable only after *ESR? has been read.
- A query that fails produces no reply at all: the client times out, as it
  would with the real instrument. The server itself never blocks on it.
- HORizontal:RECOrdlength rounds up to the next length the TDS has (500 ...
  120000; above the largest: execution error 222). HORizontal:MAIn:SCAle
  rounds to the nearest 1-2.5-5 step in 5 ns..10 s.
- *RST restores acquisition, vertical, horizontal, trigger and DATa settings;
  HEADer and VERBose, being interface settings, are left alone.
- Only single sequences are simulated: with ACQuire:STOPAfter RUNSTop,
  ACQuire:STATE RUN just marks the scope running and acquires nothing.
- The probe is on `probe_channel`; `channel_sources` puts more probes on other
  channels (a stimulus and a response, say), on the same clock; displayed
  channels without a probe see 0 V + noise.
- HEADer ON: replies carry their header, long or short as VERBose is ON or
  OFF (``:CH1:SCALE 1.0E-1``, ``:CH1:SCA 1.0E-1``). The preamble's waveform part
  carries its waveform's compound header, as in the manual's WFMPre:<wfm>?
  example: WFMPre:CH1? answers ``:WFMPRE:CH1:WFID "...";NR_PT 500;...;YZERO 0.0E0``
  and WFMPre? ``:WFMPRE:BYT_NR 1;BIT_NR 8;ENCDG BIN;BN_FMT RI;BYT_OR MSB;
  :WFMPRE:CH1:WFID "...";NR_PT 500;...`` (with VERBose OFF ``:WFMP:BYT_N 1;...;
  :WFMP:CH1:WFI "...";NR_P 500;...``). Whether a TDS spells the waveform part of
  WFMPre? from the root, as here, or relative (``;CH1:WFID``) is unverified; the
  driver reads both.
- Not modelled: the 100 MS/s real-time limit (any time base and record length
  give dt = 10·time_per_div / record_length), acquisition modes other than
  SAMple.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from instruments.sim.commands import (
    Fault,
    Node,
    boolean,
    choice,
    integer,
    number,
    quoted,
    short_form,
    tek_nr3,
)
from instruments.sim.scope_model import CHANNELS, ScopeModel, Settings
from instruments.sim.signal import LEVELS_PER_DIV

DEFAULT_IDN = "TEKTRONIX,TDS 460A,0,CF:91.1CT FV:v1.0.2e"
RECORD_LENGTHS = (500, 1000, 2500, 5000, 15000, 30000, 60000, 120000)
TIME_PER_DIV_RANGE = (5e-9, 10.0)
VOLTS_PER_DIV_RANGE = (1e-3, 10.0)
POSITION_RANGE = (-5.0, 5.0)
NO_MEASUREMENT = "9.9E37"  # the reply to a measurement without a valid value

ENCODINGS = {  # DATa:ENCdg -> (signed, big-endian); None: ASCII
    "ASCII": None,
    "RIBINARY": (True, True),
    "RPBINARY": (False, True),
    "SRIBINARY": (True, False),
    "SRPBINARY": (False, False),
}


def round_time_per_div(value: float) -> float:
    """Nearest 1-2.5-5 step (in log scale), as the horizontal knob has."""
    decade = 10.0 ** math.floor(math.log10(value))
    steps = [m * decade for m in (0.5, 1.0, 2.5, 5.0, 10.0)]
    return min(steps, key=lambda s: abs(math.log(s / value)))


@dataclass
class TdsSettings(Settings):
    """Everything a TDS's *RST restores."""

    acquire_mode: str = "SAMPLE"
    stop_after: str = "RUNSTOP"
    encoding: str = "RIBINARY"
    width: int = 1
    data_start: int = 1
    data_stop: int = 500
    measure_type: str = "PERIOD"


class TdsModel(ScopeModel):
    """A TDS 400/500/600: its command tree, event queue (ALLEv?/EVMsg?), ranges and record
    lengths, WFMPre? preamble and CURVe? transfer."""

    settings_type: type[Settings] = TdsSettings
    default_idn = DEFAULT_IDN
    default_bus = "gpib"  # its own interface (instruments/sim/bus.py)

    def _record_lengths(self, largest: int | None) -> tuple[int, ...]:
        return tuple(n for n in RECORD_LENGTHS if largest is None or n <= largest)

    def _build_table(self) -> list[Node]:
        s = self  # handlers read self.s at call time: *RST replaces it
        ch = self._channel
        return [
            *self._common_nodes(),
            Node("HEADer", get=lambda: s._bool(s.header), set=lambda a: s._set_header(a)),
            Node("VERBose", get=lambda: s._bool(s.verbose), set=lambda a: s._set_verbose(a)),
            Node("ALLEv", get=s._allev),
            Node("EVMsg", get=s._evmsg),
            Node("BUSY", get=lambda: "1" if s.busy else "0"),
            Node(
                "SELect:CH<n>",
                get=lambda n: s._bool(ch(n).displayed),
                set=lambda a, n: setattr(ch(n), "displayed", boolean(a)),
            ),
            Node("CH<n>:SCAle", get=lambda n: tek_nr3(ch(n).scale), set=s._set_scale),
            Node("CH<n>:POSition", get=lambda n: tek_nr3(ch(n).position), set=s._set_position),
            Node(
                "CH<n>:COUPling",
                get=lambda n: s._kw(ch(n).coupling),
                set=lambda a, n: setattr(ch(n), "coupling", choice(a, ("AC", "DC", "GND"))),
            ),
            Node("HORizontal:MAIn:SCAle", get=s._get_tdiv, set=s._set_tdiv),
            Node("HORizontal:SCAle", get=s._get_tdiv, set=s._set_tdiv),
            Node(
                "HORizontal:RECOrdlength",
                get=lambda: str(s.s.record_length),
                set=s._set_record_length,
            ),
            Node(
                "HORizontal:TRIGger:POSition",
                get=lambda: tek_nr3(s.s.trigger_position_pct),
                set=s._set_trigger_position,
            ),
            Node("TRIGger:MAIn:TYPe", get=lambda: s._kw("EDGE"), set=lambda a: choice(a, ["EDGE"])),
            Node(
                "TRIGger:MAIn:EDGE:SOUrce",
                get=lambda: f"CH{s.s.trigger_source}",
                set=lambda a: setattr(s.s, "trigger_source", s._channel_arg(a)),
            ),
            Node(
                "TRIGger:MAIn:EDGE:SLOpe",
                get=lambda: s._kw(s.s.trigger_slope),
                set=lambda a: setattr(s.s, "trigger_slope", choice(a, ("RISe", "FALL"))),
            ),
            Node(
                "TRIGger:MAIn:EDGE:COUPling",
                get=lambda: s._kw("DC"),
                set=lambda a: choice(a, ("DC",)),
            ),
            Node(
                "TRIGger:MAIn:LEVel",
                get=lambda: tek_nr3(s.s.trigger_level),
                set=lambda a: setattr(s.s, "trigger_level", number(a)),
            ),
            Node(
                "TRIGger:MAIn:MODe",
                get=lambda: s._kw(s.s.trigger_mode),
                set=lambda a: setattr(s.s, "trigger_mode", choice(a, ("AUTO", "NORMal"))),
            ),
            Node("TRIGger:STATE", get=lambda: s._trigger_state),
            Node("ACQuire:MODe", get=lambda: s._kw(s.s.acquire_mode), set=s._set_acquire_mode),
            Node(
                "ACQuire:STOPAfter",
                get=lambda: s._kw(s.s.stop_after),
                set=lambda a: setattr(s.s, "stop_after", choice(a, ("RUNSTop", "SEQuence"))),
            ),
            Node("ACQuire:STATE", get=lambda: s._bool(s._running or s.busy), set=s._set_state),
            Node("ACQuire:NUMACq", get=lambda: str(s._numacq)),
            Node(
                "DATa:SOUrce",
                get=lambda: f"CH{s.s.data_source}",
                set=lambda a: setattr(s.s, "data_source", s._channel_arg(a)),
            ),
            Node("DATa:ENCdg", get=lambda: s._kw(s.s.encoding), set=s._set_encoding),
            Node("DATa:WIDth", get=lambda: str(s.s.width), set=s._set_width),
            Node("DATa:STARt", get=lambda: str(s.s.data_start), set=s._set_start),
            Node("DATa:STOP", get=lambda: str(s.s.data_stop), set=s._set_stop),
            Node("WFMPre", get=lambda: s._preamble(None, None), headers=False),
            Node("WFMPre:CH<n>", get=lambda n: s._preamble(n, None), headers=False),
            *[
                Node(f"WFMPre:{f}", get=lambda f=f: s._preamble(None, f))
                for f in (*_FORMAT_FIELDS, *_WFM_FIELDS)
            ],
            *[Node(f"WFMPre:CH<n>:{f}", get=lambda n, f=f: s._preamble(n, f)) for f in _WFM_FIELDS],
            Node("CURVe", get=s._curve),
            Node("MEASUrement:IMMed:TYPe", get=lambda: s._kw(s.s.measure_type),
                 set=s._set_measure_type),
            Node("MEASUrement:IMMed:SOUrce<n>", get=lambda n: f"CH{s.s.measure_source}",
                 set=lambda a, n: setattr(s.s, "measure_source", s._channel_arg(a))),
            Node("MEASUrement:IMMed:SOUrce", get=lambda: f"CH{s.s.measure_source}",
                 set=lambda a: setattr(s.s, "measure_source", s._channel_arg(a))),
            Node("MEASUrement:IMMed:VALue", get=s._immediate_value),
        ]

    def _kw(self, long: str) -> str:
        return long.upper() if self.verbose else short_form(long)

    def _channel_arg(self, arg: str) -> int:
        word = arg.upper()
        if word.startswith("CH") and word[2:].isdigit() and int(word[2:]) in CHANNELS:
            return int(word[2:])
        raise Fault(141, "Invalid character data")

    def _no_events(self) -> str:
        if self._pending:
            return '1,"No events to report - new events pending *ESR?"'
        return '0,"No events to report - queue empty"'

    def _allev(self) -> str:
        if not self._events:
            return self._no_events()
        text = ",".join(f"{code},{quoted(msg)}" for code, msg in self._events)
        self._events.clear()
        return text

    def _evmsg(self) -> str:
        if not self._events:
            return self._no_events()
        code, msg = self._events.pop(0)
        return f"{code},{quoted(msg)}"

    def _set_header(self, arg: str) -> None:
        self.header = boolean(arg)

    def _set_verbose(self, arg: str) -> None:
        self.verbose = boolean(arg)

    def _set_scale(self, arg: str, n: int) -> None:
        v = number(arg)
        if not VOLTS_PER_DIV_RANGE[0] <= v <= VOLTS_PER_DIV_RANGE[1]:
            raise Fault(222, "Data out of range")
        self._channel(n).scale = v

    def _set_position(self, arg: str, n: int) -> None:
        v = number(arg)
        if not POSITION_RANGE[0] <= v <= POSITION_RANGE[1]:
            raise Fault(222, "Data out of range")
        self._channel(n).position = v

    def _get_tdiv(self) -> str:
        return tek_nr3(self.s.time_per_div)

    def _set_tdiv(self, arg: str) -> None:
        v = number(arg)
        lo, hi = TIME_PER_DIV_RANGE
        if not lo * 0.999 <= v <= hi * 1.001:
            raise Fault(222, "Data out of range")
        self.s.time_per_div = self._time_base(min(max(round_time_per_div(v), lo), hi))

    def _set_record_length(self, arg: str) -> None:
        v = integer(arg)
        fits = [n for n in self.record_lengths if n >= v]
        if not fits:
            raise Fault(222, "Data out of range")
        self.s.record_length = fits[0]

    def _set_trigger_position(self, arg: str) -> None:
        v = number(arg)
        if not 0.0 <= v <= 100.0:
            raise Fault(222, "Data out of range")
        self.s.trigger_position_pct = v

    def _set_acquire_mode(self, arg: str) -> None:
        mode = choice(arg, ("SAMple", "PEAKdetect", "HIRes", "AVErage", "ENVelope"))
        if mode != "SAMPLE":
            raise Fault(221, "Settings conflict; only SAMple is simulated")
        self.s.acquire_mode = mode

    def _set_encoding(self, arg: str) -> None:
        self.s.encoding = choice(arg, ("ASCIi", "RIBinary", "RPBinary", "SRIbinary", "SRPbinary"))

    def _set_width(self, arg: str) -> None:
        v = integer(arg)
        if v not in (1, 2):
            raise Fault(222, "Data out of range")
        self.s.width = v

    def _set_start(self, arg: str) -> None:
        self.s.data_start = max(1, integer(arg))

    def _set_stop(self, arg: str) -> None:
        self.s.data_stop = max(1, integer(arg))

    def _set_state(self, arg: str) -> None:
        word = arg.upper()
        if word in ("RUN", "ON") or (word not in ("STOP", "OFF") and boolean(arg)):
            if self.s.stop_after == "SEQUENCE":
                self._start_sequence()
            else:
                self._running = True
        else:
            self._cancel()
            self._running = False

    def _set_measure_type(self, arg: str) -> None:
        self.s.measure_type = choice(arg, ("PWIdth", "NWIdth", "PERIod", "FREQuency", "AMPlitude"))

    def _immediate_value(self) -> str:
        """MEASUrement:IMMed:VALue?: the first positive pulse's width (9.9E37: none)."""
        if self.s.measure_type != "PWIDTH":
            raise Fault(221, "Settings conflict; only PWIdth is simulated")
        widths = self.measured_widths_ns(self.s.measure_source)
        return tek_nr3(widths[0] * 1e-9) if len(widths) else NO_MEASUREMENT

    def _transfer_range(self, n: int) -> tuple[int, int]:
        start, stop = sorted((self.s.data_start, self.s.data_stop))
        start, stop = min(start, n), min(stop, n)
        return start, stop

    def _preamble(self, n: int | None, field_name: str | None) -> str:
        rec, channel = self._source_record(n)
        info, vert = rec.info, rec.channels[channel]
        start, stop = self._transfer_range(info.record_length)
        enc = ENCODINGS[self.s.encoding]
        width = self.s.width
        scale = 256 if width == 2 else 1
        y_off = vert.position * LEVELS_PER_DIV + (0 if enc is None or enc[0] else 128)
        tdiv = f"{rec.time_per_div * 1e6:.4g}us/div"
        wfid = (
            f"Ch{channel}, {vert.coupling} coupling, {vert.scale:.4g}V/div, {tdiv}, "
            f"{info.record_length} points, Sample mode"
        )
        formatting = [  # (mnemonic as the manual spells it, value)
            ("BYT_Nr", str(width)),
            ("BIT_Nr", str(8 * width)),
            ("ENCdg", "ASC" if enc is None else "BIN"),
            ("BN_Fmt", "RI" if enc is None or enc[0] else "RP"),
            ("BYT_Or", "MSB" if enc is None or enc[1] else "LSB"),
        ]
        waveform = [
            ("WFId", quoted(wfid)),
            ("NR_Pt", str(stop - start + 1)),
            ("PT_Fmt", "Y"),
            ("XUNit", quoted("s")),
            ("XINcr", tek_nr3(info.dt_ns * 1e-9)),
            ("XZEro", tek_nr3(rec.xzero_s)),
            ("PT_Off", str(info.pt_off - (start - 1))),  # relative to DATa:STARt
            ("YUNit", quoted("Volts")),
            ("YMUlt", tek_nr3(vert.scale / LEVELS_PER_DIV / scale)),
            ("YOFf", tek_nr3(y_off * scale)),
            ("YZEro", tek_nr3(0.0)),
        ]
        if field_name is not None:
            return {k.upper(): v for k, v in formatting + waveform}[field_name.upper()]
        if not self.header:
            return ";".join(v for _, v in (formatting if n is None else []) + waveform)
        # headers in the VERBose spelling; the waveform part under its compound header (CH<n>:)
        root = f":{self._kw('WFMPre')}:"
        part = f"{root}CH{channel}:" + ";".join(f"{self._kw(k)} {v}" for k, v in waveform)
        if n is not None:
            return part
        return root + ";".join(f"{self._kw(k)} {v}" for k, v in formatting) + ";" + part

    def _curve(self) -> bytes:
        rec, channel = self._source_record(None)
        start, stop = self._transfer_range(rec.info.record_length)
        encoding, width = self.s.encoding, self.s.width
        key = (rec.info.number, channel, start, stop, encoding, width)
        return self._block(key, lambda: encode_curve(rec.codes[channel][start - 1 : stop], encoding,
                                                     width))


def encode_curve(codes: np.ndarray, encoding: str, width: int) -> bytes:
    """CURVe?'s reply for int8 digitizer `codes`: ASCII NR1 values or an IEEE 488.2 block."""
    enc = ENCODINGS[encoding]
    if enc is None:
        return ",".join(map(str, codes.tolist())).encode()
    signed, big = enc
    values = codes.astype(np.int32)
    if not signed:
        values += 128
    if width == 2:
        values *= 256
    kind = ("i" if signed else "u") + str(width)
    data = values.astype((">" if big else "<") + kind).tobytes()
    length = str(len(data))
    return b"".join((b"#", str(len(length)).encode(), length.encode(), data))


_FORMAT_FIELDS = ("BYT_Nr", "BIT_Nr", "ENCdg", "BN_Fmt", "BYT_Or")
_WFM_FIELDS = ("WFId", "NR_Pt", "PT_Fmt", "XUNit", "XINcr", "XZEro", "PT_Off", "YUNit", "YMUlt",
               "YOFf", "YZEro")
