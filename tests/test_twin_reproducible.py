"""The twin's random streams follow the run's identity (campaign seed + run id), not
the order modules happen to be loaded in: a run measured after a resume equals the
same run measured in one go — but for the machine's slow drift, which follows the twin's
clock (a resumed run is measured at another time) and is taken out as the twin logged it —
and two different runs never share their draws."""

from __future__ import annotations

import asyncio

import numpy as np
import pandas as pd

from station import api
from station.config import parse_campaign
from station.kinds.module.data import load_run


def _campaign(variants: str, seed: int = 11):
    return parse_campaign(
        "name: twin-repro\n"
        f"bench: {{target: {{kind: twin}}, scope: {{kind: none}}, twin: {{seed: {seed}, ground_truth: true}}}}\n"
        f"matrix: {{interfaces: [lpt], variants: [{variants}], samples: 3000}}\n"
    )


def _latencies(out, run_id: str) -> np.ndarray:
    """The run's first 3000 t_SW, less the drift of the twin's clock each event met (its truth)."""
    sw = load_run(out / "runs" / run_id).sw[["seq", "latency_ns"]]
    truth = pd.read_parquet(out / "runs" / run_id / "twin-truth.parquet", columns=["seq", "drift_ns"])
    joined = sw.merge(truth, on="seq", how="left", validate="one_to_one")
    assert joined["drift_ns"].notna().all()
    return (joined["latency_ns"] - joined["drift_ns"]).to_numpy()[:3000]


def test_a_run_draws_the_same_events_whatever_ran_before_it(tmp_path):
    whole, resumed, other_seed = tmp_path / "whole", tmp_path / "resumed", tmp_path / "other-seed"
    asyncio.run(api.run_campaign_async(_campaign("inb, no-inb"), whole))
    # as after an interruption: only the second run is left to measure, in a fresh twin
    asyncio.run(api.run_campaign_async(_campaign("no-inb"), resumed))
    asyncio.run(api.run_campaign_async(_campaign("no-inb", seed=12), other_seed))
    first = _latencies(whole, "lpt-no-inb-none-r0")
    again = _latencies(resumed, "lpt-no-inb-none-r0")
    assert len(first) == len(again) == 3000
    assert np.array_equal(first, again)
    # different runs, and the same run under another campaign seed, draw differently
    inb = _latencies(whole, "lpt-inb-none-r0")
    assert np.mean(inb[:3000] == first) < 0.05
    assert np.mean(_latencies(other_seed, "lpt-no-inb-none-r0") == first) < 0.05
