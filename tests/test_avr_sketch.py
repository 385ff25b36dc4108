"""Seed 002's Arduino sketch on the real Arduino core (Debian's arduino-core-avr), under simavr:
`attachInterrupt` on pin 2 and `digitalWrite` of pin 7 in the handler
(target_modules/avr/sketch/responder_sketch.ino), built as the Arduino IDE builds it, run in the
same harness as the bare responder, with the core's timer0 overflow interrupt on and masked.

Checked against the seed's published figures (seed 002: with timer0 masked, every response
within 8.9485-9.1986 µs, a 0.2501 µs spread) where simulation can reproduce them, and against the
harness's own log of each handler run for the mechanism. The seed's ~9 µs is not reproduced (the
core's code path takes ~109 cycles here, not ~145): docs/avr-responder.md accounts for it cycle
by cycle; this test prints both.

Needs gcc-avr, avr-libc, simavr's library, make and arduino-core-avr
(target_modules/scripts/ci-deps.sh installs them): without them these tests skip naming what is
missing, except under CI, where they fail."""

from __future__ import annotations

import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from station.kinds.avrsim import simulator as avr_sim
from tests.conftest import missing
from tests.test_avr_responder import (
    JITTER,
    PERIOD,
    STIMULI,
    assert_outlier_rate_predicted,
    run_masked,
    run_unmasked,
)

SRC = avr_sim.sources()
ARDUINO_CORE = Path("/usr/share/arduino/hardware/arduino/avr/cores/arduino")
CYCLE_S = 1 / 16e6
# seed 002 (2016), timer0 masked: every response within 8.9485-9.1986 µs
SEED_MIN_S, SEED_MAX_S = 8.9485e-6, 9.1986e-6


def require_sketch_tools() -> None:
    """Skip (fail under CI) naming what the sketch's build and the harness need and is missing."""
    absent = [t for t in ("make", "avr-gcc", "avr-g++", "avr-objcopy", "cc") if not shutil.which(t)]
    if not Path("/usr/include/simavr/sim_avr.h").is_file():
        absent.append("simavr headers")
    if not (ARDUINO_CORE / "Arduino.h").is_file():
        absent.append("the Arduino core")
    if absent:
        missing(f"{', '.join(absent)} not installed (apt-get install {' '.join(avr_sim.SKETCH_APT_PACKAGES)})")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> avr_sim.Build:
    require_sketch_tools()
    build_dir = tmp_path_factory.mktemp("avr-sketch")
    res = subprocess.run(["make", "-B", "-C", str(SRC), f"BUILD={build_dir}", "sketch", "harness"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    # the sketch and the harness are ours and compile warning-free; the core is compiled with -w, as
    # the IDE does by default
    ours = [line for line in (res.stdout + res.stderr).splitlines() if "responder_sketch" in line
            or "simavr_harness" in line]
    assert not [line for line in ours if "warning" in line.lower()], ours
    return avr_sim.build_sketch(build_dir)  # up to date: the API's own make run is a no-op


@pytest.fixture(scope="module")
def masked(built) -> avr_sim.Analysis:
    return run_masked(built)


@pytest.fixture(scope="module")
def unmasked_out(built) -> avr_sim.AvrSimOutput:
    return run_unmasked(built)


@pytest.fixture(scope="module")
def unmasked(unmasked_out, masked) -> avr_sim.Analysis:
    return avr_sim.analyse(unmasked_out, baseline_max=masked.max_cycles,
                           after_reti=max(avr_sim.CORE_AFTER_RETI_CYCLES_SIM))


def test_the_sketch_links_the_cores_dispatcher_and_digitalwrite(built):
    """What makes it the seed's sketch and not our bare handler: INT0's vector is the core's
    dispatcher (WInterrupts.c), which calls the sketch's function through a pointer, which calls
    digitalWrite (wiring_digital.c)."""
    for elf in (built.elf, built.masked_elf):
        symbols = subprocess.run(["avr-nm", "-C", str(elf)], capture_output=True, text=True, check=True).stdout
        for name in ("attachInterrupt", "digitalWrite", "__vector_1", "__vector_16", "init"):
            assert f" {name}" in symbols, name
        dump = subprocess.run(["avr-objdump", "-d", str(elf)], capture_output=True, text=True, check=True).stdout
        vector_1 = dump[dump.index("<__vector_1>:"):]
        assert "icall" in vector_1[:vector_1.index("reti")]  # through the pointer attachInterrupt stored
        hexfile = elf.with_suffix(".hex").read_text().splitlines()
        assert hexfile[-1] == ":00000001FF"


def test_masked_every_edge_answered_by_the_handler_with_the_seeds_spread(masked, built):
    assert len(masked.responses) == STIMULI and masked.misses == 0
    assert masked.window.runs == 0  # TOIE0 cleared: timer0's handler never ran
    # the seed's spread, 0.2501 µs (4 cycles: the core's main loop runs 1-4-cycle instructions an
    # edge waits out), within one CPU cycle
    assert abs(masked.spread_s - (SEED_MAX_S - SEED_MIN_S)) <= CYCLE_S, masked.spread_s
    # every answer comes from the INT0 handler the harness saw run for that edge
    out = avr_sim.run(built.harness, built.masked_elf, stimuli=2000, period=PERIOD, jitter=JITTER, seed=11)
    runs = sorted(out.isr_runs(avr_sim.INT0_VECTOR), key=lambda r: r.entry)
    assert len(runs) == 2000
    for r, run in zip(avr_sim.pair(out), runs, strict=True):
        assert r.stim <= run.entry < r.resp < run.exit, (r, run)


def test_unmasked_outliers_come_at_the_rate_the_cores_handler_predicts(unmasked):
    w = unmasked.window
    assert unmasked.misses == 0
    assert w.rate_hz == pytest.approx(16e6 / avr_sim.TIMER0_OVERFLOW_CYCLES, rel=1e-3)  # 976.5625 Hz
    assert_outlier_rate_predicted(unmasked)


def test_every_outlier_waited_out_the_rest_of_a_timer0_handler_run(unmasked, masked):
    assert unmasked.outliers and unmasked.unexplained == []
    lo, hi = avr_sim.CORE_AFTER_RETI_CYCLES_SIM
    spread = masked.max_cycles - masked.min_cycles
    for o in unmasked.outliers:
        rest = o.isr.exit - o.stim
        # after RETI, two main-loop instructions (4-8 cycles), then the edge's own wait as any edge
        assert lo <= o.extra - rest <= hi + spread, o
    fast = [r.delay for r in unmasked.responses if r.stim not in {o.stim for o in unmasked.outliers}]
    assert min(fast) == masked.min_cycles and max(fast) <= masked.max_cycles


def test_report_the_figures_beside_the_seeds(masked, unmasked):
    w = unmasked.window
    median = statistics.median(masked.delays)
    print(
        f"\nsketch on the Arduino core, timer0 masked: delay {masked.min_cycles}..{masked.max_cycles} cycles = "
        f"{masked.min_cycles / 16:.4f}..{masked.max_cycles / 16:.4f} µs (median {median / 16:.4f} µs), "
        f"spread {masked.spread_s * 1e6:.4f} µs; the seed: {SEED_MIN_S * 1e6:.4f}..{SEED_MAX_S * 1e6:.4f} µs, "
        f"spread {(SEED_MAX_S - SEED_MIN_S) * 1e6:.4f} µs"
        f"\ncore's timer0 handler: {w.runs} runs at {w.rate_hz:.4f} Hz, {w.min_cycles}..{w.max_cycles} cycles "
        f"(mean {w.mean_cycles:.2f} = {w.mean_cycles / 16:.3f} µs)"
        f"\nunmasked: {len(unmasked.outliers)} outliers of {len(unmasked.responses)} = "
        f"{unmasked.outlier_fraction:.5f}; predicted rate x window = {w.expected_fraction:.5f}; "
        f"worst response {unmasked.max_cycles / 16:.4f} µs"
    )
    # the core's overflow handler (wiring.c) does the millis() work the bare firmware copies: a
    # handler of about a hundred cycles, as the bare responder's (100-130)
    assert 80 <= w.min_cycles <= 130
