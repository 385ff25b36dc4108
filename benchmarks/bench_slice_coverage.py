"""Do cyclictest's sliced-run intervals hold on latency that comes in phases?

cyclictest keeps no time order in its histogram; cyclictest.slices runs it as consecutive
invocations so the station sees one histogram per slice (station/analysis/slices.py). This bench
draws seeded runs of a process with a load's time structure (station/twin/phased_process.py: three
phases cycling, durations jittered, carry-over between cycles), cuts each into slices, histograms
them in whole µs as cyclictest does, and holds the stated 95 % intervals of p50, p99, p99.99 and of
the probability of reaching a deadline at the process's long-run p99 against the truth from the
process's parameters. Beside each: the independent interval on the same histograms (what a
histogram alone allows), and the median widths. OK where the sliced interval holds in 90-99 % of
the runs that state one, MISS otherwise (exit status 1).

    .venv/bin/python benchmarks/bench_slice_coverage.py [--runs 200] [--slices 20,40] [--per-slice 4000,20000]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from station.analysis import slices  # noqa: E402
from station.analysis.histogram import Histogram, combine  # noqa: E402
from station.analysis.worst_case import binomial_interval  # noqa: E402
from station.twin.phased_process import PhasedProcess  # noqa: E402

LEVELS = {"p50": 0.5, "p99": 0.99, "p99.99": 0.9999}
GOAL = (0.90, 0.99)


def histograms(latency_us: np.ndarray, per_slice: int, range_us: int = 10_000) -> list[Histogram]:
    out = []
    for part in latency_us.reshape(-1, per_slice):
        b, c = np.unique(np.minimum(np.floor(part).astype(np.int64), range_us), return_counts=True)
        out.append(Histogram(b[b < range_us], c[b < range_us], int(c[b == range_us].sum()), range_us=range_us))
    return out


def study(process: PhasedProcess, k: int, per: int, runs: int, seed: int) -> list[tuple[str, int, int, float, int,
                                                                                       float, bool]]:
    truth = {key: process.quantile(p) * 1000 for key, p in LEVELS.items()}
    deadline_us = math.floor(process.quantile(0.99))
    p_true = 1 - process.cdf(deadline_us)
    rng = np.random.default_rng(seed)
    stated = {key: [] for key in [*LEVELS, "deadline"]}
    iid = {key: [] for key in stated}
    for _ in range(runs):
        parts = histograms(process.sample(rng, k * per), per)
        got = slices.percentile_intervals(parts)
        plain = combine(parts).percentile_ci95_ns()
        for key, xi in truth.items():
            lo, hi = got[key]["ci95_ns"]
            if lo is not None and hi is not None:
                stated[key].append((lo <= xi <= hi, hi - lo))
            lo, hi = plain[key]
            if lo is not None and hi is not None:
                iid[key].append((lo <= xi <= hi, hi - lo))
        d = slices.exceedance(parts, deadline_us * 1000)
        stated["deadline"].append((d["ci_low"] <= p_true <= d["ci_high"], d["ci_high"] - d["ci_low"]))
        lo, hi = binomial_interval(d["above"], d["cycles"])
        iid["deadline"].append((lo <= p_true <= hi, hi - lo))
    rows = []
    for key in stated:
        s, i = stated[key], iid[key]
        held = sum(h for h, _ in s) / len(s) if s else math.nan
        ok = not s or GOAL[0] <= held <= GOAL[1]
        rows.append((key, len(s), sum(h for h, _ in s), float(np.median([w for _, w in s])) if s else math.nan,
                     sum(h for h, _ in i), float(np.median([w for _, w in i])) if i else math.nan, ok))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--slices", default="20,40")
    ap.add_argument("--per-slice", default="4000,20000")
    ap.add_argument("--seed", type=int, default=46)
    args = ap.parse_args()
    process = PhasedProcess()
    print(f"process: phases at {process.medians_us} µs for ~{process.durations} cycles (jitter {process.jitter}), "
          f"log-spread {process.sigma}, carry-over {process.carry}; {args.runs} runs per row")
    print(f"{'slices':>6} {'cycles/slice':>12} {'figure':>9} {'stated':>7} {'held':>7} {'width':>10} "
          f"{'iid held':>9} {'iid width':>10}  verdict")
    missed = False
    for k in (int(x) for x in args.slices.split(",")):
        for per in (int(x) for x in args.per_slice.split(",")):
            for key, n, held, width, held_iid, width_iid, ok in study(process, k, per, args.runs, args.seed):
                missed |= not ok
                share = f"{held / n:.1%}" if n else "—"
                fmt = (lambda w: f"{w:.3g}") if key == "deadline" else (lambda w: f"{w / 1000:.3g} µs")
                print(f"{k:>6} {per:>12} {key:>9} {n:>7} {share:>7} {fmt(width) if n else '—':>10} "
                      f"{held_iid / args.runs:>9.1%} {fmt(width_iid):>10}  {'OK' if ok else 'MISS'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
