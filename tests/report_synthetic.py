"""Seeded synthetic campaign for the report tests: arrays and the report dict built from them.

The statistics are computed here with plain numpy, independently of the
station's analysis, so the renderers are checked against known numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from station.analysis.samples import RunSamples, ThreadHistogram

PERCENTILES = {"p50": 50.0, "p99": 99.0, "p99.99": 99.99, "p99.999": 99.999}
TRW_NS = 2000.0


def stats(values: np.ndarray) -> dict[str, Any]:
    pct = np.percentile(values, list(PERCENTILES.values()))
    return {
        "count": int(values.size),
        "min_ns": float(values.min()),
        "mean_ns": float(values.mean()),
        "std_ns": float(values.std(ddof=1)),
        "max_ns": float(values.max()),
        "percentiles_ns": {k: float(v) for k, v in zip(PERCENTILES, pct, strict=True)},
    }


def _sw(rng: np.random.Generator, n: int, floor_ns: float, mean_ns: float,
        outlier_fraction: float = 0.0) -> np.ndarray:
    # Shifted gamma: a hard floor and a right tail, like an IRQ latency.
    shape = 4.0
    x = floor_ns + rng.gamma(shape, (mean_ns - floor_ns) / shape, n)
    k = int(round(outlier_fraction * n))
    if k:
        idx = rng.choice(n, k, replace=False)
        x[idx] = rng.uniform(25_000, 40_000, k)  # the seed's PCIe secondary distribution
    return np.round(x).astype(np.int64)


def _hw(rng: np.random.Generator, sw: np.ndarray, shift_ns: float,
        outlier_fraction: float = 0.0) -> np.ndarray:
    hw = sw.astype(np.float64) + shift_ns + rng.normal(0.0, 40.0, sw.size)
    if outlier_fraction:
        # SW outliers from a delay *before* the bus write: the pulse does not see them.
        big = sw > 20_000
        hw[big] = rng.normal(6400.0, 500.0, int(big.sum())) + shift_ns
    return hw


def build(n: int = 50_000, seed: int = 2015) -> tuple[dict[str, Any], dict[str, RunSamples]]:
    rng = np.random.default_rng(seed)
    samples: dict[str, RunSamples] = {}
    specs = [
        # id, interface, variant, n, floor, mean, outlier fraction, hw shift (None: no scope)
        ("lpt-inb-r0", "lpt", "inb", 2 * n, 5700, 8100, 0.0, TRW_NS),
        ("lpt-no-inb-r0", "lpt", "no-inb", n, 5700, 8100, 0.0, 0.0),
        ("pcie-inb-r0", "pcie", "inb", n, 4800, 6400, 1e-3, TRW_NS),
        ("pcie-no-inb-r0", "pcie", "no-inb", n, 4800, 6400, 1e-3, 0.0),
        ("lpt-no-inb-r1", "lpt", "no-inb", n // 5, 5700, 8100, 0.0, None),
    ]
    runs = []
    for run_id, interface, variant, count, floor, mean, outliers, shift in specs:
        sw = _sw(rng, count, floor, mean, outliers)
        hw = None if shift is None else _hw(rng, sw, shift, outliers)
        samples[run_id] = RunSamples(sw_ns=sw, hw_ns=hw)
        diff = None if hw is None else hw - sw
        runs.append({
            "id": run_id, "interface": interface, "variant": variant, "load": "seed-io",
            "repetition": int(run_id[-1]), "period_ns": 100_000,
            "status": "complete" if hw is not None else "incomplete",
            "error": None if hw is not None else "scope disconnected after 12 s",
            "duration_s": count * 100e-6,
            "sw": stats(sw), "hw": None if hw is None else stats(hw),
            "losses": {"sw_lost": 0, "sw_dropped_by_target": 0 if hw is not None else 3,
                       "gaps": 0 if hw is not None else 1, "format": "v1"},
            "shift": None if diff is None else {
                "hw_minus_sw_mean_ns": float(diff.mean()),
                "ci95_ns": [float(diff.mean() - 1.96 * diff.std(ddof=1) / np.sqrt(diff.size)),
                            float(diff.mean() + 1.96 * diff.std(ddof=1) / np.sqrt(diff.size))],
                "hw_minus_sw_median_ns": float(np.median(diff)),
            },
            "outliers": {"sw_threshold_ns": 20_000.0, "sw_count": int((sw > 20_000).sum()),
                         "hw_count": 0 if hw is None else int((hw > 20_000).sum()),
                         "method": "fixed threshold 20 µs"},
        })
    runs.append({
        "id": "pcie-no-inb-r1", "interface": "pcie", "variant": "no-inb", "load": "seed-io",
        "repetition": 1, "period_ns": 100_000, "status": "failed",
        "error": "insmod: ERROR: could not insert module irq_pcie.ko: No such device",
        "duration_s": 0.0, "sw": None, "hw": None,
        "losses": {"sw_lost": 0, "sw_dropped_by_target": 0, "gaps": 0, "format": "v1"},
        "shift": None, "outliers": None,
    })
    by_id = {r["id"]: r for r in runs}
    trw = []
    for interface in ("lpt", "pcie"):
        a, b = by_id[f"{interface}-inb-r0"], by_id[f"{interface}-no-inb-r0"]
        est = a["shift"]["hw_minus_sw_mean_ns"] - b["shift"]["hw_minus_sw_mean_ns"]
        trw.append({"interface": interface, "estimate_ns": est, "ci95_ns": [est - 15, est + 15],
                    "inb_run": a["id"], "no_inb_run": b["id"], "truth_ns": TRW_NS})
    lpt_max = max(by_id[k]["sw"]["max_ns"] for k in ("lpt-inb-r0", "lpt-no-inb-r0"))
    pcie_sw = np.concatenate([samples["pcie-inb-r0"].sw.samples(), samples["pcie-no-inb-r0"].sw.samples()])
    pcie_hw = np.concatenate([samples["pcie-inb-r0"].hw.samples(), samples["pcie-no-inb-r0"].hw.samples()])
    above = int((pcie_sw > lpt_max).sum())
    report: dict[str, Any] = {
        "schema_version": 2,
        "campaign": {
            "name": "seed-2015-twin",
            "description": "Reproduction of the 2015 RTAI LPT vs PCIe experiment on the twin.",
            "config_path": "configs/demo-twin.yaml",
            "created_utc": "2025-01-02T03:04:05Z",
            "station_version": "0.1.0",
            "target": {"kind": "twin", "host": "127.0.0.1:2222", "audit": {
                "uname": "Linux twin 3.4.55-rtai #1 SMP x86_64",
                "cmdline": "BOOT_IMAGE=/vmlinuz isolcpus=1 <quiet> & nosmt",
                "interrupts_excerpt": "  5:   812345   0  IO-APIC-edge  parport0\n"
                                      " 16:   401234   0  PCI-MSI      irq_pcie",
            }},
            "scope": {"idn": "TEKTRONIX,TDS 460A,0,CF:91.1CT",
                      "resource": "TCPIP::127.0.0.1::5025::SOCKET"},
            "twin": {"preset": "seed-2015",
                     "ground_truth": {"t_rw_ns": {"lpt": TRW_NS, "pcie": TRW_NS},
                                      "pcie_outlier_fraction": 1e-3}},
        },
        "runs": runs,
        "comparisons": {
            "t_rw": trw,
            "cross_interface_outliers": [{
                "interface": "pcie", "reference_interface": "lpt", "threshold_ns": lpt_max,
                "sw_count_above": above, "sw_total": int(pcie_sw.size),
                "sw_fraction": above / pcie_sw.size,
                "hw_count_above": int((pcie_hw > lpt_max).sum()), "hw_total": int(pcie_hw.size),
                "seen_by_scope": False,
                "verdict": "PCIe SW outliers beyond the LPT maximum are not on the scope: "
                           "the delay happens before the bus write.",
            }],
            "worst_case": [
                {"interface": "lpt", "observed_max_ns": lpt_max,
                 "p99_999_ns": by_id["lpt-inb-r0"]["sw"]["percentiles_ns"]["p99.999"],
                 "run": "lpt-inb-r0"},
                {"interface": "pcie", "observed_max_ns": float(pcie_sw.max()),
                 "p99_999_ns": by_id["pcie-no-inb-r0"]["sw"]["percentiles_ns"]["p99.999"],
                 "run": "pcie-no-inb-r0"},
            ],
        },
        "findings": [],
        "notes": ["Run lpt-no-inb-r1 is incomplete: 3 records dropped by the target, 1 gap.",
                  "Run pcie-no-inb-r1 failed: insmod could not insert irq_pcie.ko."],
    }
    return report, samples


# --- cyclictest (seed 004) ----------------------------------------------------------------------

CT_TARGETS = ("regular", "rt")
CT_CASES = ("no-load", "hackbench", "stress-light", "stress-medium", "stress-hard")
#: The seed's "Maximum latency" table (µs): each cell's largest sample, planted in repetition 0.
CT_SEED_MAX_US = {"regular": (5959, 6167, 6195, 6153, 7937), "rt": (71, 97, 172, 157, 176)}
CT_DEADLINE_US = 125
CT_RANGE_US = {"regular": 6000, "rt": 1000}  # cyclictest -h: regular's worst cells overflow it
CT_FAILED = ("regular", "hackbench")  # both repetitions failed: no value, a problem
CT_INCOMPLETE = ("rt", "stress-hard", 1)  # a larger max that the table must not count
CT_PROBLEMS = {
    "regular": {"hackbench": "failed: cyclictest exited with status 1: "
                             "sched_setscheduler: Operation not permitted"},
    "rt": {"stress-hard": "1 of 2 runs incomplete: stopped after 31 s of 60 s"},
}


def histogram_stats(values_us: np.ndarray, range_us: int) -> dict[str, Any]:
    """STATS of whole-µs latencies as a 1 µs histogram with ``range_us`` buckets sees them."""
    inside = values_us[values_us < range_us]
    pct = np.percentile(values_us, list(PERCENTILES.values()), method="inverted_cdf")
    in_range = {k: float(p) * 1000 if p < range_us else None
                for k, p in zip(PERCENTILES, pct, strict=True)}
    return {
        "count": int(values_us.size), "min_ns": float(inside.min()) * 1000,
        "mean_ns": float(inside.mean()) * 1000, "std_ns": float(inside.std(ddof=1)) * 1000,
        "max_ns": float(inside.max()) * 1000, "percentiles_ns": in_range,
        "resolution_ns": 1000, "overflows": int((values_us >= range_us).sum()),
        "percentile_ci95_ns": {k: None if v is None else [v - 1000, v + 1000]
                               for k, v in in_range.items()},
    }


def build_cyclictest(n: int = 20_000, threads: int = 2,
                     seed: int = 4) -> tuple[dict[str, Any], dict[str, RunSamples]]:
    """Report dict and samples of a seed-004-like campaign: 2 targets × 5 cases × 2 repetitions."""
    rng = np.random.default_rng(seed)
    runs: list[dict[str, Any]] = []
    samples: dict[str, RunSamples] = {}
    for target in CT_TARGETS:
        scale = 2.0 if target == "rt" else 25.0
        range_us = CT_RANGE_US[target]
        for case, seed_max in zip(CT_CASES, CT_SEED_MAX_US[target], strict=True):
            for rep in (0, 1):
                run_id = f"{target}-{case}-r{rep}"
                run: dict[str, Any] = {
                    "id": run_id, "target": target, "load": case, "repetition": rep,
                    "status": "complete", "error": None, "cyclictest_version": "2.40",
                    "arguments": ["-q", "--policy=fifo", "--priority=95", "-a", "-t", "-m",
                                  f"-h{range_us}", "-i200", "-D60"],
                    "duration_s": 60.4, "threads": [], "combined": None, "break": None}
                runs.append(run)
                if (target, case) == CT_FAILED:
                    run.update(status="failed", duration_s=0.2,
                               error=CT_PROBLEMS[target][case].removeprefix("failed: "))
                    samples[run_id] = RunSamples(sw_ns=np.empty(0))
                    continue
                if (target, case, rep) == CT_INCOMPLETE:
                    run.update(status="incomplete", error="stopped after 31 s of 60 s")
                histograms, pooled = [], []
                for t in range(threads):
                    v = np.round(3 + rng.gamma(2.0, scale, n)).astype(np.int64)
                    v = np.minimum(v, seed_max - 1)
                    if rep == 0 and t == threads - 1:
                        v[n // 2] = seed_max
                    if (target, case, rep) == CT_INCOMPLETE:
                        v[0] = seed_max + 74
                    pooled.append(v)
                    buckets, counts = np.unique(v[v < range_us], return_counts=True)
                    label = f"thread {t} (CPU {t})"
                    histograms.append(ThreadHistogram(label, buckets, counts, int(v.max()),
                                                      int((v >= range_us).sum())))
                    run["threads"].append({
                        "thread": t, "cpu": t, "cycles": n, "min_us": int(v.min()),
                        "avg_us": round(float(v.mean()), 2), "max_us": int(v.max()),
                        "overflows": int((v >= range_us).sum()),
                        "stats": histogram_stats(v, range_us)})
                run["combined"] = histogram_stats(np.concatenate(pooled), range_us)
                samples[run_id] = RunSamples(sw_ns=np.empty(0), histograms=tuple(histograms))
    table = {"targets": list(CT_TARGETS), "cases": list(CT_CASES),
             "max_latency_us": {t: {c: None if (t, c) == CT_FAILED else m
                                    for c, m in zip(CT_CASES, CT_SEED_MAX_US[t], strict=True)}
                                for t in CT_TARGETS},
             "problems": CT_PROBLEMS}
    targets = {
        "regular": {"kind": "vm", "kernel_release": "6.1.0-28-amd64", "preempt_rt": False,
                    "emulated": True, "cpus": threads,
                    "uname": "Linux regular 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian x86_64"},
        "rt": {"kind": "vm", "kernel_release": "6.1.0-28-rt-amd64", "preempt_rt": True,
               "emulated": True, "cpus": threads,
               "uname": "Linux rt 6.1.0-28-rt-amd64 #1 SMP PREEMPT_RT Debian x86_64"},
    }
    report: dict[str, Any] = {
        "schema_version": 2,
        "campaign": {"name": "seed-004-vm", "description": "cyclictest on a regular and a "
                     "PREEMPT_RT kernel under five loads.", "config_path": "configs/cyclictest-rt-vs-regular.yaml",
                     "created_utc": "2025-01-02T03:04:05Z", "station_version": "0.1.0",
                     "target": {"kind": "ssh", "host": "127.0.0.1:10022"},
                     "targets": {"regular": {"kind": "ssh", "host": "127.0.0.1:10022"},
                                 "rt": {"kind": "ssh", "host": "127.0.0.1:10023"}},
                     "scope": None, "twin": None},
        "runs": [], "findings": [],
        "cyclictest": {"table": table, "targets": targets, "runs": runs,
                       "deadline_us": CT_DEADLINE_US},
        "notes": ["Run regular-hackbench-r0 failed: cyclictest exited with status 1.",
                  "Run rt-stress-hard-r1 is incomplete: stopped after 31 s of 60 s."],
    }
    return report, samples
