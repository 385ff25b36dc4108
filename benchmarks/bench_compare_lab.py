"""`station compare` over a lab's worth of campaigns, against DuckDB's own query of the same
aggregates, measured in the same run.

A lab compares hundreds of campaigns (kernels, loads, months of monitoring). This bench makes one
seed-scale campaign (bench_report.template and scale_campaign: 4 runs × --samples records, the
scope's pulses, as the seal writes them; its report.json written once) and presents it as
--campaigns campaign directories in bounded disk: every other directory holds hard links to the
first's files (the same bytes; 100 campaigns of the seed's size would be ~200 GB as copies).

Timed, each as a whole process, --repeat rounds interleaved (median, min, max):

    compare   .venv/bin/station compare DIR0 … DIRn --out OUT
    duckdb    one DuckDB query of the aggregates compare reports per campaign, group and source —
              count, min, mean, standard deviation, max, the 99.99th percentile — over every
              campaign's sw.parquet (the module's own records) and hw.parquet (the widths);
              --duckdb per-campaign: the same query once per campaign, on one connection (at
              100 seed-scale campaigns the single query runs out of memory: its exact quantile
              holds every group's values, 18.8 GiB of this machine's 24 when it gave up)

Memory: the peak of the sum of the process tree's resident sets, sampled every 50 ms; a command
past --limit-gb is stopped there and reported as such (the machine has to survive the bench).
Targets (issue 33): compare's peak ≤ 2 GB, independent of the number of campaigns, and its time a
small multiple of DuckDB's (≤ 3× here); OK or MISS, exit status 1 on a miss.

    .venv/bin/python benchmarks/bench_compare_lab.py                                  # 100 × 4 × 8.4 M
    .venv/bin/python benchmarks/bench_compare_lab.py --campaigns 10 --samples 1000000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import REPO, scale_campaign, template  # noqa: E402 - the seed-scale campaign maker

from station.store.result_store import OWN_RECORDS  # noqa: E402

DUCKDB = """
import sys, duckdb
own_records, per_campaign, dirs = sys.argv[1], sys.argv[2] == "per-campaign", sys.argv[3:]
con = duckdb.connect()
for table, column, scale, own in (("sw", "latency_ns", 1.0, own_records), ("hw", "width_s", 1e9, "true")):
    x = f"CAST({column} AS DOUBLE) * {scale}"
    for part in ([[d] for d in dirs] if per_campaign else [dirs]):
        files = [f"{d}/runs/*/{table}.parquet" for d in part]
        con.execute(f"SELECT split_part(filename, '/runs/', 1) AS campaign, interface, variant, load, count(*), "
                    f"min({x}), avg({x}), stddev_samp({x}), max({x}), quantile_cont({x}, 0.9999) "
                    f"FROM read_parquet({files!r}, filename=true) WHERE {own} GROUP BY ALL").fetchall()
"""


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and every descendant (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = (Path(entry.path) / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def timed(argv: list[str], limit: float) -> tuple[float, float, bool]:
    """(wall seconds, peak GB of the process tree, whether it finished) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        if peak > limit * 2**30:
            proc.kill()
            proc.wait()
            return time.perf_counter() - t0, peak / 2**30, False
        time.sleep(0.05)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])} … failed:\n{proc.stderr.read()[-3000:]}")
    return time.perf_counter() - t0, peak / 2**30, True


def lab(first: Path, count: int) -> list[Path]:
    """`count` campaign directories: the first, then hard links to its files."""
    dirs = [first]
    for i in range(1, count):
        d = first.with_name(f"c{i:03d}")
        for src in first.rglob("*"):
            dst = d / src.relative_to(first)
            if src.is_dir():
                dst.mkdir(parents=True, exist_ok=True)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.link(src, dst)
        dirs.append(d)
    return dirs


def spread(values: list[float]) -> str:
    return f"{np.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=100)
    parser.add_argument("--samples", type=int, default=8_400_000, help="software samples per run")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (at least 5)")
    parser.add_argument("--limit-gb", type=float, default=8.0, help="stop a command whose tree passes this")
    parser.add_argument("--duckdb", choices=("one-query", "per-campaign"), default="one-query",
                        help="the baseline: one query over every campaign, or one per campaign")
    args = parser.parse_args()
    if args.repeat < 5 or args.campaigns < 2:
        parser.error("--repeat: at least 5; --campaigns: at least 2")
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        t0 = time.perf_counter()
        first = template(work)
        runs = scale_campaign(first, args.samples)
        subprocess.run([str(REPO / ".venv/bin/station"), "report", str(first)], check=True, capture_output=True)
        first = first.rename(work / "c000")
        dirs = lab(first, args.campaigns)
        print(f"{args.campaigns} campaigns × {runs} runs × {args.samples:,} records "
              f"({args.campaigns * runs * args.samples:.2e} records), made in {time.perf_counter() - t0:.0f} s")
        compare = [str(REPO / ".venv/bin/station"), "compare", *map(str, dirs), "--out", str(work / "out")]
        # the module's own records, as compare selects them (passed in: the baseline imports no station)
        duck = [sys.executable, "-c", DUCKDB, OWN_RECORDS, args.duckdb, *map(str, dirs)]
        rounds = []
        for _ in range(args.repeat):
            rounds.append((timed(duck, args.limit_gb), timed(compare, args.limit_gb)))
            if not rounds[-1][1][2]:
                break  # past the limit: once is enough to know
        d_times, c_times = [r[0][0] for r in rounds], [r[1][0] for r in rounds]
        d_peak, c_peak = max(r[0][1] for r in rounds), max(r[1][1] for r in rounds)
        finished = all(r[1][2] for r in rounds)
        print(f"duckdb ({args.duckdb}): {spread(d_times)} s   peak {d_peak:.2f} GB   ({len(rounds)} rounds)")
        if not finished:
            print(f"station compare: stopped at {c_peak:.2f} GB after {max(c_times):.0f} s (--limit-gb "
                  f"{args.limit_gb}): MISS (peak ≤ 2 GB)")
            return 1
        ratio = float(np.median(c_times) / np.median(d_times))
        small, fast = c_peak <= 2.0, ratio <= 3.0
        print(f"station compare: {spread(c_times)} s   peak {c_peak:.2f} GB")
        print(f"ratio: {ratio:.1f}× DuckDB's own query (target ≤ 3×: {'OK' if fast else 'MISS'}); "
              f"peak {c_peak:.2f} GB (target ≤ 2 GB: {'OK' if small else 'MISS'})")
        return 0 if small and fast else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
