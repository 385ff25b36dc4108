"""The InfiniiVision driver against the simulated InfiniiVision, over TCP via PyVISA + pyvisa-py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from instruments.keysight_infiniivision import KeysightInfiniiVision, Preamble, fill_holes
from instruments.scope import ScopeError, ScopeTimeout, open_scope
from instruments.sim import PeriodicEdgeSource, SimScopeServer
from tests.scope_helpers import (
    check_mute_timeout,
    check_on_grid,
    check_timing,
    check_widths,
    settings,
    sim_scope,
    split_log,
)

DIALECT = "keysight_infiniivision"  # the conftest fixtures source, server and scope serve this dialect


def test_identify(scope: KeysightInfiniiVision) -> None:
    assert scope.identify().startswith("KEYSIGHT TECHNOLOGIES,DSOX3034T")
    assert scope.query(":SYSTem:ERRor?") == '+0,"No error"'


def test_configure_reads_back_what_the_instrument_applied(scope: KeysightInfiniiVision) -> None:
    applied = scope.configure(settings(record_length=120_000, position_div=-1.5, trigger_position_pct=20.0))
    assert applied.record_length == 200_000  # :WAVeform:POINts rounds up to 1-2.5-5 steps
    assert applied.position_div == pytest.approx(-1.5)
    assert scope.offset_v == pytest.approx(1.5)  # centre screen shows +1.5 V
    assert applied.trigger_position_pct == pytest.approx(20.0)
    assert scope.time_position_s == pytest.approx(0.3 * 10 * 250e-6)
    assert scope.time_reference == "center" and scope.trigger_sweep == "normal"
    assert scope.trigger_slope == "rise" and scope.points_mode == "raw"
    assert scope.data_format == "BYTE" and scope.data_source == "CHAN1"
    assert scope.applied == applied


def test_one_acquisition_is_scaled_with_the_preamble(scope: KeysightInfiniiVision, server: SimScopeServer) -> None:
    applied = scope.configure(settings(record_length=10_000))
    wf = scope.acquire_single()
    check_timing(wf, server.acquisitions[-1], applied)
    # unsigned bytes, 32 per division, 128 at centre screen = the offset (+2 V)
    check_on_grid(wf, 1 / 32, -128 - 2.0 * 32)
    pre = Preamble.parse(scope.query(":WAVeform:PREamble?"))
    assert (pre.format, pre.type, pre.points, pre.y_reference, pre.x_reference) == (0, 0, 10_000, 128, 0)
    assert pre.y_origin == pytest.approx(2.0) and pre.x_origin == pytest.approx(wf.t0_s)


def test_a_scope_left_with_signed_bytes_still_reads_right(scope: KeysightInfiniiVision,
                                                          server: SimScopeServer) -> None:
    """Another program (or a front-panel user) left :WAVeform:UNSigned 0: BYTE data then come
    128 codes lower as signed bytes. configure() sets it (issue 28), so the volts are the same as
    on a fresh scope, and the record length is read back once the scope is stopped."""
    scope.write(":WAVeform:UNSigned 0")
    applied = scope.configure(settings(record_length=10_000))
    assert scope.unsigned is True
    wf = scope.acquire_single()
    check_timing(wf, server.acquisitions[-1], applied)  # levels 0 V and 3.3 V, as the probe sees them
    log = server.commands
    configure = log[log.index(":WAVeform:UNSigned 0;*ESR?") + 1:]
    assert configure.index(":STOP;*ESR?") < configure.index(":WAVeform:POINts?")


def test_preamble_and_holes_without_a_scope() -> None:
    pre = Preamble.parse("+0,+0,+1000,+1,+1.0E-09,-5.0E-07,+10,+4.0E-02,+1.0E+00,+128")
    assert pre.times_origin() == pytest.approx(-5.1e-7)  # t = (i − xref)·xinc + xorig at i = 0
    codes = np.array([0, 0, 5, 0, 7, 0xFF, 0], dtype=np.uint8)
    np.testing.assert_array_equal(fill_holes(codes), [5, 5, 5, 5, 7, 0xFF, 0xFF])


@given(st.integers(1, 6), st.integers(1, 9), st.data())
def test_segments_are_filled_each_on_its_own(segments: int, points: int, data: st.DataObject) -> None:
    # the two segmented transfers (all segments in one block, or one block a segment) must give
    # the same codes: a hole at a segment's start never takes the previous segment's last sample
    codes = np.array(data.draw(st.lists(st.sampled_from([0, 0, 3, 9, 0xFF]), min_size=segments * points,
                                        max_size=segments * points)), dtype=np.uint8).reshape(segments, points)
    together = fill_holes(codes)
    assert together.shape == codes.shape
    for row, alone in zip(together, codes, strict=True):
        np.testing.assert_array_equal(row, fill_holes(alone.copy()))
        valid = alone[alone != 0]
        if len(valid):
            assert row[0] == valid[0] and not (row == 0).any()


# the coarse record's sample interval (240 ns) is no divisor of the 100 µs period, so the
# sub-sample phase of the edges varies within a record and the bias check averages over it
@pytest.mark.parametrize(("record_length", "time_per_div"), [(100_000, 250e-6), (10_000, 240e-6)])
def test_extracted_widths_equal_the_injected_ones(
    scope: KeysightInfiniiVision,
    server: SimScopeServer,
    source: PeriodicEdgeSource,
    record_length: int,
    time_per_div: float,
) -> None:
    applied = scope.configure(settings(record_length=record_length, time_per_div=time_per_div))
    check_widths(scope, server, source, applied)


def test_command_sequence(scope: KeysightInfiniiVision, server: SimScopeServer) -> None:
    server.clear_log()
    scope.configure(settings(record_length=5000, time_per_div=50e-6))
    scope.acquire_single()
    checked = [
        ":CHANnel1:DISPlay 1",
        ":CHANnel1:SCALe 1",
        ":CHANnel1:OFFSet 2",
        ":TIMebase:SCALe 5e-05",
        ":TIMebase:REFerence CENTer",
        ":TIMebase:POSition 0.0002",
        ":TRIGger:MODE EDGE",
        ":TRIGger:EDGE:SOURce CHANnel1",
        ":TRIGger:EDGE:SLOPe POSitive",
        ":TRIGger:EDGE:LEVel 1.65",
        ":TRIGger:SWEep NORMal",
        ":ACQuire:TYPE NORMal",
        ":WAVeform:SOURce CHANnel1",
        ":WAVeform:FORMat BYTE",
        ":WAVeform:UNSigned 1",
        ":WAVeform:POINts:MODE RAW",
        ":WAVeform:POINts 5000",
        ":STOP",
    ]
    readback = [
        ":CHANnel1:SCALe?",
        ":TIMebase:SCALe?",
        ":CHANnel1:OFFSet?",
        ":WAVeform:POINts?",
        ":TIMebase:POSition?",
        ":TRIGger:EDGE:LEVel?",
    ]
    acquire = split_log(server.commands, [f"{c};*ESR?" for c in checked] + readback + [":ACQuire:MODE RTIMe;*ESR?"])
    assert acquire[0] == ":SINGle;*ESR?"
    polls = acquire[1:-2]
    assert polls and set(polls) == {":OPERegister:CONDition?"}
    assert acquire[-2:] == [":WAVeform:PREamble?", ":WAVeform:DATA?"]


def test_undefined_command_names_itself_and_the_instrument_text(scope: KeysightInfiniiVision) -> None:
    with pytest.raises(ScopeError) as caught:
        scope.write(":FOO:BAR 1")
    err = caught.value
    assert err.command == ":FOO:BAR 1"
    assert err.instrument_text == '-113,"Undefined header"'
    message = str(err)
    assert ":FOO:BAR 1" in message and "Undefined header" in message and "\n" not in message
    scope.check_errors()  # the queue was read: nothing left


def test_value_the_instrument_refuses(scope: KeysightInfiniiVision) -> None:
    with pytest.raises(ScopeError) as caught:
        scope.configure(settings(time_per_div=100.0))
    assert caught.value.command == ":TIMebase:SCALe 100"
    assert caught.value.instrument_text == '-222,"Data out of range"'


def test_unknown_query_times_out_with_the_reason(server: SimScopeServer) -> None:
    with open_scope(server.resource, dialect=DIALECT, timeout_s=0.5) as scope:
        with pytest.raises(ScopeTimeout) as caught:
            scope.query(":FOO:BAR?")
        assert caught.value.command == ":FOO:BAR?"
        assert caught.value.instrument_text == '-113,"Undefined header"'
        assert scope.identify().startswith("KEYSIGHT")


def test_no_trigger_is_a_clear_timeout_and_the_scope_is_stopped(scope: KeysightInfiniiVision) -> None:
    scope.configure(settings(trigger_level_v=5.0, acquire_timeout_s=0.3, record_length=1000))
    with pytest.raises(ScopeTimeout) as caught:
        scope.acquire_single()
    assert caught.value.command == ":SINGle"
    assert "trigger" in str(caught.value)
    assert scope.busy() is False


def test_mute_instrument_gives_a_timeout_naming_the_resource() -> None:
    check_mute_timeout(DIALECT)


def test_a_tektronix_is_not_taken_for_a_keysight() -> None:
    with sim_scope(PeriodicEdgeSource(), "tektronix_mso") as sim, pytest.raises(ScopeError) as caught:
        open_scope(sim.resource, dialect=DIALECT, timeout_s=1.0)
    assert "TEKTRONIX" in str(caught.value) and "dialect" in str(caught.value)
