"""Analysis rules that matter for what a report claims."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from station.kinds.module.analysis import _t_rw
from station.kinds.module.correlation import shift
from station.kinds.module.outliers import robust_threshold


def _entry(iface, variant, load, rep, d):
    return {"id": f"{iface}-{variant}-{load}-r{rep}", "interface": iface, "variant": variant, "load": load,
            "repetition": rep, "truth": None,
            "shift": {"hw_minus_sw_mean_ns": d, "se_ns": 10.0, "hw_minus_sw_median_ns": d}}


def test_t_rw_pairs_inb_with_no_inb_of_the_same_load():
    entries = [
        _entry("lpt", "inb", "idle", 0, 2000.0),
        _entry("lpt", "inb", "io", 0, 2100.0),
        _entry("lpt", "no-inb", "io", 0, 100.0),
        # lpt-no-inb-idle has no scope data: the idle inb run must not borrow io's
    ]
    entries[1]["shift"]["hw_minus_sw_mean_ns"] = 2100.0
    # runs as the campaign keeps them: the entry, and no paired differences (no pairing here)
    (est,) = _t_rw([SimpleNamespace(entry=e, diffs=None) for e in entries])
    assert est["load"] == "io" and est["inb_run"] == "lpt-inb-io-r0" and est["estimate_ns"] == 2000.0


def test_shift_interval_widens_when_acquisitions_drift_together():
    rng = np.random.default_rng(1)
    sw = rng.normal(8000, 800, 100_000)
    acq = np.repeat(np.arange(100), 50)
    drift = np.repeat(rng.normal(0, 300, 100), 50)  # each burst shares a load-driven offset
    hw = rng.normal(8000, 800, 5000) + drift
    clustered = shift(sw, hw, acq)
    naive = shift(sw, hw)
    assert clustered["se_ns"] > 2 * naive["se_ns"]
    lo, hi = clustered["ci95_ns"]
    assert lo < 0 < hi


def test_robust_threshold_with_a_quantised_sample_does_not_flag_half_of_it():
    v = np.array([1000] * 700 + [1008] * 300 + [20000])
    thr = robust_threshold(v)
    assert np.sum(v > thr) == 1
