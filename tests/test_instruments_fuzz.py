"""Whatever an instrument sends as a data block or a waveform preamble, the drivers either
get something usable out of it (the points announced, finite scales, a positive sample
interval) or raise ScopeDataError naming the command and the field at fault: never a bare
ValueError/IndexError/OverflowError/MemoryError, never a wait or an allocation decided by a
header number.

Property-based tests (hypothesis) feed the block reader and each dialect's preamble parser
arbitrary text and bytes, and replies captured from the simulated instruments with one
field or byte replaced. Example-based tests pin down the rejections themselves, in memory
and end to end: the driver over PyVISA and TCP against a simulated scope whose reply has
been tampered with (`SimScopeServer.tamper`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from instruments import keysight_infiniivision, tektronix_mso, tektronix_tds
from instruments.scope import Scope, ScopeDataError, ScopeError, ScopeTimeout, open_scope
from instruments.scpi import flag, nr1, read_block, real, split_fields
from instruments.sim import SimScopeServer
from tests.scope_helpers import pulse_source, reset_scope, sim_scope
from tests.scope_helpers import settings as scope_settings

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- each dialect's preamble: its parser, its fields, and what they must hold ---------------------
@dataclass(frozen=True)
class Dialect:
    name: str
    parse: Callable[[str], object]
    query: str  # the preamble query
    data_query: str
    fields: tuple[str, ...]  # in the documented order
    separator: str
    datatype: str  # of the data block as the driver asks for it
    big_endian: bool
    numeric: frozenset[str]  # fields the driver uses as numbers: nan/inf/garbage is refused
    positive: frozenset[str]  # ... that must be > 0
    nonzero: frozenset[str]  # ... that must not be 0
    integral: frozenset[str]  # ... that must be whole numbers

    def split(self, reply: str) -> list[str]:
        return split_fields(reply) if self.separator == ";" else reply.split(",")


TDS = Dialect(
    "tektronix_tds",
    tektronix_tds.Preamble.parse,
    tektronix_tds.Preamble.query,
    "CURVe?",
    tektronix_tds.FIELDS,
    ";",
    "b",
    True,
    numeric=frozenset({"BYT_NR", "NR_PT", "XINCR", "XZERO", "PT_OFF", "YMULT", "YOFF", "YZERO"}),
    positive=frozenset({"BYT_NR", "NR_PT", "XINCR"}),
    nonzero=frozenset({"YMULT"}),
    integral=frozenset({"BYT_NR", "NR_PT", "PT_OFF"}),
)
MSO = Dialect(
    "tektronix_mso",
    tektronix_mso.OutputPreamble.parse,
    tektronix_mso.OutputPreamble.query,
    "CURVe?",
    tektronix_mso.FIELDS,
    ";",
    "b",
    False,
    numeric=TDS.numeric,
    positive=TDS.positive,
    nonzero=TDS.nonzero,
    integral=TDS.integral,
)
KEYSIGHT = Dialect(
    "keysight_infiniivision",
    keysight_infiniivision.Preamble.parse,
    keysight_infiniivision.Preamble.query,
    ":WAVeform:DATA?",
    keysight_infiniivision.FIELDS,
    ",",
    "B",
    True,
    numeric=frozenset(keysight_infiniivision.FIELDS),
    positive=frozenset({"points", "xincrement"}),
    nonzero=frozenset({"yincrement"}),
    integral=frozenset({"format", "type", "points", "count"}),
)
DIALECTS = {d.name: d for d in (TDS, MSO, KEYSIGHT)}


@dataclass(frozen=True)
class Genuine:
    """Replies captured from a simulated instrument after one acquisition."""

    preamble: str  # HEADer OFF: values in the documented order
    named: str  # HEADer ON where the instrument names its fields (MSO), else the same
    block: bytes = field(repr=False)  # the data reply as sent, without its terminator
    points: int = 0


def _capture(into: dict[str, bytes], key: str) -> Callable[[bytes], bytes]:
    def keep(reply: bytes) -> bytes:
        into[key] = reply
        return reply

    return keep


@pytest.fixture(scope="module")
def genuine() -> dict[str, Genuine]:
    """One acquisition per simulated dialect, its preamble and data block as they travelled."""
    out = {}
    for d in DIALECTS.values():
        with sim_scope(pulse_source(), d.name) as sim, reset_scope(sim, d.name) as scope:
            seen: dict[str, bytes] = {}
            sim.tamper(d.query, _capture(seen, "preamble"))
            sim.tamper(d.data_query, _capture(seen, "block"))
            applied = scope.configure(scope_settings(record_length=1000, time_per_div=50e-6))
            scope.acquire_single()
            named = seen["preamble"].decode("latin-1")
            if d is MSO:
                scope.write("HEADer ON")
                named = scope.query(d.query)
                scope.write("HEADer OFF")
        out[d.name] = Genuine(seen["preamble"].decode("latin-1"), named, seen["block"], applied.record_length)
    return out


# --- what "usable" and "rejected properly" mean ----------------------------------------------------
def check_usable(pre: object) -> None:
    """Finite scales, a positive sample interval, a point count within the parser's bound,
    finite times for the whole record and finite volts for every code."""
    if isinstance(pre, keysight_infiniivision.Preamble):
        dt, n, y_step = pre.x_increment, pre.points, pre.y_increment
        t0 = pre.times_origin()
        volts = [(code - pre.y_reference) * pre.y_increment + pre.y_origin for code in (0, 255, 65535)]
        numbers = [pre.x_origin, pre.x_reference, pre.y_origin, pre.y_reference]
    else:
        assert isinstance(pre, tektronix_tds.Preamble)
        dt, n, y_step = pre.x_incr, pre.points, pre.y_mult
        t0 = pre.x_zero - pre.x_incr * pre.pt_off
        volts = [pre.y_zero + pre.y_mult * (code - pre.y_off) for code in (-32768, 0, 65535)]
        numbers = [pre.x_zero, pre.y_off, pre.y_zero]
        assert 1 <= pre.byte_nr <= 8
    assert math.isfinite(dt) and dt > 0
    assert math.isfinite(y_step) and y_step != 0
    assert isinstance(n, int) and 1 <= n <= type(pre).max_points
    assert all(math.isfinite(x) for x in [t0, t0 + (n - 1) * dt, *volts, *numbers])


def check_rejection(exc: ScopeDataError, command: str, fields: tuple[str, ...] = ()) -> None:
    """The error names the command and the part of the reply at fault, on one short line."""
    message = str(exc)
    assert isinstance(exc, ScopeError)
    assert exc.command == command and command in message
    assert exc.field and exc.field in message
    if fields:
        assert exc.field in (*fields, "reply")
    assert "\n" not in message and len(message) < 500  # garbage is quoted, escaped and shortened


def parse_or_reject(d: Dialect, reply: str) -> ScopeDataError | None:
    """Parse `reply`: None if usable, the error if rejected properly; anything else fails the test."""
    try:
        pre = d.parse(reply)
    except ScopeDataError as exc:
        check_rejection(exc, d.query, d.fields)
        return exc
    check_usable(pre)
    return None


def must_reject(d: Dialect, field: str, text: str) -> bool:
    """Whether a field holding `text` makes a preamble unusable whatever the other fields hold."""
    if field not in d.numeric:
        return False
    try:
        value = float(text)
    except ValueError:
        return True
    return (
        not math.isfinite(value)
        or (field in d.positive and value <= 0)
        or (field in d.nonzero and value == 0)
        or (field in d.integral and not value.is_integer())
    )


def replace_field(d: Dialect, reply: str, field: str, text: str) -> str:
    """`reply` with `field` holding `text`: by position, or by name in a reply that names its fields."""
    parts = d.split(reply)
    if parts and parts[0].startswith(":"):  # ":WFMOUTPRE:BYT_NR 1;BIT_NR 8;..."
        prefix, _, first = parts[0].rpartition(":")
        parts[0] = first
        named = [p.partition(" ") for p in parts]
        parts = [f"{k} {text}" if k.upper() == field else f"{k} {v}" for k, _, v in named]
        return f"{prefix}:" + d.separator.join(parts)
    parts[d.fields.index(field)] = text
    return d.separator.join(parts)


# --- strategies ------------------------------------------------------------------------------------
SPECIAL = [
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "0", "-0", "0.0", "+0", "0E0", "-1", "-1.0E-9", "-4",
    "1e-400", "1e308", "-1e308", "1e400", "9" * 400, "1" * 5000, "12.5", "1e12", "99999999999999999999",
    "", " ", "abc", "0x10", "1_0", "+", "-", ".", "e5", "1e", "\x00", "#", "１２", "٣",
]  # fmt: skip
field_text = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats().map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.9E}"),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(max_size=12),
)
joined_fields = st.one_of(
    st.lists(field_text, max_size=25).map(";".join),
    st.lists(field_text, max_size=14).map(",".join),
)


# --- properties: preambles -------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(reply=st.one_of(st.text(max_size=400), joined_fields))
def test_preamble_parser_on_arbitrary_text(dialect: str, reply: str) -> None:
    parse_or_reject(DIALECTS[dialect], reply)


@pytest.mark.parametrize(("dialect", "form"), [*((name, "preamble") for name in DIALECTS), ("tektronix_mso", "named")])
@FUZZ
@given(data=st.data())
def test_genuine_preamble_with_one_field_replaced(
    genuine: dict[str, Genuine], dialect: str, form: str, data: st.DataObject
) -> None:
    d = DIALECTS[dialect]
    field = data.draw(st.sampled_from(d.fields), label="field")
    text = data.draw(field_text, label="text")
    exc = parse_or_reject(d, replace_field(d, getattr(genuine[dialect], form), field, text))
    # text that cannot change how the reply splits into fields is blamed on its own field
    plain = text.strip() and not any(c in text for c in ';,"') and text == text.strip()
    if plain and must_reject(d, field, text):
        assert exc is not None and exc.field == field, f"{field}={text!r} accepted"


# --- properties: data blocks -----------------------------------------------------------------------
class Reply:
    """A reply as VISA's read_bytes gives it: up to `count` bytes a call, b"" once it ended.
    `asked` is the furthest byte of the reply requested: what a header could make the reader
    wait for or hold."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)
        self.asked = 0

    def read(self, count: int) -> bytes:
        self.asked = max(self.asked, self.stream.tell() + count)
        return self.stream.read(count)


def read_or_reject(data: bytes, datatype: str, points: int, big_endian: bool = True) -> np.ndarray | None:
    reply = Reply(data)
    try:
        codes = read_block(reply.read, "CURVe?", datatype, points, big_endian=big_endian)
    except ScopeDataError as exc:
        check_rejection(exc, "CURVe?", ("block header", "block length", "block data", "block end"))
        codes = None
    else:
        assert len(codes) == points and codes.dtype == np.dtype(datatype).newbyteorder("=")
    width = np.dtype(datatype).itemsize
    # '#', the digit count, at most 9 length digits, the points announced, the terminator
    assert reply.asked <= 2 + 9 + points * width + 1
    return codes


def ieee_block(payload: bytes) -> bytes:
    length = str(len(payload)).encode()
    return b"#" + str(len(length)).encode() + length + payload


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=700),
        st.builds(lambda p, tail: ieee_block(p) + tail, st.binary(max_size=600), st.sampled_from([b"\n", b"", b"x"])),
        st.builds(lambda head, p: b"#" + head + p + b"\n", st.binary(max_size=12), st.binary(max_size=600)),
    ),
    datatype=st.sampled_from(["b", "B", "h", "H"]),
    points=st.integers(min_value=1, max_value=300),
    big_endian=st.booleans(),
)
def test_block_reader_on_arbitrary_bytes(data: bytes, datatype: str, points: int, big_endian: bool) -> None:
    read_or_reject(data, datatype, points, big_endian)


def mutations(block: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    n = len(block)
    index = st.integers(min_value=0, max_value=n - 1)
    return st.one_of(
        st.tuples(index, st.integers(0, 255)).map(
            lambda a: ("replace", block[: a[0]] + bytes([a[1]]) + block[a[0] + 1 :])
        ),
        index.map(lambda i: ("truncate", block[:i])),
        st.tuples(index, st.binary(min_size=1, max_size=8)).map(
            lambda a: ("insert", block[: a[0]] + a[1] + block[a[0] :])
        ),
        st.tuples(st.integers(0, 9), st.text("0123456789-+. ex", max_size=10)).map(
            lambda a: ("header", b"#" + str(a[0]).encode() + a[1].encode() + block[2 + int(block[1:2]) :])
        ),
    )


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(data=st.data())
def test_genuine_block_mutated(genuine: dict[str, Genuine], dialect: str, data: st.DataObject) -> None:
    d, g = DIALECTS[dialect], genuine[dialect]
    assert read_or_reject(g.block + b"\n", d.datatype, g.points, d.big_endian) is not None
    kind, reply = data.draw(mutations(g.block), label="mutation")
    codes = read_or_reject(reply + b"\n", d.datatype, g.points, d.big_endian)
    if kind == "truncate":
        assert codes is None  # a reply that stops short is never taken for a record


@FUZZ
@given(reply=st.text(max_size=60) | st.sampled_from(SPECIAL))
def test_reply_parsers_raise_only_value_error(reply: str) -> None:
    """What `query_value` turns into "unexpected reply": ValueError, never Overflow/Index errors."""
    for parse in (real, nr1, flag):
        try:
            value = parse(reply)
        except ValueError:
            continue
        assert isinstance(value, bool) or math.isfinite(value)


# --- the listed rejections, in memory --------------------------------------------------------------
def test_genuine_replies_are_accepted(genuine: dict[str, Genuine]) -> None:
    for name, g in genuine.items():
        d = DIALECTS[name]
        check_usable(d.parse(g.preamble))
        check_usable(d.parse(g.named))
        assert len(read_or_reject(g.block + b"\n", d.datatype, g.points, d.big_endian)) == g.points


@pytest.mark.parametrize(
    ("dialect", "field", "text", "reason"),
    [
        ("tektronix_tds", "XINCR", "0", "sample interval must be a positive finite number"),
        ("tektronix_tds", "XINCR", "-4.0E-9", "sample interval must be a positive finite number"),
        ("tektronix_tds", "XINCR", "inf", "sample interval must be a positive finite number"),
        ("tektronix_tds", "YMULT", "nan", "volts per digitizer code must be a finite number other than 0"),
        ("tektronix_tds", "YMULT", "0", "other than 0"),
        ("tektronix_tds", "XZERO", "-inf", "must be a finite number"),
        ("tektronix_tds", "NR_PT", "0", "whole number from 1 to"),
        ("tektronix_tds", "NR_PT", "1e12", "whole number from 1 to"),
        ("tektronix_tds", "NR_PT", "12.5", "whole number"),
        ("tektronix_mso", "YMULT", "NaN", "finite number other than 0"),
        ("tektronix_mso", "XINCR", "-2.0E-9", "positive finite number"),
        ("keysight_infiniivision", "xincrement", "+0.000000000E+00", "positive finite number"),
        ("keysight_infiniivision", "yincrement", "nan", "finite number other than 0"),
        ("keysight_infiniivision", "points", "-1000", "whole number from 1 to"),
        ("keysight_infiniivision", "yorigin", "9e999", "finite number"),
    ],
)
def test_preamble_field_rejected(genuine: dict[str, Genuine], dialect: str, field: str, text: str, reason: str) -> None:
    d = DIALECTS[dialect]
    with pytest.raises(ScopeDataError) as caught:
        d.parse(replace_field(d, genuine[dialect].preamble, field, text))
    err = caught.value
    assert (err.command, err.field, err.value) == (d.query, field, text)
    assert str(err).startswith(f"{d.query}: {field} is {text!r} — ") and reason in str(err)


def test_preamble_values_that_only_overflow_together() -> None:
    # every field finite on its own, but the record's last sample time is not
    reply = '1;8;BIN;RI;MSB;"Ch1";500;Y;"s";1.0E306;1.0E308;0;"V";4.0E-2;0;0'
    with pytest.raises(ScopeDataError, match=r"^WFMPre\?: XINCR is '1.0E306' — with XZERO .* must be finite"):
        tektronix_tds.Preamble.parse(reply)


def test_preamble_with_a_field_missing_or_too_many() -> None:
    with pytest.raises(ScopeDataError, match=r"^WFMPre\?: reply is '1;8;BIN' — 15 or 16 ';'-separated fields"):
        tektronix_tds.Preamble.parse("1;8;BIN")
    named = ":WFMOUTPRE:BYT_NR 1;BIT_NR 8;ENCDG BIN"
    with pytest.raises(ScopeDataError, match=r"^WFMOutpre\?: BN_FMT — missing from the reply"):
        tektronix_mso.OutputPreamble.parse(named)
    with pytest.raises(ScopeDataError, match="10 comma-separated fields expected, got 11"):
        keysight_infiniivision.Preamble.parse("+0,+0,+1000,+1,+1.0E-09,-5.0E-07,+0,+4.0E-02,+1.0E+00,+128,+1")


def test_an_empty_field_is_not_dropped() -> None:
    # "a;;b" is three fields: were the empty one dropped, 15 fields would pass for old firmware
    reply = '1;8;BIN;RI;MSB;;500;Y;"s";1.0E-5;0;249;"Volts";4.0E-2;0.0E0;0.0E0'
    assert len(split_fields(reply)) == 16
    assert tektronix_tds.Preamble.parse(reply).wfid == ""


@pytest.mark.parametrize(
    ("reply", "datatype", "field", "fragment"),
    [
        (b"#x500" + bytes(500) + b"\n", "b", "block header", "is '#x' — '#' must be followed by the number of length"),
        (b"#2-4" + bytes(500) + b"\n", "b", "block length", "is '-4' — '#2' must be followed by 2 decimal digits"),
        (b"#3+50" + bytes(500) + b"\n", "b", "block length", "is '+50'"),
        (b"#3 50" + bytes(500) + b"\n", "b", "block length", "is ' 50'"),
        (
            b"#9999999999" + bytes(500) + b"\n",
            "b",
            "block length",
            "holds 999999999 samples, the preamble announced 500",
        ),
        (b"#3499" + bytes(499) + b"\n", "b", "block length", "holds 499 samples, the preamble announced 500"),
        (b"#3999" + bytes(999) + b"\n", "h", "block length", "999 bytes are not a whole number of 2-byte samples"),
        (b"#3500" + bytes(200), "b", "block data", "the reply ended after 200 of 500 bytes"),
        (b"#3500" + bytes(501) + b"\n", "b", "block end", "the block is longer than its header says"),
        (b"#3500" + bytes(500), "b", "block end", "ended after 0 of 1 bytes"),
        (b":CURVE #3500" + bytes(500) + b"\n", "b", "block header", "is ':' — an IEEE 488.2 block starts with '#'"),
        (b"", "b", "block header", "the reply ended after 0 of 1 bytes"),
        (b"#", "b", "block header", "the reply ended"),
    ],
)
def test_block_rejected(reply: bytes, datatype: str, field: str, fragment: str) -> None:
    with pytest.raises(ScopeDataError) as caught:
        read_block(Reply(reply).read, "CURVe?", datatype, 500)
    assert caught.value.field == field and fragment in str(caught.value)
    assert str(caught.value).startswith(f"CURVe?: {field}")


def test_blocks_that_are_fine() -> None:
    codes = np.arange(-250, 250, dtype=">i2")
    got = read_block(Reply(ieee_block(codes.tobytes()) + b"\n").read, "CURVe?", "h", 500)
    np.testing.assert_array_equal(got, codes)
    assert got.dtype == np.dtype("int16") and got.flags.writeable
    little = read_block(
        Reply(ieee_block(codes.astype("<i2").tobytes()) + b"\n").read, "CURVe?", "h", 500, big_endian=False
    )
    np.testing.assert_array_equal(little, codes)
    # #0: an indefinite block holds the points the preamble announced
    assert len(read_block(Reply(b"#0" + bytes(500) + b"\n").read, "CURVe?", "B", 500)) == 500
    # no terminator expected (a session without read termination)
    assert len(read_block(Reply(ieee_block(bytes(8))).read, "CURVe?", "B", 8, termination=b"")) == 8


def test_a_header_number_never_decides_what_is_read() -> None:
    """`#9999999999…` from an instrument that then streams forever: rejected after 11 bytes."""

    class Endless:
        asked = 0

        def read(self, count: int) -> bytes:
            sent, self.asked = self.asked, self.asked + count
            return (b"#" + b"9" * count)[:count] if sent == 0 else b"9" * count

    for points in (1, 500, 8_000_000):
        stream = Endless()
        with pytest.raises(ScopeDataError, match="block length is '999999999'"):
            read_block(stream.read, "CURVe?", "b", points)
        assert stream.asked == 11


# --- the listed rejections, end to end: PyVISA over TCP to a tampered simulated scope ---------------
@pytest.fixture
def tampered(request: pytest.FixtureRequest) -> Iterator[tuple[SimScopeServer, Scope]]:
    dialect = request.param
    with sim_scope(pulse_source(), dialect) as sim, reset_scope(sim, dialect) as scope:
        scope.configure(scope_settings(record_length=1000, time_per_div=50e-6))
        yield sim, scope


def field_set(d: Dialect, field: str, text: str) -> Callable[[bytes], bytes]:
    def edit(reply: bytes) -> bytes:
        return replace_field(d, reply.decode("latin-1"), field, text).encode("latin-1")

    return edit


def header_set(header: bytes) -> Callable[[bytes], bytes]:
    """The block with its header (#<n><digits>) replaced by `header`, its data kept."""

    def edit(reply: bytes) -> bytes:
        return header + reply[2 + int(reply[1:2]) :]

    return edit


def rejected_then_recovered(sim: SimScopeServer, scope: Scope, message: str) -> ScopeError:
    """acquire_single fails on the tampered reply; once the instrument behaves, the same
    session acquires again (the rejected reply was flushed, nothing answers late)."""
    with pytest.raises(ScopeError) as caught:
        scope.acquire_single()
    sim.tamper(message, None)
    wf = scope.acquire_single()
    assert len(wf) == 1000 and wf.dt_s > 0
    return caught.value


@pytest.mark.parametrize("tampered", ["tektronix_tds"], indirect=True)
def test_tds_preamble_with_xincr_0_over_tcp(tampered: tuple[SimScopeServer, Scope]) -> None:
    sim, scope = tampered
    sim.tamper("WFMPre?", field_set(TDS, "XINCR", "0"))
    err = rejected_then_recovered(sim, scope, "WFMPre?")
    assert isinstance(err, ScopeDataError) and (err.command, err.field, err.value) == ("WFMPre?", "XINCR", "0")
    assert str(err) == (f"{sim.resource}: WFMPre?: XINCR is '0' — the sample interval must be a positive finite number")


@pytest.mark.parametrize("tampered", ["tektronix_mso"], indirect=True)
def test_mso_preamble_with_ymult_nan_over_tcp(tampered: tuple[SimScopeServer, Scope]) -> None:
    sim, scope = tampered
    sim.tamper("WFMOutpre?", field_set(MSO, "YMULT", "nan"))
    err = rejected_then_recovered(sim, scope, "WFMOutpre?")
    assert isinstance(err, ScopeDataError) and (err.field, err.value) == ("YMULT", "nan")
    assert sim.resource in str(err) and "WFMOutpre?: YMULT is 'nan'" in str(err)


@pytest.mark.parametrize("tampered", ["keysight_infiniivision"], indirect=True)
def test_keysight_preamble_with_negative_xincrement_over_tcp(tampered: tuple[SimScopeServer, Scope]) -> None:
    sim, scope = tampered
    sim.tamper(":WAVeform:PREamble?", field_set(KEYSIGHT, "xincrement", "-5.0E-07"))
    err = rejected_then_recovered(sim, scope, ":WAVeform:PREamble?")
    assert isinstance(err, ScopeDataError) and err.field == "xincrement"
    assert ":WAVeform:PREamble?: xincrement is '-5.0E-07' — the sample interval" in str(err)


@pytest.mark.parametrize(
    ("tampered", "edit", "field", "fragment"),
    [
        ("keysight_infiniivision", header_set(b"#x"), "block header", "block header is '#x'"),
        (
            "keysight_infiniivision",
            header_set(b"#800000999"),
            "block length",
            "holds 999 samples, the preamble announced 1000",
        ),
        ("tektronix_tds", header_set(b"#2-4"), "block length", "block length is '-4'"),
        ("tektronix_tds", header_set(b"#9999999999"), "block length", "block length is '999999999'"),
        ("tektronix_mso", lambda reply: reply + b"\x01\x02", "block end", "longer than its header says"),
    ],
    indirect=["tampered"],
)
def test_block_rejected_over_tcp(
    tampered: tuple[SimScopeServer, Scope], edit: Callable[[bytes], bytes], field: str, fragment: str
) -> None:
    sim, scope = tampered
    message = ":WAVeform:DATA?" if sim.dialect == "keysight_infiniivision" else "CURVe?"
    sim.tamper(message, edit)
    err = rejected_then_recovered(sim, scope, message)
    # refused on reading the header: the block's own field named, not the timeout error a wait for the
    # announced bytes would end in (a type, not a time: a loaded machine cannot make this pass or fail)
    assert isinstance(err, ScopeDataError) and err.field == field and fragment in str(err)
    assert str(err).startswith(f"{sim.resource}: {message}: {field}")


@pytest.mark.parametrize("tampered", ["tektronix_tds"], indirect=True)
def test_truncated_block_over_tcp_is_a_timeout_saying_how_far_it_got(tampered: tuple[SimScopeServer, Scope]) -> None:
    sim, first = tampered
    first.acquire_single()  # a record to transfer
    sim.tamper("CURVe?", lambda reply: reply[:600])  # "#41000" and 594 of the 1000 bytes, then "\n"
    with open_scope(sim.resource, dialect="tektronix_tds", timeout_s=0.5) as scope:
        with pytest.raises(ScopeTimeout) as caught:
            scope.query_block("CURVe?", "b", 1000)
        message = str(caught.value)
        assert "'CURVe?' timed out" in message and "6 bytes into the reply, while 1000 more were due" in message
        sim.tamper("CURVe?", None)
        assert len(scope.query_block("CURVe?", "b", 1000)) == 1000


@pytest.mark.parametrize("tampered", ["tektronix_tds"], indirect=True)
def test_busy_reply_inf_is_an_unexpected_reply_not_an_overflow(tampered: tuple[SimScopeServer, Scope]) -> None:
    sim, scope = tampered
    sim.tamper("BUSY?", lambda reply: b"inf")
    with pytest.raises(ScopeError, match=r"'BUSY\?' failed \(unexpected reply 'inf'\)"):
        scope.acquire_single()


@pytest.mark.parametrize(
    ("tampered", "query", "reply", "fragment"),
    [
        ("tektronix_tds", "CH1:SCAle?", b"0", "'CH1:SCAle?' failed (unexpected reply '0')"),
        ("tektronix_tds", "HORizontal:RECOrdlength?", b"nan", "unexpected reply 'nan'"),
        ("tektronix_mso", "HORizontal:SCAle?", b"-2.5E-4", "unexpected reply '-2.5E-4'"),
        ("keysight_infiniivision", ":TIMebase:SCALe?", b"+0.0E+00", "unexpected reply '+0.0E+00'"),
        ("tektronix_tds", "HORizontal:TRIGger:POSition?", b"150", "trigger_position_pct must be 0..100, got 150"),
    ],
    indirect=["tampered"],
)
def test_settings_read_back_that_cannot_be(
    tampered: tuple[SimScopeServer, Scope], query: str, reply: bytes, fragment: str
) -> None:
    """configure() keeps what the instrument says it applied: a scale of 0, a record length
    of nan or a trigger position of 150 % is an error naming the instrument, not a ValueError
    (or a division by zero) from inside the driver."""
    sim, scope = tampered
    sim.tamper(query, lambda _: reply)
    with pytest.raises(ScopeError) as caught:
        scope.configure(scope_settings(record_length=1000, time_per_div=50e-6))
    assert fragment in str(caught.value) and sim.resource in str(caught.value)
