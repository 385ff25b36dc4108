"""The ATmega328P responder (seed 002) under simavr: both firmware variants built with avr-gcc,
run in the harness with jittered edges, and the timer0 overflow handler shown to be the one cause
of the outliers — at the rate its measured length predicts, each outlier delayed by exactly what
was left of the handler run it arrived in. Plus the harness's error paths and a property test of
the output parser.

Needs gcc-avr, avr-libc, simavr's library and make (target_modules/scripts/ci-deps.sh installs
them): without them these tests skip naming what is missing, except under CI, where they fail."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import beta

from station.kinds.avrsim import simulator as avr_sim
from station.kinds.avrsim.simulator import AvrSimError, AvrSimOutputError
from tests.conftest import missing

SRC = avr_sim.sources()
STIMULI = 20_000  # ~0.3 s of simavr each; ~140 outliers expected unmasked, enough for a tight interval
PERIOD, JITTER = 2000, 2000  # jitter = period: edge phase against timer0's 16384 cycles is uniform
CONFIDENCE = 0.999
EXAMPLES = int(os.environ.get("STATION_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> avr_sim.Build:
    absent = [t for t in ("make", "avr-gcc", "avr-objcopy", "cc") if not shutil.which(t)]
    if not Path("/usr/include/simavr/sim_avr.h").is_file():
        absent.append("simavr headers")
    if absent:
        missing(f"{', '.join(absent)} not installed (apt-get install {' '.join(avr_sim.APT_PACKAGES)})")
    build_dir = tmp_path_factory.mktemp("avr-build")
    # -B: everything compiled here, so every warning shows; -Wall -Wextra are in the Makefile
    res = subprocess.run(
        ["make", "-B", "-C", str(SRC), f"BUILD={build_dir}", "all"], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    assert "warning" not in (res.stdout + res.stderr).lower(), res.stderr
    return avr_sim.build(build_dir)  # up to date: the API's own make run is a no-op


def run_masked(built: avr_sim.Build) -> avr_sim.Analysis:
    """The masked build's STIMULI jittered edges, analysed (no baseline: it is the baseline)."""
    out = avr_sim.run(built.harness, built.masked_elf, stimuli=STIMULI, period=PERIOD, jitter=JITTER, seed=11)
    return avr_sim.analyse(out)


def run_unmasked(built: avr_sim.Build) -> avr_sim.AvrSimOutput:
    """The build with timer0's interrupt on, the same number of edges (another seed)."""
    return avr_sim.run(built.harness, built.elf, stimuli=STIMULI, period=PERIOD, jitter=JITTER, seed=12)


@pytest.fixture(scope="module")
def masked(built) -> avr_sim.Analysis:
    return run_masked(built)


@pytest.fixture(scope="module")
def unmasked_out(built) -> avr_sim.AvrSimOutput:
    return run_unmasked(built)


@pytest.fixture(scope="module")
def unmasked(unmasked_out, masked) -> avr_sim.Analysis:
    return avr_sim.analyse(unmasked_out, baseline_max=masked.max_cycles)


def test_builds_give_flashable_hex_files_and_no_simavr_section(built):
    for elf in (built.elf, built.masked_elf):
        hexfile = elf.with_suffix(".hex")
        lines = hexfile.read_text().splitlines()
        assert lines and all(line.startswith(":") for line in lines)
        assert lines[-1] == ":00000001FF"  # Intel HEX end-of-file record
        sections = subprocess.run(["avr-objdump", "-h", str(elf)], capture_output=True, text=True, check=True)
        assert ".mmcu" not in sections.stdout  # the harness names MCU and clock itself


def test_masked_answers_every_edge_within_a_quarter_microsecond(masked):
    assert len(masked.responses) == STIMULI
    assert masked.misses == 0
    assert masked.spread_s <= 0.3e-6
    assert masked.outliers == []
    assert masked.window.runs == 0  # TOIE0 clear: the overflow handler never ran


def test_unmasked_outliers_come_at_the_rate_the_handler_length_predicts(unmasked):
    w = unmasked.window
    assert unmasked.misses == 0
    assert w.rate_hz == pytest.approx(16e6 / avr_sim.TIMER0_OVERFLOW_CYCLES, rel=1e-3)  # 976.5625 Hz
    assert_outlier_rate_predicted(unmasked)


def assert_outlier_rate_predicted(a: avr_sim.Analysis) -> None:
    """The observed outlier fraction's Clopper-Pearson interval holds rate x window."""
    n, k = len(a.responses), len(a.outliers)
    alpha = 1 - CONFIDENCE
    lo = beta.ppf(alpha / 2, k, n - k + 1) if k else 0.0
    hi = beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    assert lo <= a.window.expected_fraction <= hi, (k, n, a.window.expected_fraction, lo, hi)


def test_every_outlier_arrived_in_a_handler_run_and_waited_out_exactly_its_rest(unmasked):
    assert unmasked.outliers
    assert unmasked.unexplained == []
    for o in unmasked.outliers:
        assert o.extra == o.blocked, o  # the mechanism, cycle for cycle
    largest = max(o.extra for o in unmasked.outliers)
    # about one handler length: a lock-out is the handler plus the post-RETI instructions
    assert unmasked.window.mean_cycles <= largest <= unmasked.window.max_cycles + avr_sim.AFTER_RETI_CYCLES_SIM


def test_responses_outside_handler_runs_are_as_fast_as_masked(unmasked, masked):
    fast = [r.delay for r in unmasked.responses if r.stim not in {o.stim for o in unmasked.outliers}]
    assert min(fast) == masked.min_cycles and max(fast) <= masked.max_cycles


def test_report_the_figures(masked, unmasked, unmasked_out):
    """The figures as printed, and what the run must give: the harness applied STIMULI edges; the
    firmware's timer0 overflows every 64 * 256 cycles for the whole run, each handler run taking the
    carry branch (two cycles more) exactly when its 24 µs remainders pass a millisecond."""
    w = unmasked.window
    print(
        f"\nmasked: {len(masked.responses)} edges, delay {masked.min_cycles}..{masked.max_cycles} cycles = "
        f"{masked.min_cycles / 16:.4f}..{masked.max_cycles / 16:.4f} µs, spread {masked.spread_s * 1e6:.4f} µs"
        f"\ntimer0 overflow handler: {w.runs} runs at {w.rate_hz:.4f} Hz, "
        f"{w.min_cycles}..{w.max_cycles} cycles (mean {w.mean_cycles:.2f} = {w.mean_cycles / 16:.3f} µs)"
        f"\nunmasked: {len(unmasked.outliers)} outliers of {len(unmasked.responses)} = "
        f"{unmasked.outlier_fraction:.5f}; predicted rate x window = {w.expected_fraction:.5f} "
        f"(on hardware, + 4 entry cycles: {w.expected_fraction_hw:.5f})"
        f"\nlargest extra delay {max(o.extra for o in unmasked.outliers)} cycles, "
        f"worst response {unmasked.max_cycles} cycles = {unmasked.max_cycles / 16:.4f} µs"
    )
    assert int(unmasked_out.config["stimuli"]) == len(unmasked_out.stims) == STIMULI
    assert len(masked.responses) == len(unmasked.responses) == STIMULI
    # one overflow per 16384 cycles of the run (the first comes one period after timer0's set-up)
    periods = unmasked_out.cycles / avr_sim.TIMER0_OVERFLOW_CYCLES
    assert periods - 1.01 < w.runs <= periods, (w.runs, periods)
    # the handler's remainder: 1024 µs per overflow, 24 µs carried; a carry on overflow k
    # when 24 * k passes a multiple of 1000
    carries = w.runs * 24 // 1000
    lengths = Counter(r.cycles for r in unmasked_out.isr_runs(avr_sim.TIMER0_OVF_VECTOR))
    assert lengths == {w.min_cycles: w.runs - carries, w.min_cycles + 2: carries}, lengths
    assert w.max_cycles == w.min_cycles + 2 and w.mean_cycles == pytest.approx(w.min_cycles + 2 * carries / w.runs)
    assert 100 <= w.min_cycles <= 130  # the firmware's 115 cycles, give or take a compiler version


def test_harness_logs_every_int0_run_and_is_reproducible(built, unmasked_out):
    assert len(unmasked_out.isr_runs(avr_sim.INT0_VECTOR)) == STIMULI
    again = avr_sim.run(built.harness, built.elf, stimuli=50, seed=12)
    assert again.stims == unmasked_out.stims[:50]  # the seed alone fixes the stimulus


def test_harness_rejects_bad_usage_and_bad_firmware(built, tmp_path):
    for args in (["-p", "100", "-w", "100"], ["-n", "0"], ["-n", "x"], ["-i", "Z9"], []):
        res = subprocess.run([str(built.harness), *args, *([str(built.elf)] if args else [])], capture_output=True)
        assert res.returncode == 2 and b"usage:" in res.stderr, args
        assert res.stdout == b""
    junk = tmp_path / "junk.elf"
    junk.write_bytes(b"not an elf")
    with pytest.raises(AvrSimError, match="exited with 1"):
        avr_sim.run(built.harness, junk, stimuli=1)


def test_makefile_names_the_package_of_a_missing_tool(tmp_path):
    res = subprocess.run(
        ["make", "-C", str(SRC), f"BUILD={tmp_path}", "AVR_CC=no-such-avr-gcc", "firmware"],
        capture_output=True,
        text=True,
    )
    assert res.returncode != 0
    assert "apt-get install gcc-avr" in res.stderr


# --- the parser, with no toolchain ---------------------------------------------------------------

SAMPLE = (
    "avrsim 1\n"
    "config mcu=atmega328p freq=16000000 stimuli=3 period=2000 jitter=2000 width=100 seed=1 input=D2 output=D7\n"
    "isr 16 16475 16590\n"
    "stim 20000\n"
    "resp 20014 1\n"
    "isr 1 20000 20028\n"
    "isr 16 32860 32975\n"
    "stim 32900\n"
    "resp 32993 0\n"
    "isr 1 32979 33007\n"
    "stim 36000\n"
    "end stims=3 resps=2 isrs=4 cycles=56000\n"
)


def test_parse_and_analyse_a_known_output():
    out = avr_sim.parse(SAMPLE)
    assert out.freq_hz == 16_000_000 and out.stims == [20000, 32900, 36000]
    a = avr_sim.analyse(out)
    assert [r.delay for r in a.responses] == [14, 93, None]
    assert a.misses == 1
    (o,) = a.outliers
    assert o.isr == avr_sim.IsrRun(16, 32860, 32975) and o.blocked == 32975 + 4 - 32900 and o.extra == 79


@pytest.mark.parametrize(
    "text, where",
    [
        ("", "line 1"),
        (SAMPLE[:-1], "newline"),
        (SAMPLE.replace("avrsim 1", "avrsim 2"), "line 1"),
        (SAMPLE.replace(" freq=16000000", ""), "line 2"),
        (SAMPLE.replace("resp 20014 1", "resp 20014 2"), "line 5"),
        (SAMPLE.replace("stim 32900", "stim 19999"), "line 8"),
        (SAMPLE.replace("isr 1 20000 20028", "isr 1 20028 20000"), "line 6"),
        (SAMPLE.replace("resps=2", "resps=3"), "line 12"),
        (SAMPLE + "stim 60000\n", "line 13"),
        (SAMPLE.replace("end stims=3 resps=2 isrs=4 cycles=56000\n", ""), "no end line"),
        (SAMPLE.replace("stim 36000", "stim +36000"), "line 11"),
    ],
)
def test_parse_names_the_bad_line(text, where):
    with pytest.raises(AvrSimOutputError, match=where):
        avr_sim.parse(text)


def _parses_or_says_why(text: str) -> None:
    try:
        avr_sim.parse(text)
    except AvrSimOutputError as exc:
        assert "line" in str(exc) or "newline" in str(exc)


@FUZZ
@given(cut=st.integers(0, len(SAMPLE)))
def test_parse_any_truncation(cut):
    if cut == len(SAMPLE):
        avr_sim.parse(SAMPLE[:cut])
    else:
        with pytest.raises(AvrSimOutputError):
            avr_sim.parse(SAMPLE[:cut])


@FUZZ
@given(pos=st.integers(0, len(SAMPLE) - 1), junk=st.text(max_size=8))
def test_parse_any_corruption(pos, junk):
    _parses_or_says_why(SAMPLE[:pos] + junk + SAMPLE[pos + 1 :])


@FUZZ
@given(st.text())
def test_parse_any_text(text):
    _parses_or_says_why(text)


@FUZZ
@given(st.lists(st.sampled_from(SAMPLE.splitlines(keepends=True)), max_size=20))
def test_parse_any_shuffle_of_real_lines(lines):
    _parses_or_says_why("".join(lines))
