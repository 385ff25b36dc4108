"""The whole campaign through each scope dialect the twin can play: the same
estimates, whatever the instrument's command set and data format."""

from __future__ import annotations

import json

import pytest
import yaml
from scipy.special import ndtri

from tests.conftest import REPO, run_station


@pytest.mark.parametrize("dialect", ["keysight_infiniivision", "tektronix_mso"])
def test_campaign_through_dialect(dialect, tmp_path):
    cfg = yaml.safe_load((REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text())
    cfg["bench"]["scope"]["dialect"] = dialect
    cfg["matrix"] |= {"interfaces": ["lpt"], "samples": 20000, "pulses": 1000}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = run_station("run", str(path), "--out", str(tmp_path / "out"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["campaign"]["scope"]["idn"].upper().startswith(("KEYSIGHT", "TEKTRONIX,MSO"))
    (est,) = report["comparisons"]["t_rw"]
    assert abs(est["paired_estimate_ns"] - est["truth_ns"]) < 10
    # the reported 95 % interval misses the truth in 1 run of 20 by design (and a 99.9 % one in 1 of
    # 1000, too often for a suite run once per submission): the check is that the truth lies within
    # z SE of the estimate, z for a two-sided risk of 1e-6 over the k = 1 interval checked here
    # (z = 4.89: a correct estimator fails it once in 1e6 runs per dialect), and the 95 % interval is that SE's
    k, z95 = 1, 1.959964
    z = ndtri(1 - 1e-6 / (2 * k))
    assert abs(est["estimate_ns"] - est["truth_ns"]) <= z * est["se_ns"], est
    lo, hi = est["ci95_ns"]
    assert lo == pytest.approx(est["estimate_ns"] - z95 * est["se_ns"])
    assert hi == pytest.approx(est["estimate_ns"] + z95 * est["se_ns"])
