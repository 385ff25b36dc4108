"""Each driver's exact exchange in the segmented and measurement modes (tests/protocol.py).

tests/test_scope_protocol.py pins configure, arm, busy and fetch of single records; these pin
what `segments > 1` and `measurement` add: FastFrame (MSO) and segmented memory (InfiniiVision,
with :WAVeform:SEGMented:ALL and segment by segment where a model refuses it), the frame time
stamps and tags in the forms the instruments send, one block per frame, and each dialect's own
pulse-width measurement with its 9.9E37 "no valid measurement" and its error queue. Replies are
what the sims (instruments/sim/) and the programmer manuals give; frame times, codes and volts
are checked against values worked out by hand from the scripted replies.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import instruments.scpi.instrument
import instruments.scpi.session
from instruments.keysight_infiniivision import KeysightInfiniiVision
from instruments.scope import Frames, ScopeDataError, ScopeError, ScopeTimeout, WidthMeasurement
from instruments.tektronix_mso import TektronixMSO
from instruments.tektronix_tds import TektronixTDS
from tests.protocol import TIMEOUT, FakeClock, FakeResource, driver, expected_protocol
from tests.test_scope_protocol import (
    APPLIED,
    KEYSIGHT_CONFIGURE,
    KEYSIGHT_PREAMBLE,
    KEYSIGHT_SETTINGS,
    MSO_CONFIGURE,
    MSO_PREAMBLE_CH1,
    MSO_SETTINGS,
    TDS_BLOCK_CH1,
    TDS_CONFIGURE,
    TDS_PREAMBLE_CH1,
    asked,
    check_applied,
)


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Busy loops run on a clock that moves only when they sleep (and they never really sleep)."""
    fake = FakeClock()
    monkeypatch.setattr(instruments.scpi.session, "time", fake)  # the session's and the instruments' waits
    monkeypatch.setattr(instruments.scpi.instrument, "time", fake)
    return fake


# --- frames, worked out by hand ------------------------------------------------------------------
# Every frame is 5000 points (the record length the configure scripts read back), 0.5 µs apart,
# sample 0 at -249.9988 µs from the frame's own trigger (both preambles say so). The frames'
# triggers, from the stamps/tags below: frame 2 100.000125 µs after frame 1, frame 3 400.00025 µs
# after it (the event between them missed), so their first samples lie at these times from
# frame 1's trigger: -249.9988 µs, 100.000125 - 249.9988 µs, 400.00025 - 249.9988 µs.
TRIGGER_S = [0.0, 100.000125e-6, 400.00025e-6]
FIRST_SAMPLE_S = [-249.9988e-6, -149.998675e-6, 150.00145e-6]

# MSO: int8, V = YZERO + YMULT · (code - YOFF) = 2 + 0.04 · code
MSO_FRAMES = (b"\x00\x7f\x80\xff\x19", b"\x19\x32\x4b\x64\x7d", b"\xe7\xce\xb5\x9c\x83")
MSO_CODES = [[0, 127, -128, -1, 25], [25, 50, 75, 100, 125], [-25, -50, -75, -100, -125]]
MSO_VOLTS = [[2.0, 7.08, -3.12, 1.96, 3.0], [3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 0.0, -1.0, -2.0, -3.0]]
# CURVe? with DATa:FRAMESTARt 1 / FRAMESTOP 3: a block per frame, back to back, one LF after the last
MSO_CURVE_3_FRAMES = b"".join(b"#45000" + f * 1000 for f in MSO_FRAMES) + b"\n"

# InfiniiVision: uint8, V = (code - 128) · 0.04 + 2.0; 0x00 is a hole, filled with the sample before
KEYSIGHT_SEGMENTS = (b"\x80\x00\xff\x01\x99", b"\x99\xb2\xcb\x67\x4e", b"\x4e\x00\x35\xe4\x80")
KEYSIGHT_CODES = [[128, 128, 255, 1, 153], [153, 178, 203, 103, 78], [78, 78, 53, 228, 128]]
KEYSIGHT_VOLTS = [[2.0, 2.0, 7.08, -3.08, 3.0], [3.0, 4.0, 5.0, 1.0, 0.0], [0.0, 0.0, -1.0, 6.0, 2.0]]
# :WAVeform:SEGMented:XLISt? TTAG: seconds from segment 1's trigger, in a definite block of 50 characters
KEYSIGHT_TTAGS = "#800000050+0.000000000E+00,+1.000001250E-04,+4.000002500E-04"
# :WAVeform:DATA? with :WAVeform:SEGMented:ALL 1: every segment in one block (3 · 5000 bytes)
KEYSIGHT_DATA_ALL = b"#800015000" + b"".join(s * 1000 for s in KEYSIGHT_SEGMENTS) + b"\n"


def check_frames(frames: Frames, codes: list[list[int]], volts: list[list[float]], dtype: type) -> None:
    assert (len(frames), frames.points, frames.channel, frames.index) == (3, 5000, 1, 0)
    assert frames.codes.dtype == dtype
    assert frames.dt_s == pytest.approx(5e-7, rel=1e-12)
    assert frames.t0_s == pytest.approx(-249.9988e-6, rel=1e-12)
    # to the tenth of a picosecond: stamps carry picoseconds, frames hours apart must keep them
    np.testing.assert_allclose(frames.trigger_s, TRIGGER_S, rtol=0, atol=1e-13)
    np.testing.assert_allclose(frames.trigger_s + frames.t0_s, FIRST_SAMPLE_S, rtol=0, atol=1e-13)
    assert frames.live_s() == pytest.approx(3 * 5000 * 5e-7, rel=1e-12)
    for i in range(3):
        frame = frames.frame(i)
        assert frame.codes is not None
        np.testing.assert_array_equal(frame.codes.reshape(1000, 5), np.tile(codes[i], (1000, 1)))
        np.testing.assert_allclose(frame.volts.reshape(1000, 5), np.tile(volts[i], (1000, 1)), rtol=1e-12,
                                   atol=1e-12)


def check_no_measurement(m: WidthMeasurement, index: int, scope: str) -> None:
    assert (m.count, m.index, m.scope) == (0, index, scope)
    assert math.isnan(m.mean_s) and math.isnan(m.min_s) and math.isnan(m.max_s)


# --- Tektronix MSO: FastFrame --------------------------------------------------------------------
MSO_FASTFRAME_3 = [
    *MSO_SETTINGS,
    ("HORizontal:FASTframe:STATE ON;*ESR?", "0"),
    ("HORizontal:FASTframe:COUNt 3;*ESR?", "0"),
    ("HORizontal:FASTframe:COUNt?", "3"),
    ("DATa:FRAMESTARt 1;*ESR?", "0"),
    ("DATa:FRAMESTOP 3;*ESR?", "0"),
]
MSO_ARMED = [
    ("ACQuire:STATE RUN;*ESR?", "0"),
    ("BUSY?", "1"),
    ("BUSY?", "0"),
]
# HORizontal:FASTframe:TIMEStamp:ALL? for the frames above, in both forms the MSO families send:
# the 4/5/6 series' numbered "DD.MM.YYYY.HH:MM:SS.<12 digits>" (as the sim), the older DPO/TDS quoted
# "DD Mon YYYY HH:MM:SS.ddd ddd ddd ddd"; frame 1 a breath before midnight on New Year's Eve
STAMPS_4_5_6 = (
    "1: 31.12.2025.23:59:59.999950000000,2: 01.01.2026.00:00:00.000050000125,"
    "3: 01.01.2026.00:00:00.000350000250"
)
STAMPS_DPO = (
    '"31 Dec 2025 23:59:59.999 950 000 000","01 Jan 2026 00:00:00.000 050 000 125",'
    '"01 Jan 2026 00:00:00.000 350 000 250"'
)


def test_mso_configure_fastframe() -> None:
    with expected_protocol(TektronixMSO, MSO_FASTFRAME_3) as scope:
        applied = scope.configure(asked(segments=3))
    check_applied(applied, dataclasses.replace(APPLIED, segments=3))


def test_mso_fastframe_count_clamped_by_the_instrument() -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_SETTINGS,
        ("HORizontal:FASTframe:STATE ON;*ESR?", "0"),
        ("HORizontal:FASTframe:COUNt 1000;*ESR?", "0"),
        ("HORizontal:FASTframe:COUNt?", "200"),  # what 5000-point frames leave room for
        ("DATa:FRAMESTARt 1;*ESR?", "0"),
        ("DATa:FRAMESTOP 200;*ESR?", "0"),  # the frames there are, not the frames asked for
    ]) as scope:
        applied = scope.configure(asked(segments=1000))
    assert applied.segments == 200
    assert scope.applied is applied


# the frames' blocks back to back, or separated by ';' as program message units are (which one an
# MSO sends is undocumented; tm_devices splits multi-frame ASCII replies on ';'): both are taken
MSO_CURVE_3_FRAMES_SEPARATED = b";".join(b"#45000" + f * 1000 for f in MSO_FRAMES) + b"\n"


# the 4/5/6 form's punctuation is undocumented: semicolons between stamps, each stamp quoted with
# its frame number, a space between date and time are taken as well
STAMPS_4_5_6_SEMICOLONS = STAMPS_4_5_6.replace(",", ";")
STAMPS_4_5_6_QUOTED = ",".join(f'"{stamp}"' for stamp in STAMPS_4_5_6.split(","))
STAMPS_4_5_6_SPACED = STAMPS_4_5_6.replace("2025.23:", "2025 23:").replace("2026.00:", "2026 00:")


@pytest.mark.parametrize("curve", [MSO_CURVE_3_FRAMES, MSO_CURVE_3_FRAMES_SEPARATED],
                         ids=["back-to-back", "semicolons"])
@pytest.mark.parametrize("stamps", [STAMPS_4_5_6, STAMPS_DPO, STAMPS_4_5_6_SEMICOLONS, STAMPS_4_5_6_QUOTED,
                                    STAMPS_4_5_6_SPACED],
                         ids=["4-5-6-series", "dpo", "semicolons", "quoted", "spaced"])
def test_mso_acquire_frames(stamps: str, curve: bytes) -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_FASTFRAME_3,
        *MSO_ARMED,
        ("WFMOutpre?", MSO_PREAMBLE_CH1),  # NR_PT per frame, XZERO frame 1's
        ("HORizontal:FASTframe:TIMEStamp:ALL?", stamps),
        ("CURVe?", curve),
    ]) as scope:
        scope.configure(asked(segments=3))
        frames = scope.acquire_frames()
    check_frames(frames, MSO_CODES, MSO_VOLTS, np.int8)


@pytest.mark.parametrize(
    ("stamps", "field", "value"),
    [
        # an acquisition stopped after two of three frames: no frame may take another's time
        ("1: 31.12.2025.23:59:59.999950000000,2: 01.01.2026.00:00:00.000050000125", "reply", "2 stamps"),
        ("1: 31.12.2025.23:59:59.999950000000,2: 01.01.2026.00:00,3: 01.01.2026.00:00:00.000350000250",
         "time stamp 2", "2: 01.01.2026.00:00"),
    ],
    ids=["two-of-three", "cut-short"],
)
def test_mso_frames_with_unusable_time_stamps_are_not_transferred(stamps: str, field: str, value: str) -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_FASTFRAME_3,
        *MSO_ARMED,
        ("WFMOutpre?", MSO_PREAMBLE_CH1),
        ("HORizontal:FASTframe:TIMEStamp:ALL?", stamps),  # no CURVe? after it
    ]) as scope:
        scope.configure(asked(segments=3))
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_frames()
    error = caught.value
    assert (error.command, error.field, error.value) == ("HORizontal:FASTframe:TIMEStamp:ALL?", field, value)


def test_mso_frame_blocks_each_terminated_are_rejected_and_flushed() -> None:
    # an LF after every block, not only after the last: the second block's header is not where it should be
    each_terminated = b"".join(b"#45000" + f * 1000 + b"\n" for f in MSO_FRAMES)
    with FakeResource([
        *MSO_FASTFRAME_3,
        *MSO_ARMED,
        ("WFMOutpre?", MSO_PREAMBLE_CH1),
        ("HORizontal:FASTframe:TIMEStamp:ALL?", STAMPS_4_5_6),
        ("CURVe?", each_terminated),
    ]) as fake:
        scope = driver(TektronixMSO, fake)
        scope.configure(asked(segments=3))
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_frames()
        assert fake.clears == 1  # the other frames' bytes are not left to answer the next query
    assert (caught.value.command, caught.value.field, caught.value.value) == ("CURVe?", "block header", "\n")


# --- Keysight InfiniiVision: segmented memory ----------------------------------------------------
KEYSIGHT_SEGMENTED_3 = [
    *KEYSIGHT_SETTINGS,
    (":ACQuire:MODE SEGMented;*ESR?", "+0"),
    (":ACQuire:SEGMented:COUNt 3;*ESR?", "+0"),
    (":ACQuire:SEGMented:COUNt?", "+3"),
    (":WAVeform:SEGMented:ALL 1;*ESR?", "+0"),
]
# a 2000 X: no :WAVeform:SEGMented:ALL
KEYSIGHT_SEGMENTED_3_WITHOUT_ALL = [
    *KEYSIGHT_SETTINGS,
    (":ACQuire:MODE SEGMented;*ESR?", "+0"),
    (":ACQuire:SEGMented:COUNt 3;*ESR?", "+0"),
    (":ACQuire:SEGMented:COUNt?", "+3"),
    (":WAVeform:SEGMented:ALL 1;*ESR?", "+32"),
    (":SYSTem:ERRor?", '-113,"Undefined header"'),
    (":SYSTem:ERRor?", '+0,"No error"'),
]
KEYSIGHT_ARMED = [
    (":SINGle;*ESR?", "+0"),
    (":OPERegister:CONDition?", "+8"),
    (":OPERegister:CONDition?", "+0"),
]


def test_keysight_configure_segmented_count_clamped_by_the_instrument() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_SETTINGS,
        (":ACQuire:MODE SEGMented;*ESR?", "+0"),
        (":ACQuire:SEGMented:COUNt 1000;*ESR?", "+0"),
        (":ACQuire:SEGMented:COUNt?", "+800"),  # what memory holds at 5000 points a segment
        (":WAVeform:SEGMented:ALL 1;*ESR?", "+0"),
    ]) as scope:
        applied = scope.configure(asked(segments=1000))
    check_applied(applied, dataclasses.replace(APPLIED, segments=800))
    assert scope.applied is applied


def test_keysight_acquire_frames_all_segments_at_once() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_SEGMENTED_3,
        *KEYSIGHT_ARMED,
        (":WAVeform:SEGMented:COUNt?", "+3"),
        (":WAVeform:PREamble?", KEYSIGHT_PREAMBLE),  # points per segment
        (":WAVeform:SEGMented:XLISt? TTAG", KEYSIGHT_TTAGS),
        (":WAVeform:DATA?", KEYSIGHT_DATA_ALL),
    ]) as scope:
        scope.configure(asked(segments=3))
        frames = scope.acquire_frames()
    check_frames(frames, KEYSIGHT_CODES, KEYSIGHT_VOLTS, np.uint8)


def test_keysight_acquire_frames_segment_by_segment_where_all_is_refused() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_SEGMENTED_3_WITHOUT_ALL,
        *KEYSIGHT_ARMED,
        (":WAVeform:SEGMented:COUNt?", "+3"),
        (":ACQuire:SEGMented:INDex 1;*ESR?", "+0"),
        (":WAVeform:SEGMented:TTAG?", "+0.000000000E+00"),
        (":WAVeform:PREamble?", KEYSIGHT_PREAMBLE),  # once: every segment has the same points and scale
        (":WAVeform:DATA?", b"#800005000" + KEYSIGHT_SEGMENTS[0] * 1000 + b"\n"),
        (":ACQuire:SEGMented:INDex 2;*ESR?", "+0"),
        (":WAVeform:SEGMented:TTAG?", "+1.000001250E-04"),
        (":WAVeform:DATA?", b"#800005000" + KEYSIGHT_SEGMENTS[1] * 1000 + b"\n"),
        (":ACQuire:SEGMented:INDex 3;*ESR?", "+0"),
        (":WAVeform:SEGMented:TTAG?", "+4.000002500E-04"),
        (":WAVeform:DATA?", b"#800005000" + KEYSIGHT_SEGMENTS[2] * 1000 + b"\n"),
    ]) as scope:
        applied = scope.configure(asked(segments=3))
        assert applied.segments == 3  # the refusal is no failure: the segments are read one by one
        frames = scope.acquire_frames()
    check_frames(frames, KEYSIGHT_CODES, KEYSIGHT_VOLTS, np.uint8)


def test_keysight_time_tags_for_fewer_segments_than_counted_are_refused() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_SEGMENTED_3,
        *KEYSIGHT_ARMED,
        (":WAVeform:SEGMented:COUNt?", "+3"),
        (":WAVeform:PREamble?", KEYSIGHT_PREAMBLE),
        (":WAVeform:SEGMented:XLISt? TTAG", "#800000033+0.000000000E+00,+1.000001250E-04"),  # no DATA? after it
    ]) as scope:
        scope.configure(asked(segments=3))
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_frames()
    error = caught.value
    assert (error.command, error.field, error.value) == (":WAVeform:SEGMented:XLISt? TTAG", "reply", "2 time tags")
    assert "announced 3 segments" in str(error)


def test_keysight_segmented_all_unanswered_is_no_refusal() -> None:
    # a scope that stops answering is not a 2000 X: configure fails rather than read segment by segment
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_SETTINGS,
        (":ACQuire:MODE SEGMented;*ESR?", "+0"),
        (":ACQuire:SEGMented:COUNt 3;*ESR?", "+0"),
        (":ACQuire:SEGMented:COUNt?", "+3"),
        (":WAVeform:SEGMented:ALL 1;*ESR?", TIMEOUT),
    ]) as scope:
        with pytest.raises(ScopeTimeout) as caught:
            scope.configure(asked(segments=3))
        assert scope.applied is None
    assert caught.value.command == ":WAVeform:SEGMented:ALL 1;*ESR?"


# --- Tektronix TDS: no segmented memory ----------------------------------------------------------
def test_tds_has_no_segmented_capture() -> None:
    with expected_protocol(TektronixTDS, TDS_CONFIGURE) as scope:  # nothing FastFrame is sent
        with pytest.raises(ScopeError) as caught:
            scope.configure(asked(segments=3))
        assert scope.applied is None
        with pytest.raises(ScopeError, match="no segmented acquisition"):
            scope.acquire_frames()  # nothing sent either
    assert caught.value.command == "HORizontal:FASTframe:STATE ON"
    assert "no FastFrame" in str(caught.value)


# --- Tektronix TDS: MEASUrement:IMMed ------------------------------------------------------------
TDS_MEASURE = [
    *TDS_CONFIGURE,
    ("MEASUrement:IMMed:TYPe PWIdth;*ESR?", "0"),
    ("MEASUrement:IMMed:SOUrce1 CH1;*ESR?", "0"),
]
TDS_ARMED = MSO_ARMED  # the TDS arms and polls as the MSO does


def test_tds_measurement_then_the_same_record() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_MEASURE,
        *TDS_ARMED,
        ("MEASUrement:IMMed:VALue?", "2.0125E-5"),
        ("WFMPre?", TDS_PREAMBLE_CH1),  # fetch(): the record measured, no new sequence
        ("CURVe?", TDS_BLOCK_CH1),
    ]) as scope:
        applied = scope.configure(asked(measurement=True))
        measured = scope.acquire_measurement()
        record = scope.fetch()
    check_applied(applied, dataclasses.replace(APPLIED, measurement=True))
    assert measured == WidthMeasurement(1, 20.125e-6, 20.125e-6, 20.125e-6, 0, "first")
    assert len(record) == 5000


def test_tds_no_valid_measurement() -> None:
    with expected_protocol(TektronixTDS, [
        *TDS_MEASURE,
        *TDS_ARMED,
        ("MEASUrement:IMMed:VALue?", "9.9E37"),  # no complete pulse in the record
        *TDS_ARMED,
        ("MEASUrement:IMMed:VALue?", "1.010416667E-5"),
    ]) as scope:
        scope.configure(asked(measurement=True))
        none = scope.acquire_measurement()
        after = scope.acquire_measurement()
    check_no_measurement(none, 0, "first")
    assert after == WidthMeasurement(1, 10.10416667e-6, 10.10416667e-6, 10.10416667e-6, 1, "first")


def test_tds_error_during_measurement_is_reported_with_the_query() -> None:
    with FakeResource([
        *TDS_MEASURE,
        *TDS_ARMED,
        ("MEASUrement:IMMed:VALue?", TIMEOUT),  # a query that fails gets no reply
        ("*ESR?", "16"),
        ("ALLEv?", '221,"Settings conflict; MEASUrement:IMMed:VALue?"'),
    ]) as fake:
        scope = driver(TektronixTDS, fake)
        scope.configure(asked(measurement=True))
        with pytest.raises(ScopeTimeout) as caught:
            scope.acquire_measurement()
        assert fake.clears == 1
    error = caught.value
    assert (error.command, error.instrument_text) == (
        "MEASUrement:IMMed:VALue?", '221,"Settings conflict; MEASUrement:IMMed:VALue?"')
    assert "'MEASUrement:IMMed:VALue?' timed out" in str(error) and "Settings conflict" in str(error)


# --- Tektronix MSO: MEAS1 and its statistics -----------------------------------------------------
MSO_MEASURE = [
    *MSO_CONFIGURE,
    ("MEASUrement:LIST?", "NONE"),  # after *RST no measurement exists: MEAS1 is added, then checked
    ('MEASUrement:ADDNew "MEAS1";*ESR?', "0"),
    ("MEASUrement:LIST?", "MEAS1"),
    ("MEASUrement:MEAS1:TYPe PWIDth;*ESR?", "0"),
    ("MEASUrement:MEAS1:SOUrce1 CH1;*ESR?", "0"),
]
MSO_RESULTS = "MEASUrement:MEAS1:RESUlts:CURRentacq:POPUlation?;MEAN?;MINimum?;MAXimum?"


def test_mso_meas1_is_used_as_it_is_when_it_exists_and_refused_when_it_cannot_be_made() -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_CONFIGURE,
        ("MEASUrement:LIST?", "MEAS1,MEAS2"),  # a user's set-up: MEAS1 exists, nothing added
        ("MEASUrement:MEAS1:TYPe PWIDth;*ESR?", "0"),
        ("MEASUrement:MEAS1:SOUrce1 CH1;*ESR?", "0"),
    ]) as scope:
        scope.configure(asked(measurement=True))
    with FakeResource([
        *MSO_CONFIGURE,
        ("MEASUrement:LIST?", "NONE"),
        ('MEASUrement:ADDNew "MEAS1";*ESR?', "0"),
        ("MEASUrement:LIST?", "NONE"),  # the instrument did not make it
    ]) as fake:
        scope = driver(TektronixMSO, fake)
        with pytest.raises(ScopeError, match="MEAS1 is not listed after it was added"):
            scope.configure(asked(measurement=True))


def test_mso_measurement_statistics_in_one_message() -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_MEASURE,
        *MSO_ARMED,
        (MSO_RESULTS, "25;9.17325E-6;1.70625E-6;1.829375E-5"),  # every pulse of the record
    ]) as scope:
        applied = scope.configure(asked(measurement=True))
        measured = scope.acquire_measurement()
    check_applied(applied, dataclasses.replace(APPLIED, measurement=True))
    assert measured == WidthMeasurement(25, 9.17325e-6, 1.70625e-6, 18.29375e-6, 0, "all")


def test_mso_no_valid_measurement() -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_MEASURE,
        *MSO_ARMED,
        (MSO_RESULTS, "0;9.9E37;9.9E37;9.9E37"),  # no pulse measured: a population of 0
        *MSO_ARMED,
        (MSO_RESULTS, "1;2.0125E-5;2.0125E-5;2.0125E-5"),
    ]) as scope:
        scope.configure(asked(measurement=True))
        none = scope.acquire_measurement()
        after = scope.acquire_measurement()
    check_no_measurement(none, 0, "all")
    assert after == WidthMeasurement(1, 20.125e-6, 20.125e-6, 20.125e-6, 1, "all")


def test_mso_error_during_measurement_is_reported_with_the_query() -> None:
    with FakeResource([
        *MSO_MEASURE,
        *MSO_ARMED,
        (MSO_RESULTS, TIMEOUT),
        ("*ESR?", "16"),
        ("ALLEv?", '221,"Settings conflict; MEASUrement:MEAS1:RESUlts:CURRentacq:POPUlation?"'),
    ]) as fake:
        scope = driver(TektronixMSO, fake)
        scope.configure(asked(measurement=True))
        with pytest.raises(ScopeTimeout) as caught:
            scope.acquire_measurement()
        assert fake.clears == 1
    error = caught.value
    assert error.command == MSO_RESULTS
    assert error.instrument_text == '221,"Settings conflict; MEASUrement:MEAS1:RESUlts:CURRentacq:POPUlation?"'
    assert f"{MSO_RESULTS!r} timed out" in str(error) and "Settings conflict" in str(error)


def test_mso_measurement_reply_without_four_numbers() -> None:
    with expected_protocol(TektronixMSO, [
        *MSO_MEASURE,
        *MSO_ARMED,
        (MSO_RESULTS, "25;9.17325E-6;1.70625E-6"),
    ]) as scope:
        scope.configure(asked(measurement=True))
        with pytest.raises(ScopeDataError) as caught:
            scope.acquire_measurement()
    error = caught.value
    assert (error.command, error.field, error.value) == (MSO_RESULTS, "reply", "25;9.17325E-6;1.70625E-6")
    assert "four numbers expected" in str(error)


# --- Keysight InfiniiVision: :MEASure:PWIDth? ----------------------------------------------------
KEYSIGHT_MEASURE = [
    *KEYSIGHT_CONFIGURE,
    (":MEASure:SOURce CHANnel1;*ESR?", "+0"),
]


def test_keysight_measurement() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_MEASURE,
        *KEYSIGHT_ARMED,
        (":MEASure:PWIDth? CHANnel1", "+1.164375000E-05"),
    ]) as scope:
        applied = scope.configure(asked(measurement=True))
        measured = scope.acquire_measurement()
    check_applied(applied, dataclasses.replace(APPLIED, measurement=True))
    assert measured == WidthMeasurement(1, 11.64375e-6, 11.64375e-6, 11.64375e-6, 0, "first")


def test_keysight_no_valid_measurement() -> None:
    with expected_protocol(KeysightInfiniiVision, [
        *KEYSIGHT_MEASURE,
        *KEYSIGHT_ARMED,
        (":MEASure:PWIDth? CHANnel1", "+9.9E+37"),
        *KEYSIGHT_ARMED,
        (":MEASure:PWIDth? CHANnel1", "+2.012500000E-05"),
    ]) as scope:
        scope.configure(asked(measurement=True))
        none = scope.acquire_measurement()
        after = scope.acquire_measurement()
    check_no_measurement(none, 0, "first")
    assert after == WidthMeasurement(1, 20.125e-6, 20.125e-6, 20.125e-6, 1, "first")


def test_keysight_error_during_measurement_is_reported_with_the_query() -> None:
    with FakeResource([
        *KEYSIGHT_MEASURE,
        *KEYSIGHT_ARMED,
        (":MEASure:PWIDth? CHANnel1", TIMEOUT),
        ("*ESR?", "+16"),
        (":SYSTem:ERRor?", '-221,"Settings conflict"'),
        (":SYSTem:ERRor?", '+0,"No error"'),
    ]) as fake:
        scope = driver(KeysightInfiniiVision, fake)
        scope.configure(asked(measurement=True))
        with pytest.raises(ScopeTimeout) as caught:
            scope.acquire_measurement()
        assert fake.clears == 1
    error = caught.value
    assert (error.command, error.instrument_text) == (":MEASure:PWIDth? CHANnel1", '-221,"Settings conflict"')
    assert "':MEASure:PWIDth? CHANnel1' timed out" in str(error) and "Settings conflict" in str(error)
