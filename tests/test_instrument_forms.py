"""Drivers that survive real instruments: every form a TDS sends its preamble in, and the
terminations of every kind of VISA resource.

The TDS preamble comes as values in order (HEADer OFF) or named (HEADer ON, long or short
names as VERBose is ON or OFF), as the full WFMPre? or the per-waveform WFMPre:CH<n>?
(without the formatting fields), with or without XZERO; a full reply whose form cannot be
read makes the driver ask WFMPre:CH<n>? once. Shown in memory (examples and hypothesis
properties: whatever the text, a usable preamble or a ScopeDataError, nothing else), against
a script of the exchange (tests/protocol.py), and end to end over TCP with the simulated TDS.

`open_session` gives every message-based resource "\\n" terminations: decided per resource
kind against a stand-in ResourceManager, and shown on a real PyVISA GPIB resource over an
emulated GPIB session (no hardware): a block's trailing LF is read (no Query INTERRUPTED
at the next query) and a 0x0A data byte does not end the block.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import pyvisa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyvisa import constants
from pyvisa_py import sessions as pyvisa_py_sessions

import instruments.scpi
from instruments.scope import ScopeDataError, open_scope
from instruments.scpi import open_session, split_fields
from instruments.sim import SimScopeServer
from instruments.tektronix_mso import OutputPreamble, TektronixMSO
from instruments.tektronix_tds import (
    FIELDS,
    FORMATTING_FIELDS,
    MNEMONICS,
    WAVEFORM_FIELDS,
    Preamble,
    PreambleFormError,
    TektronixTDS,
)
from tests.protocol import TIMEOUT, expected_protocol
from tests.scope_helpers import check_timing, pulse_source, reset_scope, sim_scope
from tests.scope_helpers import settings as scope_settings

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- preamble replies, built in each form from one set of values --------------------------------
VALUES = {
    "BYT_NR": "1",
    "BIT_NR": "8",
    "ENCDG": "BIN",
    "BN_FMT": "RI",
    "BYT_OR": "MSB",
    "WFID": '"Ch1, DC coupling, 1.0V/div, 250us/div, 5000 points, Sample mode"',
    "NR_PT": "5000",
    "PT_FMT": "Y",
    "XUNIT": '"s"',
    "XINCR": "5.0E-7",
    "XZERO": "1.2E-9",
    "PT_OFF": "500",
    "YUNIT": '"Volts"',
    "YMULT": "4.0E-2",
    "YOFF": "-5.0E1",
    "YZERO": "0.0E0",
}
EXPECTED = Preamble(1, "BIN", "RI", "MSB", "Ch1, DC coupling, 1.0V/div, 250us/div, 5000 points, Sample mode",
                    5000, 5e-7, 1.2e-9, 500, 0.04, -50.0, 0.0)  # fmt: skip
NUMERIC = frozenset({"BYT_NR", "NR_PT", "XINCR", "XZERO", "PT_OFF", "YMULT", "YOFF", "YZERO"})
POSITIVE = frozenset({"BYT_NR", "NR_PT", "XINCR"})
INTEGRAL = frozenset({"BYT_NR", "NR_PT", "PT_OFF"})


def short(name: str) -> str:
    """The short form a TDS sends with VERBose OFF: BYT_NR -> BYT_N."""
    return "".join(c for c in MNEMONICS[name] if not c.islower()).upper()


def positional(values: Mapping[str, str], *, per_waveform: bool = False) -> str:
    """HEADer OFF: the values in the documented order (fields left out of `values` are skipped)."""
    names = WAVEFORM_FIELDS if per_waveform else FIELDS
    return ";".join(values[n] for n in names if n in values)


def named(
    values: Mapping[str, str],
    *,
    verbose: bool = True,
    per_waveform: bool = False,
    relative: bool = False,
    channel: int = 1,
    lower: bool = False,
) -> str:
    """HEADer ON as the simulated TDS sends it (":WFMPRE:BYT_NR 1;...;:WFMPRE:CH1:WFID ...";
    with VERBose OFF ":WFMP:BYT_N 1;...;:WFMP:CH1:WFI ..."); `relative`: the waveform part
    as ";CH1:WFID ..." instead, the other reading of the manual; `lower`: headers in lower case."""
    root = ":WFMPRE:" if verbose else ":WFMP:"
    root = root.lower() if lower else root

    def spell(name: str) -> str:
        header = name if verbose else short(name)
        return f"{header.lower() if lower else header} {values[name]}"

    wave = ";".join(spell(n) for n in WAVEFORM_FIELDS if n in values)
    if per_waveform:
        return f"{root}CH{channel}:{wave}"
    head = ";".join(spell(n) for n in FORMATTING_FIELDS if n in values)
    return f"{root}{head};{'' if relative else root}CH{channel}:{wave}"


def without(*names: str) -> dict[str, str]:
    return {k: v for k, v in VALUES.items() if k not in names}


FORMS = {  # name: (reply, its XZERO)
    "positional": (positional(VALUES), 1.2e-9),
    "positional, no XZERO (older firmware)": (positional(without("XZERO")), 0.0),
    "per-waveform": (positional(VALUES, per_waveform=True), 1.2e-9),
    "per-waveform, no XZERO": (positional(without("XZERO"), per_waveform=True), 0.0),
    "named, VERBose ON": (named(VALUES), 1.2e-9),
    "named, VERBose OFF": (named(VALUES, verbose=False), 1.2e-9),
    "named, waveform part relative": (named(VALUES, relative=True), 1.2e-9),
    "named, short and relative": (named(VALUES, verbose=False, relative=True), 1.2e-9),
    "named, lower case": (named(VALUES, verbose=False, lower=True), 1.2e-9),
    "named, no XZERO": (named(without("XZERO")), 0.0),
    "named per-waveform, VERBose ON": (named(VALUES, per_waveform=True), 1.2e-9),
    "named per-waveform, VERBose OFF": (named(VALUES, per_waveform=True, verbose=False), 1.2e-9),
    "named per-waveform, no XZERO": (named(without("XZERO"), per_waveform=True), 0.0),
    "named, no units nor BIT_NR": (named(without("BIT_NR", "PT_FMT", "XUNIT", "YUNIT")), 1.2e-9),
    # the TDS 1000/2000 order, and the ISF file header's repeated NR_PT
    "named, another order": (":WFMPRE:" + ";".join(f"{n} {VALUES[n]}" for n in reversed(FIELDS)), 1.2e-9),
    "named, a field repeated": (f":WFMPRE:NR_PT 5000;{named(VALUES)}", 1.2e-9),
    "named, fields the driver does not use": (named(VALUES) + ";NR_FR 1;VSCALE 1.0;HDELAY 0.0E0", 1.2e-9),
}


@pytest.mark.parametrize(("reply", "x_zero"), FORMS.values(), ids=FORMS.keys())
def test_every_form_gives_the_same_preamble(reply: str, x_zero: float) -> None:
    pre = Preamble.parse(reply)
    assert pre.x_zero == x_zero  # 0 when the firmware has no XZERO
    assert replace(pre, x_zero=EXPECTED.x_zero) == EXPECTED


def test_the_per_waveform_form_takes_its_formatting_from_the_driver() -> None:
    reply = positional(VALUES, per_waveform=True)
    assert (Preamble.parse(reply).bn_fmt, Preamble.parse(reply).byte_or) == ("RI", "MSB")  # what the TDS driver sets
    other = {"BYT_NR": "2", "BIT_NR": "16", "ENCDG": "BIN", "BN_FMT": "RP", "BYT_OR": "LSB"}
    for form in (reply, named(VALUES, per_waveform=True)):
        pre = Preamble.parse(form, command="WFMPre:CH1?", formatting=other)
        assert (pre.byte_nr, pre.bn_fmt, pre.byte_or, pre.points) == (2, "RP", "LSB", 5000)
    # a reply that has formatting fields keeps its own
    assert Preamble.parse(positional(VALUES), formatting=other).byte_nr == 1


@pytest.mark.parametrize(
    ("reply", "field", "value", "fragment"),
    [
        (named(without("YMULT")), "YMULT", None, "missing from the reply"),
        (named(without("BN_FMT")), "BN_FMT", None, "missing from the reply"),  # some formatting fields, not all
        (named(without("NR_PT"), per_waveform=True), "NR_PT", None, "missing from the reply"),
        (named(VALUES) + ";4.0E-2", "reply", "4.0E-2", "field 17 has no header"),
        (named(VALUES) + ";", "reply", "", "field 17 has no header"),
        (":WFMPRE:XINCR 1.0E-6;" + named(VALUES), "XINCR", "5.0E-7", "named twice, the first time as '1.0E-6'"),
        ("1;8;BIN;RI;MSB", "reply", "1;8;BIN;RI;MSB", "15 or 16 ';'-separated fields expected"),
        (positional(VALUES) + ";0", "reply", None, "(10 or 11 in the per-waveform form WFMPre:CH<n>?), got 17"),
    ],
)
def test_a_form_that_cannot_be_read(reply: str, field: str, value: str | None, fragment: str) -> None:
    with pytest.raises(PreambleFormError) as caught:
        Preamble.parse(reply)
    err = caught.value
    assert (err.command, err.field) == ("WFMPre?", field)
    if value is not None:
        assert err.value == value
    assert fragment in str(err) and str(err).startswith(f"WFMPre?: {field}")


@pytest.mark.parametrize("form", ["named", "short", "per-waveform", "named per-waveform"])
@pytest.mark.parametrize(
    ("field", "text", "reason"),
    [
        ("XINCR", "0.0E0", "the sample interval must be a positive finite number"),
        ("YMULT", "nan", "must be a finite number other than 0"),
        ("NR_PT", "2.5", "must be a whole number from 1 to"),
        ("XZERO", "inf", "must be a finite number"),
    ],
)
def test_a_value_refused_in_any_form_names_its_field(form: str, field: str, text: str, reason: str) -> None:
    values = {**VALUES, field: text}
    reply = {
        "named": named(values),
        "short": named(values, verbose=False),
        "per-waveform": positional(values, per_waveform=True),
        "named per-waveform": named(values, per_waveform=True),
    }[form]
    with pytest.raises(ScopeDataError) as caught:
        Preamble.parse(reply, command="WFMPre:CH1?")
    err = caught.value
    assert not isinstance(err, PreambleFormError)  # the instrument's word on the waveform: not a form problem
    assert (err.command, err.field, err.value) == ("WFMPre:CH1?", field, text)
    assert str(err) == f"WFMPre:CH1?: {field} is {text!r} — {err.detail}" and reason in err.detail


def test_the_mso_shares_the_named_reading() -> None:
    values = {**VALUES, "PT_ORDER": "LINEAR", "BYT_OR": "LSB"}
    order = (*FIELDS[:8], "PT_ORDER", *FIELDS[8:])
    long = ":WFMOUTPRE:" + ";".join(f"{n} {values[n]}" for n in order) + ";DOMAIN TIME"
    shorter = ":WFMO:" + ";".join(f"{short(n)} {values[n]}" for n in order)  # PT_ORder -> PT_OR
    for reply in (long, shorter, ";".join(values[n] for n in order)):
        pre = OutputPreamble.parse(reply)
        assert (pre.points, pre.x_incr, pre.byte_or, pre.wfid) == (5000, 5e-7, "LSB", EXPECTED.wfid)
    with pytest.raises(ScopeDataError, match=r"^WFMOutpre\?: BN_FMT — missing from the reply"):
        OutputPreamble.parse(":WFMOUTPRE:BYT_NR 1;BIT_NR 8;ENCDG BIN")


# --- properties: whatever the text, a usable preamble or a ScopeDataError naming its field ------
SPECIAL = [
    "nan", "inf", "-inf", "0", "-0", "0.0E0", "-1", "1e-400", "1e308", "-1e308", "1e400", "9" * 400, "2.5",
    "", " ", "abc", "0x10", "1_0", "+", ".", "e5", "\x00", "#", "１２", "٣", '"', ";", ":", "::", "a b",
]  # fmt: skip
field_text = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats().map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.9E}"),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(max_size=12),
)
HEADERS = [
    *FIELDS, *(short(n) for n in FIELDS), *(n.lower() for n in FIELDS), "PT_OR", "NR_FR", "WFMPRE", "X", "CH1",
]  # fmt: skip
header = st.tuples(
    st.sampled_from(["", ":WFMPRE:", ":WFMP:", "CH1:", ":WFMPRE:CH1:", ":wfmp:ch2:", ":"]),
    st.sampled_from(HEADERS),
).map("".join)
named_garbage = st.lists(st.tuples(header, field_text).map(" ".join), max_size=20).map(";".join)
positional_garbage = st.lists(field_text, max_size=18).map(";".join)


def check_usable(pre: Preamble) -> None:
    """Finite scales, a positive sample interval, a count within bounds, finite times and volts."""
    assert math.isfinite(pre.x_incr) and pre.x_incr > 0
    assert math.isfinite(pre.y_mult) and pre.y_mult != 0
    assert isinstance(pre.points, int) and 1 <= pre.points <= Preamble.max_points
    assert 1 <= pre.byte_nr <= 8
    t0 = pre.x_zero - pre.x_incr * pre.pt_off
    volts = [pre.y_zero + pre.y_mult * (code - pre.y_off) for code in (-32768, 0, 65535)]
    assert all(math.isfinite(x) for x in [t0, t0 + (pre.points - 1) * pre.x_incr, *volts, pre.y_off, pre.y_zero])


def parse_or_reject(reply: str, command: str = "WFMPre?") -> ScopeDataError | None:
    """None if `reply` parses to a usable preamble; the error if it is rejected properly
    (naming `command` and a field, on one short line); anything else fails the test."""
    try:
        pre = Preamble.parse(reply, command=command)
    except ScopeDataError as exc:
        message = str(exc)
        assert exc.command == command and message.startswith(f"{command}: {exc.field}")
        assert exc.field in (*FIELDS, "reply")
        assert "\n" not in message and len(message) < 500
        return exc
    check_usable(pre)
    return None


@FUZZ
@given(reply=st.one_of(st.text(max_size=400), positional_garbage, named_garbage))
def test_arbitrary_text(reply: str) -> None:
    parse_or_reject(reply)
    parse_or_reject(reply, "WFMPre:CH3?")


def must_reject(field: str, text: str) -> bool:
    """A field holding `text` makes any preamble unusable."""
    if field not in NUMERIC:
        return False
    try:
        value = float(text)
    except ValueError:
        return True
    return (
        not math.isfinite(value)
        or (field in POSITIVE and value <= 0)
        or (field == "YMULT" and value == 0)
        or (field in INTEGRAL and not value.is_integer())
    )


BUILDERS = {
    "positional": lambda v: positional(v),
    "per-waveform": lambda v: positional(v, per_waveform=True),
    "named": lambda v: named(v),
    "short": lambda v: named(v, verbose=False),
    "relative": lambda v: named(v, relative=True),
    "named per-waveform": lambda v: named(v, per_waveform=True),
    "short per-waveform": lambda v: named(v, per_waveform=True, verbose=False),
}


@pytest.mark.parametrize("form", BUILDERS)
@FUZZ
@given(data=st.data())
def test_one_field_replaced_in_each_form(form: str, data: st.DataObject) -> None:
    fields = WAVEFORM_FIELDS if "per-waveform" in form else FIELDS
    field = data.draw(st.sampled_from(fields), label="field")
    text = data.draw(field_text, label="text")
    exc = parse_or_reject(BUILDERS[form]({**VALUES, field: text}))
    # text that cannot change how the reply splits into fields (nor, in a reply without
    # headers, make its first field read as "<header> <value>") is blamed on its own field
    plain = text.strip() and not any(c in text for c in ';"') and text == text.strip()
    if form in ("positional", "per-waveform"):
        plain = plain and not any(c.isspace() for c in text)
    if plain and must_reject(field, text):
        assert exc is not None and exc.field == field, f"{field}={text!r} accepted"


# --- the driver: WFMPre:CH<n>? when WFMPre?'s reply cannot be read, against a script ----------
SIGNED = b"\x00\x7f\x80\xff\x19"  # int8: 0, 127, -128, -1, 25
BLOCK = b"#45000" + SIGNED * 1000 + b"\n"


def check_fetched(scope: TektronixTDS, channel: int = 1) -> None:
    wf = scope.fetch()
    assert (wf.channel, len(wf)) == (channel, 5000)
    assert wf.dt_s == pytest.approx(5e-7) and wf.t0_s == pytest.approx(1.2e-9 - 500 * 5e-7)
    np.testing.assert_allclose(wf.volts[:5], [2.0, 7.08, -3.12, 1.96, 3.0])  # (code + 50) · 0.04 V


@pytest.mark.parametrize(
    "full",
    [
        "1;8;BIN;RI;MSB",  # the waveform part missing
        positional(VALUES) + ';"extra"',  # a field too many
        named(without("YMULT")),  # HEADer ON, a field missing
        ":WFMPRE:BYT_NR 1;BIT_NR 8;ENCDG BIN;BN_FMT RI;BYT_OR MSB;garbage",
    ],
)
@pytest.mark.parametrize("per_waveform", [positional(VALUES, per_waveform=True), named(VALUES, per_waveform=True)])
def test_fallback_to_the_per_waveform_form(full: str, per_waveform: str) -> None:
    with expected_protocol(TektronixTDS, [
        ("WFMPre?", full),
        ("WFMPre:CH1?", per_waveform),
        ("CURVe?", BLOCK),
    ]) as scope:
        check_fetched(scope)


def test_fallback_asks_for_the_data_source_channel() -> None:
    with expected_protocol(TektronixTDS, [
        ("WFMPre?", "1;8;BIN;RI;MSB"),
        ("WFMPre:CH3?", named(VALUES, per_waveform=True, channel=3)),
        ("CURVe?", BLOCK),
    ]) as scope:
        scope.channel = 3  # what acquire_channels() does while it transfers CH3
        check_fetched(scope, channel=3)


def test_a_value_refused_is_not_asked_again() -> None:
    """XINCR 0 is the instrument's statement about the waveform: WFMPre:CH1? would repeat it."""
    with expected_protocol(TektronixTDS, [
        ("WFMPre?", named({**VALUES, "XINCR": "0"})),
    ]) as scope, pytest.raises(ScopeDataError) as caught:
        scope.fetch()
    assert (caught.value.command, caught.value.field, caught.value.value) == ("WFMPre?", "XINCR", "0")
    assert "tried" not in str(caught.value)


def test_both_forms_unreadable_says_which_were_tried() -> None:
    with expected_protocol(TektronixTDS, [
        ("WFMPre?", "1;8;BIN;RI;MSB"),
        ("WFMPre:CH1?", positional({**VALUES, "XINCR": "-1"}, per_waveform=True)),  # no CURVe? after it
    ]) as scope, pytest.raises(ScopeDataError) as caught:
        scope.fetch()
    err = caught.value
    assert (err.command, err.field, err.value) == ("WFMPre:CH1?", "XINCR", "-1")
    message = str(err)
    assert message.startswith("FAKE::INSTR: WFMPre:CH1?: XINCR is '-1' — the sample interval must be")
    assert "[tried WFMPre? then WFMPre:CH1?; WFMPre?: reply is '1;8;BIN;RI;MSB' — 15 or 16" in message
    assert "\n" not in message


def test_per_waveform_query_not_answered() -> None:
    with expected_protocol(TektronixTDS, [
        ("WFMPre?", "1;8;BIN;RI;MSB"),
        ("WFMPre:CH1?", TIMEOUT),  # an instrument without the per-waveform query
        ("*ESR?", "32"),
        ("ALLEv?", '113,"Undefined header; Command not found; WFMPre:CH1?"'),
    ]) as scope, pytest.raises(ScopeDataError) as caught:
        scope.fetch()
    err = caught.value
    assert (err.command, err.field, err.value) == ("WFMPre?", "reply", "1;8;BIN;RI;MSB")
    message = str(err)
    assert "15 or 16 ';'-separated fields" in message and "[tried WFMPre? then WFMPre:CH1?;" in message
    assert "'WFMPre:CH1?' timed out" in message and "Undefined header" in message


def test_the_mso_has_no_per_waveform_query() -> None:
    with expected_protocol(TektronixMSO, [
        ("WFMOutpre?", ":WFMOUTPRE:BYT_NR 1;BIT_NR 8;ENCDG BIN"),
    ]) as scope, pytest.raises(ScopeDataError, match=r"WFMOutpre\?: BN_FMT — missing from the reply"):
        scope.fetch()


# --- end to end: the simulated TDS over TCP ------------------------------------------------------
@pytest.fixture(scope="module")
def sim() -> Iterator[SimScopeServer]:
    with sim_scope(pulse_source(), "tektronix_tds") as server:
        yield server


@pytest.fixture
def tds(sim: SimScopeServer) -> Iterator[TektronixTDS]:
    with reset_scope(sim, "tektronix_tds") as scope:
        assert isinstance(scope, TektronixTDS)
        yield scope
        for message in ("WFMPre?", "WFMPre:CH1?"):
            sim.tamper(message, None)
        scope.write("HEADer OFF;:VERBose ON", check=False)  # *RST leaves them: for the next test


ASKED = scope_settings(record_length=1000, time_per_div=50e-6)


def test_sim_header_forms_are_a_tds_s(tds: TektronixTDS) -> None:
    """HEADer ON: the waveform part under its compound header (the manual's WFMPre:CH1? example),
    names long or short as VERBose is ON or OFF; per-field queries likewise."""
    tds.configure(ASKED)
    tds.acquire_single()
    tds.write("HEADer ON")
    full, part = tds.query("WFMPre?"), tds.query("WFMPre:CH1?")
    assert full.startswith(':WFMPRE:BYT_NR 1;BIT_NR 8;ENCDG BIN;BN_FMT RI;BYT_OR MSB;:WFMPRE:CH1:WFID "Ch1, ')
    assert part.startswith(':WFMPRE:CH1:WFID "Ch1, ') and ";NR_PT 1000;PT_FMT Y;XUNIT \"s\";XINCR " in part
    assert full.endswith(f";{part}") and part.endswith(";YZERO 0.0E0")
    assert tds.query("WFMPre:XINcr?") == ":WFMPRE:XINCR 5.0E-7"
    tds.write("VERBose OFF")
    full, part = tds.query("WFMPre?"), tds.query("WFMPre:CH1?")
    assert full.startswith(':WFMP:BYT_N 1;BIT_N 8;ENC BIN;BN_F RI;BYT_O MSB;:WFMP:CH1:WFI "Ch1, ')
    assert part.startswith(':WFMP:CH1:WFI "Ch1, ') and ";NR_P 1000;PT_F Y;XUN \"s\";XIN 5.0E-7;XZE " in part
    assert ";PT_O 100;YUN \"Volts\";YMU 4.0E-2;YOF -5.0E1;YZE 0.0E0" in part
    assert tds.query("WFMPre:CH1:YMUlt?") == ":WFMP:CH1:YMU 4.0E-2"
    tds.write("HEADer OFF;:VERBose ON")
    assert tds.query("WFMPre:CH1?") == tds.query("WFMPre?").split(";", 5)[5]


def test_fallback_over_tcp(tds: TektronixTDS, sim: SimScopeServer) -> None:
    applied = tds.configure(ASKED)
    # the formatting part only, as a firmware that loses the waveform part would send it
    sim.tamper("WFMPre?", lambda reply: ";".join(split_fields(reply.decode())[:5]).encode())
    sim.clear_log()
    wf = tds.acquire_single()
    check_timing(wf, sim.acquisitions[-1], applied)
    assert sim.commands[-3:] == ["WFMPre?", "WFMPre:CH1?", "CURVe?"]


def test_fallback_over_tcp_for_each_channel(tds: TektronixTDS, sim: SimScopeServer) -> None:
    tds.configure(scope_settings(record_length=1000, time_per_div=50e-6, extra_channels=(2,)))
    sim.tamper("WFMPre?", lambda reply: reply + b';"one too many"')
    sim.clear_log()
    waveforms = tds.acquire_channels()
    assert [waveforms[c].channel for c in (1, 2)] == [1, 2] and all(len(w) == 1000 for w in waveforms.values())
    transfers = [c for c in sim.commands if c.startswith(("WFMPre", "CURVe", "DATa:SOUrce"))]
    assert transfers == [
        "DATa:SOUrce CH2;*ESR?", "WFMPre?", "WFMPre:CH2?", "CURVe?",
        "DATa:SOUrce CH1;*ESR?", "WFMPre?", "WFMPre:CH1?", "CURVe?",
    ]  # fmt: skip


def test_both_forms_corrupted_over_tcp_then_recovered(tds: TektronixTDS, sim: SimScopeServer) -> None:
    tds.configure(ASKED)
    sim.tamper("WFMPre?", lambda reply: b"1;8;BIN")
    sim.tamper("WFMPre:CH1?", lambda reply: reply.replace(b";Y;", b";Y;garbage;"))
    with pytest.raises(ScopeDataError) as caught:
        tds.acquire_single()
    message = str(caught.value)
    assert message.startswith(f"{sim.resource}: WFMPre:CH1?: reply is ")
    assert "got 12" in message and "[tried WFMPre? then WFMPre:CH1?; WFMPre?: reply is '1;8;BIN' — " in message
    sim.tamper("WFMPre?", None)
    sim.tamper("WFMPre:CH1?", None)
    assert len(tds.acquire_single()) == 1000  # nothing left unread, nothing answers late


@pytest.mark.parametrize("verbose", ["ON", "OFF"])
def test_a_tds_left_with_headers_on(sim: SimScopeServer, tds: TektronixTDS, verbose: str) -> None:
    """Another program set HEADer ON (and VERBose): a preamble read before configure() parses,
    in both forms; configure() turns headers off and acquisitions go on."""
    tds.configure(ASKED)
    tds.acquire_single()
    genuine = tds._preamble()
    tds.write(f"HEADer ON;:VERBose {verbose}")  # the other program
    with open_scope(sim.resource, dialect="tektronix_tds", timeout_s=2.0) as later:
        assert isinstance(later, TektronixTDS)
        assert later.query("HEADer?").startswith(":HEADER" if verbose == "ON" else ":HEAD")
        assert later._preamble() == genuine
        assert Preamble.parse(later.query("WFMPre:CH1?"), command="WFMPre:CH1?") == genuine[0]
        later.configure(ASKED)
        assert later.query("HEADer?") == "0"
        assert len(later.acquire_single()) == 1000


@pytest.mark.parametrize("verbose", [True, False])
def test_a_firmware_that_keeps_headers_on_its_preamble(
    sim: SimScopeServer, tds: TektronixTDS, monkeypatch: pytest.MonkeyPatch, verbose: bool
) -> None:
    """A TDS whose preamble carries headers whatever HEADer says: acquisitions still work."""
    model = sim.model
    genuine = model._preamble

    def with_headers(n: int | None, field_name: str | None) -> str:
        kept = model.header, model.verbose
        model.header, model.verbose = True, verbose
        try:
            return genuine(n, field_name)
        finally:
            model.header, model.verbose = kept

    monkeypatch.setattr(model, "_preamble", with_headers)
    applied = tds.configure(ASKED)
    wf = tds.acquire_single()
    check_timing(wf, sim.acquisitions[-1], applied)
    assert tds.query("HEADer?") == "0" and tds.query("WFMPre?").startswith(":WFMPRE:" if verbose else ":WFMP:")


# --- open_session: terminations for every kind of resource -----------------------------------
class StandInResource:
    """What open_session touches of a PyVISA resource: the terminations as PyVISA keeps them
    (setting a read termination turns VISA's termination character on) and VISA attributes."""

    def __init__(self, name: str, refuse: bool = False) -> None:
        self.name = name
        self.refuse = refuse
        self._read_termination: str | None = None
        self.write_termination = "\r\n"  # PyVISA's default
        self.attributes: dict[Any, Any] = {constants.ResourceAttribute.termchar_enabled: constants.VI_FALSE}

    @property
    def read_termination(self) -> str | None:
        return self._read_termination

    @read_termination.setter
    def read_termination(self, value: str | None) -> None:
        self.set_visa_attribute(constants.ResourceAttribute.termchar, ord((value or "\n")[-1]))
        self.set_visa_attribute(constants.ResourceAttribute.termchar_enabled, bool(value))
        self._read_termination = value

    def set_visa_attribute(self, attribute: Any, value: Any) -> None:
        if self.refuse:
            raise RuntimeError(f"UnknownAttribute: {attribute}")  # as pyvisa-py's Prologix sessions do
        self.attributes[attribute] = value


class StandInManager:
    opened: list[StandInResource] = []
    refuse = False

    def __init__(self, visa_library: str = "@py") -> None:
        self.visa_library = visa_library

    def open_resource(self, name: str, **kwargs: Any) -> StandInResource:
        res = StandInResource(name, refuse=self.refuse)
        StandInManager.opened.append(res)
        return res


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> type[StandInManager]:
    monkeypatch.setattr(instruments.scpi.pyvisa, "ResourceManager", StandInManager)
    monkeypatch.setattr(StandInManager, "opened", [])
    monkeypatch.setattr(StandInManager, "refuse", False)
    return StandInManager


END = "END"  # replies end with END (EOI): the termination character is off
LF = "LF"  # the LF ends a reply: the termination character stays on


@pytest.mark.parametrize(
    ("resource", "ends"),
    [
        ("TCPIP::192.168.1.20::4000::SOCKET", LF),  # raw socket (MSO, Keysight 5025)
        ("TCPIP0::192.168.1.20::inst0::INSTR", END),  # VXI-11
        ("TCPIP::192.168.1.20::INSTR", END),  # VXI-11, device name inst0 implied
        ("TCPIP::gateway::gpib0,1::INSTR", END),  # VXI-11 to GPIB gateway (E5810)
        ("TCPIP::192.168.1.20::hislip0::INSTR", END),  # HiSLIP
        ("GPIB0::1::INSTR", END),  # the TDS 460A
        ("GPIB::5::0::INSTR", END),  # with a secondary address
        ("USB0::0x0699::0x0522::C012345::INSTR", END),  # USBTMC
        ("VICP::192.168.1.20::INSTR", END),
        ("ASRL/dev/ttyUSB0::INSTR", LF),  # serial: no END
    ],
)
def test_every_message_based_resource_gets_lf_terminations(
    manager: type[StandInManager], resource: str, ends: str
) -> None:
    session = open_session(resource, timeout_s=1.0)
    res = manager.opened[-1]
    assert session._res is res and res.name == resource
    assert (res.read_termination, res.write_termination) == ("\n", "\n")
    assert res.attributes[constants.ResourceAttribute.termchar] == ord("\n")
    assert res.attributes[constants.ResourceAttribute.termchar_enabled] == (ends == LF)


@pytest.mark.parametrize(
    "resource",
    ["GPIB0::INTFC", "VXI0::1::INSTR", "VXI0::1::MEMACC", "USB0::0x1234::0x5678::SN::RAW", "NOT-A-RESOURCE"],
)
def test_other_resources_are_left_as_pyvisa_opens_them(manager: type[StandInManager], resource: str) -> None:
    open_session(resource, timeout_s=1.0)
    res = manager.opened[-1]
    assert (res.read_termination, res.write_termination) == (None, "\r\n")
    assert res.attributes == {constants.ResourceAttribute.termchar_enabled: constants.VI_FALSE}


def test_a_backend_refusing_the_attributes_still_opens(manager: type[StandInManager]) -> None:
    manager.refuse = True  # pyvisa-py's Prologix GPIB sessions know no termination character
    session = open_session("GPIB0::1::INSTR", timeout_s=1.0)
    assert session._res.write_termination == "\n" and session._res.read_termination is None


# --- a real PyVISA GPIB resource over an emulated GPIB session -----------------------------------
class EmulatedGpibSession(pyvisa_py_sessions.Session):
    """A GPIB board with an IEEE 488.2 instrument behind it, in memory.

    A read returns up to `count` bytes and stops after the termination character when it is
    enabled (the board's EOS) or after the message's last byte, sent with EOI (END). A command
    written while a reply is unread discards it and logs Query INTERRUPTED (*ESR? bit 4),
    as an IEEE 488.2 instrument does. CURVe? answers a 500-point block full of 0x0A bytes.
    """

    session_type = (constants.InterfaceType.gpib, "INSTR")
    data = bytes([0x0A, 0x0A, 0x41, 0x0A, 0x00] * 100)
    reads: list[int] = []  # bytes returned by each read, per session

    def after_parsing(self) -> None:
        self.attrs[constants.ResourceAttribute.termchar] = ord("\n")
        self.attrs[constants.ResourceAttribute.termchar_enabled] = constants.VI_FALSE
        self.output = b""
        self.esr = 0
        self.reads = []

    def _get_attribute(self, attribute: constants.ResourceAttribute) -> tuple[Any, constants.StatusCode]:
        raise pyvisa_py_sessions.UnknownAttribute(attribute)

    def _set_attribute(self, attribute: constants.ResourceAttribute, state: Any) -> constants.StatusCode:
        raise pyvisa_py_sessions.UnknownAttribute(attribute)

    def close(self) -> constants.StatusCode:
        return constants.StatusCode.success

    def clear(self) -> constants.StatusCode:
        self.output = b""
        return constants.StatusCode.success

    def write(self, data: bytes) -> tuple[int, constants.StatusCode]:
        if self.output:
            self.output = b""
            self.esr |= 4  # 410, "Query INTERRUPTED"
        message = data.decode("latin-1").strip()
        if message == "*ESR?":
            self.output, self.esr = f"{self.esr}\n".encode(), 0
        elif message == "*IDN?":
            self.output = b"TEKTRONIX,TDS 460A,0,CF:91.1CT FV:v1.0.2e\n"
        elif message == "CURVe?":
            self.output = b"#3500" + self.data + b"\n"
        return len(data), constants.StatusCode.success

    def read(self, count: int) -> tuple[bytes, constants.StatusCode]:
        if not self.output:
            return b"", constants.StatusCode.error_timeout
        chunk = self.output[:count]
        eos = self.attrs[constants.ResourceAttribute.termchar_enabled]
        if eos and b"\n" in chunk:
            chunk = chunk[: chunk.index(b"\n") + 1]
        self.output = self.output[len(chunk) :]
        self.reads.append(len(chunk))
        if not self.output:
            return chunk, constants.StatusCode.success  # END with the last byte
        if eos and chunk.endswith(b"\n"):
            return chunk, constants.StatusCode.success_termination_character_read
        return chunk, constants.StatusCode.success_max_count_read


@pytest.fixture
def gpib(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[instruments.scpi.ScpiSession, EmulatedGpibSession]]:
    key = (constants.InterfaceType.gpib, "INSTR")
    monkeypatch.setitem(pyvisa_py_sessions.Session._session_classes, key, EmulatedGpibSession)
    session = open_session("GPIB0::1::INSTR", timeout_s=1.0)
    res = session._res
    assert isinstance(res, pyvisa.resources.GPIBInstrument)  # PyVISA's own resource class
    yield session, res.visalib.sessions[res.session]
    session.close()


def test_gpib_block_then_query(gpib: tuple[instruments.scpi.ScpiSession, EmulatedGpibSession]) -> None:
    session, board = gpib
    res = session._res
    assert (res.read_termination, res.write_termination) == ("\n", "\n")
    assert res.get_visa_attribute(constants.ResourceAttribute.termchar_enabled) == constants.VI_FALSE
    assert session.query("*IDN?").startswith("TEKTRONIX,TDS 460A")
    for _ in range(2):
        board.reads.clear()
        codes = session.query_block("CURVe?", "b", 500)
        assert codes.tobytes() == EmulatedGpibSession.data  # 300 LF data bytes, none ended the block
        assert board.reads == [1, 1, 3, 500, 1]  # '#', '3', '500', the data at once, the LF
        assert session.query("*ESR?") == "0"  # the LF was read: no Query INTERRUPTED


def test_gpib_block_with_the_termination_character_on(
    gpib: tuple[instruments.scpi.ScpiSession, EmulatedGpibSession],
) -> None:
    """Should the termination character stay on (a backend that cannot turn it off), a read
    stops at each 0x0A data byte, and read_bytes goes on until the block is whole."""
    session, board = gpib
    session._res.set_visa_attribute(constants.ResourceAttribute.termchar_enabled, constants.VI_TRUE)
    codes = session.query_block("CURVe?", "b", 500)
    assert codes.tobytes() == EmulatedGpibSession.data
    assert len(board.reads) > 300  # one read per LF in the data
    assert session.query("*ESR?") == "0"


def test_gpib_without_the_read_termination_pyvisa_leaves(
    gpib: tuple[instruments.scpi.ScpiSession, EmulatedGpibSession],
) -> None:
    """What open_session used to leave on INSTR resources: the block's LF stays unread, the
    next command interrupts that reply and the instrument logs Query INTERRUPTED."""
    session, _ = gpib
    session._res.read_termination = None
    assert session.query_block("CURVe?", "b", 500).tobytes() == EmulatedGpibSession.data
    assert session.query("*ESR?") == "4"  # the query error bit
