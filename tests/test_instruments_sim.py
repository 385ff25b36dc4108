"""The simulated TDS at the SCPI level: raw PyVISA + pyvisa-py sessions over TCP, no driver."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import pyvisa

from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from instruments.sim.signal import LogicSignal, digitize
from instruments.sim.tds import round_time_per_div


@pytest.fixture(scope="module")
def server() -> Iterator[SimScopeServer]:
    sim = SimScopeServer(PeriodicEdgeSource(seed=5), seed=11)
    with run_in_thread(sim):
        yield sim


@pytest.fixture(scope="module")
def rm() -> pyvisa.ResourceManager:
    return pyvisa.ResourceManager("@py")


@pytest.fixture
def tds(server: SimScopeServer, rm: pyvisa.ResourceManager) -> Iterator[object]:
    res = rm.open_resource(server.resource, read_termination="\n", write_termination="\n", timeout=2000)
    res.write("*RST;*CLS;HEADer OFF")
    yield res
    res.close()


def arm_and_wait(tds) -> None:  # noqa: ANN001 - a pyvisa resource
    tds.write("SELect:CH1 ON;:CH1:SCAle 1;:CH1:POSition -2;:HORizontal:RECOrdlength 5000")
    tds.write("HORizontal:MAIn:SCAle 50e-6;:TRIGger:MAIn:LEVel 1.65;:TRIGger:MAIn:MODe NORMal")
    tds.write("ACQuire:STOPAfter SEQuence;:ACQuire:STATE RUN")
    assert tds.query("*OPC?") == "1"


def test_short_long_and_any_case_forms(tds) -> None:  # noqa: ANN001
    tds.write("hor:reco 2000")
    assert tds.query("HORIZONTAL:RECORDLENGTH?") == "2500"  # rounded up to a TDS length
    tds.write("HORizontal:MAIn:SCAle 3e-4")
    assert float(tds.query("hor:main:sca?")) == pytest.approx(2.5e-4)
    tds.write("TRIGger:MAIn:MODe NORMal;LEVel 1.2")  # after ';' a header is relative
    assert float(tds.query("TRIG:MAI:LEV?")) == pytest.approx(1.2)
    assert tds.query("*ESR?") == "0"


def test_headers_on_and_verbose_off(tds) -> None:  # noqa: ANN001
    tds.write("HEADer ON")
    assert tds.query("CH1:SCA?") == ":CH1:SCALE 1.0E-1"
    tds.write("VERBose OFF")
    assert tds.query("CH1:SCA?") == ":CH1:SCA 1.0E-1"
    assert tds.query("*ESR?") == "0"  # common commands never carry a header
    tds.write("VERBose ON;:HEADer OFF")
    assert tds.query("CH1:SCAle?") == "1.0E-1"


def test_errors_set_esr_and_queue_tds_events(tds) -> None:  # noqa: ANN001
    tds.write("FOO:BAR")
    tds.write("CH1:SCAle 1000")
    # as on a TDS, events are readable once *ESR? has been read
    assert tds.query("ALLEv?") == '1,"No events to report - new events pending *ESR?"'
    assert int(tds.query("*ESR?")) == 32 | 16
    assert tds.query("ALLEv?") == (
        '113,"Undefined header; Command not found; FOO:BAR",222,"Data out of range; CH1:SCAle 1000"'
    )
    assert tds.query("ALLEv?") == '0,"No events to report - queue empty"'
    assert float(tds.query("CH1:SCAle?")) == pytest.approx(0.1)  # unchanged


def test_unknown_query_gets_no_reply(tds, server: SimScopeServer) -> None:  # noqa: ANN001
    tds.timeout = 200
    with pytest.raises(pyvisa.errors.VisaIOError) as caught:
        tds.query("FOO:BAR?")
    assert caught.value.error_code == pyvisa.constants.StatusCode.error_timeout
    tds.timeout = 2000
    assert int(tds.query("*ESR?")) == 32
    assert "FOO:BAR?" in server.commands


def test_bad_arguments(tds) -> None:  # noqa: ANN001
    tds.write("TRIGger:MAIn:EDGE:SLOpe SIDEWAYS")
    tds.write("CH1:POSition")
    tds.write("HORizontal:RECOrdlength 200000")
    assert int(tds.query("*ESR?")) == 32 | 16
    events = tds.query("ALLEv?")
    assert events.startswith('141,"Invalid character data; TRIGger:MAIn:EDGE:SLOpe SIDEWAYS"')
    assert '109,"Missing parameter; CH1:POSition"' in events
    assert '222,"Data out of range; HORizontal:RECOrdlength 200000"' in events


def test_single_sequence_busy_then_done(tds, server: SimScopeServer) -> None:  # noqa: ANN001
    before = len(server.acquisitions)
    arm_and_wait(tds)
    assert tds.query("BUSY?") == "0"
    assert tds.query("TRIGger:STATE?") == "SAVE"
    assert tds.query("ACQuire:NUMACq?") == "1"
    assert len(server.acquisitions) == before + 1
    info = server.acquisitions[-1]
    assert info.record_length == 5000 and info.pt_off == 2500  # *RST put the trigger at 50 %
    # the trigger falls between samples pt_off - 1 and pt_off
    offset = info.trigger_ns - info.first_sample_ns
    assert (info.pt_off - 1) * info.dt_ns < offset <= info.pt_off * info.dt_ns


def test_without_a_trigger_the_scope_waits_like_a_real_one(tds) -> None:  # noqa: ANN001
    tds.write("TRIGger:MAIn:MODe NORMal;LEVel 5.0")  # above the 3.3 V swing
    tds.write("ACQuire:STOPAfter SEQuence;STATE RUN")
    for _ in range(5):
        assert tds.query("BUSY?") == "1"
    assert tds.query("TRIGger:STATE?") == "READY"
    tds.write("ACQuire:STATE STOP")
    assert tds.query("BUSY?") == "0"


def test_auto_trigger_mode_fires_without_an_edge(tds) -> None:  # noqa: ANN001
    tds.write("TRIGger:MAIn:MODe AUTO;LEVel 5.0;:HORizontal:RECOrdlength 500")
    tds.write("ACQuire:STOPAfter SEQuence;STATE RUN")
    assert tds.query("*OPC?") == "1"


def test_transfer_encodings_agree(tds) -> None:  # noqa: ANN001
    arm_and_wait(tds)
    tds.write("DATa:SOUrce CH1;ENCdg RIBinary;WIDth 1;STARt 1;STOP 5000")
    ri = tds.query_binary_values("CURVe?", datatype="b", is_big_endian=True, container=np.array, data_points=5000)
    tds.write("DATa:ENCdg RPBinary;WIDth 2")
    rp = tds.query_binary_values("CURVe?", datatype="H", is_big_endian=True, container=np.array, data_points=5000)
    assert float(tds.query("WFMPre:YOFf?")) == pytest.approx((-2 * 25 + 128) * 256)
    tds.write("DATa:ENCdg ASCIi")
    ascii_codes = np.array([int(x) for x in tds.query("CURVe?").split(",")])
    assert len(ri) == 5000 and ri.min() < 0 < ri.max()
    np.testing.assert_array_equal(rp.astype(np.int32) // 256 - 128, ri)
    np.testing.assert_array_equal(ascii_codes, ri)


def test_partial_transfer_shifts_pt_off(tds) -> None:  # noqa: ANN001
    arm_and_wait(tds)
    tds.write("DATa:SOUrce CH1;ENCdg RIBinary;WIDth 1;STARt 101;STOP 600")
    assert tds.query("WFMPre:NR_Pt?") == "500"
    assert tds.query("WFMPre:CH1:PT_Off?") == "2400"  # trigger at 50 % of 5000, minus 100
    fields = tds.query("WFMPre?").split(";")
    assert len(fields) == 16 and fields[:5] == ["1", "8", "BIN", "RI", "MSB"]
    block = tds.query_binary_values("CURVe?", datatype="b", is_big_endian=True, container=np.array, data_points=500)
    assert len(block) == 500


def test_waveform_of_a_channel_that_is_off_is_refused(tds) -> None:  # noqa: ANN001
    arm_and_wait(tds)
    tds.timeout = 200
    with pytest.raises(pyvisa.errors.VisaIOError):
        tds.query("WFMPre:CH2?")
    tds.timeout = 2000
    assert int(tds.query("*ESR?")) == 16
    assert "waveform requested is not on" in tds.query("ALLEv?")


def test_mute_server_logs_but_never_answers(rm: pyvisa.ResourceManager) -> None:
    sim = SimScopeServer(PeriodicEdgeSource(), mute=True)
    with run_in_thread(sim):
        res = rm.open_resource(sim.resource, read_termination="\n", write_termination="\n", timeout=200)
        with pytest.raises(pyvisa.errors.VisaIOError):
            res.query("*IDN?")
        res.close()
    assert sim.commands == ["*IDN?"]


# --- the signal model, without the socket -------------------------------------------------
def test_digitizer_clips_and_has_25_levels_per_division() -> None:
    codes = digitize(np.array([-100.0, 0.0, 0.04, 0.5, 100.0]), 0.1, 1.0)
    np.testing.assert_array_equal(codes, [-128, 25, 35, 127, 127])


def test_rendered_edges_cross_mid_level_at_the_edge_time() -> None:
    sig = LogicSignal(levels=(0.0, 3.3), rise_time_s=16e-9, noise_v=0.0)
    pulses = np.array([[100.0, 300.0]])
    v = sig.render(pulses, 0.0, 0.5, 1000, np.random.default_rng(0))
    assert v[200] == pytest.approx(1.65) and v[600] == pytest.approx(1.65)  # 50 % points
    assert v[0] == 0.0 and v[400] == pytest.approx(3.3)
    # 10-90 % in 16 ns: the ramp runs 20 ns in full
    assert v[200 - 20] == pytest.approx(0.0) and v[200 + 20] == pytest.approx(3.3)
    assert v[200 + 10] == pytest.approx(1.65 + 3.3 / 4)


def test_time_base_steps() -> None:
    assert round_time_per_div(3e-4) == pytest.approx(2.5e-4)
    assert round_time_per_div(4e-4) == pytest.approx(5e-4)
    assert round_time_per_div(1.1e-6) == pytest.approx(1e-6)
