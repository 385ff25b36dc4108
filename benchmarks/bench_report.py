"""`station report` at the seed's scale, on campaigns of several shapes, from a fresh clone, against
reading the same raw files in the same run.

The seed ran 14 minutes per run: 8.4 M software samples at 100 µs. This script makes such a
campaign from a short twin campaign (the demo's configuration, run here for a few seconds, gives
the manifests, the campaign facts and the twin's preset) by drawing each run's events from the
twin's own event model (station/twin/model.py), a model chunk at a time: sw.raw as the module
streams it, the scope's pulses, sw_arrivals.csv in batches, and sw.parquet and hw.parquet as the
seal's conversions write them (same schema, metadata and row groups), a row group at a time. The
campaign's shape (issue 50: the target holds on every one) is what the report's pairing sees:

    demo           50 pulses an acquisition, arrivals every   225 events, 43 % captured
    arrivals-1000  50                                          1 000        43 %
    sparse          5                                            100         5 %
    dense         500                                         10 000        80 %
    many-small      5                                         10 000        80 %

Generation runs in bounded memory (~0.5 GB whatever the sample count) at ~0.5 µs per sample, so
the same code makes the growth bench's 16× campaign (benchmarks/bench_report_growth.py). No
hw_pulses.csv: module_data.load_run reads hw.parquet when it exists. Draws are deterministic (the
model per chunk, the pulses' noise and arrival delays from the run's name).

The station measured is the last commit in a fresh clone, set up as the README's set-up does it
(scripts/bootstrap.sh: its byte-code compiled, numba's kernels compiled into their cache by
`station warm-up`), run with this checkout's .venv's packages. Each shape is timed, each
command as a whole process (wall time and peak resident memory):

    report    python -m station.cli report DIR   (the clone's station)
    baseline  a Python process that np.fromfile's every run's sw.raw and
              np.histogram's its latencies, and reads hw.parquet and
              histograms the widths: the floor of any report over the same data

in interleaved rounds (baseline, report; --repeat of them, 5 by default), and prints the
medians and their ratio. Targets at the seed's scale, on every shape: ≤ 3× the baseline (issues
33 and 50), peak ≤ 4 GB; a missed one says MISS and the exit status is 1. Once, for reference
and with no target: the first report of a clone whose set-up was skipped (it compiles its
byte-code and kernels itself).

    .venv/bin/python benchmarks/bench_report.py                    # every shape, 4 runs × 8.4 M
    .venv/bin/python benchmarks/bench_report.py --shape demo       # one shape
    .venv/bin/python benchmarks/bench_report.py --samples 100000   # demo size
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Shape:
    """What a campaign's data look like to the report: pulses per acquisition (consecutive
    events), records per arrival batch, and the share of events the scope caught."""

    per_acquisition: int
    batch: int
    capture: float

    def __str__(self) -> str:
        return (f"{self.per_acquisition} pulses an acquisition, arrivals every {self.batch} "
                f"events, {self.capture:.0%} captured")


# the demo's: 5 ms records at 100 µs, 443 arrival batches for 100 000 records, 43 % of events seen
DEMO = Shape(50, 225, 0.43)
# the corners issue 50 names (5-500 pulses an acquisition, arrivals every 100-10 000 events,
# 5-80 % captured), its own example (arrivals every 1 000 events), and the demo's
SHAPES = {"demo": DEMO, "arrivals-1000": Shape(50, 1000, 0.43), "sparse": Shape(5, 100, 0.05),
          "dense": Shape(500, 10_000, 0.80), "many-small": Shape(5, 10_000, 0.80)}

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


def scale_run(run_dir: Path, samples: int, shape: Shape = DEMO) -> None:
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
    per, batch = shape.per_acquisition, shape.batch
    acq = 0
    next_acq = 10 * per
    gap = max(per, round(per / shape.capture))
    prev_first, prev_rise, prev_fall = 0, np.empty(0, np.int64), np.empty(0, np.int64)
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
                last = np.arange(c.first + batch - 1 - c.first % batch, c.first + n, batch)
                host = host0 + (c.ts[last - c.first] - 10**12) / 1e9 + rng.uniform(0.002, 0.006, len(last))
                arrivals.write("".join(f"{h:.6f},{s}\n" for h, s in zip(host.tolist(), last.tolist(), strict=True)))
                # this chunk and the one before it: an acquisition may begin in the one before
                # (at most CHUNK_EVENTS pulses long)
                rise_all, fall_all = np.r_[prev_rise, c.rise[:n]], np.r_[prev_fall, c.fall[:n]]
                pulses: list[tuple[np.ndarray, np.ndarray, float]] = []
                while next_acq + per <= c.first + n:
                    lo = next_acq - prev_first
                    if lo < 0:  # before what is held (an acquisition longer than a chunk): skip it
                        next_acq += gap
                        continue
                    sl = slice(lo, lo + per)
                    rise, fall = rise_all[sl].astype(np.float64), fall_all[sl].astype(np.float64)
                    trigger = rise[per // 10]
                    start = (rise - trigger + rng.normal(0, 5, per)) / 1e9
                    widths = (fall - rise + rng.normal(0, 10, per)) / 1e9
                    armed = host0 + (rise[0] - 10**12) / 1e9 - rng.uniform(0.0005, 0.002)
                    pulses.append((start, widths, armed))
                    next_acq += gap
                prev_first, prev_rise, prev_fall = c.first, c.rise[:n], c.fall[:n]
                if pulses:
                    k = len(pulses)
                    block = np.empty(k * per, HW_DTYPE)
                    block["acquisition"] = np.repeat(np.arange(acq, acq + k), per)
                    block["start_s"] = np.concatenate([p[0] for p in pulses])
                    block["width_s"] = np.concatenate([p[1] for p in pulses])
                    block["armed_host_s"] = np.repeat([p[2] for p in pulses], per)
                    hw_out.add(block)
                    acq += k
        sw_out.close()
        hw_out.close()
    except BaseException:
        sw_out.abandon()
        hw_out.abandon()
        raise
    manifest["counts"] = {"sw_records": samples, "hw_pulses": acq * per}
    manifest["interrupts"] = {"before": 0, "after": samples, "row": manifest.get("interrupts", {}).get("row")}
    manifest["acquisitions"] = acq
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))


def scale_campaign(campaign: Path, samples: int, shape: Shape = DEMO) -> int:
    """Scale every run of a (copy of the) template campaign to `samples` software samples of this
    shape; the number of runs."""
    runs = sorted(d for d in (campaign / "runs").iterdir() if d.is_dir())
    for run_dir in runs:
        for stale in ("twin-truth.parquet", "report.json"):
            (run_dir / stale).unlink(missing_ok=True)
        scale_run(run_dir, samples, shape)
    return len(runs)


PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); " \
       "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak resident GB) of one command, run under a small parent whose only
    child it is (ru_maxrss of the children: the largest resident set the command reached)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PEAK, *argv], check=True, capture_output=True, text=True,
                         env=env)
    return time.perf_counter() - t0, int(out.stdout.split()[-1]) / 1024**2


def clone(work: Path, set_up: bool) -> Path:
    """The repository's last commit in a fresh clone, as a new user has it: its byte-code and
    numba's kernels compiled by the set-up's own steps (scripts/bootstrap.sh: compileall, then
    `station warm-up`), or with no cache at all (set_up False: a clone whose set-up was skipped). The
    packages are this checkout's .venv's (a new venv would add minutes and change nothing the
    report runs)."""
    where = work / ("clone" if set_up else "clone-cold")
    subprocess.run(["git", "clone", "-q", str(REPO), str(where)], check=True)
    if set_up:
        python = str(REPO / ".venv/bin/python")
        subprocess.run([python, "-m", "compileall", "-q", "-j", "0", str(where / "station"),
                        str(where / "instruments")], check=True)
        subprocess.run([python, "-m", "station.cli", "warm-up"], check=True, capture_output=True,
                       env=_env(where))
    return where


def _env(code: Path) -> dict[str, str]:
    """The station imported from `code` (a clone), numba's cache beside its sources."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(code)}


def measure(campaign: Path, code: Path, repeat: int) -> tuple[tuple, tuple, list[float]]:
    """Interleaved rounds (baseline, report) with the station of `code`: the two medians and each
    round's own ratio."""
    env = _env(code)
    report = [str(REPO / ".venv/bin/python"), "-m", "station.cli", "report", str(campaign)]
    rounds = [(timed([sys.executable, "-c", BASELINE, str(campaign)], env),
               timed(report, env)) for _ in range(repeat)]
    base, rep = (_median([r[i] for r in rounds]) for i in (0, 1))
    return base, rep, [r[1][0] / r[0][0] for r in rounds]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8_400_000, help="software samples per run")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (baseline, report)")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES),
                        help="the campaign shapes to measure (repeatable; default: every one)")
    parser.add_argument("--keep", type=Path, help="keep the (last) campaign here (default: a temporary "
                        "directory)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    verdicts: list[bool] = []
    try:
        t0 = time.perf_counter()
        first = template(work)
        code = clone(work, set_up=True)
        cold = clone(work, set_up=False)
        print(f"template and fresh clones of {_head()} made in {time.perf_counter() - t0:.0f} s")
        for name in args.shape or list(SHAPES):
            shape = SHAPES[name]
            campaign = work / name
            shutil.copytree(first, campaign)
            t0 = time.perf_counter()
            runs = scale_campaign(campaign, args.samples, shape)
            pulses = sum(json.loads((d / "manifest.json").read_text())["counts"]["hw_pulses"]
                         for d in (campaign / "runs").iterdir() if d.is_dir()) // runs
            print(f"\n[{name}] {shape}: {runs} runs × {args.samples:,} software samples, "
                  f"{pulses:,} pulses a run, made in {time.perf_counter() - t0:.0f} s")
            os.sync()  # the campaign just written is on disk: no write-back under the first rounds
            base, report, paired = measure(campaign, code, args.repeat)
            for label, (t, peak, times) in (("baseline np.fromfile + np.histogram:", base),
                                            ("station report (fresh clone, set up):", report)):
                print(f"  {label:38s} {t:7.2f} s  peak {peak:.2f} GB   (median of {len(times)}: "
                      + ", ".join(f"{x:.2f}" for x in times) + " s)")
            fast, small = report[0] / base[0] <= 3.0, report[1] <= 4.0
            verdicts += [fast, small]
            print(f"  ratio: {report[0] / base[0]:.1f}× the baseline (target ≤ 3×: "
                  f"{'OK' if fast else 'MISS'}); peak {report[1]:.2f} GB (target ≤ 4 GB: "
                  f"{'OK' if small else 'MISS'})")
            # the machine's speed drifts between rounds, a round's pair shares it
            print(f"  each round's ratio: median {np.median(paired):.1f}× (min {min(paired):.1f}, "
                  f"max {max(paired):.1f})")
            if name == (args.shape or list(SHAPES))[0]:  # once: what a clone without the set-up pays
                t, _ = timed([str(REPO / ".venv/bin/python"), "-m", "station.cli", "report",
                              str(campaign)], _env(cold))
                print(f"  for reference, the first report of a clone whose set-up was skipped "
                      f"(byte-code and kernels compiled by the report itself): {t:.2f} s, "
                      f"{t / base[0]:.1f}× (no target)")
            if args.keep:
                shutil.copytree(campaign, args.keep, dirs_exist_ok=True)
            shutil.rmtree(campaign, ignore_errors=True)
        return 0 if all(verdicts) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def _median(runs: list[tuple[float, float]]) -> tuple[float, float, list[float]]:
    """(median wall seconds, largest peak GB, every wall time) of one command's rounds."""
    times = [t for t, _ in runs]
    return float(np.median(times)), max(p for _, p in runs), times


if __name__ == "__main__":
    raise SystemExit(main())
