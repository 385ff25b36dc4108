"""Each driver's exact exchange with its instrument, checked against a script (tests/protocol.py).

Beside the tests against the simulated instruments over TCP (tests/test_instruments_*.py),
which show that a driver and a model of the instrument agree, these pin down what a driver
sends, in which order, and what it makes of the replies, with no socket and no sim: every
configuration write travels as "CMD;*ESR?", read-backs follow the writes, a single
acquisition is arm, busy polls, preamble, block. Replies are what the instruments send
(as the sims and programmer manuals give them); waveform times and volts are checked
against values worked out by hand from the scripted preambles.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import instruments.scpi.instrument
import instruments.scpi.session
from instruments.funcgen import GeneratorError, GeneratorSettings, Keysight33500
from instruments.keysight_infiniivision import KeysightInfiniiVision
from instruments.scope import ScopeDataError, ScopeError, ScopeSettings, ScopeTimeout, Waveform
from instruments.tektronix_mso import TektronixMSO
from instruments.tektronix_tds import TektronixTDS
from tests.protocol import RESOURCE, TIMEOUT, FakeClock, FakeResource, ProtocolError, driver, expected_protocol


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Busy loops run on a clock that moves only when they sleep (and they never really sleep)."""
    fake = FakeClock()
    monkeypatch.setattr(instruments.scpi.session, "time", fake)  # the session's and the instruments' waits
    monkeypatch.setattr(instruments.scpi.instrument, "time", fake)
    return fake


def asked(**overrides: object) -> ScopeSettings:
    """What the station asks for: 1 V/div, trace 2 div below centre, 250 µs/div, 4000 points."""
    base: dict[str, object] = dict(
        volts_per_div=1.0,
        position_div=-2.0,
        time_per_div=250e-6,
        record_length=4000,
        trigger_level_v=1.65,
        trigger_slope="rise",
        trigger_position_pct=10.0,
        acquire_timeout_s=5.0,
    )
    base.update(overrides)
    return ScopeSettings(**base)  # type: ignore[arg-type]


def check_applied(applied: ScopeSettings, expected: ScopeSettings) -> None:
    """Field by field: numbers to the last few bits (some are computed from read-backs), the rest equal."""
    for field in dataclasses.fields(ScopeSettings):
        got, want = getattr(applied, field.name), getattr(expected, field.name)
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15), field.name
        else:
            assert got == want, field.name


# every scope reads back a record length rounded up from 4000 to 5000 and a trigger level on its grid
APPLIED = dataclasses.replace(asked(), record_length=5000, trigger_level_v=1.64)
APPLIED_CH1_CH2 = dataclasses.replace(APPLIED, extra_channels=(2,))

# 5000 samples of 5 codes repeated; a record spans 10 · 250 µs: 5000 samples 0.5 µs apart
SIGNED_CH1 = b"\x00\x7f\x80\xff\x19"  # int8: 0, 127, -128, -1, 25
SIGNED_CH2 = b"\x19\x00\x7f\x80\xff"  # the same codes, rotated by one
UNSIGNED_CH1 = b"\x80\x00\xff\x01\x99"  # uint8: 128, hole (0 -> the previous sample), 255, 1, 153
UNSIGNED_CH2 = b"\x99\x80\x00\xff\x01"
# 2.0 V + 0.04 V per code from the trace's zero (position -2 div at 25 codes per division)
VOLTS_SIGNED_CH1 = [2.0, 7.08, -3.12, 1.96, 3.0]
VOLTS_SIGNED_CH2 = [3.0, 2.0, 7.08, -3.12, 1.96]
VOLTS_UNSIGNED_CH1 = [2.0, 2.0, 7.08, -3.08, 3.0]  # (code - 128) · 0.04 + 2.0, the hole filled
VOLTS_UNSIGNED_CH2 = [3.0, 2.0, 2.0, 7.08, -3.08]
DT_S = 5e-7
T0_S = -2.499988e-4  # 10 % of 2.5 ms before the trigger, plus 1.2 ns of trigger interpolation


def check_waveform(wf: Waveform, channel: int, codes: list[int], volts: list[float], index: int = 0) -> None:
    assert (wf.channel, wf.index, len(wf)) == (channel, index, 5000)
    assert wf.dt_s == pytest.approx(DT_S, rel=1e-12)
    assert wf.t0_s == pytest.approx(T0_S, rel=1e-12)
    assert wf.resolution_v == pytest.approx(0.04)
    assert wf.codes is not None
    np.testing.assert_array_equal(wf.codes.reshape(1000, 5), np.tile(codes, (1000, 1)))
    np.testing.assert_allclose(wf.volts.reshape(1000, 5), np.tile(volts, (1000, 1)), rtol=1e-12, atol=1e-12)


# --- Tektronix TDS ------------------------------------------------------------------------------
TDS_CONFIGURE = [
    ("HEADer OFF;*ESR?", "0"),
    ("SELect:CH1 ON;*ESR?", "0"),
    ("CH1:SCAle 1;*ESR?", "0"),
    ("CH1:POSition -2;*ESR?", "0"),
    ("HORizontal:RECOrdlength 4000;*ESR?", "0"),
    ("HORizontal:MAIn:SCAle 0.00025;*ESR?", "0"),
    ("HORizontal:TRIGger:POSition 10;*ESR?", "0"),
    ("TRIGger:MAIn:EDGE:SOUrce CH1;*ESR?", "0"),
    ("TRIGger:MAIn:EDGE:SLOpe RISe;*ESR?", "0"),
    ("TRIGger:MAIn:LEVel 1.65;*ESR?", "0"),
    ("TRIGger:MAIn:MODe NORMal;*ESR?", "0"),
    ("ACQuire:MODe SAMple;*ESR?", "0"),
    ("ACQuire:STOPAfter SEQuence;*ESR?", "0"),
    ("DATa:SOUrce CH1;*ESR?", "0"),
    ("DATa:ENCdg RIBinary;*ESR?", "0"),
    ("DATa:WIDth 1;*ESR?", "0"),
    ("DATa:STARt 1;*ESR?", "0"),
    ("CH1:SCAle?", "1.0E0"),
    ("CH1:POSition?", "-2.0E0"),
    ("HORizontal:MAIn:SCAle?", "2.5E-4"),
    ("HORizontal:RECOrdlength?", "5000"),
    ("HORizontal:TRIGger:POSition?", "1.0E1"),
    ("TRIGger:MAIn:LEVel?", "1.64E0"),
    ("DATa:STOP 5000;*ESR?", "0"),
]
TDS_CONFIGURE_CH1_CH2 = [
    ("HEADer OFF;*ESR?", "0"),
    ("SELect:CH1 ON;*ESR?", "0"),
    ("CH1:SCAle 1;*ESR?", "0"),
    ("CH1:POSition -2;*ESR?", "0"),
    ("SELect:CH2 ON;*ESR?", "0"),
    ("CH2:SCAle 1;*ESR?", "0"),
    ("CH2:POSition -2;*ESR?", "0"),
    ("HORizontal:RECOrdlength 4000;*ESR?", "0"),
    ("HORizontal:MAIn:SCAle 0.00025;*ESR?", "0"),
    ("HORizontal:TRIGger:POSition 10;*ESR?", "0"),
    ("TRIGger:MAIn:EDGE:SOUrce CH1;*ESR?", "0"),
    ("TRIGger:MAIn:EDGE:SLOpe RISe;*ESR?", "0"),
    ("TRIGger:MAIn:LEVel 1.65;*ESR?", "0"),
    ("TRIGger:MAIn:MODe NORMal;*ESR?", "0"),
    ("ACQuire:MODe SAMple;*ESR?", "0"),
    ("ACQuire:STOPAfter SEQuence;*ESR?", "0"),
    ("DATa:SOUrce CH1;*ESR?", "0"),
    ("DATa:ENCdg RIBinary;*ESR?", "0"),
    ("DATa:WIDth 1;*ESR?", "0"),
    ("DATa:STARt 1;*ESR?", "0"),
    ("CH1:SCAle?", "1.0E0"),
    ("CH1:POSition?", "-2.0E0"),
    ("HORizontal:MAIn:SCAle?", "2.5E-4"),
    ("HORizontal:RECOrdlength?", "5000"),
    ("HORizontal:TRIGger:POSition?", "1.0E1"),
    ("TRIGger:MAIn:LEVel?", "1.64E0"),
    ("DATa:STOP 5000;*ESR?", "0"),
]
# t0 = XZERO - XINCR · PT_OFF = 1.2 ns - 0.5 µs · 500; V = YZERO + YMULT · (code - YOFF) = 0.04 · (code + 50)
TDS_PREAMBLE_FIELDS = {
    "BYT_NR": "1",
    "BIT_NR": "8",
    "ENCDG": "BIN",
    "BN_FMT": "RI",
    "BYT_OR": "MSB",
    "WFID": '"Ch1, DC coupling, 1V/div, 250us/div, 5000 points, Sample mode"',
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


def tds_preamble(**fields: str) -> str:
    return ";".join({**TDS_PREAMBLE_FIELDS, **fields}.values())


TDS_PREAMBLE_CH1 = tds_preamble()
TDS_PREAMBLE_CH2 = tds_preamble(WFID='"Ch2, DC coupling, 1V/div, 250us/div, 5000 points, Sample mode"')
TDS_BLOCK_CH1 = b"#45000" + SIGNED_CH1 * 1000 + b"\n"
TDS_BLOCK_CH2 = b"#45000" + SIGNED_CH2 * 1000 + b"\n"


def test_tds_reset() -> None:
    with expected_protocol(TektronixTDS, [
        ("*RST;*CLS;HEADer OFF;*ESR?", "0"),
    ]) as scope:
        scope.reset()
        assert scope.applied is None
        with pytest.raises(RuntimeError, match="configure"):
            scope.acquire_single()  # nothing is sent before the scope is configured


def test_tds_configure_one_channel() -> None:
    with expected_protocol(TektronixTDS, TDS_CONFIGURE) as scope:
        applied = scope.configure(asked())
    check_applied(applied, APPLIED)
    assert scope.applied is applied


def test_tds_configure_with_an_extra_channel() -> None:
    with expected_protocol(TektronixTDS, TDS_CONFIGURE_CH1_CH2) as scope:
        applied = scope.configure(asked(extra_channels=(2,)))
    check_applied(applied, APPLIED_CH1_CH2)


def test_tds_single_acquisition(clock: FakeClock) -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "1"),
        ("BUSY?", "0"),
        ("WFMPre?", TDS_PREAMBLE_CH1),
        ("CURVe?", TDS_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked())
        wf = scope.acquire_single()
    assert clock.sleeps == [0.001]
    assert wf.codes is not None and wf.codes.dtype == np.int8
    check_waveform(wf, 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1)


def test_tds_acquire_channels() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE_CH1_CH2,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "1"),
        ("BUSY?", "0"),
        ("DATa:SOUrce CH2;*ESR?", "0"),
        ("WFMPre?", TDS_PREAMBLE_CH2),
        ("CURVe?", TDS_BLOCK_CH2),
        ("DATa:SOUrce CH1;*ESR?", "0"),  # the triggering channel last: the source ends where configure() put it
        ("WFMPre?", TDS_PREAMBLE_CH1),
        ("CURVe?", TDS_BLOCK_CH1),
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMPre?", TDS_PREAMBLE_CH1),
        ("CURVe?", TDS_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked(extra_channels=(2,)))
        waveforms = scope.acquire_channels()
        after = scope.acquire_single()  # no source to restore: CH1 is where it was left
    assert list(waveforms) == [1, 2]
    check_waveform(waveforms[1], 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1)
    check_waveform(waveforms[2], 2, [25, 0, 127, -128, -1], VOLTS_SIGNED_CH2)
    check_waveform(after, 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1, index=1)


def test_tds_source_restored_after_acquire_channels_failed_half_way() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE_CH1_CH2,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("DATa:SOUrce CH2;*ESR?", "0"),
        ("WFMPre?", tds_preamble(XINCR="0.0E0")),
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("DATa:SOUrce CH1;*ESR?", "0"),
        ("WFMPre?", TDS_PREAMBLE_CH1),
        ("CURVe?", TDS_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked(extra_channels=(2,)))
        with pytest.raises(ScopeDataError):
            scope.acquire_channels()
        wf = scope.acquire_single()
    check_waveform(wf, 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1)


def test_tds_rejected_configure_command() -> None:
    with expected_protocol(TektronixTDS, [
        ("HEADer OFF;*ESR?", "0"),
        ("SELect:CH3 ON;*ESR?", "32"),
        ("ALLEv?", '113,"Undefined header; Command not found; SELect:CH3 ON"'),
    ]) as scope, pytest.raises(ScopeError) as caught:
        scope.configure(asked(channel=3))
    error = caught.value
    assert (error.command, error.resource) == ("SELect:CH3 ON", RESOURCE)
    assert error.instrument_text == '113,"Undefined header; Command not found; SELect:CH3 ON"'
    assert "'SELect:CH3 ON'" in str(error)
    assert '113,"Undefined header; Command not found; SELect:CH3 ON"' in str(error)
    assert scope.applied is None


def test_tds_failed_configure_leaves_no_stale_settings() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE,
        ("HEADer OFF;*ESR?", "0"),
        ("SELect:CH3 ON;*ESR?", "32"),
        ("ALLEv?", '113,"Undefined header; Command not found; SELect:CH3 ON"'),
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeError):
            scope.configure(asked(channel=3))
        # the instrument is half-way between two configurations: no settings describe it
        assert scope.applied is None
        with pytest.raises(RuntimeError, match="configure"):
            scope.acquire_single()


def test_tds_error_bit_with_an_empty_event_queue() -> None:
    with expected_protocol(TektronixTDS, [
        ("*RST;*CLS;HEADer OFF;*ESR?", "16"),
        ("ALLEv?", '0,"No events to report - queue empty"'),
    ]) as scope, pytest.raises(ScopeError) as caught:
        scope.reset()
    assert caught.value.command == "*RST;*CLS;HEADer OFF"
    assert "*ESR? = 16" in str(caught.value)


@pytest.mark.parametrize("esr", ["0", "1"])  # 1: operation complete, no error
def test_tds_check_errors_clean(esr: str) -> None:
    with expected_protocol(TektronixTDS, [
        ("*ESR?", esr),
    ]) as scope:
        scope.check_errors()


def test_tds_check_errors_reports_the_event_queue_without_quiet_events() -> None:
    with expected_protocol(TektronixTDS, [
        ("*IDN?", "TEKTRONIX,TDS 460A,0,CF:91.1CT FV:v1.0e"),
        ("*ESR?", "33"),  # command error + operation complete
        ("ALLEv?", '402,"Operation complete",113,"Undefined header; Command not found; CH5:SCAle 1"'),
    ]) as scope:
        assert scope.identify() == "TEKTRONIX,TDS 460A,0,CF:91.1CT FV:v1.0e"
        with pytest.raises(ScopeError) as caught:
            scope.check_errors()
    error = caught.value
    assert error.command == "*IDN?"  # the last command sent
    assert error.instrument_text == '113,"Undefined header; Command not found; CH5:SCAle 1"'
    assert "Operation complete" not in str(error)


@pytest.mark.parametrize(
    ("field", "value"),
    [("XINCR", "0.0E0"), ("YMULT", "0.0E0"), ("NR_PT", "-1"), ("XZERO", "NaN"), ("PT_OFF", "2.5")],
)
def test_tds_malformed_preamble(field: str, value: str) -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMPre?", tds_preamble(**{field: value})),  # no CURVe? after it
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_single()
    error = caught.value
    assert (error.command, error.field, error.value, error.resource) == ("WFMPre?", field, value, RESOURCE)
    assert f"WFMPre?: {field} is {value!r}" in str(error)


def test_tds_preamble_with_missing_fields() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMPre?", "1;8;BIN;RI;MSB"),
        ("WFMPre:CH1?", "1;8;BIN;RI;MSB"),  # the per-waveform form, once, before giving up
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_single()
    assert (caught.value.field, caught.value.value) == ("reply", "1;8;BIN;RI;MSB")
    assert "15 or 16" in str(caught.value)


def test_tds_block_longer_than_the_preamble_says_is_rejected_and_flushed() -> None:
    with FakeResource([
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMPre?", TDS_PREAMBLE_CH1),
        ("CURVe?", b"#46000" + SIGNED_CH1 * 1200 + b"\n"),
    ]) as fake:
        scope = driver(TektronixTDS, fake)
        scope.configure(asked())
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_single()
        assert fake.clears == 1  # the 6000 data bytes are not left to answer the next query
    assert (caught.value.command, caught.value.field, caught.value.value) == ("CURVe?", "block length", "6000")


def test_tds_block_shorter_than_its_header_times_out_and_the_status_is_read() -> None:
    with FakeResource([
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMPre?", TDS_PREAMBLE_CH1),
        ("CURVe?", b"#45000" + SIGNED_CH1 * 800 + b"\n"),  # the link dropped 1000 bytes
        ("*ESR?", "0"),
    ]) as fake:
        scope = driver(TektronixTDS, fake)
        scope.error_check_timeout_s = 0.25
        scope.configure(asked())
        with pytest.raises(ScopeTimeout) as caught:
            scope.acquire_single()
        assert fake.clears == 1
        assert fake.timeouts == [250.0, 1000.0]  # *ESR? under its own timeout, then the session's again
    assert caught.value.command == "CURVe?"
    assert "6 bytes into the reply, while 5000 more were due" in str(caught.value)


def test_tds_query_timeout_is_explained_by_the_event_queue() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", TIMEOUT),
        ("*ESR?", "4"),
        ("ALLEv?", '410,"Query INTERRUPTED"'),
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeTimeout) as caught:
            scope.acquire_single()
    assert caught.value.command == "BUSY?"
    assert caught.value.instrument_text == '410,"Query INTERRUPTED"'


def test_tds_no_trigger_stops_the_sequence_unchecked(clock: FakeClock) -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "1"),
        ("BUSY?", "1"),
        ("BUSY?", "1"),
        ("ACQuire:STATE STOP", None),  # no *ESR? on the way out
    ]) as scope:
        scope.configure(asked(acquire_timeout_s=0.002))
        with pytest.raises(ScopeTimeout) as caught:
            scope.acquire_single()
    assert clock.sleeps == [0.001, 0.0015]  # then 2.5 ms have passed: more than the 2 ms allowed
    assert caught.value.command == "ACQuire:STATE RUN"
    assert "within 0.002 s" in str(caught.value) and "CH1" in str(caught.value)


# --- Tektronix MSO 4/5/6 ------------------------------------------------------------------------
MSO_SETTINGS = [  # what configure() sends before choosing single records or FastFrame
    ("HEADer OFF;*ESR?", "0"),
    ("DISplay:GLObal:CH1:STATE ON;*ESR?", "0"),
    ("CH1:SCAle 1;*ESR?", "0"),
    ("CH1:POSition -2;*ESR?", "0"),
    ("CH1:OFFSet 0;*ESR?", "0"),
    ("HORizontal:MODe MANual;*ESR?", "0"),
    ("HORizontal:DELay:MODe OFF;*ESR?", "0"),  # ON would keep the trigger at 50 %
    ("HORizontal:RECOrdlength 4000;*ESR?", "0"),
    ("HORizontal:SCAle 0.00025;*ESR?", "0"),
    ("HORizontal:POSition 10;*ESR?", "0"),
    ("TRIGger:A:EDGE:SOUrce CH1;*ESR?", "0"),
    ("TRIGger:A:EDGE:SLOpe RISe;*ESR?", "0"),
    ("TRIGger:A:LEVel:CH1 1.65;*ESR?", "0"),
    ("TRIGger:A:MODe NORMal;*ESR?", "0"),
    ("ACQuire:MODe SAMple;*ESR?", "0"),
    ("ACQuire:STOPAfter SEQuence;*ESR?", "0"),
    ("DATa:SOUrce CH1;*ESR?", "0"),
    ("DATa:ENCdg SRIbinary;*ESR?", "0"),
    ("DATa:WIDth 1;*ESR?", "0"),
    ("DATa:STARt 1;*ESR?", "0"),
    ("CH1:SCAle?", "1.0000"),
    ("CH1:POSition?", "-2.0000"),
    ("HORizontal:SCAle?", "250.0000E-6"),
    ("HORizontal:RECOrdlength?", "5000"),
    ("HORizontal:POSition?", "10.0000"),
    ("TRIGger:A:LEVel:CH1?", "1.6400"),
    ("DATa:STOP 5000;*ESR?", "0"),
]
MSO_CONFIGURE = [*MSO_SETTINGS, ("HORizontal:FASTframe:STATE OFF;*ESR?", "0")]  # single records, whatever was on before
MSO_CONFIGURE_CH1_CH2 = [
    ("HEADer OFF;*ESR?", "0"),
    ("DISplay:GLObal:CH1:STATE ON;*ESR?", "0"),
    ("CH1:SCAle 1;*ESR?", "0"),
    ("CH1:POSition -2;*ESR?", "0"),
    ("CH1:OFFSet 0;*ESR?", "0"),
    ("DISplay:GLObal:CH2:STATE ON;*ESR?", "0"),
    ("CH2:SCAle 1;*ESR?", "0"),
    ("CH2:POSition -2;*ESR?", "0"),
    ("CH2:OFFSet 0;*ESR?", "0"),
    ("HORizontal:MODe MANual;*ESR?", "0"),
    ("HORizontal:DELay:MODe OFF;*ESR?", "0"),  # ON would keep the trigger at 50 %
    ("HORizontal:RECOrdlength 4000;*ESR?", "0"),
    ("HORizontal:SCAle 0.00025;*ESR?", "0"),
    ("HORizontal:POSition 10;*ESR?", "0"),
    ("TRIGger:A:EDGE:SOUrce CH1;*ESR?", "0"),
    ("TRIGger:A:EDGE:SLOpe RISe;*ESR?", "0"),
    ("TRIGger:A:LEVel:CH1 1.65;*ESR?", "0"),
    ("TRIGger:A:MODe NORMal;*ESR?", "0"),
    ("ACQuire:MODe SAMple;*ESR?", "0"),
    ("ACQuire:STOPAfter SEQuence;*ESR?", "0"),
    ("DATa:SOUrce CH1;*ESR?", "0"),
    ("DATa:ENCdg SRIbinary;*ESR?", "0"),
    ("DATa:WIDth 1;*ESR?", "0"),
    ("DATa:STARt 1;*ESR?", "0"),
    ("CH1:SCAle?", "1.0000"),
    ("CH1:POSition?", "-2.0000"),
    ("HORizontal:SCAle?", "250.0000E-6"),
    ("HORizontal:RECOrdlength?", "5000"),
    ("HORizontal:POSition?", "10.0000"),
    ("TRIGger:A:LEVel:CH1?", "1.6400"),
    ("DATa:STOP 5000;*ESR?", "0"),
    ("HORizontal:FASTframe:STATE OFF;*ESR?", "0"),  # single records, whatever was on before
]
# t0 = XZERO - XINCR · PT_OFF = XZERO (PT_OFF 0); V = YZERO + YMULT · (code - YOFF) = 2 + 0.04 · code
MSO_PREAMBLE_FIELDS = {
    "BYT_NR": "1",
    "BIT_NR": "8",
    "ENCDG": "BIN",
    "BN_FMT": "RI",
    "BYT_OR": "LSB",
    "WFID": '"Ch1, DC coupling, 1.000V/div, 250.0us/div, 5000 points, Sample mode"',
    "NR_PT": "5000",
    "PT_FMT": "Y",
    "PT_ORDER": "LINEAR",
    "XUNIT": '"s"',
    "XINCR": "500.0000E-9",
    "XZERO": "-249.9988E-6",
    "PT_OFF": "0",
    "YUNIT": '"V"',
    "YMULT": "40.0000E-3",
    "YOFF": "0.0E+0",
    "YZERO": "2.0000",
    "DOMAIN": "TIME",
    "WFMTYPE": "ANALOG",
    "CENTERFREQUENCY": "0.0E+0",
    "SPAN": "0.0E+0",
    "REFLEVEL": "0.0E+0",
}


def mso_preamble(**fields: str) -> str:
    return ";".join({**MSO_PREAMBLE_FIELDS, **fields}.values())


MSO_PREAMBLE_CH1 = mso_preamble()
MSO_PREAMBLE_CH2 = mso_preamble(WFID='"Ch2, DC coupling, 1.000V/div, 250.0us/div, 5000 points, Sample mode"')
MSO_BLOCK_CH1 = b"#45000" + SIGNED_CH1 * 1000 + b"\n"
MSO_BLOCK_CH2 = b"#45000" + SIGNED_CH2 * 1000 + b"\n"


def test_mso_reset() -> None:
    with expected_protocol(TektronixMSO, [
        ("*RST;*CLS;HEADer OFF;*ESR?", "0"),
    ]) as scope:
        scope.reset()
    assert scope.applied is None


def test_mso_configure_one_channel() -> None:
    with expected_protocol(TektronixMSO, MSO_CONFIGURE) as scope:
        applied = scope.configure(asked())
    check_applied(applied, APPLIED)
    assert scope.applied is applied


def test_mso_configure_with_an_extra_channel() -> None:
    with expected_protocol(TektronixMSO, MSO_CONFIGURE_CH1_CH2) as scope:
        applied = scope.configure(asked(extra_channels=(2,)))
    check_applied(applied, APPLIED_CH1_CH2)


def test_mso_single_acquisition(clock: FakeClock) -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "1"),
        ("BUSY?", "0"),
        ("WFMOutpre?", MSO_PREAMBLE_CH1),
        ("CURVe?", MSO_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked())
        wf = scope.acquire_single()
    assert clock.sleeps == [0.001]
    assert wf.codes is not None and wf.codes.dtype == np.int8
    check_waveform(wf, 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1)


def test_mso_preamble_with_headers() -> None:
    # a session someone left with HEADer ON: fields are read by name
    named = ":WFMOUTPRE:" + ";".join(f"{k} {v}" for k, v in MSO_PREAMBLE_FIELDS.items())
    with expected_protocol(TektronixMSO, [
        *MSO_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMOutpre?", named),
        ("CURVe?", MSO_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked())
        wf = scope.acquire_single()
    check_waveform(wf, 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1)


def test_mso_acquire_channels() -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_CONFIGURE_CH1_CH2,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "1"),
        ("BUSY?", "0"),
        ("DATa:SOUrce CH2;*ESR?", "0"),
        ("WFMOutpre?", MSO_PREAMBLE_CH2),
        ("CURVe?", MSO_BLOCK_CH2),
        ("DATa:SOUrce CH1;*ESR?", "0"),
        ("WFMOutpre?", MSO_PREAMBLE_CH1),
        ("CURVe?", MSO_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked(extra_channels=(2,)))
        waveforms = scope.acquire_channels()
    assert list(waveforms) == [1, 2]
    check_waveform(waveforms[1], 1, [0, 127, -128, -1, 25], VOLTS_SIGNED_CH1)
    check_waveform(waveforms[2], 2, [25, 0, 127, -128, -1], VOLTS_SIGNED_CH2)


def test_mso_rejected_configure_command() -> None:
    with expected_protocol(TektronixMSO, [
        ("HEADer OFF;*ESR?", "0"),
        ("DISplay:GLObal:CH3:STATE ON;*ESR?", "32"),
        ("ALLEv?", '113,"Undefined header; Command not found; DISplay:GLObal:CH3:STATE ON"'),
    ]) as scope, pytest.raises(ScopeError) as caught:
        scope.configure(asked(channel=3))
    error = caught.value
    assert error.command == "DISplay:GLObal:CH3:STATE ON"
    assert "'DISplay:GLObal:CH3:STATE ON'" in str(error)
    assert '113,"Undefined header; Command not found; DISplay:GLObal:CH3:STATE ON"' in str(error)


def test_mso_check_errors() -> None:
    with expected_protocol(TektronixMSO, [
        ("*ESR?", "0"),
        ("*ESR?", "16"),
        ("ALLEv?", '221,"Settings conflict; waveform requested is not on"'),
    ]) as scope:
        scope.check_errors()
        with pytest.raises(ScopeError) as caught:
            scope.check_errors()
    assert caught.value.instrument_text == '221,"Settings conflict; waveform requested is not on"'


@pytest.mark.parametrize(("field", "value"), [("XINCR", "-500.0000E-9"), ("YMULT", "0.0E+0"), ("NR_PT", "0")])
def test_mso_malformed_preamble(field: str, value: str) -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_CONFIGURE,
        ("ACQuire:STATE RUN;*ESR?", "0"),
        ("BUSY?", "0"),
        ("WFMOutpre?", mso_preamble(**{field: value})),
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_single()
    error = caught.value
    assert (error.command, error.field, error.value, error.resource) == ("WFMOutpre?", field, value, RESOURCE)
    assert f"WFMOutpre?: {field} is {value!r}" in str(error)


# --- Keysight InfiniiVision ---------------------------------------------------------------------
KEYSIGHT_SETTINGS = [  # what configure() sends before choosing single records or segments
    (":CHANnel1:DISPlay 1;*ESR?", "+0"),
    (":CHANnel1:SCALe 1;*ESR?", "+0"),
    (":CHANnel1:OFFSet 2;*ESR?", "+0"),  # 2 div below centre at 1 V/div: centre screen shows +2 V
    (":TIMebase:SCALe 0.00025;*ESR?", "+0"),
    (":TIMebase:REFerence CENTer;*ESR?", "+0"),
    (":TIMebase:POSition 0.001;*ESR?", "+0"),  # the trigger 1 ms before centre: at 10 % of 2.5 ms
    (":TRIGger:MODE EDGE;*ESR?", "+0"),
    (":TRIGger:EDGE:SOURce CHANnel1;*ESR?", "+0"),
    (":TRIGger:EDGE:SLOPe POSitive;*ESR?", "+0"),
    (":TRIGger:EDGE:LEVel 1.65;*ESR?", "+0"),
    (":TRIGger:SWEep NORMal;*ESR?", "+0"),
    (":ACQuire:TYPE NORMal;*ESR?", "+0"),
    (":WAVeform:SOURce CHANnel1;*ESR?", "+0"),
    (":WAVeform:FORMat BYTE;*ESR?", "+0"),
    (":WAVeform:UNSigned 1;*ESR?", "+0"),  # not left to *RST or to the last user
    (":WAVeform:POINts:MODE RAW;*ESR?", "+0"),
    (":WAVeform:POINts 4000;*ESR?", "+0"),
    (":STOP;*ESR?", "+0"),  # stopped before the record length is read back
    (":CHANnel1:SCALe?", "+1.00E+00"),
    (":TIMebase:SCALe?", "+250.0E-06"),
    (":CHANnel1:OFFSet?", "+2.00000E+00"),
    (":WAVeform:POINts?", "+5000"),
    (":TIMebase:POSition?", "+1.000000000E-03"),
    (":TRIGger:EDGE:LEVel?", "+1.64000E+00"),
]
KEYSIGHT_CONFIGURE = [*KEYSIGHT_SETTINGS, (":ACQuire:MODE RTIMe;*ESR?", "+0")]  # single records, whatever was on before
KEYSIGHT_CONFIGURE_CH1_CH2 = [
    (":CHANnel1:DISPlay 1;*ESR?", "+0"),
    (":CHANnel1:SCALe 1;*ESR?", "+0"),
    (":CHANnel1:OFFSet 2;*ESR?", "+0"),
    (":CHANnel2:DISPlay 1;*ESR?", "+0"),
    (":CHANnel2:SCALe 1;*ESR?", "+0"),
    (":CHANnel2:OFFSet 2;*ESR?", "+0"),
    (":TIMebase:SCALe 0.00025;*ESR?", "+0"),
    (":TIMebase:REFerence CENTer;*ESR?", "+0"),
    (":TIMebase:POSition 0.001;*ESR?", "+0"),
    (":TRIGger:MODE EDGE;*ESR?", "+0"),
    (":TRIGger:EDGE:SOURce CHANnel1;*ESR?", "+0"),
    (":TRIGger:EDGE:SLOPe POSitive;*ESR?", "+0"),
    (":TRIGger:EDGE:LEVel 1.65;*ESR?", "+0"),
    (":TRIGger:SWEep NORMal;*ESR?", "+0"),
    (":ACQuire:TYPE NORMal;*ESR?", "+0"),
    (":WAVeform:SOURce CHANnel1;*ESR?", "+0"),
    (":WAVeform:FORMat BYTE;*ESR?", "+0"),
    (":WAVeform:UNSigned 1;*ESR?", "+0"),  # not left to *RST or to the last user
    (":WAVeform:POINts:MODE RAW;*ESR?", "+0"),
    (":WAVeform:POINts 4000;*ESR?", "+0"),
    (":STOP;*ESR?", "+0"),  # stopped before the record length is read back
    (":CHANnel1:SCALe?", "+1.00E+00"),
    (":TIMebase:SCALe?", "+250.0E-06"),
    (":CHANnel1:OFFSet?", "+2.00000E+00"),
    (":WAVeform:POINts?", "+5000"),
    (":TIMebase:POSition?", "+1.000000000E-03"),
    (":TRIGger:EDGE:LEVel?", "+1.64000E+00"),
    (":ACQuire:MODE RTIMe;*ESR?", "+0"),  # single records, whatever was on before
]
# format,type,points,count,xincrement,xorigin,xreference,yincrement,yorigin,yreference:
# t0 = xorigin - xreference · xincrement; V = (code - 128) · 0.04 + 2.0
KEYSIGHT_PREAMBLE_FIELDS = {
    "format": "+0",
    "type": "+0",
    "points": "+5000",
    "count": "+1",
    "xincrement": "+5.00000000E-07",
    "xorigin": "-2.49998800E-04",
    "xreference": "+0",
    "yincrement": "+4.00000000E-02",
    "yorigin": "+2.00000000E+00",
    "yreference": "+128",
}


def keysight_preamble(**fields: str) -> str:
    return ",".join({**KEYSIGHT_PREAMBLE_FIELDS, **fields}.values())


KEYSIGHT_PREAMBLE = keysight_preamble()
KEYSIGHT_BLOCK_CH1 = b"#800005000" + UNSIGNED_CH1 * 1000 + b"\n"
KEYSIGHT_BLOCK_CH2 = b"#800005000" + UNSIGNED_CH2 * 1000 + b"\n"


def test_keysight_reset() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        ("*RST;*CLS;*ESR?", "+0"),
    ]) as scope:
        scope.reset()
    assert scope.applied is None


def test_keysight_configure_one_channel() -> None:
    with expected_protocol(KeysightInfiniiVision, KEYSIGHT_CONFIGURE) as scope:
        applied = scope.configure(asked())
    check_applied(applied, APPLIED)
    assert scope.applied is applied


def test_keysight_configure_with_an_extra_channel() -> None:
    with expected_protocol(KeysightInfiniiVision, KEYSIGHT_CONFIGURE_CH1_CH2) as scope:
        applied = scope.configure(asked(extra_channels=(2,)))
    check_applied(applied, APPLIED_CH1_CH2)


def test_keysight_single_acquisition(clock: FakeClock) -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_CONFIGURE,
        (":SINGle;*ESR?", "+0"),
        (":OPERegister:CONDition?", "+8"),  # bit 3: running
        (":OPERegister:CONDition?", "+0"),
        (":WAVeform:PREamble?", KEYSIGHT_PREAMBLE),
        (":WAVeform:DATA?", KEYSIGHT_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked())
        wf = scope.acquire_single()
    assert clock.sleeps == [0.001]
    assert wf.codes is not None and wf.codes.dtype == np.uint8
    check_waveform(wf, 1, [128, 128, 255, 1, 153], VOLTS_UNSIGNED_CH1)


def test_keysight_acquire_channels() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_CONFIGURE_CH1_CH2,
        (":SINGle;*ESR?", "+0"),
        (":OPERegister:CONDition?", "+8"),
        (":OPERegister:CONDition?", "+0"),
        (":WAVeform:SOURce CHANnel2;*ESR?", "+0"),
        (":WAVeform:PREamble?", KEYSIGHT_PREAMBLE),
        (":WAVeform:DATA?", KEYSIGHT_BLOCK_CH2),
        (":WAVeform:SOURce CHANnel1;*ESR?", "+0"),
        (":WAVeform:PREamble?", KEYSIGHT_PREAMBLE),
        (":WAVeform:DATA?", KEYSIGHT_BLOCK_CH1),
    ]) as scope:
        scope.configure(asked(extra_channels=(2,)))
        waveforms = scope.acquire_channels()
    assert list(waveforms) == [1, 2]
    check_waveform(waveforms[1], 1, [128, 128, 255, 1, 153], VOLTS_UNSIGNED_CH1)
    check_waveform(waveforms[2], 2, [153, 128, 128, 255, 1], VOLTS_UNSIGNED_CH2)


def test_keysight_rejected_configure_command() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        (":CHANnel3:DISPlay 1;*ESR?", "+32"),  # a two-channel model
        (":SYSTem:ERRor?", '-113,"Undefined header"'),
        (":SYSTem:ERRor?", '+0,"No error"'),
    ]) as scope, pytest.raises(ScopeError) as caught:
        scope.configure(asked(channel=3))
    error = caught.value
    assert (error.command, error.instrument_text) == (":CHANnel3:DISPlay 1", '-113,"Undefined header"')
    assert "':CHANnel3:DISPlay 1'" in str(error) and '-113,"Undefined header"' in str(error)
    assert scope.applied is None


def test_keysight_check_errors() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        ("*ESR?", "+0"),
        ("*ESR?", "+36"),  # command error + query error
        (":SYSTem:ERRor?", '-113,"Undefined header"'),
        (":SYSTem:ERRor?", '-410,"Query INTERRUPTED"'),
        (":SYSTem:ERRor?", '+0,"No error"'),
    ]) as scope:
        scope.check_errors()
        with pytest.raises(ScopeError) as caught:
            scope.check_errors()
    assert caught.value.instrument_text == '-113,"Undefined header" | -410,"Query INTERRUPTED"'


@pytest.mark.parametrize(
    ("field", "value"),
    [("xincrement", "+0.00000000E+00"), ("yincrement", "+0.00000000E+00"), ("points", "+0"), ("format", "+7")],
)
def test_keysight_malformed_preamble(field: str, value: str) -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_CONFIGURE,
        (":SINGle;*ESR?", "+0"),
        (":OPERegister:CONDition?", "+0"),
        (":WAVeform:PREamble?", keysight_preamble(**{field: value})),
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_single()
    error = caught.value
    assert (error.command, error.field, error.value, error.resource) == (":WAVeform:PREamble?", field, value, RESOURCE)
    assert f":WAVeform:PREamble?: {field} is {value!r}" in str(error)


def test_keysight_preamble_with_nine_fields() -> None:
    nine = ",".join(list(KEYSIGHT_PREAMBLE_FIELDS.values())[:9])
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_CONFIGURE,
        (":SINGle;*ESR?", "+0"),
        (":OPERegister:CONDition?", "+0"),
        (":WAVeform:PREamble?", nine),
    ]) as scope:
        scope.configure(asked())
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_single()
    assert caught.value.field == "reply" and "10 comma-separated fields expected, got 9" in str(caught.value)


# --- Keysight 33500 function generator ---------------------------------------------------------
def pulses(**overrides: object) -> GeneratorSettings:
    base: dict[str, object] = dict(frequency_hz=1000.0, width_s=20e-6, low_v=0.0, high_v=3.3)
    base.update(overrides)
    return GeneratorSettings(**base)  # type: ignore[arg-type]


def test_33500_reset() -> None:
    with expected_protocol(Keysight33500, [
        ("*RST;*CLS;*ESR?", "+0"),
    ]) as gen:
        gen.reset()
    assert gen.applied is None


def test_33500_configure_periodic_pulses() -> None:
    with expected_protocol(Keysight33500, [
        ("OUTPut1:LOAD INFinity;*ESR?", "+0"),
        ("SOURce1:FM:STATe OFF;*ESR?", "+0"),
        ("SOURce1:FUNCtion:PULSe:WIDTh?", "+1.000000000000000E-04"),
        # narrower than now: the width first, so that it fits the period at every step
        ("SOURce1:FUNCtion:PULSe:WIDTh 2e-05;*ESR?", "+0"),
        ("SOURce1:FREQuency 1000;*ESR?", "+0"),
        ("SOURce1:FUNCtion PULSe;*ESR?", "+0"),
        ("SOURce1:FUNCtion:PULSe:HOLD WIDTh;*ESR?", "+0"),
        ("SOURce1:VOLTage:LOW?", "-5.000000000000000E-02"),
        # the present LOW is below the new HIGH: HIGH first
        ("SOURce1:VOLTage:HIGH 3.3;*ESR?", "+0"),
        ("SOURce1:VOLTage:LOW 0;*ESR?", "+0"),
        ("SYSTem:ERRor?", '+0,"No error"'),
        ("OUTPut1:LOAD?", "+9.900000000000000E+37"),
        ("SOURce1:FUNCtion?", "PULS"),
        ("SOURce1:FREQuency?", "+1.000000000000000E+03"),
        ("SOURce1:FM:STATe?", "0"),
        ("SOURce1:FUNCtion:PULSe:WIDTh?", "+2.000000000000000E-05"),
        ("SOURce1:VOLTage:HIGH?", "+3.300000000000000E+00"),
        ("SOURce1:VOLTage:LOW?", "+0.000000000000000E+00"),
    ]) as gen:
        applied = gen.configure(pulses())
    assert applied == pulses()
    assert gen.applied is applied


def test_33500_configure_jittered_pulses() -> None:
    with expected_protocol(Keysight33500, [
        ("OUTPut2:LOAD INFinity;*ESR?", "+0"),
        ("SOURce2:FM:STATe OFF;*ESR?", "+0"),
        ("SOURce2:FUNCtion:PULSe:WIDTh?", "+1.000000000000000E-04"),
        # wider than now: the frequency first
        ("SOURce2:FREQuency 1000;*ESR?", "+0"),
        ("SOURce2:FUNCtion:PULSe:WIDTh 0.0002;*ESR?", "+0"),
        ("SOURce2:FUNCtion PULSe;*ESR?", "+0"),
        ("SOURce2:FUNCtion:PULSe:HOLD WIDTh;*ESR?", "+0"),
        ("SOURce2:VOLTage:LOW?", "+3.500000000000000E+00"),
        # the present LOW (3.5 V, left by a 5 V run) is not below the new HIGH: LOW first
        ("SOURce2:VOLTage:LOW 0;*ESR?", "+0"),
        ("SOURce2:VOLTage:HIGH 3.3;*ESR?", "+0"),
        ("SOURce2:FM:SOURce INTernal;*ESR?", "+0"),
        ("SOURce2:FM:INTernal:FUNCtion NOISe;*ESR?", "+0"),
        ("SOURce2:FM:DEViation 100;*ESR?", "+0"),
        ("SOURce2:FM:STATe ON;*ESR?", "+0"),
        ("SYSTem:ERRor?", '+0,"No error"'),
        ("OUTPut2:LOAD?", "+9.900000000000000E+37"),
        ("SOURce2:FUNCtion?", "PULS"),
        ("SOURce2:FREQuency?", "+1.000000000000000E+03"),
        ("SOURce2:FM:STATe?", "1"),
        ("SOURce2:FM:SOURce?", "INT"),
        ("SOURce2:FM:INTernal:FUNCtion?", "NOIS"),
        ("SOURce2:FM:DEViation?", "+1.000000000000000E+02"),
        ("SOURce2:FUNCtion:PULSe:WIDTh?", "+2.000000000000000E-04"),
        ("SOURce2:VOLTage:HIGH?", "+3.300000000000000E+00"),
        ("SOURce2:VOLTage:LOW?", "+0.000000000000000E+00"),
    ]) as gen:
        applied = gen.configure(pulses(channel=2, width_s=200e-6, jitter=0.1))
    assert applied == pulses(channel=2, width_s=200e-6, jitter=0.1)


def test_33500_rejected_configure_command() -> None:
    with expected_protocol(Keysight33500, [
        ("OUTPut2:LOAD INFinity;*ESR?", "+32"),  # a one-channel 33521B
        ("SYSTem:ERRor?", '-113,"Undefined header"'),
        ("SYSTem:ERRor?", '+0,"No error"'),
    ]) as gen, pytest.raises(GeneratorError) as caught:
        gen.configure(pulses(channel=2))
    error = caught.value
    assert (error.command, error.instrument_text) == ("OUTPut2:LOAD INFinity", '-113,"Undefined header"')
    assert "'OUTPut2:LOAD INFinity'" in str(error) and '-113,"Undefined header"' in str(error)
    assert gen.applied is None


def test_33500_check_errors_reads_the_queue_alone() -> None:
    with expected_protocol(Keysight33500, [
        ("SYSTem:ERRor?", '+0,"No error"'),
        ("OUTPut1 ON;*ESR?", "+0"),
        ("SYSTem:ERRor?", '-222,"Data out of range"'),
        ("SYSTem:ERRor?", '-221,"Settings conflict"'),
        ("SYSTem:ERRor?", '+0,"No error"'),
    ]) as gen:
        gen.check_errors()
        gen.set_output(True)
        with pytest.raises(GeneratorError) as caught:
            gen.check_errors()
    assert caught.value.command == "OUTPut1 ON"
    assert caught.value.instrument_text == '-222,"Data out of range" | -221,"Settings conflict"'


def test_33500_output() -> None:
    with expected_protocol(Keysight33500, [
        ("OUTPut1 OFF;*ESR?", "+0"),
        ("OUTPut1?", "0"),
    ]) as gen:
        gen.set_output(False)
        assert gen.output_enabled() is False


# --- the fake itself: it must catch what it is there to catch ------------------------------------
def test_fake_fails_on_the_first_command_that_differs() -> None:
    differs = r"command 2 of 2: the driver sent 'SELect:CH1 ON;\*ESR\?' \(query\), the script expects 'SELect:CH2"
    with pytest.raises(ProtocolError, match=differs), expected_protocol(TektronixTDS, [
        ("HEADer OFF;*ESR?", "0"),
        ("SELect:CH2 ON;*ESR?", "0"),
    ]) as scope:
        scope.configure(asked())


def test_fake_fails_on_a_command_after_the_end() -> None:
    after = r"'SELect:CH1 ON;\*ESR\?' \(query\) after the script's end"
    with pytest.raises(ProtocolError, match=after), expected_protocol(TektronixTDS, [
        ("HEADer OFF;*ESR?", "0"),
    ]) as scope:
        scope.configure(asked())


def test_fake_fails_on_entries_never_sent() -> None:
    unsent = r"(?s)1 of 2 script entries were never sent.*2\. 'ALLEv\?'"
    with pytest.raises(ProtocolError, match=unsent), expected_protocol(TektronixTDS, [
        ("*ESR?", "0"),
        ("ALLEv?", '0,"No events to report - queue empty"'),
    ]) as scope:
        scope.check_errors()


def test_fake_fails_on_a_reply_left_unread() -> None:
    fake = FakeResource([("CURVe?", b"#15abcde\n"), ("*ESR?", "0")])
    fake.write("CURVe?")
    assert fake.read_bytes(2) == b"#1"
    with pytest.raises(ProtocolError, match="while 7 bytes of the reply to 'CURVe\\?' were unread"):
        fake.query("*ESR?")


def test_fake_reraises_a_failure_the_driver_swallowed() -> None:
    fake = FakeResource([("*ESR?", "0")])
    with pytest.raises(ProtocolError):
        fake.query("*OPC?")
    with pytest.raises(ProtocolError, match=r"the driver sent '\*OPC\?'"):
        fake.check()
