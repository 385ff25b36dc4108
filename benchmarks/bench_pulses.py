"""extract_pulses on a 120 000-point record, against baselines measured in the same run.

Baselines: numpy's bare threshold compare (`volts > threshold`, the floor of
any vectorised method) and a naive pure-Python Schmitt loop with the same
interpolation (what the vectorised code replaces). Prints times and ratios;
no absolute thresholds, as machines differ.

    .venv/bin/python benchmarks/bench_pulses.py
"""

from __future__ import annotations

import timeit

import numpy as np

from instruments.pulses import extract_pulses
from instruments.scope import Waveform
from instruments.sim.signal import LogicSignal, digitize

N = 120_000
DT_NS = 2.5e6 / N  # 250 µs/div: a 2.5 ms record


def record() -> tuple[Waveform, float, float]:
    """A TDS-like record: pulses every 100 µs of 1-20 µs, 15 ns edges, noise, 8 bits."""
    rng = np.random.default_rng(1)
    leads = np.arange(-50_000.0, 2.6e6, 100_000.0)
    pulses = np.stack([leads, leads + rng.uniform(1_000, 20_000, len(leads))], axis=1)
    volts = LogicSignal(noise_v=0.02).render(pulses, 0.0, DT_NS, N, rng)
    codes = digitize(volts, 1.0, -2.0)
    volts = 0.04 * (codes.astype(np.float64) + 50)
    return Waveform(0.0, DT_NS * 1e-9, volts, resolution_v=0.04), 1.65, 0.33


def naive_pulses(volts: list[float], threshold: float, hysteresis: float) -> list[float]:
    """The same Schmitt trigger and interpolation, one sample at a time; widths in samples."""
    lo, hi = threshold - hysteresis / 2, threshold + hysteresis / 2
    state, last_below, last_above = 0, -1, -1
    lead: float | None = None
    widths = []
    for i, v in enumerate(volts):
        new = 1 if v >= hi else -1 if v <= lo else state
        if state and new != state:
            k = last_below if new == 1 else last_above
            x = k + (threshold - volts[k]) / (volts[k + 1] - volts[k])
            if new == 1:
                lead = x
            elif lead is not None:
                widths.append(x - lead)
        if v < threshold:
            last_below = i
        elif v > threshold:
            last_above = i
        state = new
    return widths


def best(fn, number: int) -> float:  # noqa: ANN001
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def main() -> None:
    wf, threshold, hysteresis = record()
    volts = wf.volts.tolist()
    fast = extract_pulses(wf, threshold, hysteresis)
    slow = naive_pulses(volts, threshold, hysteresis)
    assert len(fast) == len(slow) and np.allclose(fast.width_s / wf.dt_s, slow), "disagree"

    t_compare = best(lambda: wf.volts > threshold, 200)
    t_fixed = best(lambda: extract_pulses(wf, threshold, hysteresis), 50)
    t_auto = best(lambda: extract_pulses(wf), 20)
    t_naive = best(lambda: naive_pulses(volts, threshold, hysteresis), 1)
    print(f"record: {N} points, {len(fast)} complete pulses")
    print(f"numpy compare (v > thr)          {t_compare * 1e3:8.3f} ms")
    print(f"extract_pulses, given threshold  {t_fixed * 1e3:8.3f} ms  = {t_fixed / t_compare:6.1f} x compare")
    print(f"extract_pulses, auto threshold   {t_auto * 1e3:8.3f} ms  = {t_auto / t_compare:6.1f} x compare")
    print(
        f"naive Python loop                {t_naive * 1e3:8.3f} ms  "
        f"= {t_naive / t_fixed:6.1f} x slower than extract_pulses"
    )


if __name__ == "__main__":
    main()
