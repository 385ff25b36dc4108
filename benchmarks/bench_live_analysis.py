"""The live analysis (issue 50, station/campaign/live_analysis.py): what it costs while a campaign
measures, and how soon the report follows the last run.

Part 1, at the seed's rate: a real twin campaign (the demo's configuration: 10 kHz, v1 records,
the TDS-style scope at the demo's capture ratio), `--runs` runs of `--seconds` each, run through
`station.api.run_campaign_async` with the live analysis on. Figures:
    the live worker's CPU time (its own process clock, its start and imports included) over the
    campaign's measuring time, and each run's analysis CPU over that run's wall time (median);
    target ≤ 25 % of one core;
    the report's delay after the last run (CampaignResult.report_after_runs_s), and beside it the
    separate `station report` pass of the same campaign with nothing kept (today's way), median of
    --repeat rounds.
At the seed's 14-minute runs the worker's share is smaller still (its start is paid once).

Part 2, at the seed's scale (4 runs × 8.4 M records, the demo's shape, made as bench_report.py
makes them): the end of a campaign replayed in a fresh process per round, as `station run` is at
that moment: runs 1–3 handed to the live worker as they were sealed (their analyses done while
run 4 measured: not timed), then the clock starts as run 4 is sealed, and stops when the report is
written (the same function `station run` calls). Baseline beside it, interleaved: the separate
`station report` pass on the same campaign with nothing kept. Target: ≤ 5 s after the last run,
median of --repeat rounds (a campaign's seal of its last run is before this clock: its cost is
the store's, the same with or without the live analysis).

    .venv/bin/python benchmarks/bench_live_analysis.py                  # both parts
    .venv/bin/python benchmarks/bench_live_analysis.py --part rate --seconds 30
    .venv/bin/python benchmarks/bench_live_analysis.py --part scale --samples 2000000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

CPU_TARGET = 0.25
DELAY_TARGET_S = 5.0
CACHE = ".analysis-cache"


def rate_part(work: Path, runs: int, seconds: float, repeat: int) -> list[bool]:
    from station import api
    from station.config import load_campaign

    doc = yaml.safe_load((REPO / "configs" / "rtai-lpt-vs-pcie.yaml").read_text())
    repetitions = max(1, -(-runs // 4))
    doc["matrix"].update(samples=int(seconds * 10_000), pulses=100, repetitions=repetitions,
                         max_duration=f"{int(seconds * 4) + 60}s")
    doc["bench"]["twin"]["ground_truth"] = False
    config = work / "rate.yaml"
    config.write_text(yaml.safe_dump(doc))
    out = work / "rate"
    os.environ["IRQ_STATION_LIVE_ANALYSIS"] = "on"
    t0 = time.monotonic()
    result = asyncio.run(api.run_campaign_async(load_campaign(config), out))
    wall = time.monotonic() - t0 - (result.report_after_runs_s or 0.0)
    live = result.live
    measured = [o for o in result.outcomes if o.status == "complete"]
    per_run = []
    for done in live.done:
        manifest = json.loads((out / "runs" / done.run_id / "manifest.json").read_text())
        per_run.append(done.seconds / max(float(manifest.get("duration_s") or 0), 1e-9))
    share = live.worker_cpu_s / wall
    print(f"\n[rate] {len(measured)} runs of {seconds:g} s at 10 kHz (the demo's scope), "
          f"{wall:.0f} s measuring")
    print(f"  live worker CPU {live.worker_cpu_s:.2f} s over {wall:.0f} s: {share:.1%} of a core "
          f"(target ≤ {CPU_TARGET:.0%}: {'OK' if share <= CPU_TARGET else 'MISS'}); a run's "
          f"analysis over its own time: median {np.median(per_run):.2%} (max {max(per_run):.2%})")
    separate = []
    for _ in range(repeat):
        separate.append(_separate_report(out))
    delay = result.report_after_runs_s or float("nan")
    print(f"  report after the last run: {delay:.2f} s; the separate `station report` pass with "
          f"nothing kept: median {np.median(separate):.2f} s (" +
          ", ".join(f"{x:.2f}" for x in separate) + ")")
    return [share <= CPU_TARGET]


def _separate_report(campaign: Path) -> float:
    """`station report` of the campaign with nothing kept (the cache moved aside and back)."""
    aside = campaign.parent / f"{campaign.name}-kept"
    if (campaign / CACHE).exists():
        (campaign / CACHE).rename(aside)
    try:
        t0 = time.perf_counter()
        subprocess.run([str(REPO / ".venv/bin/python"), "-m", "station.cli", "report",
                        str(campaign)], check=True, capture_output=True)
        return time.perf_counter() - t0
    finally:
        if aside.exists():
            aside.rename(campaign / CACHE)


# One round of part 2, in a fresh process: what `station run` has imported when its last run is
# sealed, the live worker warm with runs 1-3, then the timed end.
ROUND = """
import asyncio, json, sys, time
from pathlib import Path
import station.api, station.campaign.loop, station.kinds.module.run  # as `station run` has them
from station.api import _write_after_runs  # the function station run calls after its runs
from station.campaign.live_analysis import LiveAnalysis
from station.campaign.loop import CampaignResult
from station.common.progress import QuietProgress
out = Path(sys.argv[1])
runs = sorted(d for d in (out / "runs").iterdir() if (d / "manifest.json").exists())
with LiveAnalysis(QuietProgress()) as live:
    for run in runs[:-1]:
        live.submit(run, "module")
    asyncio.run(live.finish())
    t0 = time.monotonic()
    live.submit(runs[-1], "module")
    result = CampaignResult(out, live=live)
    asyncio.run(_write_after_runs(result, out, live))
    print(json.dumps({"delay": time.monotonic() - t0, "error": result.report_error,
                      "live": [d.run_id for d in live.done]}))
"""


def scale_part(work: Path, samples: int, repeat: int, given: Path | None) -> list[bool]:
    import bench_report

    if given is not None:  # a campaign bench_report.py made (--keep): not made again
        campaign = given
        runs = len([d for d in (campaign / "runs").iterdir() if (d / "manifest.json").exists()])
        print(f"\n[scale] {runs} runs of {campaign}")
    else:
        first = bench_report.template(work)
        campaign = work / "scale"
        shutil.copytree(first, campaign)
        t0 = time.perf_counter()
        runs = bench_report.scale_campaign(campaign, samples, bench_report.SHAPES["demo"])
        print(f"\n[scale] {runs} runs × {samples:,} records (the demo's shape), made in "
              f"{time.perf_counter() - t0:.0f} s")
    os.sync()
    delays, separate = [], []
    for _ in range(repeat):
        separate.append(_separate_report(campaign))
        shutil.rmtree(campaign / CACHE, ignore_errors=True)
        done = subprocess.run([str(REPO / ".venv/bin/python"), "-c", ROUND, str(campaign)],
                              check=True, capture_output=True, text=True, cwd=REPO)
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got["error"] is None and len(got["live"]) == runs, got
        delays.append(got["delay"])
    delay, base = float(np.median(delays)), float(np.median(separate))
    ok = delay <= DELAY_TARGET_S
    print(f"  report after the last run (live): median {delay:.2f} s (" +
          ", ".join(f"{x:.2f}" for x in delays) + f"); target ≤ {DELAY_TARGET_S:g} s: "
          f"{'OK' if ok else 'MISS'}")
    print(f"  the separate `station report` pass, nothing kept: median {base:.2f} s (" +
          ", ".join(f"{x:.2f}" for x in separate) + f"); live ÷ separate {delay / base:.2f}")
    return [ok]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("rate", "scale", "both"), default="both")
    parser.add_argument("--runs", type=int, default=8, help="part 1: runs (4 conditions)")
    parser.add_argument("--seconds", type=float, default=30.0, help="part 1: seconds a run")
    parser.add_argument("--samples", type=int, default=8_400_000, help="part 2: records a run")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each timing")
    parser.add_argument("--campaign", type=Path, help="part 2: a seed-scale campaign already made "
                        "(bench_report.py --keep DIR)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-live-"))
    verdicts: list[bool] = []
    try:
        if args.part in ("rate", "both"):
            verdicts += rate_part(work, args.runs, args.seconds, args.repeat)
        if args.part in ("scale", "both"):
            verdicts += scale_part(work, args.samples, args.repeat, args.campaign)
        return 0 if all(verdicts) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
