"""How many of the events each capture strategy sees, on the twin's scope models and their buses.

The capture ratio (pulses captured ÷ events the target emitted while the scope was capturing)
depends on the bus (instruments/sim/bus.py) and on the host's speed (extraction, pairing) as
much as on the strategy, so it is measured here, not asserted in the tests. For each scope
model the twin plays, this runs the demo's LPT campaign at a 100 µs period once per strategy
the model has, on the model's own bus and on the loopback (the host alone), and prints what
the run's manifest accounts (station/capture/accounting.py):

    model                  bus       strategy         acq.  pulses  events  capture ratio  dead time/acq.  vs waveform
    tektronix_tds          gpib      waveform         ...
    tektronix_mso          gigabit   waveform         ...   (the baseline of its bus)
    tektronix_mso          gigabit   segmented        ...   R×

Segmented frames: 1000 points at 25 ns (25 µs: the twin's pulses and their tails), and on the
InfiniiVision also 250 points, where fewer bytes a frame cross its LAN in less than a period:
at 50 ns (12.5 µs, which cuts the twin's longest pulses: "cut frames", whose widths are lost,
so that configuration does not count towards the target) and at 100 ns (25 µs).
Target (issue 14): segmented sees ≥ 50 % of the events on the MSO and InfiniiVision models.
A frame whose bytes take longer than a period to cross the bus cannot reach it whatever the
station does: the ratio is then at most T / (T + frame bytes / rate); see docs/capture.md.

    .venv/bin/python benchmarks/bench_capture.py [--samples 60000] [--buses model,loopback] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
STATION = [sys.executable, "-m", "station.cli"]
MODELS = {
    "tektronix_tds": ("waveform",),
    "tektronix_mso": ("waveform", "segmented"),
    "keysight_infiniivision": ("waveform", "segmented"),
}
SEGMENTED = {"segments": 1000, "time_per_div": "2.5us", "record_length": 1000, "trigger_position_pct": 10}
# fewer bytes a frame: 250 points, at 50 ns (12.5 µs: too short for the twin's longest pulses, which
# the frames then cut, "cut frames") or at 100 ns (25 µs: every pulse whole, a coarser sample interval)
SHORT_FRAMES = {"segments": 1000, "time_per_div": "1.25us", "record_length": 250, "trigger_position_pct": 10}
COARSE_FRAMES = {"segments": 1000, "time_per_div": "2.5us", "record_length": 250, "trigger_position_pct": 10}
VARIANTS = {"segmented": SEGMENTED, "segmented-250": SHORT_FRAMES, "segmented-250c": COARSE_FRAMES}
MODELS["keysight_infiniivision"] += ("segmented-250", "segmented-250c")
TARGET = 0.5


def campaign(dialect: str, strategy: str, samples: int, bus: str) -> dict:
    cfg = yaml.safe_load((REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text())
    cfg["name"] = f"capture-{dialect}-{strategy}-{bus}"
    cfg["bench"]["scope"] |= {"dialect": dialect, "capture": strategy.split("-")[0], "bus": bus}
    cfg["bench"]["scope"] |= VARIANTS.get(strategy, {})
    cfg["matrix"] |= {"interfaces": ["lpt"], "variants": ["inb"], "samples": samples, "pulses": 1000,
                      "period": "100us", "max_duration": "5min"}
    return cfg


def run(dialect: str, strategy: str, samples: int, bus: str, work: Path) -> dict:
    path = work / f"{dialect}-{strategy}-{bus}.yaml"
    path.write_text(yaml.safe_dump(campaign(dialect, strategy, samples, bus)))
    out = work / f"{dialect}-{strategy}-{bus}"
    proc = subprocess.run([*STATION, "run", str(path), "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{dialect}/{strategy}: station run failed:\n{proc.stderr[-2000:]}")
    (manifest,) = [json.loads(p.read_text()) for p in (out / "runs").glob("*/manifest.json")]
    return manifest["capture"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=60_000, help="software samples per run (100 µs each)")
    parser.add_argument("--buses", default="model,loopback",
                        help="comma-separated bench.scope.bus values to run each model on")
    parser.add_argument("--keep", type=Path, help="keep the campaigns in this directory")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-capture-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'model':23}{'bus':10}{'strategy':15}{'acq.':>6}{'pulses':>9}{'events':>9}{'capture ratio':>15}"
          f"{'dead time/acq.':>16}{'vs waveform':>13}{'cut frames':>12}")
    best: dict[tuple[str, str], float] = {}  # (model, bus) -> its best segmented ratio
    try:
        for bus in args.buses.split(","):
            for dialect, strategies in MODELS.items():
                baseline = None
                for strategy in strategies:
                    c = run(dialect, strategy, args.samples, bus, work)
                    ratio = c["capture_ratio"]
                    baseline = ratio if strategy == "waveform" else baseline
                    versus = f"{ratio / baseline:.2f}x" if strategy != "waveform" and baseline else ""
                    shown = c["bus"].split(":")[0].split(" (")[0].removeprefix("twin, ")
                    print(f"{dialect:23}{shown:10}{strategy:15}{c['acquisitions_counted']:>6}"
                          f"{c['pulses_counted']:>9}{c['events_emitted']:>9}{100 * ratio:>14.1f}%"
                          f"{1e3 * c['dead_time_per_acquisition_s']:>13.1f} ms{versus:>13}"
                          f"{c.get('frames_without_pulse', 0) / max(c['frames'], 1) * 100:>11.1f}%", flush=True)
                    if strategy.startswith("segmented") and not c.get("frames_without_pulse"):
                        best[dialect, bus] = max(best.get((dialect, bus), 0.0), ratio)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    missed = [f"{d} on {b}: {100 * r:.1f} %" for (d, b), r in best.items() if r < TARGET]
    print(f"target: segmented >= {100 * TARGET:.0f} % of events on the MSO and InfiniiVision models: "
          + ("MET on every bus run" if not missed else "MISSED (" + "; ".join(missed) + ")"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
