"""Does the pairing's stated false-pair rate hold over whole twin campaigns?

Each paired acquisition carries a bound on the chance that its alignment is wrong
(station/kinds/module/pairing.py: no wrong alignment among the candidates could agree with as many
pulses with probability above 1e-4); a run reports their sum as `pairing.expected_false_pairs`.
The unit tests check that bound over seeded runs of the twin's event model; this script checks it
where a user meets it: full twin campaigns (real SSH, real SCPI, drifting clocks, trigger error),
with acquisitions short enough to sit near the number of pulses a pairing needs (about 12-13 at
the twin's spreads), so that many acquisitions are decided at the margin.

For every seed and record span it runs one campaign (LPT and PCIe, inb) on the InfiniiVision twin
(whose time/div is continuous, so a span of 12, 14 or 17 pulses can be asked for), then judges each
paired acquisition against the twin's truth (an acquisition is wrong if any of its pulses is paired
to a record whose true width is not that pulse's) and prints, per span:

    span   campaigns  acquisitions  pairable  paired  stated false pairs  observed wrong  verdict

The verdict is OK when the observed count is within the Poisson 99.9 % quantile of the stated
expectation (the bound is an upper bound, so fewer is expected), MISS otherwise. Slow (a campaign
is ~15-30 s): a bench, not a test.

    .venv/bin/python benchmarks/bench_false_pairs.py [--seeds 5] [--spans 120,140,170] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from station.kinds.module.data import load_run  # noqa: E402
from station.kinds.module.pairing import pair_run  # noqa: E402
from station.store.run_store import list_runs  # noqa: E402

STATION = [sys.executable, "-m", "station.cli"]
POINTS = 50_000  # 24-34 ns a sample at these spans: widths within the pairing's ±150 ns


def campaign(seed: int, per_div_us: int) -> str:
    return f"""name: false-pairs-{per_div_us}us-{seed}
bench:
  target: {{kind: twin, family: rtai}}
  twin: {{seed: {seed}, ground_truth: true}}
  scope: {{kind: twin, dialect: keysight_infiniivision, channel: 1, volts_per_div: 1V, position_div: -3,
          time_per_div: {per_div_us}us, record_length: {POINTS}, trigger_level: 1.5V, threshold: auto,
          bus: loopback}}
matrix:
  interfaces: [lpt, pcie]
  variants: [inb]
  loads: [none]
  period: 100us
  samples: 30000
  pulses: 1500
  max_duration: 2min
loads:
  none: []
"""


def judge(run_dir: Path) -> dict[str, float]:
    """One run: its acquisitions, pairable and paired ones, the stated bound and the wrong ones."""
    report_run = json.loads((run_dir / "manifest.json").read_text())
    data = load_run(run_dir)
    pairing = pair_run(data.sw, data.hw, data.arrivals, int(report_run["period_ns"]))
    truth = data.truth.set_index("seq")
    pairs = pairing.pairs
    wrong = 0
    if len(pairs):
        true_hw = truth.loc[pairs["seq"].to_numpy(), "hw_ns"].to_numpy()
        bad = ~(np.abs(true_hw - pairs["hw_ns"].to_numpy()) <= 200)  # NaN (a stray's) is wrong too
        wrong = int(pairs.loc[bad, "acquisition"].nunique())
    return {"acquisitions": pairing.acquisitions, "pairable": pairing.pairable,
            "paired": pairing.acquisitions_paired, "stated": pairing.expected_false_pairs, "wrong": wrong}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--spans", default="120,140,170", help="InfiniiVision time/div in µs (10 divisions a record)")
    parser.add_argument("--keep", type=Path, help="keep the campaigns here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="false-pairs-"))
    print(f"{'span':>8} {'campaigns':>9} {'acquisitions':>12} {'pairable':>8} {'paired':>6} "
          f"{'stated false pairs':>18} {'observed wrong':>14}  verdict")
    missed = False
    for per_div in (int(s) for s in args.spans.split(",")):
        total = {"acquisitions": 0, "pairable": 0, "paired": 0, "stated": 0.0, "wrong": 0}
        done = 0
        for seed in range(1, args.seeds + 1):
            where = root / f"{per_div}us-{seed}"
            where.mkdir(parents=True, exist_ok=True)
            (where / "c.yaml").write_text(campaign(seed, per_div))
            res = subprocess.run([*STATION, "run", str(where / "c.yaml"), "--out", str(where / "out")],
                                 capture_output=True, text=True, cwd=REPO)
            if res.returncode not in (0, 4):  # 4: a scope the station could not match (said, not failed)
                print(f"campaign {where} failed ({res.returncode}): {res.stderr[-500:]}", file=sys.stderr)
                continue
            for run_dir in list_runs(where / "out"):
                for key, value in judge(run_dir).items():
                    total[key] += value
            done += 1
        limit = stats.poisson.ppf(0.999, total["stated"]) if total["stated"] > 0 else 0
        verdict = "OK" if total["wrong"] <= limit else "MISS"
        missed |= verdict == "MISS"
        print(f"{per_div:>6}us {done:>9} {total['acquisitions']:>12} {total['pairable']:>8} {total['paired']:>6} "
              f"{total['stated']:>18.3g} {total['wrong']:>14}  {verdict}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
