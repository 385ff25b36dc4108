"""Pulse extraction on a 100 M-sample int8 record (a deep-memory scope's transfer), against
a numpy copy of the same codes measured in the same run.

Two records, 8-bit codes as a TDS-like digitizer gives them (25 codes per division at
1 V/div, 20 mV noise, 15 ns edges), pulses of 1-20 µs every 100.037 µs:
  fast  2.5 GS/s: 40 ms, ~400 pulses (edges 37 samples long, most blocks left unread)
  slow  48 MS/s:  2 s, ~20 000 pulses (a pulse every ~4 800 samples: many blocks read)
For each: the median of several interleaved timings (copy, then each extraction, round after
round, so a slow spell of the machine falls on all of them alike) of `codes.copy()` and of
`extract_pulses` with the automatic threshold, with a given threshold and hysteresis, and with a
given threshold only (what a campaign with a fixed threshold asks: the hysteresis still comes
from the levels), each as "copy time / extraction time" (target >= 0.5, OK or MISS); then the
extraction's peak of allocations (tracemalloc, which numpy reports to) as a multiple of the
record (target <= 3). No absolute thresholds, as machines differ; the exit status is 1 when a
target is missed, on either record. Every time is printed as the median (min-max) of the
rounds (--repeat, at least 5). The edges come from the compiled walk (instruments/schmitt_kernel.py,
numba) on records this long; the header of each record says which path ran, and the pure-numpy
path (IRQ_STATION_KERNEL=numpy) is timed beside it for reference. `--float` adds the float64 path
(the record converted to volts, as before the code path) once, for reference.

    .venv/bin/python benchmarks/bench_extraction.py [--points N] [--float]
"""

from __future__ import annotations

import argparse
import os
import time
import timeit
import tracemalloc
from collections.abc import Callable

import numpy as np

from instruments import schmitt_kernel
from instruments.pulses import extract_pulses, waveform_threshold
from instruments.scope import CodeScale, Waveform
from instruments.sim.signal import LogicSignal, digitize

PERIOD_NS = 100_037.0
RENDER_SLICE = 1 << 22  # samples rendered at a time (the float64 rendering is 8 bytes a sample)


def record(points: int, dt_ns: float, seed: int = 1) -> Waveform:
    """An int8 record at 1 V/div, position -2 div (0 V at code -50), 0-3.3 V pulses, noise."""
    rng = np.random.default_rng(seed)
    span = points * dt_ns
    leads = np.arange(-PERIOD_NS / 2, span + PERIOD_NS, PERIOD_NS) + rng.uniform(0, 1000, 1)
    pulses = np.stack([leads, leads + rng.uniform(1_000, 20_000, len(leads))], axis=1)
    signal = LogicSignal(noise_v=0.02)
    codes = np.empty(points, np.int8)
    for i in range(0, points, RENDER_SLICE):
        n = min(RENDER_SLICE, points - i)
        t0, t1 = i * dt_ns, (i + n) * dt_ns
        near = pulses[(pulses[:, 1] > t0 - 1000) & (pulses[:, 0] < t1 + 1000)]
        codes[i : i + n] = digitize(signal.render(near, t0, dt_ns, n, rng), 1.0, -2.0)
    scale = CodeScale(volts_per_code=0.04, offset_code=-50.0, offset_v=0.0)
    return Waveform(0.0, dt_ns * 1e-9, codes=codes, scale=scale)


def timings(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Each function's times over `repeat` rounds, the functions interleaved in every round."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name].append(timeit.timeit(fn, number=1))
    return times


def spread(times: list[float]) -> str:
    """median (min-max) in ms, over every round."""
    return f"{np.median(times) * 1e3:8.2f} ms ({min(times) * 1e3:.2f}-{max(times) * 1e3:.2f})"


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISS"


def peak_bytes(fn: Callable[[], object]) -> int:
    """The peak of allocations while `fn` runs, beyond what was allocated before."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench(name: str, wf: Waveform, repeat: int, with_float: bool) -> bool:
    """Prints the record's figures; True when every target is met."""
    codes = wf.codes
    assert codes is not None
    auto = waveform_threshold(wf)
    assert auto is not None, "the record has two levels"
    threshold, hysteresis = auto
    runs: dict[str, Callable[[], object]] = {
        "automatic threshold": lambda: extract_pulses(wf),
        "given threshold, hysteresis": lambda: extract_pulses(wf, threshold, hysteresis),
        "given threshold only": lambda: extract_pulses(wf, threshold),
    }
    pulses = extract_pulses(wf)
    print(
        f"\n{name}: {len(wf):,} int8 samples ({codes.nbytes / 1e6:.0f} MB), {len(pulses)} complete pulses, "
        f"threshold {threshold:.3f} V, hysteresis {hysteresis:.3f} V;\n  edges by the "
        f"{schmitt_kernel.path_for(len(wf))} path"
    )

    def numpy_path() -> object:  # the pure-numpy path, for reference (no target: the default path has it)
        os.environ["IRQ_STATION_KERNEL"] = "numpy"
        try:
            return extract_pulses(wf, threshold, hysteresis)
        finally:
            del os.environ["IRQ_STATION_KERNEL"]

    timed = timings({"copy": codes.copy, **runs, "numpy path": numpy_path}, repeat)
    copies = timed.pop("copy")
    t_copy = float(np.median(copies))
    t_numpy = timed.pop("numpy path")
    met = True
    print(f"  {'numpy copy of the codes, median (min-max)':46s} {spread(copies)}")
    for label, times in timed.items():
        t = float(np.median(times))
        met &= (ok := t_copy / t >= 0.5)
        print(
            f"  {'extract_pulses, ' + label:46s} {spread(times)}   copy/extraction = {t_copy / t:5.2f}"
            f"  (target >= 0.5: {verdict(ok)})"
        )
    t = float(np.median(t_numpy))
    print(f"  {'pure-numpy path, given threshold, hysteresis':46s} {spread(t_numpy)}   copy/extraction = "
          f"{t_copy / t:5.2f}  (reference)")
    for label, fn in runs.items():
        peak = peak_bytes(fn)
        met &= (ok := peak / codes.nbytes <= 3)
        print(
            f"  {'peak allocations, ' + label:46s} {peak / 1e6:8.1f} MB   = {peak / codes.nbytes:5.2f} x the record"
            f"  (target <= 3: {verdict(ok)})"
        )
    if with_float:
        assert wf.scale is not None
        start = time.perf_counter()  # the conversion the dialects did, then the float64 extraction
        float_wf = Waveform(wf.t0_s, wf.dt_s, wf.scale.volts(codes), resolution_v=wf.resolution_v)
        float_pulses = extract_pulses(float_wf)
        t = time.perf_counter() - start
        del float_wf
        same = len(float_pulses) == len(pulses) and np.array_equal(float_pulses.width_s, pulses.width_s)
        print(
            f"  float64 path (to volts, then extract), one run: {t * 1e3:.0f} ms   copy/extraction = {t_copy / t:5.3f}"
            f"   same pulses: {same}"
        )
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000_000)
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds (at least 5)")
    parser.add_argument("--float", action="store_true", help="also time the float64 path once")
    args = parser.parse_args()
    if args.repeat < 5:
        parser.error("--repeat: at least 5 rounds (a median with its min and max)")
    met = [bench(name, record(args.points, dt_ns), args.repeat, args.float)
           for name, dt_ns in (("fast, 2.5 GS/s", 0.4), ("slow, 48 MS/s", 2.5e6 / 120_000))]
    print("\nevery target met" if all(met) else "\nMISS: a target is missed (see above)")
    return 0 if all(met) else 1


if __name__ == "__main__":
    raise SystemExit(main())
