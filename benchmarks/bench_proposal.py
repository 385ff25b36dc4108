"""Does the scope block `station bench check --propose` proposes capture what it predicts?

For each scope model the twin plays, on the model's own bus (TDS: GPIB, MSO: gigabit LAN,
InfiniiVision: LAN), this writes a demo-like LPT campaign at T = 100 µs, runs `station bench
check --apply` on it (which times the candidates on the scope and predicts the capture ratio from
docs/scopes/README.md's arithmetic), runs the campaign it wrote, and prints the ratio the run's
manifest accounts beside the prediction:

    model                   strategy    predicted  measured  measured/predicted
    tektronix_tds           waveform    0.46 %     0.45 %    0.97  ok
    ...

Target (issue 49): within 20 % for each dialect (MISS otherwise). Each line is the median of
--repeats check-and-run pairs (each pair a new twin).

    .venv/bin/python benchmarks/bench_proposal.py [--samples 60000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATION = [sys.executable, "-m", "station.cli"]
DIALECTS = ("tektronix_tds", "tektronix_mso", "keysight_infiniivision")
TARGET = 0.2


def campaign(dialect: str, samples: int, seed: int) -> str:
    return (f"name: proposal-{dialect}\nbench:\n  target: {{kind: twin, family: rtai}}\n"
            f"  twin: {{seed: {seed}}}\n"
            f"  scope: {{kind: twin, dialect: {dialect}, channel: 1, bus: model}}\n"
            "matrix:\n  interfaces: [lpt]\n  variants: [inb]\n  loads: [none]\n"
            f"  period: 100us\n  samples: {samples}\n  pulses: 1\n  max_duration: 5min\n"
            "loads:\n  none: []\n")


def one(work: Path, dialect: str, samples: int, seed: int) -> tuple[str, float, float]:
    work.mkdir(parents=True)
    source, applied = work / "c.yaml", work / "applied.yaml"
    source.write_text(campaign(dialect, samples, seed))
    check = subprocess.run([*STATION, "bench", "check", str(source), "--apply", str(applied),
                            "--json"], capture_output=True, text=True, cwd=REPO, check=False)
    if check.returncode != 0:
        raise SystemExit(f"{dialect}: bench check failed:\n{check.stdout}{check.stderr}")
    proposal = json.loads(check.stdout)["proposal"]
    run = subprocess.run([*STATION, "run", str(applied), "--out", str(work / "out")],
                         capture_output=True, text=True, cwd=REPO, check=False)
    if run.returncode != 0:
        raise SystemExit(f"{dialect}: the campaign failed:\n{run.stdout}{run.stderr}")
    (manifest,) = (work / "out").glob("runs/*/manifest.json")
    measured = json.loads(manifest.read_text())["capture"]["capture_ratio"]
    return proposal["scope"]["capture"], proposal["capture_ratio"], measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-proposal-"))
    print(f"{'model':<24}{'strategy':<12}{'predicted':>10}{'measured':>10}"
          f"{'measured/predicted':>20}")
    misses = 0
    try:
        for dialect in DIALECTS:
            rows = [one(root / f"{dialect}-{n}", dialect, args.samples, 11 + n)
                    for n in range(args.repeats)]
            predicted = statistics.median(r[1] for r in rows)
            measured = statistics.median(r[2] for r in rows)
            ratio = statistics.median(r[2] / r[1] for r in rows)
            verdict = "ok" if abs(ratio - 1) <= TARGET else "MISS"
            misses += verdict == "MISS"
            print(f"{dialect:<24}{rows[0][0]:<12}{100 * predicted:>9.3g}%{100 * measured:>9.3g}%"
                  f"{ratio:>16.2f}  {verdict}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"target: measured within {100 * TARGET:.0f} % of predicted for every model; "
          f"{'MISS on ' + str(misses) if misses else 'met'}")


if __name__ == "__main__":
    main()
