"""`station report` at the seed's scale, against reading the same raw files in the same run.

The seed ran 14 minutes per run: 8.4 M software samples at 100 µs. This script
makes such a campaign from a short twin campaign (the demo's configuration, run
here for a few seconds, gives the manifests, the campaign facts and the twin's
preset) by drawing each run's events from the twin's own event model
(station/twin/model.py), a model chunk at a time: sw.raw as the module streams it,
the scope's pulses with the demo's capture ratio (acquisitions of 50 consecutive
events, 43 % of events seen), sw_arrivals.csv in batches, and sw.parquet and
hw.parquet as the seal's conversions write them (same schema, metadata and row
groups), a row group at a time. Generation runs in bounded memory (~0.5 GB
whatever the sample count) at ~0.5 µs per sample, so the same code makes the
growth bench's 16× campaign (benchmarks/bench_report_growth.py). No hw_pulses.csv:
module_data.load_run reads hw.parquet when it exists. Draws are deterministic (the
model per chunk, the pulses' noise and arrival delays from the run's name).

It then times, each as a whole process (wall time and peak resident memory):

    report    .venv/bin/station report DIR
    baseline  a Python process that np.fromfile's every run's sw.raw and
              np.histogram's its latencies, and reads hw.parquet and
              histograms the widths: the floor of any report over the same data

in interleaved rounds (baseline, report; --repeat of them, 5 by default), and prints the
medians and their ratio. Targets at the seed's scale: ≤ 3× the baseline (issue 33; it was 5×),
peak ≤ 4 GB; a missed one says MISS and the exit status is 1. The printout:

    campaign: 4 runs × 8,400,000 software samples, made in N s
    baseline np.fromfile + np.histogram:   T s  peak P GB   (median of 5: t1, …, t5 s)
    station report:                        T s  peak P GB   (median of 5: t1, …, t5 s)
    ratio: R× the baseline (target ≤ 3×: OK|MISS); peak P GB (target ≤ 4 GB: OK|MISS)
    each round's ratio: median R× (min r1, max r2)

The verdict is the ratio of the medians; each round's own ratio (report ÷ the baseline run just
before it) is printed beside it, as the machine's speed drifts between rounds.

    .venv/bin/python benchmarks/bench_report.py                   # 4 runs × 8.4 M
    .venv/bin/python benchmarks/bench_report.py --samples 100000  # demo size
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[1]
PER_ACQUISITION = 50  # the demo's 5 ms records at 100 µs
CAPTURE_RATIO = 0.43  # the demo's pulses ÷ events
BATCH = 225  # records per arrival batch (the demo: 443 batches for 100 000 records)

BASELINE = """
import sys, numpy as np, pandas as pd
from pathlib import Path
from station.parsers import records
for run in sorted(Path(sys.argv[1]).glob("runs/*")):
    lat = np.fromfile(run / "sw.raw", dtype=records.V1_DTYPE)["latency_ns"]
    np.histogram(lat, bins=1000)
    widths = pd.read_parquet(run / "hw.parquet", columns=["width_s"])["width_s"].to_numpy()
    np.histogram(widths, bins=1000)
"""


def template(work: Path) -> Path:
    """A short twin campaign with the demo's configuration: manifests and facts to scale up."""
    doc = yaml.safe_load((REPO / "configs" / "rtai-lpt-vs-pcie.yaml").read_text())
    doc["matrix"].update(samples=2000, pulses=100, max_duration="1min")
    doc["bench"]["twin"]["ground_truth"] = False
    config = work / "template.yaml"
    config.write_text(yaml.safe_dump(doc))
    out = work / "template"
    subprocess.run([str(REPO / ".venv/bin/station"), "run", str(config), "--out", str(out)], check=True,
                   capture_output=True)
    return out


ROW_GROUP = 1 << 20  # rows per Parquet row group: pq.write_table's default, so the seal's layout


class ParquetChunks:
    """A Parquet file written a row group at a time, bounded in memory, that reads as the one
    store.write_parquet makes of the whole table: same schema (the data columns as pandas gives
    them to pyarrow, then the run's identity columns), same key-value metadata (pandas', the
    result store's schema version and table name), same row groups of ROW_GROUP rows. Rows come
    as structured arrays (blocks) whose fields include the data columns (`empty`'s: others, such
    as a v1 record's magic, are left out). Whole or not at all: written beside the file and
    renamed at close."""

    def __init__(self, path: Path, empty: pd.DataFrame, identity: dict[str, Any]) -> None:
        from station.store.run_store import with_identity

        self.path, self.identity, self.table = path, identity, path.stem
        self.tmp = path.with_name(path.name + ".tmp")
        schema = with_identity(pa.Table.from_pandas(empty, preserve_index=False), identity, self.table).schema
        self.writer = pq.ParquetWriter(self.tmp, schema)
        self.names = list(empty.columns)
        self.pending: list[np.ndarray] = []
        self.rows = 0

    def add(self, block: np.ndarray) -> None:
        self.pending.append(block)
        self.rows += len(block)
        while self.rows >= ROW_GROUP:
            self._flush(ROW_GROUP)

    def _flush(self, rows: int) -> None:
        from station.store.run_store import with_identity

        block = np.concatenate(self.pending)
        head = pa.table({name: np.ascontiguousarray(block[name][:rows]) for name in self.names})
        self.writer.write_table(with_identity(head, self.identity, self.table), row_group_size=ROW_GROUP)
        self.pending = [block[rows:].copy()] if self.rows > rows else []
        self.rows -= rows

    def close(self) -> None:
        if self.rows:
            self._flush(self.rows)
        self.writer.close()
        os.replace(self.tmp, self.path)

    def abandon(self) -> None:
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


# the columns (and dtypes) pandas reads from hw_pulses.csv, which the seal converts to hw.parquet
HW_DTYPE = np.dtype([("acquisition", np.int64), ("start_s", np.float64), ("width_s", np.float64),
                     ("armed_host_s", np.float64)])


def scale_run(run_dir: Path, samples: int) -> None:
    """Replace a run's data with `samples` events drawn from the twin's model, in bounded memory
    (CHUNK_EVENTS events at a time; a Parquet row group of software records and one of pulses at
    most): sw.raw appended chunk by chunk, sw.parquet and hw.parquet written a row group at a time
    as the seal would write them, sw_arrivals.csv. No hw_pulses.csv: the scope's pulses go straight
    to hw.parquet, and a run with its Parquet files is read from them (module_data.load_run), so the
    template's CSV is removed. Pulse times keep full float precision where the CSV route kept 10
    significant digits (start, width: 5e-10 relative) and microseconds (armed time): otherwise the
    same draws, and the report's figures agree with that route's to ~1e-10 relative."""
    from station.parsers import records
    from station.store.run_store import run_identity
    from station.twin.model import CHUNK_EVENTS, ModuleSession, board_width_ns, load_preset

    manifest = json.loads((run_dir / "manifest.json").read_text())
    iface, check = manifest["run"]["interface"], manifest["run"]["variant"] == "inb"
    twin = manifest["campaign"]["bench"]["twin"]
    preset = load_preset(twin["preset"]).with_overrides(twin.get("overrides") or {})
    params = preset.interfaces[iface]
    period = int(manifest["period_ns"])
    session = ModuleSession(params, preset.calibration_samples, period, check, 10**12, f"bench/{run_dir.name}")
    rng = np.random.default_rng(zlib.crc32(run_dir.name.encode()))
    host0 = 1.8e9
    flags = records.pack_flags(records.Interface.LPT if iface == "lpt" else records.Interface.PCIE, check)
    if params.clock_hz > 0:
        flags |= records.Flag.HW_WIDTH
    acq = 0
    next_acq = 10 * PER_ACQUISITION
    gap = int(PER_ACQUISITION / CAPTURE_RATIO)
    identity = run_identity(run_dir)
    (run_dir / "hw_pulses.csv").unlink(missing_ok=True)
    sw_out = ParquetChunks(run_dir / "sw.parquet", pd.DataFrame(records.V1Decoder.columns(
        np.empty(0, records.V1_DTYPE))), identity)  # the frame records.decode gives
    hw_out = ParquetChunks(run_dir / "hw.parquet", pd.DataFrame(np.empty(0, HW_DTYPE)), identity)
    try:
        with open(run_dir / "sw.raw", "wb") as raw, open(run_dir / "sw_arrivals.csv", "w") as arrivals:
            arrivals.write("host_s,last_seq\n")
            for index in range(-(-samples // CHUNK_EVENTS)):
                c = session.chunk(index, loaded=True)
                n = min(CHUNK_EVENTS, samples - c.first)
                seq = np.arange(c.first, c.first + n)
                width = board_width_ns(c.rise[:n], c.fall[:n], params.clock_hz) if params.clock_hz > 0 else 0
                recs = np.frombuffer(records.encode_v1(seq, c.ts[:n], c.sw[:n], flags, width), records.V1_DTYPE)
                raw.write(recs)
                sw_out.add(recs)
                last = np.arange(c.first + BATCH - 1 - c.first % BATCH, c.first + n, BATCH)
                host = host0 + (c.ts[last - c.first] - 10**12) / 1e9 + rng.uniform(0.002, 0.006, len(last))
                arrivals.write("".join(f"{h:.6f},{s}\n" for h, s in zip(host.tolist(), last.tolist(), strict=True)))
                pulses: list[tuple[np.ndarray, np.ndarray, float]] = []
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
                    pulses.append((start, widths, armed))
                    next_acq += gap
                if pulses:
                    k = len(pulses)
                    block = np.empty(k * PER_ACQUISITION, HW_DTYPE)
                    block["acquisition"] = np.repeat(np.arange(acq, acq + k), PER_ACQUISITION)
                    block["start_s"] = np.concatenate([p[0] for p in pulses])
                    block["width_s"] = np.concatenate([p[1] for p in pulses])
                    block["armed_host_s"] = np.repeat([p[2] for p in pulses], PER_ACQUISITION)
                    hw_out.add(block)
                    acq += k
        sw_out.close()
        hw_out.close()
    except BaseException:
        sw_out.abandon()
        hw_out.abandon()
        raise
    manifest["counts"] = {"sw_records": samples, "hw_pulses": acq * PER_ACQUISITION}
    manifest["interrupts"] = {"before": 0, "after": samples, "row": manifest.get("interrupts", {}).get("row")}
    manifest["acquisitions"] = acq
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))


def scale_campaign(campaign: Path, samples: int) -> int:
    """Scale every run of a (copy of the) template campaign to `samples` software samples; the
    number of runs."""
    runs = sorted(d for d in (campaign / "runs").iterdir() if d.is_dir())
    for run_dir in runs:
        for stale in ("twin-truth.parquet", "report.json"):
            (run_dir / stale).unlink(missing_ok=True)
        scale_run(run_dir, samples)
    return len(runs)


PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); " \
       "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident GB) of one command, run under a small parent whose only
    child it is (ru_maxrss of the children: the largest resident set the command reached)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PEAK, *argv], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, int(out.stdout.split()[-1]) / 1024**2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8_400_000, help="software samples per run")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (baseline, report)")
    parser.add_argument("--keep", type=Path, help="keep the campaign here (default: a temporary directory)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        t0 = time.perf_counter()
        campaign = template(work)
        runs = scale_campaign(campaign, args.samples)
        print(f"campaign: {runs} runs × {args.samples:,} software samples, made in {time.perf_counter() - t0:.0f} s")
        os.sync()  # the campaign just written is on disk: no write-back under the first rounds
        rounds = [(timed([sys.executable, "-c", BASELINE, str(campaign)]),
                   timed([str(REPO / ".venv/bin/station"), "report", str(campaign)])) for _ in range(args.repeat)]
        base, report = (_median([r[i] for r in rounds]) for i in (0, 1))
        for label, (t, peak, times) in (("baseline np.fromfile + np.histogram:", base), ("station report:", report)):
            print(f"{label:36s} {t:7.2f} s  peak {peak:.2f} GB   (median of {len(times)}: "
                  + ", ".join(f"{x:.2f}" for x in times) + " s)")
        fast, small = report[0] / base[0] <= 3.0, report[1] <= 4.0
        # each round's own ratio too: the machine's speed drifts between rounds, a round's pair shares it
        paired = [r[1][0] / r[0][0] for r in rounds]
        print(f"ratio: {report[0] / base[0]:.1f}× the baseline (target ≤ 3×: {'OK' if fast else 'MISS'}); "
              f"peak {report[1]:.2f} GB (target ≤ 4 GB: {'OK' if small else 'MISS'})")
        print(f"each round's ratio: median {np.median(paired):.1f}× (min {min(paired):.1f}, max {max(paired):.1f})")
        if args.keep:
            shutil.copytree(campaign, args.keep, dirs_exist_ok=True)
        return 0 if fast and small else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _median(runs: list[tuple[float, float]]) -> tuple[float, float, list[float]]:
    """(median wall seconds, largest peak GB, every wall time) of one command's rounds."""
    times = [t for t, _ in runs]
    return float(np.median(times)), max(p for _, p in runs), times


if __name__ == "__main__":
    raise SystemExit(main())
