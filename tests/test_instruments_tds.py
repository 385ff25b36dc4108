"""The TDS driver against the simulated TDS, over a real TCP socket via PyVISA + pyvisa-py.

Ground truth comes from the edge source (what was injected) and from the sim's
acquisition log (where each record's trigger and samples fell on the source's
clock), never from constants.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

from instruments.pulses import extract_pulses
from instruments.scope import ScopeError, ScopeSettings, ScopeTimeout, open_scope
from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from instruments.tektronix_tds import Preamble, TektronixTDS
from tests.scope_helpers import (
    check_mute_timeout,
    check_on_grid,
    check_timing,
    check_widths,
    settings,
    split_log,
)

DIALECT = "tektronix_tds"  # the conftest fixtures source, server and scope serve this dialect


def test_identify_and_replies_without_headers(scope: TektronixTDS) -> None:
    assert scope.identify().startswith("TEKTRONIX,TDS 460A")
    assert scope.query("HEADer?") == "0"
    assert float(scope.query("CH1:SCAle?")) == pytest.approx(0.1)  # bare value, *RST default


def test_configure_reads_back_what_the_instrument_applied(scope: TektronixTDS) -> None:
    asked = settings(time_per_div=300e-6, record_length=100_000, position_div=-1.5)
    applied = scope.configure(asked)
    # a TDS has 1-2.5-5 time bases and a fixed set of record lengths
    assert applied.time_per_div == pytest.approx(250e-6)
    assert applied.record_length == 120_000
    assert applied.position_div == pytest.approx(-1.5)
    assert applied.volts_per_div == pytest.approx(1.0)
    assert scope.applied == applied
    assert applied.sample_interval_s == pytest.approx(2.5e-3 / 120_000)
    assert scope.data_stop == 120_000 and scope.stop_after == "sequence"
    assert scope.trigger_slope == "rise" and scope.trigger_mode == "normal"


def test_one_acquisition_is_scaled_with_the_preamble(scope: TektronixTDS, server: SimScopeServer) -> None:
    applied = scope.configure(settings(record_length=15_000))
    wf = scope.acquire_single()
    check_timing(wf, server.acquisitions[-1], applied)
    # 8-bit codes at 25 per division: volts sit on a 40 mV grid offset by the position
    check_on_grid(wf, 0.04, -2.0 * 25)


def test_preamble_without_xzero_from_older_firmware() -> None:
    reply = '1;8;BIN;RI;MSB;"Ch1, DC coupling, 1.0V/div";500;Y;"s";1.0E-5;249;"Volts";4.0E-2;0.0E0;0.0E0'
    pre = Preamble.parse(reply)
    assert (pre.points, pre.pt_off, pre.x_zero, pre.y_mult) == (500, 249, 0.0, 0.04)
    assert pre.wfid == "Ch1, DC coupling, 1.0V/div"


@pytest.mark.parametrize("record_length", [120_000, 15_000])
def test_extracted_widths_equal_the_injected_ones(
    scope: TektronixTDS, server: SimScopeServer, source: PeriodicEdgeSource, record_length: int
) -> None:
    check_widths(scope, server, source, scope.configure(settings(record_length=record_length)))


def test_pulses_cut_by_the_record_ends_are_dropped() -> None:
    # 60 µs pulses every 100 µs; a 250 µs record triggered at 18 % spans [-45, 205) µs:
    # it opens inside the pulse [-100, -40] and closes inside [200, 260]
    src = PeriodicEdgeSource(period_s=100e-6, width_s=60e-6)
    with run_in_thread(SimScopeServer(src, seed=1)) as sim, open_scope(sim.resource) as scope:
        scope.configure(settings(time_per_div=25e-6, record_length=5000, trigger_position_pct=18.0))
        wf = scope.acquire_single()
    assert wf.volts[:10].min() > 3.0 and wf.volts[-10:].min() > 3.0
    p = extract_pulses(wf)
    np.testing.assert_allclose(p.width_s, [60e-6, 60e-6], atol=wf.dt_s)
    np.testing.assert_allclose(p.start_s, [0.0, 100e-6], atol=wf.dt_s)


def test_command_sequence(scope: TektronixTDS, server: SimScopeServer) -> None:
    server.clear_log()
    scope.configure(settings(record_length=5000, time_per_div=50e-6))
    scope.acquire_single()
    log = server.commands
    checked = [
        "HEADer OFF",
        "SELect:CH1 ON",
        "CH1:SCAle 1",
        "CH1:POSition -2",
        "HORizontal:RECOrdlength 5000",
        "HORizontal:MAIn:SCAle 5e-05",
        "HORizontal:TRIGger:POSition 10",
        "TRIGger:MAIn:EDGE:SOUrce CH1",
        "TRIGger:MAIn:EDGE:SLOpe RISe",
        "TRIGger:MAIn:LEVel 1.65",
        "TRIGger:MAIn:MODe NORMal",
        "ACQuire:MODe SAMple",
        "ACQuire:STOPAfter SEQuence",
        "DATa:SOUrce CH1",
        "DATa:ENCdg RIBinary",
        "DATa:WIDth 1",
        "DATa:STARt 1",
    ]
    readback = [
        "CH1:SCAle?",
        "CH1:POSition?",
        "HORizontal:MAIn:SCAle?",
        "HORizontal:RECOrdlength?",
        "HORizontal:TRIGger:POSition?",
        "TRIGger:MAIn:LEVel?",
    ]
    configure = [f"{c};*ESR?" for c in checked] + readback + ["DATa:STOP 5000;*ESR?"]
    acquire = split_log(log, configure)
    assert acquire[0] == "ACQuire:STATE RUN;*ESR?"
    polls = acquire[1:-2]
    assert polls and set(polls) == {"BUSY?"}
    assert acquire[-2:] == ["WFMPre?", "CURVe?"]


def test_undefined_command_names_itself_and_the_instrument_text(scope: TektronixTDS) -> None:
    with pytest.raises(ScopeError) as caught:
        scope.write("FOO:BAR 1")
    err = caught.value
    assert err.command == "FOO:BAR 1"
    assert err.instrument_text == '113,"Undefined header; Command not found; FOO:BAR 1"'
    message = str(err)
    assert "FOO:BAR 1" in message and "Undefined header" in message and "\n" not in message
    scope.check_errors()  # the queue was read: nothing left


def test_value_the_instrument_refuses(scope: TektronixTDS) -> None:
    with pytest.raises(ScopeError) as caught:
        scope.configure(settings(record_length=1_000_000))
    assert caught.value.command == "HORizontal:RECOrdlength 1000000"
    assert caught.value.instrument_text.startswith('222,"Data out of range')


def test_check_errors_reports_the_last_command(scope: TektronixTDS) -> None:
    scope.write("CH1:BANDWIDTH TWENTY", check=False)
    with pytest.raises(ScopeError) as caught:
        scope.check_errors()
    assert caught.value.command == "CH1:BANDWIDTH TWENTY"
    assert "113" in caught.value.instrument_text


def test_unknown_query_times_out_with_the_reason(server: SimScopeServer) -> None:
    with open_scope(server.resource, timeout_s=0.5) as scope:
        with pytest.raises(ScopeTimeout) as caught:
            scope.query("FOO:BAR?")
        assert caught.value.command == "FOO:BAR?"
        assert "Undefined header" in caught.value.instrument_text
        # the session is usable afterwards
        assert scope.identify().startswith("TEKTRONIX")


def test_no_trigger_is_a_clear_timeout_and_the_scope_is_stopped(
    scope: TektronixTDS,
) -> None:
    scope.configure(settings(trigger_level_v=5.0, acquire_timeout_s=0.3))  # above the swing
    with pytest.raises(ScopeTimeout) as caught:
        scope.acquire_single()
    assert caught.value.command == "ACQuire:STATE RUN"
    assert "trigger" in str(caught.value) and "CH1" in str(caught.value)
    assert scope.busy() is False


def test_settings_are_validated_before_the_wire(scope: TektronixTDS) -> None:
    with pytest.raises(ValueError):
        ScopeSettings(
            volts_per_div=1, position_div=0, time_per_div=1e-3, record_length=500, trigger_level_v=1, trigger_slope="up"
        )  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        scope.volts_per_div = 100.0


def test_mute_instrument_gives_a_timeout_naming_the_resource() -> None:
    check_mute_timeout("tektronix_tds")


def test_refused_connection_gives_a_clear_error() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nobody listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    resource = f"TCPIP::127.0.0.1::{port}::SOCKET"
    with pytest.raises(ScopeError) as caught:
        open_scope(resource, timeout_s=0.5)
    message = str(caught.value).lower()
    assert resource.lower() in message and "refused" in message and "check" in message
    assert "traceback" not in message


def test_bad_resource_string_and_unknown_dialect() -> None:
    with pytest.raises(ScopeError) as caught:
        open_scope("NOT-A-RESOURCE", timeout_s=0.5)
    assert "NOT-A-RESOURCE" in str(caught.value)
    with pytest.raises(ValueError, match="tektronix_tds"):
        open_scope("TCPIP::127.0.0.1::1::SOCKET", dialect="rigol")


def test_wrong_instrument_for_the_dialect() -> None:
    sim = SimScopeServer(PeriodicEdgeSource(), idn="KEYSIGHT TECHNOLOGIES,DSOX1102G,X,1.0")
    with run_in_thread(sim), pytest.raises(ScopeError) as caught:
        open_scope(sim.resource, timeout_s=1.0)
    assert "KEYSIGHT" in str(caught.value) and "dialect" in str(caught.value)
