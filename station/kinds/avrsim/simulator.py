"""GPIO response of an ATmega328P under simavr (seed 002): build, run, parse, pair, explain.

The responder firmware (target_modules/avr/responder.c) toggles PD7 from its INT0 handler on every
rising edge of PD2; timer0 overflows every 64 * 256 cycles, as the Arduino core sets it up, and its
handler (unless built masked) blocks INT0 while it runs. The harness (target_modules/avr/harness/
simavr_harness.c) applies jittered edges in simavr and prints, one event per line::

    avrsim 1                                   magic and format version (first line)
    config key=value ...                       mcu, freq, stimuli, period, jitter, width, seed,
    input, output stim <cycle>                               rising edge on the input
    resp <cycle> <0|1>                         the output changed
    isr <vector> <entry> <exit>                one run of a logged handler (exit: after its RETI)
    end stims=<n> resps=<n> isrs=<n> cycles=<c>

:func:`parse` is strict: a line that is not exactly one of these, a missing or repeated header, a
count in ``end`` that disagrees with the lines, anything after ``end`` or no ``end`` at all raises
:class:`AvrSimOutputError` naming the line. :func:`analyse` pairs each stimulus with the next output
change before the following stimulus (else a miss), and explains the outliers by the timer0
handler runs the harness logged: each outlier must have arrived while one ran.

The collision window. An edge that arrives while the overflow handler runs waits for the rest of
it, so the chance that a randomly timed edge is delayed is the fraction of time the handler runs:
overflow rate * mean handler length (``expected_fraction``). The extra delay is at most one
handler length. Three details at the window's edges:

* entry: simavr charges no cycles for the jump to a vector, but a real AVR spends 4 (push PC,
  clear I) during which an arriving edge is already locked out, so on hardware the window
  starts 4 cycles earlier (``ENTRY_CYCLES_HW``). An edge that arrives *with* the overflow (both
  flags set when the same instruction ends) is not delayed: INT0 has the higher priority.
* after RETI the core runs main-loop code before it takes a pending interrupt: one instruction
  on a real AVR, two in simavr 1.6 (its ``interrupt_state = -2``); with the idle loop's 2-cycle
  ``rjmp`` that is 4 cycles (``AFTER_RETI_CYCLES_SIM``). An edge arriving in a handler is
  delayed by exactly the rest of the handler plus those cycles (``Outlier.blocked``).
* an edge arriving in the last cycles of that lock-out is delayed by no more than the
  baseline's own spread, so it does not count as an outlier.

So the observed fraction is the prediction give or take a few cycles out of ~115: 2-3 %,
far inside the binomial interval of any run of practical length.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from bisect import bisect_right
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

FORMAT_VERSION = 1
MAGIC = "avrsim"
INT0_VECTOR = 1  # ATmega328P vector numbers (avr-libc INT0_vect_num, TIMER0_OVF_vect_num)
TIMER0_OVF_VECTOR = 16
TIMER0_OVERFLOW_CYCLES = 64 * 256  # prescaler 64, 8-bit counter: 976.5625 Hz at 16 MHz
# interrupt entry on a real AVR (push PC, clear I), which simavr 1.6 does not charge
ENTRY_CYCLES_HW = 4
# simavr 1.6 runs two instructions after RETI before a pending interrupt: 2 rjmp
AFTER_RETI_CYCLES_SIM = 4
APT_PACKAGES = ("gcc-avr", "binutils-avr", "avr-libc", "libsimavr-dev", "pkg-config", "make", "gcc")
# the seed's sketch on the real Arduino core
SKETCH_APT_PACKAGES = (*APT_PACKAGES, "arduino-core-avr")
# The Arduino core's main loop with an empty loop() (main.cpp: `call loop`, `ret`, `sbiw`, `breq`):
# the two instructions simavr runs after RETI cost 4 (sbiw + breq) to 8 (call + ret) cycles.
CORE_AFTER_RETI_CYCLES_SIM = (4, 8)

_UINT = re.compile(r"(0|[1-9][0-9]*)")
_CONFIG_KEY = re.compile(r"[a-z_]+")
_CONFIG_REQUIRED = ("mcu", "freq", "stimuli", "period", "jitter", "width", "seed", "input",
                    "output")
_END_KEYS = ("stims", "resps", "isrs", "cycles")


class AvrSimOutputError(ValueError):
    """Harness output that cannot be read: the message names the line and what is wrong."""


class AvrSimError(RuntimeError):
    """The firmware or harness could not be built or run."""


@dataclass(frozen=True)
class IsrRun:
    """One run of an interrupt handler, in CPU cycles since reset."""

    vector: int
    entry: int  # the core jumped to the vector (interrupts disabled from here)
    exit: int  # the cycle after its RETI completed

    @property
    def cycles(self) -> int:
        return self.exit - self.entry


@dataclass(frozen=True)
class AvrSimOutput:
    """Everything one harness run printed."""

    version: int
    config: dict[str, str]
    freq_hz: int
    stims: list[int]  # rising edges, in order
    resps: list[tuple[int, int]]  # (cycle, new level), in order
    isrs: list[IsrRun]  # in order of exit
    cycles: int  # the run's last cycle

    def isr_runs(self, vector: int) -> list[IsrRun]:
        return [r for r in self.isrs if r.vector == vector]


def _uint(tok: str, what: str, lineno: int, line: str) -> int:
    if not _UINT.fullmatch(tok):
        raise AvrSimOutputError(f"line {lineno}: {what} {tok!r} is not an unsigned integer: "
                                f"{line!r}")
    return int(tok)


def parse(text: str) -> AvrSimOutput:
    """The harness's stdout, checked line by line (see the module docstring)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    else:
        raise AvrSimOutputError(f"line {len(lines)}: output does not end with a newline "
                                "(truncated?)")
    version: int | None = None
    config: dict[str, str] | None = None
    stims: list[int] = []
    resps: list[tuple[int, int]] = []
    isrs: list[IsrRun] = []
    end: dict[str, int] | None = None
    last_cycle = 0  # stim and resp lines are in time order

    for lineno, line in enumerate(lines, start=1):
        toks = line.split(" ")
        if end is not None:
            raise AvrSimOutputError(f"line {lineno}: text after the end line: {line!r}")
        if lineno == 1:
            if len(toks) != 2 or toks[0] != MAGIC:
                raise AvrSimOutputError(
                    f"line 1: expected '{MAGIC} {FORMAT_VERSION}', got {line!r}"
                )
            version = _uint(toks[1], "version", lineno, line)
            if version != FORMAT_VERSION:
                raise AvrSimOutputError(f"line 1: format version {version}, this parser reads "
                                        f"{FORMAT_VERSION}")
            continue
        if lineno == 2:
            if toks[0] != "config":
                raise AvrSimOutputError(f"line 2: expected the config line, got {line!r}")
            config = {}
            for tok in toks[1:]:
                key, sep, value = tok.partition("=")
                if not sep or not _CONFIG_KEY.fullmatch(key) or not value or key in config:
                    raise AvrSimOutputError(f"line 2: bad or repeated config item {tok!r}")
                config[key] = value
            absent = [k for k in _CONFIG_REQUIRED if k not in config]
            if absent:
                raise AvrSimOutputError(f"line 2: config lacks {', '.join(absent)}")
            if _uint(config["freq"], "freq", lineno, line) == 0:
                raise AvrSimOutputError("line 2: freq=0")
            continue
        kind = toks[0]
        if kind == "stim" and len(toks) == 2:
            cycle = _uint(toks[1], "cycle", lineno, line)
            if cycle < last_cycle:
                raise AvrSimOutputError(f"line {lineno}: cycle {cycle} goes back in time (last "
                                        f"{last_cycle})")
            last_cycle = cycle
            stims.append(cycle)
        elif kind == "resp" and len(toks) == 3:
            cycle = _uint(toks[1], "cycle", lineno, line)
            if toks[2] not in ("0", "1"):
                raise AvrSimOutputError(f"line {lineno}: level {toks[2]!r} is not 0 or 1")
            if cycle < last_cycle:
                raise AvrSimOutputError(f"line {lineno}: cycle {cycle} goes back in time (last "
                                        f"{last_cycle})")
            last_cycle = cycle
            resps.append((cycle, int(toks[2])))
        elif kind == "isr" and len(toks) == 4:
            vector = _uint(toks[1], "vector", lineno, line)
            entry = _uint(toks[2], "entry", lineno, line)
            exit_ = _uint(toks[3], "exit", lineno, line)
            if exit_ <= entry:
                raise AvrSimOutputError(f"line {lineno}: exit {exit_} not after entry {entry}")
            isrs.append(IsrRun(vector, entry, exit_))
        elif kind == "end" and len(toks) == 5:
            end = {}
            for key, tok in zip(_END_KEYS, toks[1:], strict=True):
                name, sep, value = tok.partition("=")
                if name != key or not sep:
                    raise AvrSimOutputError(f"line {lineno}: expected {key}=<n>, got {tok!r}")
                end[key] = _uint(value, key, lineno, line)
        elif kind in ("stim", "resp", "isr", "end"):
            raise AvrSimOutputError(f"line {lineno}: wrong number of fields for {kind}: {line!r}")
        else:
            raise AvrSimOutputError(f"line {lineno}: unknown line {line!r}")

    if version is None or config is None:
        raise AvrSimOutputError(f"line {len(lines) + 1}: output ends before the header is complete")
    if end is None:
        raise AvrSimOutputError(f"line {len(lines) + 1}: no end line (the harness did not finish)")
    got = {"stims": len(stims), "resps": len(resps), "isrs": len(isrs)}
    for key, n in got.items():
        if end[key] != n:
            raise AvrSimOutputError(f"line {len(lines)}: end says {key}={end[key]}, the output has "
                                    f"{n}")
    if end["cycles"] < max([last_cycle, *(r.exit for r in isrs)]):
        raise AvrSimOutputError(f"line {len(lines)}: end cycles={end['cycles']} is before the last "
                                "event")
    return AvrSimOutput(version, config, int(config["freq"]), stims, resps, isrs, end["cycles"])


# --- build and run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Build:
    """What `make` in target_modules/avr produced."""

    elf: Path  # timer0 overflow interrupt enabled, as under the Arduino core
    masked_elf: Path  # -DMASK_TIMER0=1
    harness: Path


def sources() -> Path:
    """target_modules/avr: the installed package's copy (station/_target_modules/avr), else the
    checkout's."""
    packaged = resources.files("station") / "_target_modules" / "avr"
    checkout = Path(__file__).resolve().parents[3] / "target_modules" / "avr"
    for src in ([packaged] if isinstance(packaged, Path) else []) + [checkout]:
        if (src / "Makefile").is_file():
            return src
    raise AvrSimError(f"no AVR responder sources at {packaged} or {checkout}")


def default_build_dir() -> Path:
    """~/.cache/irq-station/avr (or under $XDG_CACHE_HOME): never inside the source tree."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "irq-station" / "avr"


def _make(
    build_dir: Path | None, targets: tuple[str, ...], what: str, packages: tuple[str, ...]
) -> Path:
    """`make` of target_modules/avr into build_dir (rebuilding only what changed)."""
    build_dir = (build_dir or default_build_dir()).resolve()
    make = shutil.which("make")
    if not make:
        raise AvrSimError(f"make is not installed (apt-get install {' '.join(packages)})")
    res = subprocess.run(
        [make, "-C", str(sources()), f"BUILD={build_dir}", *targets], capture_output=True,
        text=True, timeout=300
    )
    if res.returncode != 0:
        raise AvrSimError(f"building {what} failed ({res.returncode}):\n{res.stderr.strip()}")
    return build_dir


def build(build_dir: Path | None = None) -> Build:
    """Both firmware variants and the harness."""
    d = _make(build_dir, ("all",), "the AVR responder", APT_PACKAGES)
    return Build(d / "responder.elf", d / "responder-masked.elf", d / "simavr_harness")


def build_sketch(build_dir: Path | None = None) -> Build:
    """The seed's sketch (target_modules/avr/sketch/responder_sketch.ino) built on Debian's Arduino
    core, both variants, and the harness: `elf` keeps the core's timer0 overflow interrupt,
    `masked_elf` clears it in setup()."""
    d = _make(build_dir, ("sketch", "harness"), "the Arduino sketch", SKETCH_APT_PACKAGES)
    return Build(d / "sketch.elf", d / "sketch-masked.elf", d / "simavr_harness")


def run(
    harness: Path,
    elf: Path,
    *,
    stimuli: int = 1000,
    period: int = 2000,
    jitter: int = 2000,
    width: int = 100,
    seed: int = 1,
    timeout: float = 120,
) -> AvrSimOutput:
    """One harness run (a real subprocess), parsed. Times are in CPU cycles."""
    cmd = [str(harness), "-n", str(stimuli), "-p", str(period), "-j", str(jitter), "-w", str(width)]
    cmd += ["-s", str(seed), str(elf)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise AvrSimError(f"{harness.name} exited with {res.returncode}: {res.stderr.strip()}")
    return parse(res.stdout)


# --- analysis --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """One stimulus and the output change that answered it (None: a miss)."""

    stim: int
    resp: int | None

    @property
    def delay(self) -> int | None:
        return None if self.resp is None else self.resp - self.stim


def pair(out: AvrSimOutput) -> list[Response]:
    """Each stimulus with the first output change after it and before the next stimulus."""
    resp_cycles = [c for c, _ in out.resps]
    paired = []
    for i, stim in enumerate(out.stims):
        j = bisect_right(resp_cycles, stim)
        nxt = out.stims[i + 1] if i + 1 < len(out.stims) else math.inf
        paired.append(
            Response(
                stim, resp_cycles[j] if j < len(resp_cycles) and resp_cycles[j] < nxt else None
            )
        )
    return paired


@dataclass(frozen=True)
class IsrWindow:
    """A handler's runs as a collision window: how often, how long."""

    vector: int
    runs: int
    rate_hz: float  # measured from the entries (nan with fewer than two runs)
    mean_cycles: float  # the collision window
    min_cycles: int
    max_cycles: int
    freq_hz: int

    @property
    def expected_fraction(self) -> float:
        """Chance that a randomly timed edge arrives while the handler runs (simavr's timing)."""
        return self.rate_hz * self.mean_cycles / self.freq_hz

    @property
    def expected_fraction_hw(self) -> float:
        """The same on a real AVR, whose 4-cycle interrupt entry also locks an edge out."""
        return self.rate_hz * (self.mean_cycles + ENTRY_CYCLES_HW) / self.freq_hz


def isr_window(out: AvrSimOutput, vector: int = TIMER0_OVF_VECTOR) -> IsrWindow:
    runs = out.isr_runs(vector)
    if not runs:
        return IsrWindow(vector, 0, 0.0, 0.0, 0, 0, out.freq_hz)
    lengths = [r.cycles for r in runs]
    span = runs[-1].entry - runs[0].entry
    rate = (len(runs) - 1) * out.freq_hz / span if len(runs) > 1 and span > 0 else math.nan
    return IsrWindow(vector, len(runs), rate, sum(lengths) / len(lengths), min(lengths),
                     max(lengths), out.freq_hz)


@dataclass(frozen=True)
class Outlier:
    stim: int
    delay: int  # cycles
    extra: int  # cycles above the fastest response
    isr: IsrRun | None  # the handler run it arrived in (None: unexplained)
    # cycles of that run's lock-out (rest of handler + after RETI) left at arrival
    blocked: int | None


@dataclass(frozen=True)
class Analysis:
    freq_hz: int
    responses: list[Response]
    threshold: int  # cycles: a delay above this is an outlier
    outliers: list[Outlier]
    window: IsrWindow

    @property
    def delays(self) -> list[int]:
        return [r.delay for r in self.responses if r.delay is not None]

    @property
    def delays_s(self) -> list[float]:
        return [d / self.freq_hz for d in self.delays]

    @property
    def misses(self) -> int:
        return sum(r.resp is None for r in self.responses)

    @property
    def min_cycles(self) -> int:
        return min(self.delays)

    @property
    def max_cycles(self) -> int:
        return max(self.delays)

    @property
    def spread_s(self) -> float:
        return (self.max_cycles - self.min_cycles) / self.freq_hz

    @property
    def outlier_fraction(self) -> float:
        return len(self.outliers) / len(self.responses) if self.responses else math.nan

    @property
    def unexplained(self) -> list[Outlier]:
        return [o for o in self.outliers if o.isr is None]


def _arrived_in(runs: list[IsrRun], entries: list[int], stim: int,
                after_reti: int) -> IsrRun | None:
    """The run whose lock-out (entry, exit + after_reti] the edge arrived in. Runs do not nest, so
    only the last run that started before the edge can hold it."""
    i = bisect_right(entries, stim - 1) - 1
    if i >= 0 and stim <= runs[i].exit + after_reti:
        return runs[i]
    return None


def analyse(
    out: AvrSimOutput,
    *,
    baseline_max: int | None = None,
    slack: int = 3,
    vector: int = TIMER0_OVF_VECTOR,
    after_reti: int = AFTER_RETI_CYCLES_SIM,
) -> Analysis:
    """Pair, find outliers, and attribute each to the `vector` handler run it arrived in.

    An outlier is a delay above `baseline_max` (the masked build's largest delay, when known),
    else above the fastest delay of this run + `slack` cycles (the idle loop's instruction spread).
    An edge that arrived at a handler's entry cycle is not in it (INT0 wins the tie); one that
    arrived up to `after_reti` cycles after its exit still is (see the module docstring)."""
    responses = pair(out)
    delays = [r.delay for r in responses if r.delay is not None]
    if not delays:
        raise AvrSimError("no stimulus was answered: nothing to analyse")
    fastest = min(delays)
    threshold = baseline_max if baseline_max is not None else fastest + slack
    runs = sorted(out.isr_runs(vector), key=lambda r: r.entry)
    entries = [r.entry for r in runs]
    outliers = []
    for r in responses:
        if r.delay is None or r.delay <= threshold:
            continue
        run = _arrived_in(runs, entries, r.stim, after_reti)
        blocked = None if run is None else run.exit + after_reti - r.stim
        outliers.append(Outlier(r.stim, r.delay, r.delay - fastest, run, blocked))
    return Analysis(out.freq_hz, responses, threshold, outliers, isr_window(out, vector))
