"""The MSO 4/5/6 driver against the simulated MSO, over TCP via PyVISA + pyvisa-py."""

from __future__ import annotations

import numpy as np
import pytest

from instruments.scope import ScopeError, ScopeTimeout, open_scope
from instruments.sim import PeriodicEdgeSource, SimScopeServer
from instruments.tektronix_mso import OutputPreamble, TektronixMSO
from tests.scope_helpers import (
    check_mute_timeout,
    check_on_grid,
    check_timing,
    check_widths,
    settings,
    sim_scope,
    split_log,
)

DIALECT = "tektronix_mso"  # the conftest fixtures source, server and scope serve this dialect


def test_identify_and_replies_without_headers(scope: TektronixMSO) -> None:
    assert scope.identify().startswith("TEKTRONIX,MSO54")
    assert scope.query("HEADer?") == "0"
    assert float(scope.query("CH1:OFFSet?")) == 0.0


def test_configure_reads_back_what_the_instrument_applied(scope: TektronixMSO) -> None:
    applied = scope.configure(settings(record_length=120_000, position_div=-1.5, trigger_position_pct=20.0))
    assert applied.record_length == 125_000  # rounded up to the MSO's 1-1.25-2-2.5-5 lengths
    assert applied.position_div == pytest.approx(-1.5) and applied.trigger_position_pct == pytest.approx(20.0)
    assert applied.time_per_div == pytest.approx(250e-6)
    assert scope.horizontal_mode == "manual" and scope.trigger_mode == "normal"
    assert scope.data_stop == 125_000 and scope.data_encoding.upper().startswith("SRI")
    assert scope.trigger_level_v == pytest.approx(1.65) and scope.displayed is True
    assert scope.applied == applied


def test_one_acquisition_is_scaled_with_the_preamble(scope: TektronixMSO, server: SimScopeServer) -> None:
    applied = scope.configure(settings(record_length=10_000))
    wf = scope.acquire_single()
    info = server.acquisitions[-1]
    check_timing(wf, info, applied)
    check_on_grid(wf, 0.04, -2.0 * 25)
    pre = OutputPreamble.parse(scope.query("WFMOutpre?"))
    # YOFf 0, YZEro carries the position; PT_Off 0 and XZEro the first sample's time
    assert (pre.y_off, pre.pt_off, pre.byte_or, pre.bn_fmt) == (0.0, 0, "LSB", "RI")
    assert pre.y_zero == pytest.approx(2.0)
    assert pre.x_zero * 1e9 == pytest.approx(info.first_sample_ns - info.trigger_ns, abs=1e-3)
    scope.acquire_single()
    assert OutputPreamble.parse(scope.query("WFMOutpre?")).x_zero != pre.x_zero  # per acquisition


def test_preamble_by_header_names() -> None:
    reply = (
        ':WFMOUTPRE:BYT_NR 1;BIT_NR 8;ENCDG BINARY;BN_FMT RI;BYT_OR LSB;WFID "Ch1, DC coupling";'
        'NR_PT 1000;PT_FMT Y;PT_ORDER LINEAR;XUNIT "s";XINCR 4.0E-9;XZERO -2.0E-6;PT_OFF 0;'
        'YUNIT "V";YMULT 4.0E-3;YOFF 0.0E+0;YZERO 1.5E-1;DOMAIN TIME;WFMTYPE ANALOG'
    )
    pre = OutputPreamble.parse(reply)
    assert (pre.points, pre.x_zero, pre.y_mult, pre.y_zero, pre.encoding) == (1000, -2e-6, 4e-3, 0.15, "BIN")
    assert pre.wfid == "Ch1, DC coupling"


# the coarse record's sample interval (240 ns) is no divisor of the 100 µs period, so the
# sub-sample phase of the edges varies within a record and the bias check averages over it
@pytest.mark.parametrize(("record_length", "time_per_div"), [(100_000, 250e-6), (10_000, 240e-6)])
def test_extracted_widths_equal_the_injected_ones(
    scope: TektronixMSO, server: SimScopeServer, source: PeriodicEdgeSource, record_length: int, time_per_div: float
) -> None:
    applied = scope.configure(settings(record_length=record_length, time_per_div=time_per_div))
    check_widths(scope, server, source, applied)


def test_command_sequence(scope: TektronixMSO, server: SimScopeServer) -> None:
    server.clear_log()
    scope.configure(settings(record_length=5000, time_per_div=50e-6))
    scope.acquire_single()
    checked = [
        "HEADer OFF",
        "DISplay:GLObal:CH1:STATE ON",
        "CH1:SCAle 1",
        "CH1:POSition -2",
        "CH1:OFFSet 0",
        "HORizontal:MODe MANual",
        "HORizontal:DELay:MODe OFF",
        "HORizontal:RECOrdlength 5000",
        "HORizontal:SCAle 5e-05",
        "HORizontal:POSition 10",
        "TRIGger:A:EDGE:SOUrce CH1",
        "TRIGger:A:EDGE:SLOpe RISe",
        "TRIGger:A:LEVel:CH1 1.65",
        "TRIGger:A:MODe NORMal",
        "ACQuire:MODe SAMple",
        "ACQuire:STOPAfter SEQuence",
        "DATa:SOUrce CH1",
        "DATa:ENCdg SRIbinary",
        "DATa:WIDth 1",
        "DATa:STARt 1",
    ]
    readback = [
        "CH1:SCAle?",
        "CH1:POSition?",
        "HORizontal:SCAle?",
        "HORizontal:RECOrdlength?",
        "HORizontal:POSition?",
        "TRIGger:A:LEVel:CH1?",
    ]
    configure = [f"{c};*ESR?" for c in checked] + readback + ["DATa:STOP 5000;*ESR?",
                                                              "HORizontal:FASTframe:STATE OFF;*ESR?"]
    acquire = split_log(server.commands, configure)
    assert acquire[0] == "ACQuire:STATE RUN;*ESR?"
    polls = acquire[1:-2]
    assert polls and set(polls) == {"BUSY?"}
    assert acquire[-2:] == ["WFMOutpre?", "CURVe?"]


def test_undefined_command_names_itself_and_the_instrument_text(scope: TektronixMSO) -> None:
    with pytest.raises(ScopeError) as caught:
        scope.write("FOO:BAR 1")
    err = caught.value
    assert err.command == "FOO:BAR 1"
    assert err.instrument_text == '113,"Undefined header; Command not found; FOO:BAR 1"'
    assert "FOO:BAR 1" in str(err) and "Undefined header" in str(err)
    scope.check_errors()


def test_tds_only_commands_are_undefined_on_an_mso(scope: TektronixMSO) -> None:
    with pytest.raises(ScopeError) as caught:
        scope.write("TRIGger:MAIn:LEVel 1")
    assert caught.value.instrument_text.startswith('113,"Undefined header')


def test_unknown_query_times_out_with_the_reason(server: SimScopeServer) -> None:
    with open_scope(server.resource, dialect=DIALECT, timeout_s=0.5) as scope:
        with pytest.raises(ScopeTimeout) as caught:
            scope.query("FOO:BAR?")
        assert "Undefined header" in caught.value.instrument_text
        assert scope.identify().startswith("TEKTRONIX,MSO")


def test_no_trigger_is_a_clear_timeout_and_the_scope_is_stopped(scope: TektronixMSO) -> None:
    scope.configure(settings(trigger_level_v=5.0, acquire_timeout_s=0.3, record_length=1000))
    with pytest.raises(ScopeTimeout) as caught:
        scope.acquire_single()
    assert caught.value.command == "ACQuire:STATE RUN"
    assert scope.busy() is False


def test_mute_instrument_gives_a_timeout_naming_the_resource() -> None:
    check_mute_timeout(DIALECT)


def test_a_tds_is_not_taken_for_an_mso() -> None:
    with sim_scope(PeriodicEdgeSource(), "tektronix_tds") as sim, pytest.raises(ScopeError) as caught:
        open_scope(sim.resource, dialect=DIALECT, timeout_s=1.0)
    assert "TDS 460A" in str(caught.value) and "dialect" in str(caught.value)


@pytest.mark.parametrize("idn, accepted", [
    ("TEKTRONIX,MSO54,C000001,CF:91.1CT FV:1.44.3.433", True),
    ("TEKTRONIX,MSO64B,B010101,CF:91.1CT FV:2.0.3.950", True),
    ("TEKTRONIX,MSO44,Q000002,CF:91.1CT FV:1.38.3", True),
    ("TEKTRONIX,MSO4104,C010101,CF:91.1CT FV:v3.18", False),  # the older 4000 series: another tree
    ("TEKTRONIX,MSO5204B,C012345,CF:91.1CT FV:10.8.3", False),
    ("TEKTRONIX,DPO5054,C000001,CF:91.1CT FV:10.0.0", False),
])
def test_the_older_mso_series_is_refused_by_name(idn, accepted) -> None:
    """MSO[456] also matched the MSO4000/5000 series, which speak another command tree: the dialect
    takes the 4/5/6 Series and refuses the older ones by name, before sending anything else."""
    from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread

    sim = SimScopeServer(PeriodicEdgeSource(seed=3), dialect="tektronix_mso", idn=idn)
    with run_in_thread(sim):
        if accepted:
            with open_scope(sim.resource, dialect="tektronix_mso", timeout_s=2.0) as s:
                assert s.identify() == idn
        else:
            with pytest.raises(ScopeError, match="2000-5000 series|expects an instrument matching") as caught:
                open_scope(sim.resource, dialect="tektronix_mso", timeout_s=2.0)
            assert idn.split(",")[1] in str(caught.value)
            assert [c for c in sim.commands if c.strip()] == ["*IDN?"], sim.commands


@pytest.mark.parametrize(("separator", "stamp_form"), [(b"", "numbered"), (b";", "numbered-semicolons"),
                                                     (b"", "numbered-quoted"), (b";", "dpo")],
                         ids=["back-to-back", "semicolons", "quoted-stamps", "dpo-stamps"])
def test_fastframe_frames_read_whichever_way_the_blocks_are_framed(separator: bytes, stamp_form: str,
                                                                    source) -> None:  # noqa: ANN001
    """The twin sends a FastFrame CURVe? either way an MSO might (blocks back to back, or ';'
    between them) and its time stamps in each form (instruments/sim/mso.py STAMP_FORMS); over real
    TCP the driver reads the same frames, each on the source's grid."""
    from instruments.sim import run_in_thread
    from instruments.sim.mso import STAMP_FORMS

    assert {"numbered", "numbered-semicolons", "numbered-quoted", "dpo"} == set(STAMP_FORMS)
    sim = SimScopeServer(source, seed=7, dialect="tektronix_mso")
    sim.model.frame_separator = separator
    sim.model.stamp_form = stamp_form
    with run_in_thread(sim), open_scope(sim.resource, dialect="tektronix_mso", timeout_s=5.0) as scope:
        scope.reset()
        scope.configure(settings(time_per_div=2.5e-6, record_length=1000, segments=20, trigger_position_pct=10.0))
        frames = scope.acquire_frames()
    info = sim.acquisitions[-1]
    assert len(frames) == info.frames == 20
    ticks = np.rint(frames.trigger_s * 1e9 / source.period_ns)
    assert np.allclose(frames.trigger_s * 1e9, ticks * source.period_ns, atol=1.0 * 1e3)
    # each frame at the time the twin triggered it, to the stamps' picosecond
    truth = np.asarray(info.frame_triggers_ns, dtype=np.float64)
    assert np.allclose(frames.trigger_s * 1e9, truth - truth[0], rtol=0, atol=2e-3)
