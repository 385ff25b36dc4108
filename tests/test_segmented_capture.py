"""Segmented capture (Tektronix FastFrame, Keysight segmented memory) end to end on the twin:
the scope's models re-arm between frames, time-tag each one, transfer all frames at once; the
station places each frame's pulse by its tag, pairs it with its software record, and accounts
for what it saw (capture ratio and dead time) in the manifest and the report. The truth is the
twin's own event file (twin-truth.parquet), never a number from the station's code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, run_station

PERIOD_S = 100e-6


def _campaign(tmp_path: Path, dialect: str) -> Path:
    cfg = yaml.safe_load((REPO / "configs/demo.yaml").read_text())
    cfg["bench"]["scope"] |= {"dialect": dialect, "capture": "segmented", "segments": 1000,
                              "time_per_div": "2.5us", "record_length": 1000, "trigger_position_pct": 10,
                              "bus": "model"}  # the model's own LAN: a realistic transfer per acquisition
    cfg["matrix"] |= {"interfaces": ["lpt"], "variants": ["inb"], "samples": 40_000, "pulses": 10_000,
                      "period": "100us"}
    path = tmp_path / f"{dialect}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module", params=["tektronix_mso", "keysight_infiniivision"])
def segmented(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    out = tmp / "out"
    res = run_station("run", str(_campaign(tmp, request.param)), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    (run,) = report["runs"]
    return out, report, run, request.param


def test_each_frame_is_paired_to_the_event_the_twin_emitted(segmented):
    out, _, run, _ = segmented
    from station.analysis.pairing import pair_run
    from station.store import load_run

    data = load_run(out / "runs" / run["id"])
    hw = data.hw
    assert hw["frame"].max() >= 900, "one pulse a frame, up to the last frames"
    pairing = pair_run(data.sw, hw, data.arrivals, data.manifest["period_ns"])
    truth = data.truth.set_index("seq")
    paired = pairing.pairs
    # the frames the stream has records for (it stops when the run has its samples, while the
    # last acquisition may still be on its way): all but at most one acquisition's. Seen once
    # on the InfiniiVision twin: one acquisition of ten unpaired, cause not found yet (issue 14's
    # note); the pairs that are made must all be right (below)
    assert len(paired) >= data.manifest["capture"]["pulses_counted"] - 1000, (len(paired), len(hw))
    # right when the paired record's true board width is the pulse the scope measured
    dt_ns = 2.5e-6 * 10 / 1000 * 1e9
    true_hw = truth.loc[paired["seq"].astype(int), "hw_ns"].to_numpy()
    right = np.abs(paired["hw_ns"].to_numpy() - true_hw) < dt_ns
    assert right.mean() >= 0.999, right.mean()
    # and its start: the frames' time tags place every pulse on the target's event grid
    acq = hw.groupby("acquisition")
    spacing = acq["start_s"].diff().dropna().to_numpy() / PERIOD_S
    assert np.all(np.abs(spacing - np.rint(spacing)) < 0.25), "tags put frames a whole number of periods apart"


def test_capture_ratio_and_dead_time_are_accounted_against_the_truth(segmented):
    out, report, run, _ = segmented
    manifest = json.loads((out / "runs" / run["id"] / "manifest.json").read_text())
    cap = manifest["capture"]
    assert cap["strategy"] == "segmented" and cap["events_from"] == "record stream"
    log = pd.read_csv(out / "runs" / run["id"] / "scope_acquisitions.csv")
    assert cap["acquisitions"] == len(log) and cap["frames"] == log["frames"].sum() == 1000 * len(log)
    hw = pd.read_parquet(out / "runs" / run["id"] / "hw.parquet")
    assert cap["pulses"] == len(hw)
    counted = log.iloc[:cap["acquisitions_counted"]]
    assert len(counted) >= 2 and cap["pulses_counted"] == counted["pulses"].sum()
    # the twin emits an event every period (its truth): the accounting's count, from the
    # stream's arrival log, must agree to within the batches of records in flight at the
    # window's two ends (64 KiB of 32-byte records: 2048 events each)
    assert cap["window_s"] == pytest.approx(counted["done_host_s"].iloc[-1] - counted["armed_host_s"].iloc[0])
    assert abs(cap["events_emitted"] - cap["window_s"] / PERIOD_S) <= 2 * 2048
    assert cap["capture_ratio"] == pytest.approx(cap["pulses_counted"] / cap["events_emitted"])
    # the frames cover their record spans, and the dead time is the rest of the window
    assert cap["live_s"] == pytest.approx(counted["live_s"].sum()) == pytest.approx(
        1000 * len(counted) * 1000 * 25e-9, rel=1e-6)
    assert cap["dead_time_per_acquisition_s"] == pytest.approx((cap["window_s"] - cap["live_s"]) / len(counted))
    # the report shows it
    assert run["capture"]["capture_ratio"] == pytest.approx(cap["capture_ratio"])
    assert run["capture"]["dead_time_per_acquisition_s"] == pytest.approx(cap["dead_time_per_acquisition_s"])
