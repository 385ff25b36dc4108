"""Scope versus software: the HW−SW shift of a run and t_rw per interface.

Scope pulses and software records are different samples of the same
stationary process (the scope catches a subset of the events), so the shift is
a difference of means with a Welch standard error. With the inb check,
t_HW ≈ t_SW + t_rw; without it t_HW ≈ t_SW, so t_rw = shift(inb) − shift(no-inb)
— an estimate that cancels whatever bias the two runs share (probe, threshold).
"""

from __future__ import annotations

import math

import numpy as np

from station.analysis.distribution import Distribution, robust_sigma
from station.analysis.stats import mean_se
from station.analysis.streaming import Moments

Z95 = 1.959963984540054


def shift(sw_ns: np.ndarray | Distribution, hw_ns: np.ndarray,
          acquisitions: np.ndarray | None = None,
          sw_window_ns: np.ndarray | None = None) -> dict | None:
    """HW − SW mean difference. Scope pulses come in bursts of consecutive events (one
    acquisition each), which drift together under load: their standard error is the
    cluster-robust one over acquisitions, not the one for independent pulses. The software
    sample may be given as its Distribution; `sw_window_ns`: the records of the scope's capture
    window, the software side where given (shift_of)."""
    sw = sw_ns if isinstance(sw_ns, Distribution) else Distribution.of(np.asarray(sw_ns))
    if sw.count < 2 or len(hw_ns) < 2:
        return None
    m_hw, se_hw = cluster_mean_se(np.asarray(hw_ns, np.float64), acquisitions)
    count = None if acquisitions is None else int(np.unique(np.asarray(acquisitions)).size)
    span = None
    if sw_window_ns is not None and len(sw_window_ns) >= 2:
        span = Moments()
        span.add(np.asarray(sw_window_ns, np.float64))
    return shift_of(sw, m_hw, se_hw, float(np.median(hw_ns)), count, span)


#: acquisitions a shift's interval needs: fewer, and the pulses of one acquisition (which move
#together : under a load's phase) would be taken as independent (6 of them held the run's shift in
#~half the runs)
MIN_ACQUISITIONS = 10


def shift_of(sw: Distribution, hw_mean_ns: float, hw_se_ns: float, hw_median_ns: float,
             acquisitions: int | None = None, span: Moments | None = None) -> dict:
    """`shift` from the scope side's mean, its cluster-robust standard error and its median. The
    software side adds std/√n: it holds every event of the run, so a load's phases are shared with
    the scope's acquisitions spread over the same run and are no error of the shift (the spread
    between acquisitions already holds them). An infinite SE, or fewer than MIN_ACQUISITIONS
    acquisitions, leaves the interval out."""
    # the software side: the records of the scope's capture window where known (`span`), else all
    m_sw = span.mean if span is not None else sw.mean()
    se_sw = (
        span.std(1) / math.sqrt(span.count) if span is not None else sw.std(1) / math.sqrt(sw.count)
    )
    d = hw_mean_ns - m_sw
    se = math.hypot(hw_se_ns, se_sw)
    few = acquisitions is not None and acquisitions < MIN_ACQUISITIONS
    stated = math.isfinite(se) and not few
    return {
        "hw_minus_sw_mean_ns": d,
        "sw_records": span.count if span is not None else sw.count,
        "sw_side": "the scope's capture window" if span is not None else "every record",
        "se_ns": se if stated else None,
        "ci95_ns": [d - Z95 * se, d + Z95 * se] if stated else None,
        # with too few acquisitions the SE is the plain one (pulses taken as independent): not
        # stated
        "hw_se_ns": hw_se_ns if math.isfinite(hw_se_ns) and not few else None,
        "hw_minus_sw_median_ns": float(hw_median_ns - sw.median()),
        "ci_withheld": None if stated else (
            f"{acquisitions} scope acquisitions: at least {MIN_ACQUISITIONS} are needed for an "
            "interval that holds when an acquisition's pulses move together (more pulses or a "
            "shorter record)" if few
            else "too few pulses for a standard error"),
    }


def cluster_mean_se(values: np.ndarray, clusters: np.ndarray | None) -> tuple[float, float]:
    if clusters is None or not len(clusters):
        return mean_se(values)
    if np.all(clusters[1:] >= clusters[:-1]):  # as written, acquisition after acquisition: no sort
        inverse = np.cumsum(np.r_[False, clusters[1:] != clusters[:-1]])
    else:
        inverse = np.unique(clusters, return_inverse=True)[1]
    if inverse.max() + 1 < 10:
        return mean_se(values)
    mean = float(values.mean())
    sums = np.bincount(inverse, weights=values - mean)
    k = len(sums)
    return mean, float(math.sqrt(k / (k - 1) * np.sum(sums**2)) / len(values))


def t_rw(shift_inb: dict, shift_no_inb: dict) -> dict:
    est = shift_inb["hw_minus_sw_mean_ns"] - shift_no_inb["hw_minus_sw_mean_ns"]
    ses = (shift_inb.get("se_ns"), shift_no_inb.get("se_ns"))
    # a shift without an interval leaves none here
    se = math.hypot(*ses) if None not in ses else None
    why = [f"{name}: {s['ci_withheld']}" for name, s in (("inb", shift_inb), ("no-inb",
                                                                              shift_no_inb))
           if s.get("se_ns") is None and s.get("ci_withheld")]
    return {
        "estimate_ns": est,
        "se_ns": se,
        "ci95_ns": [est - Z95 * se, est + Z95 * se] if se is not None else None,
        "ci_withheld": ("; ".join(why) or "a shift has no interval") if se is None else None,
        "median_estimate_ns": shift_inb["hw_minus_sw_median_ns"]
        - shift_no_inb["hw_minus_sw_median_ns"],
    }


# an event whose HW−SW lies this many robust sigmas from its run's median is an outlier of one side
PAIRED_OUTLIER_MADS = 6.0


def bulk(diff_ns: np.ndarray, median: float | None = None) -> np.ndarray:
    """The events whose HW−SW difference lies with the run's bulk.

    A paired difference holds the bus access and the scope's resolution; an event delayed on one
    side only (the software side's outliers the station flags, or a stretch the scope sees) moves
    it by microseconds. Such events say nothing about t_rw, and a few of them (1e-3 on PCIe)
    shift the mean by more than its standard error: they are left out, and counted.
    """
    d = np.asarray(diff_ns, dtype=np.float64)
    median, sigma = robust_sigma(d, median)  # median given: the caller has it
    if sigma == 0.0:
        return d == median
    return np.abs(d - median) <= PAIRED_OUTLIER_MADS * sigma


def paired_t_rw(diff_inb: np.ndarray, diff_no_inb: np.ndarray,
                keep_inb: np.ndarray | None = None, keep_no_inb: np.ndarray | None = None) -> dict:
    """t_rw from paired events: the same events seen by both, so each difference
    holds only the bus access and the scope's resolution, not the latency's spread.
    Events outlying on one side are left out of each run's mean (`bulk`, unless given); how
    many is said."""
    a, b = np.asarray(diff_inb, np.float64), np.asarray(diff_no_inb, np.float64)
    keep_a = bulk(a) if keep_inb is None else keep_inb
    keep_b = bulk(b) if keep_no_inb is None else keep_no_inb
    return paired_t_rw_of((*mean_se(a[keep_a]), int((~keep_a).sum())), (*mean_se(b[keep_b]),
                                                                        int((~keep_b).sum())))


def paired_t_rw_of(inb: tuple[float, float, int], no_inb: tuple[float, float, int]) -> dict:
    """paired_t_rw from each run's (bulk mean, its standard error, events left out)."""
    (m_a, se_a, out_a), (m_b, se_b, out_b) = inb, no_inb
    est, se = m_a - m_b, math.hypot(se_a, se_b)
    return {"paired_estimate_ns": est, "paired_se_ns": se, "paired_ci95_ns": [est - Z95 * se,
                                                                              est + Z95 * se],
            "paired_excluded": {"inb": out_a, "no_inb": out_b},
            "paired_method": f"mean of paired HW−SW per run, events beyond {PAIRED_OUTLIER_MADS:g} "
                             "robust sigmas "
                             "of the run's median left out (one-sided outliers)"}
