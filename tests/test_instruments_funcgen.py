"""The Keysight 33500 function generator driver against the simulated 33500B, over TCP via
PyVISA + pyvisa-py, and the simulated generator's pulse train as the stimulus a delay run
sends to a GPIO: rate, widths, the random period jitter (no phase lock with a periodic
interrupt), output on/off, settings that apply from the moment they are made.

Ground truth comes from the sim's pulse train (`PulseTrain.edges`/`segments`), never from
constants; waiting is for a number of pulses to exist, never an assertion on speed.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from instruments.dialects import GENERATORS, generator_class
from instruments.funcgen import (
    MODULATING,
    FunctionGenerator,
    GeneratorError,
    GeneratorSettings,
    GeneratorTimeout,
    Keysight33500,
    load_ohms,
    open_generator,
)
from instruments.scpi import flag, from_keyword
from instruments.sim import EdgeSource
from instruments.sim.funcgen import (
    NOISE_SIGMA,
    Keysight33500Model,
    PulseTrain,
    SimGeneratorServer,
    serve_in_thread,
)

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TICK_NS = 1_024_000  # a 1.024 ms periodic interrupt (an Arduino's timer 0 overflow) the stimulus must not lock to
SEED = 2016


@pytest.fixture(scope="module")
def server() -> Iterator[SimGeneratorServer]:
    with serve_in_thread(SimGeneratorServer(seed=SEED)) as sim:
        yield sim


@pytest.fixture
def gen(server: SimGeneratorServer) -> Iterator[Keysight33500]:
    with open_generator(server.resource, timeout_s=2.0) as g:
        assert isinstance(g, Keysight33500)
        g.reset()
        yield g
        g.set_output(False)


def stimulus(**overrides: object) -> GeneratorSettings:
    base: dict[str, object] = dict(frequency_hz=5_000.0, width_s=20e-6, low_v=0.0, high_v=3.3, jitter=0.3)
    base.update(overrides)
    return GeneratorSettings(**base)  # type: ignore[arg-type]


def run_pulses(gen: FunctionGenerator, source: PulseTrain, count: int) -> np.ndarray:
    """Output on until `count` pulses exist, then off; the pulses of that stretch, [lead, trail] rows."""
    gen.set_output(True)
    seg = source.segments[-1]
    assert seg.end_ns is None
    deadline = time.monotonic() + 60  # a safety net for a hung sim, not a speed requirement
    while len(source.stimulus_times_ns(seg.start_ns, source.now_ns())) < count:
        assert time.monotonic() < deadline, "the sim produced no pulses"
        time.sleep(0.02)
    gen.set_output(False)
    seg = source.segments[seg.index]
    assert seg.end_ns is not None
    pulses = source.edges(seg.start_ns, seg.end_ns)
    return pulses[pulses[:, 0] >= seg.start_ns]


# --- the driver over TCP ------------------------------------------------------------------------
def test_identify_and_empty_error_queue(gen: Keysight33500) -> None:
    assert gen.identify().startswith("Agilent Technologies,33522B")
    assert gen.query("SYSTem:ERRor?") == '+0,"No error"'
    assert gen.output_enabled() is False


def test_configure_reads_back_what_the_instrument_applied(gen: Keysight33500, server: SimGeneratorServer) -> None:
    wanted = stimulus(frequency_hz=2_000.0, width_s=50e-6, jitter=0.2, high_v=5.0)
    server.clear_log()
    applied = gen.configure(wanted)
    assert applied == gen.applied
    assert applied.frequency_hz == pytest.approx(2_000.0) and applied.width_s == pytest.approx(50e-6)
    assert (applied.low_v, applied.high_v) == (pytest.approx(0.0), pytest.approx(5.0))
    assert applied.jitter == pytest.approx(0.2) and applied.deviation_hz == pytest.approx(400.0)
    assert gen.load == math.inf and gen.function == "pulse" and gen.pulse_hold == "width"
    assert gen.fm_enabled and gen.fm_source == "internal" and gen.fm_function == "noise"
    assert gen.output_enabled() is False  # configure leaves the output alone
    checked = [
        "OUTPut1:LOAD INFinity",
        "SOURce1:FM:STATe OFF",
        "SOURce1:FUNCtion:PULSe:WIDTh 5e-05",  # narrower than *RST's 100 µs: before the frequency
        "SOURce1:FREQuency 2000",
        "SOURce1:FUNCtion PULSe",
        "SOURce1:FUNCtion:PULSe:HOLD WIDTh",
        "SOURce1:VOLTage:HIGH 5",
        "SOURce1:VOLTage:LOW 0",
        "SOURce1:FM:SOURce INTernal",
        "SOURce1:FM:INTernal:FUNCtion NOISe",
        "SOURce1:FM:DEViation 400",
        "SOURce1:FM:STATe ON",
    ]
    sent = [c.removesuffix(";*ESR?") for c in server.commands if c.endswith(";*ESR?")]
    assert sent == checked
    # the error queue is read after configuring, before the read-back
    log = server.commands
    assert log.index("SYSTem:ERRor?") > log.index("SOURce1:FM:STATe ON;*ESR?")


def test_no_jitter_switches_fm_off(gen: Keysight33500) -> None:
    gen.configure(stimulus(jitter=0.25))
    applied = gen.configure(stimulus(jitter=0.0, frequency_hz=50_000.0, width_s=2e-6))
    assert applied.jitter == 0.0 and gen.fm_enabled is False


def test_levels_and_width_are_reprogrammed_in_a_safe_order(gen: Keysight33500) -> None:
    # from 3.3 V/1 kHz/400 µs to 8..9.5 V/20 kHz/10 µs and back: no intermediate state is refused
    gen.configure(stimulus(frequency_hz=1_000.0, width_s=400e-6, jitter=0.0))
    applied = gen.configure(stimulus(frequency_hz=20_000.0, width_s=10e-6, low_v=8.0, high_v=9.5, jitter=0.0))
    assert (applied.low_v, applied.high_v) == (pytest.approx(8.0), pytest.approx(9.5))
    applied = gen.configure(stimulus(frequency_hz=1_000.0, width_s=400e-6, low_v=-1.0, high_v=0.0, jitter=0.0))
    assert (applied.low_v, applied.high_v, applied.width_s) == (-1.0, 0.0, pytest.approx(400e-6))


def test_the_jittered_stimulus(gen: Keysight33500, server: SimGeneratorServer) -> None:
    s = gen.configure(stimulus())
    source = server.source(1)
    assert isinstance(source, EdgeSource)  # the twin scope can be fed by the twin generator
    pulses = run_pulses(gen, source, 3_000)[:3_000]
    lead, trail = pulses[:, 0], pulses[:, 1]
    # widths are exact, pulses never overlap
    assert np.all(trail - lead == round(s.width_s * 1e9))
    assert np.all(lead[1:] > trail[:-1])
    # the rate: FM keeps the mean instantaneous frequency at the carrier's, within 5 standard errors
    periods = np.diff(lead).astype(np.float64)
    freq = 1e9 / periods
    sigma = s.frequency_hz * s.jitter * NOISE_SIGMA
    assert abs(freq.mean() - s.frequency_hz) < 5 * sigma / math.sqrt(len(freq)) + 0.01
    # the jitter: every period within T/(1+j)..T/(1-j) (±1 ns of rounding), the spread as configured
    assert periods.min() >= s.shortest_period_s * 1e9 - 1 and periods.max() <= s.longest_period_s * 1e9 + 1
    assert 0.85 * sigma < freq.std() < 1.1 * sigma
    assert freq.max() > s.frequency_hz * (1 + 0.8 * s.jitter) and freq.min() < s.frequency_hz * (1 - 0.8 * s.jitter)
    # no phase lock with a 1.024 ms tick: the leads' phase in the tick is uniform (chi-square, 16 bins)
    phase = (lead - lead[0]) % TICK_NS
    counts, _ = np.histogram(phase, bins=16, range=(0, TICK_NS))
    assert stats.chisquare(counts).pvalue > 1e-3
    # output off: nothing after the segment's end, even a while later
    end = source.segments[-1].end_ns
    assert end is not None and end >= lead[-1]
    time.sleep(0.02)
    assert len(source.stimulus_times_ns(end, source.now_ns())) == 0


def test_a_firmware_refusing_fm_on_a_pulse_gets_the_square_carrier_and_says_so() -> None:
    """No reference confirms that a 33500 takes FM on a PULSe carrier: where FM:STATe ON is refused
    (-221 Settings conflict), the driver makes the stimulus with a SQUare carrier of the same nominal
    duty cycle, reports carrier "square", and the edges carry the jitter asked for; each pulse then
    lasts the duty cycle of its own period (the sim's truth), not a fixed width."""
    with serve_in_thread(SimGeneratorServer(seed=SEED, fm_on_pulse=False)) as server, \
            open_generator(server.resource, timeout_s=2.0) as gen:
        assert isinstance(gen, Keysight33500)
        gen.reset()
        wanted = stimulus(frequency_hz=5_000.0, width_s=20e-6, jitter=0.3)
        applied = gen.configure(wanted)
        assert applied.carrier == "square" and gen.function == "square"
        assert applied.jitter == pytest.approx(0.3) and applied.width_s == pytest.approx(20e-6)
        assert gen.duty_pct == pytest.approx(10.0)
        assert "SOURce1:FM:STATe ON;*ESR?" in server.commands  # tried on the pulse first, refused
        pulses = run_pulses(gen, server.source(1), 2_000)[:2_000]
        gen.set_output(False)
    lead, trail = pulses[:, 0], pulses[:, 1]
    periods = np.diff(lead).astype(np.float64)
    freq = 1e9 / periods
    sigma = wanted.frequency_hz * wanted.jitter * NOISE_SIGMA
    assert 0.85 * sigma < freq.std() < 1.1 * sigma  # the jitter asked for
    # each pulse is 10 % of the period it starts: width / period = duty, to the ns rounding
    widths = (trail - lead)[:-1].astype(np.float64)
    assert np.all(np.abs(widths - 0.1 * periods) <= 1.0)
    assert widths.std() > 100.0  # not a fixed width: the read-back's carrier says so


def test_a_pulse_carrier_is_kept_where_the_firmware_takes_fm(gen: Keysight33500) -> None:
    assert gen.configure(stimulus(jitter=0.3)).carrier == "pulse" and gen.function == "pulse"


def test_a_strictly_periodic_stimulus_locks_and_the_check_sees_it(
    gen: Keysight33500, server: SimGeneratorServer
) -> None:
    # 256 µs, a quarter of the tick: the phase takes four values, which the chi-square rejects
    s = gen.configure(stimulus(frequency_hz=1e9 / 256_000, width_s=20e-6, jitter=0.0))
    pulses = run_pulses(gen, server.source(1), 400)[:400]
    periods = np.diff(pulses[:, 0])
    assert np.all(np.abs(periods - 256_000) <= 1) and np.all(pulses[:, 1] - pulses[:, 0] == 20_000)
    phase = (pulses[:, 0] - pulses[0, 0]) % TICK_NS
    counts, _ = np.histogram(phase, bins=16, range=(0, TICK_NS))
    assert stats.chisquare(counts).pvalue < 1e-6
    assert s.jitter == 0.0


def test_a_change_applies_from_the_moment_it_is_made(gen: Keysight33500, server: SimGeneratorServer) -> None:
    source = server.source(1)
    gen.configure(stimulus(frequency_hz=10_000.0, width_s=5e-6, jitter=0.1))
    gen.set_output(True)
    first = source.segments[-1]
    time.sleep(0.05)
    before = source.now_ns()
    past = source.edges(first.start_ns, before)
    gen.configure(stimulus(frequency_hz=2_000.0, width_s=100e-6, jitter=0.1))
    after = source.now_ns()
    new = source.segments[-1]
    time.sleep(0.05)
    gen.set_output(False)
    old, new = source.segments[first.index], source.segments[new.index]
    # the first segment ended when the change began; each command took effect as it was made
    # (FM off, frequency, width ...: a segment each), the last one is what was configured
    assert old.end_ns is not None and before <= old.end_ns <= after
    assert (new.frequency_hz, new.width_ns, new.jitter) == (2_000.0, 100_000, pytest.approx(0.1))
    between = source.segments[first.index + 1 : new.index]
    assert all(old.end_ns <= s.start_ns and s.end_ns is not None and s.end_ns <= after for s in between)
    # the past did not change, and asking again (overlapping windows) gives the same pulses
    assert np.array_equal(source.edges(first.start_ns, before), past)
    both = source.edges(first.start_ns, new.end_ns)
    assert np.array_equal(both[: len(past)], past)
    old_pulses = both[both[:, 0] < old.end_ns]
    new_pulses = both[both[:, 0] >= new.start_ns]
    assert np.all(old_pulses[:, 1] - old_pulses[:, 0] == 5_000)
    assert np.all(new_pulses[:, 1] - new_pulses[:, 0] == 100_000)
    assert new_pulses[0, 0] >= old_pulses[-1, 1] + source.min_gap_ns  # no overlap across the change
    assert np.all(both[1:, 0] > both[:-1, 1])


def test_undefined_command_names_itself_and_the_instrument_text(gen: Keysight33500) -> None:
    with pytest.raises(GeneratorError) as caught:
        gen.write("SOURce1:FOO 1")
    err = caught.value
    assert err.command == "SOURce1:FOO 1" and err.instrument_text == '-113,"Undefined header"'
    assert "SOURce1:FOO 1" in str(err) and "Undefined header" in str(err) and "\n" not in str(err)
    gen.check_errors()  # the queue was read: nothing left


def test_value_the_instrument_refuses(gen: Keysight33500) -> None:
    with pytest.raises(GeneratorError) as caught:
        gen.configure(stimulus(high_v=20.0))  # ±10 V into high impedance
    assert caught.value.command == "SOURce1:VOLTage:HIGH 20"
    assert caught.value.instrument_text == '-222,"Data out of range"'
    with pytest.raises(GeneratorError) as caught:
        gen.configure(stimulus(frequency_hz=1e6, width_s=10e-9, jitter=0.0))  # shorter than 16 ns
    assert caught.value.command == "SOURce1:FUNCtion:PULSe:WIDTh 1e-08"
    assert "Data out of range" in caught.value.instrument_text


def test_unknown_query_times_out_with_the_reason(server: SimGeneratorServer) -> None:
    with open_generator(server.resource, timeout_s=0.5) as g:
        assert isinstance(g, Keysight33500)
        with pytest.raises(GeneratorTimeout) as caught:
            g.query("SOURce1:FOO?")
        assert caught.value.command == "SOURce1:FOO?"
        assert caught.value.instrument_text == '-113,"Undefined header"'
        assert g.identify().startswith("Agilent")


def test_a_generator_failure_is_the_generators_own_error() -> None:
    """A caller that handles a scope's failure does not catch the generator's by accident (and the
    reverse); InstrumentError is either. Here at every layer: opening, the session, a command."""
    from instruments.scope import InstrumentError, InstrumentTimeout, ScopeError, ScopeTimeout

    with pytest.raises(GeneratorError) as refused:  # nothing listens: the session cannot open
        open_generator("TCPIP::127.0.0.1::1::SOCKET", timeout_s=0.5)
    with serve_in_thread(SimGeneratorServer()) as sim, open_generator(sim.resource, timeout_s=0.5) as g:
        with pytest.raises(GeneratorTimeout) as silent:
            g.query("SOURce1:FOO?")
        with pytest.raises(GeneratorError) as rejected:
            g.write("SOURce1:FOO 1")
    for caught in (refused, silent, rejected):
        assert isinstance(caught.value, InstrumentError) and not isinstance(caught.value, ScopeError), caught.value
    assert isinstance(silent.value, InstrumentTimeout) and not isinstance(silent.value, ScopeTimeout)
    assert str(GeneratorError("")) == "generator error" and str(ScopeError("")) == "scope error"


def test_another_instrument_is_not_taken_for_a_33500() -> None:
    rigol = SimGeneratorServer(idn="RIGOL TECHNOLOGIES,DG1062Z,DG1ZA0000,00.01.14")
    with serve_in_thread(rigol) as sim, pytest.raises(GeneratorError) as caught:
        open_generator(sim.resource, timeout_s=1.0)
    assert "RIGOL" in str(caught.value) and "dialect" in str(caught.value)


def test_registry() -> None:
    assert generator_class("keysight_33500") is Keysight33500 and set(GENERATORS) == {"keysight_33500"}
    with pytest.raises(ValueError, match="unknown function generator dialect 'rigol'.*keysight_33500"):
        open_generator("TCPIP::127.0.0.1::1::SOCKET", dialect="rigol")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(jitter=0.6), "jitter must be a fraction"),
        (dict(jitter=-0.1), "jitter must be a fraction"),
        (dict(frequency_hz=0.0), "frequency_hz must be > 0"),
        (dict(width_s=0.0), "width_s must be > 0"),
        (dict(width_s=190e-6), "shorter than the shortest period"),  # 5 kHz, 30 %: 153.8 µs
        (dict(low_v=3.3, high_v=0.0), "high_v"),
        (dict(channel=3), "channel"),
        (dict(frequency_hz=math.nan), "finite"),
    ],
)
def test_settings_are_checked(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stimulus(**overrides)


# --- garbage in: the sim's and the driver's parsers --------------------------------------------
HEADERS = [
    "FREQ",
    "SOUR1:FREQ",
    "SOUR2:FUNC:PULS:WIDT",
    "VOLT:HIGH",
    "VOLT:LOW",
    "OUTP",
    "OUTP2:LOAD",
    "FM:DEV",
    "FM:STAT",
    "FM:INT:FUNC",
    "FM:SOUR",
    "APPL:PULS",
    "FUNC",
    "FUNC:PULS:HOLD",
    "*ESR",
    "SYST:ERR",
    "*RST",
]


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.text(st.characters(min_codepoint=1, max_codepoint=255), max_size=40),
            st.tuples(st.sampled_from(HEADERS), st.booleans(), st.text(max_size=12)).map(
                lambda t: f"{t[0]}{'?' if t[1] else ''} {t[2]}"
            ),
        ),
        max_size=4,
    ).map(";".join)
)
def test_the_sim_survives_any_message(message: str) -> None:
    model = Keysight33500Model(seed=1)
    reply = model.handle(message)
    assert reply is None or isinstance(reply, bytes)
    assert all(code != -300 for code, _ in model.errors), model.errors  # no handler crashed
    for n, c in model.channels.items():  # whatever was accepted is a state the instrument can be in
        assert c.high > c.low and abs(c.high) <= c.max_v and abs(c.low) <= c.max_v
        if c.output and c.function == "PULSE":
            assert c.width < 1.0 / (c.frequency * (1.0 + c.jitter)), n
    assert model.handle("*IDN?") == model.idn.encode()


@FUZZ
@given(st.text(max_size=30))
def test_the_driver_parsers_accept_or_raise_value_error(reply: str) -> None:
    for parse in (load_ohms, flag, from_keyword(MODULATING)):
        try:
            value = parse(reply)
        except ValueError:
            continue
        assert value is not None


@FUZZ
@given(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1.0, max_value=1.0),
)
def test_settings_either_fit_or_say_why(frequency: float, width: float, jitter: float) -> None:
    try:
        s = GeneratorSettings(frequency_hz=frequency, width_s=width, jitter=jitter)
    except ValueError as exc:
        assert str(exc)
        return
    assert 0 < s.width_s < s.shortest_period_s <= s.period_s and 0 <= s.jitter <= 0.5


@FUZZ
@given(
    st.integers(0, 3),
    st.lists(st.tuples(st.integers(1, 50_000_000), st.integers(1, 50_000_000)), min_size=1, max_size=5),
)
def test_the_train_answers_any_window_the_same_way(seed: int, windows: list[tuple[int, int]]) -> None:
    now = [0]
    train = PulseTrain(seed=seed, clock=lambda: now[0])
    train.switch((20_000.0, 10_000, 0.4))
    now[0] = 20_000_000
    train.switch((3_000.0, 150_000, 0.0))
    now[0] = 30_000_000
    train.switch(None)
    whole = train.edges(0, 60_000_000)
    assert np.all(whole[1:, 0] > whole[:-1, 1]) and np.all(whole[:, 1] > whole[:, 0])
    for a, b in windows:
        t0, t1 = min(a, b), max(a, b) + 1
        got = train.edges(t0, t1)
        expected = whole[(whole[:, 1] > t0) & (whole[:, 0] < t1)]
        assert np.array_equal(got, expected)


def test_garbage_over_tcp_leaves_the_instrument_answering(server: SimGeneratorServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(b"\x00\xff;;:::FREQ 1e400;*ESR?\n")
        assert sock.recv(100).strip() in (b"+32", b"+16", b"+48")
    with open_generator(server.resource, timeout_s=2.0) as g:
        assert g.identify().startswith("Agilent")
        with pytest.raises(GeneratorError):
            g.check_errors()  # the errors the garbage caused are reported, then gone
        g.check_errors()
