"""Event pairing: which software record is each scope pulse?

Within one acquisition the pulses are consecutive events, so their start times
say their event-number offsets k (start spacing / period). The scope's arm time
(host clock) and the stream's arrival times (host clock → last sequence number)
place the acquisition within a few thousand events. Among those candidate
first events n0, the right one makes the residuals t_HW − t_SW of all the
acquisition's pulses nearly constant (one bus access or none, plus scope
resolution); a wrong one leaves residuals spread like the latency itself.
An acquisition is paired only when the best candidate is clearly better than
the runner-up, so a pairing is either right or absent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MISSING = 1e15  # a lost record: never a plausible residual
MIN_PULSES = 5
MAX_SPREAD_NS = 150.0
MIN_SEPARATION = 4.0


@dataclass
class Pairing:
    pairs: pd.DataFrame  # acquisition, seq, hw_ns, sw_ns, diff_ns
    acquisitions: int
    acquisitions_paired: int
    pulses: int

    def summary(self) -> dict:
        d = self.pairs["diff_ns"].to_numpy()
        return {
            "acquisitions": self.acquisitions,
            "acquisitions_paired": self.acquisitions_paired,
            "pulses": self.pulses,
            "pulses_paired": int(len(d)),
            "hw_minus_sw_paired_mean_ns": float(d.mean()) if len(d) else None,
            "hw_minus_sw_paired_median_ns": float(np.median(d)) if len(d) else None,
            "hw_minus_sw_paired_std_ns": float(d.std(ddof=1)) if len(d) > 1 else None,
            "method": "per-acquisition offset search on pulse spacing; accepted when the median absolute "
            f"deviation of HW−SW is < {MAX_SPREAD_NS:g} ns and {MIN_SEPARATION:g}× better than the next candidate",
        }


def _offsets(starts_ns: np.ndarray, period_ns: int) -> np.ndarray | None:
    k = np.rint((starts_ns - starts_ns[0]) / period_ns).astype(np.int64)
    return k if np.all(np.diff(k) > 0) else None


def pair_run(sw: pd.DataFrame, hw: pd.DataFrame, arrivals: pd.DataFrame | None, period_ns: int,
             window: int = 3000) -> Pairing | None:
    """Pair the pulses of one run with its v1 records; None when the run cannot be paired
    (legacy stream without sequence numbers, no scope, or no arrival times)."""
    if "seq" not in sw or not len(sw) or not len(hw) or arrivals is None or not len(arrivals):
        return None
    if "armed_host_s" not in hw:
        return None
    seqs = sw["seq"].to_numpy(np.int64)
    lat = np.full(int(seqs.max()) + 1, MISSING)
    lat[seqs] = sw["latency_ns"].to_numpy(np.float64)
    arr_t = arrivals["host_s"].to_numpy()
    arr_seq = arrivals["last_seq"].to_numpy(np.float64)
    lag_estimates: list[int] = []
    out = []
    groups = hw.groupby("acquisition", sort=True)
    paired_acq = 0
    for acq, g in groups:
        if len(g) < MIN_PULSES:
            continue
        starts = g["start_s"].to_numpy() * 1e9
        widths = g["width_s"].to_numpy() * 1e9
        k = _offsets(starts, period_ns)
        if k is None:
            continue
        predicted = int(np.interp(g["armed_host_s"].iloc[0], arr_t, arr_seq))
        w = window
        if lag_estimates:  # the clock relation is known: look closely around it
            predicted += int(np.median(lag_estimates))
            w = max(window // 10, 50)
        lo = max(predicted - w, 0)
        hi = min(predicted + w, len(lat) - 1 - int(k[-1]))
        if hi - lo < 2:
            continue
        n0 = np.arange(lo, hi + 1)
        resid = widths[None, :] - lat[n0[:, None] + k[None, :]]
        center = np.median(resid, axis=1)
        spread = np.median(np.abs(resid - center[:, None]), axis=1)
        order = np.argsort(spread)
        best, runner_up = spread[order[0]], spread[order[1]]
        if best > MAX_SPREAD_NS or runner_up < MIN_SEPARATION * max(best, 1.0):
            continue
        first = int(n0[order[0]])
        lag_estimates.append(first - int(np.interp(g["armed_host_s"].iloc[0], arr_t, arr_seq)))
        seq = first + k
        sw_ns = lat[seq]
        keep = sw_ns < MISSING
        out.append(pd.DataFrame({"acquisition": acq, "seq": seq[keep], "hw_ns": widths[keep], "sw_ns": sw_ns[keep]}))
        paired_acq += 1
    pairs = pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        {"acquisition": [], "seq": [], "hw_ns": [], "sw_ns": []}
    )
    pairs["diff_ns"] = pairs["hw_ns"] - pairs["sw_ns"]
    return Pairing(pairs, int(groups.ngroups), paired_acq, int(len(hw)))
