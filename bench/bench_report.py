"""`station report` at the seed's scale, against reading the same raw files in the same run.

The seed ran 14 minutes per run: 8.4 M software samples at 100 µs. This script
makes such a campaign from a short twin campaign (the demo's configuration, run
here for a few seconds, gives the manifests, the campaign facts and the twin's
preset) by drawing each run's events from the twin's own event model
(station/twin/model.py): sw.raw as the module streams it, hw_pulses.csv with the
demo's capture ratio (acquisitions of 50 consecutive events, 43 % of events seen),
sw_arrivals.csv in batches, then the seal's Parquet conversions.

It then times, each as a whole process (wall time and peak resident memory):

    report    .venv/bin/station report DIR
    baseline  a Python process that np.fromfile's every run's sw.raw and
              np.histogram's its latencies, and reads hw.parquet and
              histograms the widths: the floor of any report over the same data

and prints the ratio. Targets (issue 12/13): ≤ 5× the baseline, ≤ 4 GB.

    .venv/bin/python bench/bench_report.py                   # 4 runs × 8.4 M
    .venv/bin/python bench/bench_report.py --samples 100000  # demo size
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
PER_ACQUISITION = 50  # the demo's 5 ms records at 100 µs
CAPTURE_RATIO = 0.43  # the demo's pulses ÷ events
BATCH = 225  # records per arrival batch (the demo: 443 batches for 100 000 records)

BASELINE = """
import sys, numpy as np, pandas as pd
from pathlib import Path
from station import records
for run in sorted(Path(sys.argv[1]).glob("runs/*")):
    lat = np.fromfile(run / "sw.raw", dtype=records.V1_DTYPE)["latency_ns"]
    np.histogram(lat, bins=1000)
    widths = pd.read_parquet(run / "hw.parquet", columns=["width_s"])["width_s"].to_numpy()
    np.histogram(widths, bins=1000)
"""


def template(work: Path) -> Path:
    """A short twin campaign with the demo's configuration: manifests and facts to scale up."""
    doc = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    doc["matrix"].update(samples=2000, pulses=100, max_duration="1min")
    doc["bench"]["twin"]["ground_truth"] = False
    config = work / "template.yaml"
    config.write_text(yaml.safe_dump(doc))
    out = work / "template"
    subprocess.run([str(REPO / ".venv/bin/station"), "run", str(config), "--out", str(out)], check=True,
                   capture_output=True)
    return out


def scale_run(run_dir: Path, samples: int) -> None:
    """Replace a run's data with `samples` events drawn from the twin's model."""
    from station import records
    from station.store import read_csv_lines, write_parquet
    from station.twin.model import CHUNK_EVENTS, ModuleSession, board_width_ns, load_preset

    manifest = json.loads((run_dir / "manifest.json").read_text())
    iface, check = manifest["run"]["interface"], manifest["run"]["variant"] == "inb"
    twin = manifest["campaign"]["bench"]["twin"]
    preset = load_preset(twin["preset"]).with_overrides(twin.get("overrides") or {})
    params = preset.interfaces[iface]
    period = int(manifest["period_ns"])
    session = ModuleSession(params, preset.calibration_samples, period, check, 10**12, f"bench/{run_dir.name}")
    rng = np.random.default_rng(abs(hash(run_dir.name)) % 2**32)
    host0 = 1.8e9
    flags = records.pack_flags(records.Interface.LPT if iface == "lpt" else records.Interface.PCIE, check)
    if params.clock_hz > 0:
        flags |= records.Flag.HW_WIDTH
    acq = 0
    next_acq = 10 * PER_ACQUISITION
    gap = int(PER_ACQUISITION / CAPTURE_RATIO)
    with open(run_dir / "sw.raw", "wb") as raw, open(run_dir / "hw_pulses.csv", "w") as pulses, \
            open(run_dir / "sw_arrivals.csv", "w") as arrivals:
        pulses.write("acquisition,start_s,width_s,armed_host_s\n")
        arrivals.write("host_s,last_seq\n")
        for index in range(-(-samples // CHUNK_EVENTS)):
            c = session.chunk(index, loaded=True)
            n = min(CHUNK_EVENTS, samples - c.first)
            seq = np.arange(c.first, c.first + n)
            width = board_width_ns(c.rise[:n], c.fall[:n], params.clock_hz) if params.clock_hz > 0 else 0
            raw.write(records.encode_v1(seq, c.ts[:n], c.sw[:n], flags, width))
            for last in range(c.first + BATCH - 1 - c.first % BATCH, c.first + n, BATCH):
                host = host0 + (c.ts[last - c.first] - 10**12) / 1e9 + rng.uniform(0.002, 0.006)
                arrivals.write(f"{host:.6f},{last}\n")
            while next_acq + PER_ACQUISITION <= c.first + n:
                lo = next_acq - c.first
                if lo < 0:  # an acquisition across two chunks: skip it, the next starts in this one
                    next_acq += gap
                    continue
                sl = slice(lo, lo + PER_ACQUISITION)
                rise, fall = c.rise[sl].astype(np.float64), c.fall[sl].astype(np.float64)
                trigger = rise[PER_ACQUISITION // 10]
                start = (rise - trigger + rng.normal(0, 5, PER_ACQUISITION)) / 1e9
                widths = (fall - rise + rng.normal(0, 10, PER_ACQUISITION)) / 1e9
                armed = host0 + (rise[0] - 10**12) / 1e9 - rng.uniform(0.0005, 0.002)
                pulses.write("".join(f"{acq},{s:.9e},{w:.9e},{armed:.6f}\n" for s, w in zip(start, widths,
                                                                                           strict=True)))
                acq += 1
                next_acq += gap
    frame = records.decode_file(run_dir / "sw.raw", "v1")
    write_parquet(frame, run_dir / "sw.parquet")
    write_parquet(read_csv_lines(run_dir / "hw_pulses.csv"), run_dir / "hw.parquet")
    manifest["counts"] = {"sw_records": samples, "hw_pulses": acq * PER_ACQUISITION}
    manifest["interrupts"] = {"before": 0, "after": samples, "row": manifest.get("interrupts", {}).get("row")}
    manifest["acquisitions"] = acq
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))


PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); " \
       "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident GB) of one command, run under a small parent whose only
    child it is (ru_maxrss of the children: the largest resident set the command reached)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PEAK, *argv], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, int(out.stdout.split()[-1]) / 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8_400_000, help="software samples per run")
    parser.add_argument("--keep", type=Path, help="keep the campaign here (default: a temporary directory)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        t0 = time.perf_counter()
        campaign = template(work)
        for run_dir in sorted((campaign / "runs").iterdir()):
            for stale in ("twin-truth.parquet", "report.json"):
                (run_dir / stale).unlink(missing_ok=True)
            scale_run(run_dir, args.samples)
        runs = len(list((campaign / "runs").iterdir()))
        print(f"campaign: {runs} runs × {args.samples:,} software samples, made in {time.perf_counter() - t0:.0f} s")
        report = timed([str(REPO / ".venv/bin/station"), "report", str(campaign)])
        base = timed([sys.executable, "-c", BASELINE, str(campaign)])
        print(f"baseline np.fromfile + np.histogram: {base[0]:7.2f} s  peak {base[1]:.2f} GB")
        print(f"station report:                      {report[0]:7.2f} s  peak {report[1]:.2f} GB")
        print(f"ratio: {report[0] / base[0]:.1f}× the baseline (target ≤ 5×); peak {report[1]:.2f} GB (target ≤ 4 GB)")
        if args.keep:
            shutil.copytree(campaign, args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
