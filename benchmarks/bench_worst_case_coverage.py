"""Do the worst-case figures hold on the twin's own latency model?

For each interface of the seed-2015 preset (PCIe with the demo's 5e-5 outliers) and each sample size,
draws seeded samples with the generator the twin streams (ModuleSession, under load) and holds the
estimator's figures (station/analysis/worst_case/) against the model's true quantiles, computed
from its parameters (tests/twin_latency_truth.py). Per interface and size it prints:

    interface  events  samples  true 1e-9  GPD interval held 1e-9  called reliable  held when reliable
    bound held (95 %)  verdict

"GPD interval held" counts every fit, whatever the station calls it: it is why the extrapolation is
limited (worst_case.MIN_EXPECTED_BEYOND). The verdict is OK when the figures the station states hold at
their level within the binomial 1 % quantile (the reliable 1e-9 intervals, where there are any,
and the distribution-free bound), MISS otherwise. Slow at 10 M events (~5 s a sample): a bench,
not a test (tests/test_worst_case_twin.py runs the 200 000-event case).

    .venv/bin/python benchmarks/bench_worst_case_coverage.py [--samples 50] [--events 200000,10000000]

With --distances (e.g. 30,10,3,1,0.1) it measures instead how far the fits may be trusted: for
each exceedance p = d/n it counts the samples whose GPD interval holds the model's true quantile
at p (the coverage a MIN_EXPECTED_BEYOND of d would promise), the samples whose stated interval
holds it (from d = 10 on, the empirical order-statistic interval), and how many the station calls
reliable there; the verdict is on the stated intervals called reliable.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from station.analysis.worst_case import worst_case  # noqa: E402
from station.twin.model import CHUNK_EVENTS, ModuleSession, latency_shape, load_preset  # noqa: E402
from tests.twin_latency_truth import TrueLatency  # noqa: E402

INTERFACES = {"lpt": {}, "pcie": {"outlier_fraction": 5.0e-5}}  # configs/rtai-lpt-vs-pcie.yaml's override


def _held_enough(held: int, total: int, level: float) -> bool:
    return total == 0 or held >= stats.binom.ppf(0.01, total, level)


def _sample(params, preset, events: int, name: str, seed: int) -> np.ndarray:  # noqa: ANN001 - model types
    session = ModuleSession(params, preset.calibration_samples, 100_000, False, 0,
                            f"bench-worst-{name}-{events}-{seed}")
    return np.concatenate([session.chunk(i, loaded=True).sw for i in range(events // CHUNK_EVENTS)])


def _models(preset):  # noqa: ANN001, ANN202 - model types
    """Each interface's parameters and its true latency distribution."""
    for name, override in INTERFACES.items():
        params = replace(preset.interfaces[name], **override)
        yield name, params, TrueLatency.of(params, latency_shape(params, preset.calibration_samples))


def _holds(block: dict, true_q: float) -> bool:
    return block.get("ci_low") is not None and block.get("ci_high") is not None \
        and block["ci_low"] <= true_q <= block["ci_high"]


def distances(samples: int, sizes: list[int], ds: list[float]) -> int:
    """Coverage at p = d/n against the model's true quantile, per distance d: of the GPD's interval
    (the fit's own, whether stated or beside the stated figure) and of the interval the station states
    (inside the data the empirical order-statistic one), beside how often it calls the figure reliable."""
    # its truth is the i.i.d. model's (dependence: bench_dependence_coverage)
    preset = load_preset("seed-2015").independent()
    print("interface  events    d=n·p   p          true q (µs)  GPD held  stated held  stated by  "
          "reliable  held|reliable  verdict")
    missed = False
    for name, params, truth in _models(preset):
        for events in sizes:
            for d in ds:
                true_q = truth.quantile(d / events)
                gpd = stated = reliable = held_reliable = 0
                kinds: set[str] = set()
                for seed in range(samples):
                    sw = _sample(params, preset, events, name, seed)
                    r = worst_case(sw, exceedance=d / events, seed=seed)
                    q = r["quantile_ns"] or {}
                    fit = q.get("fit") or (q if q.get("interval", "").startswith("profile") else {})
                    gpd += _holds(fit, true_q)
                    stated += _holds(q, true_q)
                    reliable += r["reliable"]
                    held_reliable += _holds(q, true_q) and r["reliable"]
                    kinds.add("empirical" if q.get("interval", "").startswith("empirical") else "GPD")
                ok = _held_enough(held_reliable, reliable, 0.95)
                missed |= not ok
                print(f"{name:9}  {events:<9,} {d:<7g} {d / events:<10.3g} {true_q / 1e3:10.3f}  "
                      f"{gpd:>4}/{samples:<4} {stated:>6}/{samples:<4} {'+'.join(sorted(kinds)):10} "
                      f"{reliable:>4}/{samples:<4} {held_reliable:>6}/{reliable:<6} {'OK' if ok else 'MISS'}",
                      flush=True)
    return 1 if missed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--events", default="200000,10000000", help="sample sizes, comma-separated")
    ap.add_argument("--distances", default=None, help="n·p values to measure the coverage at, comma-separated")
    args = ap.parse_args()
    if args.distances:
        return distances(args.samples, [int(v) for v in args.events.split(",")],
                         [float(v) for v in args.distances.split(",")])
    # its truth is the i.i.d. model's (dependence: bench_dependence_coverage)
    preset = load_preset("seed-2015").independent()
    print("interface  events    samples  true 1e-9  GPD held  reliable  held|reliable  bound held  verdict")
    missed = False
    for name, params, truth in _models(preset):
        q9 = truth.quantile(1e-9)
        for events in (int(v) for v in args.events.split(",")):
            held = reliable = held_reliable = bound_held = 0
            for seed in range(args.samples):
                sw = _sample(params, preset, events, name, seed)
                r = worst_case(sw, seed=seed)
                q = r["quantile_ns"] or {}
                inside = q.get("ci_low") is not None and q.get("ci_high") is not None \
                    and q["ci_low"] <= q9 <= q["ci_high"]
                held += inside
                reliable += r["reliable"]
                held_reliable += inside and r["reliable"]
                bound_held += truth.quantile(r["bound"]["exceedance"]) <= r["bound"]["bound_ns"]
            ok = _held_enough(held_reliable, reliable, 0.95) and _held_enough(bound_held, args.samples, 0.95)
            missed |= not ok
            print(f"{name:9}  {events:<9,} {args.samples:<8} {q9 / 1000:7.2f} µs  {held:>3}/{args.samples:<4} "
                  f"{reliable:>3}/{args.samples:<4} {held_reliable:>5}/{reliable:<6} {bound_held:>5}/{args.samples:<4} "
                  f"{'OK' if ok else 'MISS'}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
