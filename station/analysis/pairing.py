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

Cost. The first few acquisitions are searched one by one over the whole window
the arrival times allow. Once BOOTSTRAP of them are paired, the arm time → first
event relation is a straight line (the host and target clocks drift slowly), and
the rest are searched in blocks, all acquisitions of a block at once, over the
few candidates around that line that its residuals allow, each scored on at most
SCORE_PULSES of its pulses; the winner is then checked on every pulse by a count.
That is linear in the run: an hour at 10 kHz pairs in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from station.analysis.correlation import bulk

MISSING = 1e15  # a lost record: never a plausible residual
MIN_PULSES = 5
MAX_SPREAD_NS = 150.0
MIN_SEPARATION = 4.0
SCORE_PULSES = 16  # pulses per acquisition that score the candidates of a block
BOOTSTRAP = 8  # acquisitions paired one by one before the clock line is trusted
BLOCK = 512  # acquisitions searched at once
MODEL_POINTS = 512  # the latest paired acquisitions the clock line is fitted to
MIN_HALF_WIDTH = 16  # candidates each side of the line, at least
SHORTLIST = 3  # candidates per acquisition whose spread is computed exactly


@dataclass
class Pairing:
    pairs: pd.DataFrame  # acquisition, seq, hw_ns, sw_ns, diff_ns
    acquisitions: int
    acquisitions_paired: int
    pulses: int

    @cached_property
    def diff_median_ns(self) -> float:
        return float(np.median(self.pairs["diff_ns"].to_numpy()))

    @cached_property
    def in_bulk(self) -> np.ndarray:
        """correlation.bulk of the paired differences: the events with the run's bulk HW−SW."""
        return bulk(self.pairs["diff_ns"].to_numpy(), self.diff_median_ns)

    def summary(self) -> dict:
        d = self.pairs["diff_ns"].to_numpy()
        return {
            "acquisitions": self.acquisitions,
            "acquisitions_paired": self.acquisitions_paired,
            "pulses": self.pulses,
            "pulses_paired": int(len(d)),
            "hw_minus_sw_paired_mean_ns": float(d.mean()) if len(d) else None,
            "hw_minus_sw_paired_median_ns": self.diff_median_ns if len(d) else None,
            "hw_minus_sw_paired_std_ns": float(d.std(ddof=1)) if len(d) > 1 else None,
            "method": "per-acquisition offset search on pulse spacing; accepted when the median absolute "
            f"deviation of HW−SW is < {MAX_SPREAD_NS:g} ns and {MIN_SEPARATION:g}× better than the next candidate",
        }


@dataclass
class _Acquisitions:
    """The run's pulses sorted by acquisition, and each acquisition's slice and offsets k."""

    ids: np.ndarray  # acquisition number of each slice
    begin: np.ndarray
    end: np.ndarray
    widths: np.ndarray  # ns, all pulses in acquisition order
    k: np.ndarray  # event offset of each pulse from its acquisition's first
    armed: np.ndarray  # host time each acquisition was armed
    usable: np.ndarray  # enough pulses, strictly increasing offsets


def _acquisitions(hw: pd.DataFrame, period_ns: int) -> _Acquisitions:
    # written in acquisition order: no reordering copy (millions of pulses in an hour's run)
    order = None if hw["acquisition"].is_monotonic_increasing else np.argsort(hw["acquisition"].to_numpy(),
                                                                               kind="stable")

    def column(name: str) -> np.ndarray:
        values = hw[name].to_numpy()
        return values if order is None else values[order]

    acq = column("acquisition")
    starts = column("start_s")
    cut = np.flatnonzero(acq[1:] != acq[:-1]) + 1
    begin, end = np.concatenate(([0], cut)), np.concatenate((cut, [len(acq)]))
    offset = starts - np.repeat(starts[begin], end - begin)
    offset *= 1e9 / period_ns
    k = np.rint(offset, out=offset).astype(np.int64)
    # offsets must grow strictly within an acquisition (a step of 0 is two pulses in one period)
    step_ok = np.ones(len(k), bool)
    step_ok[1:] = np.diff(k) > 0
    step_ok[begin] = True
    increasing = np.logical_and.reduceat(step_ok, begin)
    return _Acquisitions(
        ids=acq[begin], begin=begin, end=end, widths=column("width_s") * 1e9, k=k,
        armed=column("armed_host_s")[begin], usable=increasing & (end - begin >= MIN_PULSES),
    )


def _scoring_columns(begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(acquisitions, SCORE_PULSES) pulse indices spread over each acquisition; a short one
    repeats its pulses (a repeat changes no candidate's ranking)."""
    n = (end - begin)[:, None]
    j = np.arange(SCORE_PULSES)[None, :]
    spread = np.where(n >= SCORE_PULSES, (j * (n - 1)) // (SCORE_PULSES - 1), j % n)
    return begin[:, None] + spread


def _rows(begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pulse indices of the slices [begin, end) one after another, and each one's slice number."""
    sizes = end - begin
    owner = np.repeat(np.arange(len(begin)), sizes)
    return np.arange(int(sizes.sum())) + np.repeat(begin - np.cumsum(sizes) + sizes, sizes), owner


def _median(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """np.median along the last axis, by a sort: several times faster on short rows."""
    s = np.sort(x, axis=-1)
    n = x.shape[-1]
    m = s[..., n // 2] if n % 2 else 0.5 * (s[..., n // 2 - 1] + s[..., n // 2])
    return m[..., None] if keepdims else m


def _mad(resid: np.ndarray) -> np.ndarray:
    """Median absolute deviation along the last axis."""
    return _median(np.abs(resid - _median(resid, keepdims=True)))


def _latency_by_seq(sw: pd.DataFrame) -> np.ndarray:
    """t_SW indexed by sequence number, MISSING where a record was lost. A stream without losses
    is its own table (no copy: a run's latencies are tens of MB)."""
    seq = sw["seq"]
    n = len(seq)
    if seq.is_monotonic_increasing and int(seq.iloc[0]) == 0 and int(seq.iloc[-1]) == n - 1:
        return sw["latency_ns"].to_numpy()  # non-decreasing, n values from 0 to n − 1: exactly 0 … n − 1
    seqs = seq.to_numpy(np.int64)
    lat = np.full(int(seqs.max()) + 1, MISSING)
    lat[seqs] = sw["latency_ns"].to_numpy(np.float64)
    return lat


def pair_run(sw: pd.DataFrame, hw: pd.DataFrame, arrivals: pd.DataFrame | None, period_ns: int,
             window: int = 3000) -> Pairing | None:
    """Pair the pulses of one run with its v1 records; None when the run cannot be paired
    (legacy stream without sequence numbers, no scope, or no arrival times)."""
    if "seq" not in sw or not len(sw) or not len(hw) or arrivals is None or not len(arrivals):
        return None
    if "armed_host_s" not in hw:
        return None
    lat = _latency_by_seq(sw)
    a = _acquisitions(hw, period_ns)
    arrived = np.interp(a.armed, arrivals["host_s"].to_numpy(), arrivals["last_seq"].to_numpy(np.float64))
    first = np.full(len(a.ids), -1, dtype=np.int64)  # the paired first event, -1: not paired
    last_k = a.k[a.end - 1]

    def search_one(i: int, predicted: int, half: int) -> None:
        lo = max(predicted - half, 0)
        hi = min(predicted + half, len(lat) - 1 - int(last_k[i]))
        if hi - lo < 2:
            return
        n0 = np.arange(lo, hi + 1)
        k = a.k[a.begin[i]:a.end[i]]
        spread = _mad(a.widths[a.begin[i]:a.end[i]][None, :] - lat[n0[:, None] + k[None, :]])
        two = np.argsort(spread)[:2]
        best, runner_up = spread[two[0]], spread[two[1]]
        if best <= MAX_SPREAD_NS and runner_up >= MIN_SEPARATION * max(best, 1.0):
            first[i] = n0[two[0]]

    todo = np.flatnonzero(a.usable)
    # bootstrap: one by one, over the window the arrival times allow
    lags: list[int] = []
    done_upto = 0
    for done_upto, i in enumerate(todo, start=1):  # noqa: B007 - its value after the loop is used
        predicted, half = int(arrived[i]), window
        if lags:  # the clock relation is roughly known: look closer
            predicted += int(np.median(lags))
            half = max(window // 10, 50)
        search_one(i, predicted, half)
        if first[i] >= 0:
            lags.append(int(first[i] - int(arrived[i])))
        if len(lags) >= BOOTSTRAP:
            break
    block_start = done_upto
    while block_start < len(todo):
        paired = np.flatnonzero(first >= 0)
        paired = paired[paired < todo[block_start]][-MODEL_POINTS:]
        # the line is extrapolated no further than the span it was fitted on
        idx = todo[block_start:block_start + min(BLOCK, max(len(paired), BOOTSTRAP))]
        block_start += len(idx)
        if len(paired) < 2 or np.ptp(a.armed[paired]) <= 0:
            for i in idx:  # no line yet: one by one around the arrival estimate
                search_one(int(i), int(arrived[i]) + (int(np.median(lags)) if lags else 0),
                           max(window // 10, 50) if lags else window)
                if first[i] >= 0:
                    lags.append(int(first[i] - int(arrived[i])))
            continue
        t0 = a.armed[paired[0]]
        slope, intercept = np.polyfit(a.armed[paired] - t0, first[paired].astype(np.float64), 1)
        off_line = np.abs(first[paired] - (slope * (a.armed[paired] - t0) + intercept))
        half = int(np.clip(np.ceil(4 * off_line.max()) + 8, MIN_HALF_WIDTH, max(window // 10, 50)))
        centre = np.rint(slope * (a.armed[idx] - t0) + intercept).astype(np.int64)
        cand = centre[:, None] + np.arange(-half, half + 1)[None, :]  # (acq, candidates)
        cols = _scoring_columns(a.begin[idx], a.end[idx])  # (acq, pulses)
        at = cand[:, :, None] + a.k[cols][:, None, :]
        inside = (cand >= 0) & (cand + last_k[idx][:, None] < len(lat))
        resid = a.widths[cols][:, None, :] - lat[np.clip(at, 0, len(lat) - 1)]
        # a cheap pre-score (how many consecutive residuals stay together) keeps SHORTLIST
        # candidates; the median absolute deviation then decides among those alone
        steady = np.where(inside, (np.abs(np.diff(resid, axis=2)) <= MAX_SPREAD_NS).sum(axis=2), -1)
        short = np.argpartition(-steady, SHORTLIST - 1, axis=1)[:, :SHORTLIST]
        spread = np.where(np.take_along_axis(inside, short, 1),
                          _mad(np.take_along_axis(resid, short[:, :, None], 1)), np.inf)
        order = np.argsort(spread, axis=1)
        two = np.take_along_axis(short, order[:, :2], 1)
        best = np.take_along_axis(spread, order[:, :1], 1)[:, 0]
        runner_up = np.take_along_axis(spread, order[:, 1:2], 1)[:, 0]
        won = (best <= MAX_SPREAD_NS) & (runner_up >= MIN_SEPARATION * np.maximum(best, 1.0))
        edge = (two[:, 0] == 0) | (two[:, 0] == 2 * half)
        chosen = cand[np.arange(len(idx)), two[:, 0]]
        # the winner against every pulse of its acquisition: most residuals near the scored centre
        centre_resid = _median(np.take_along_axis(resid, two[:, :1, None], 1)[:, 0, :])
        rows, owner = _rows(a.begin[idx], a.end[idx])
        sizes = a.end[idx] - a.begin[idx]
        seq = np.clip(chosen[owner] + a.k[rows], 0, len(lat) - 1)
        near = np.abs(a.widths[rows] - lat[seq] - centre_resid[owner]) <= MAX_SPREAD_NS
        agree = np.bincount(owner, weights=near, minlength=len(idx)) >= (sizes + 1) // 2
        ok = won & ~edge & agree
        first[idx[ok]] = chosen[ok]
        for i in idx[~ok & (edge | ~won)]:  # off the line (a stalled scope, a clock step): the wide search
            search_one(int(i), int(arrived[i]) + int(np.median(lags)), max(window // 10, 50))
    return _pairs(a, first, lat)


def _pairs(a: _Acquisitions, first: np.ndarray, lat: np.ndarray) -> Pairing:
    paired = np.flatnonzero(first >= 0)
    rows, owner = _rows(a.begin[paired], a.end[paired])
    owner = paired[owner]
    seq = first[owner] + a.k[rows]
    sw_ns = lat[seq].astype(np.float64, copy=False)
    keep = sw_ns < MISSING
    hw_ns, sw_ns = a.widths[rows][keep], sw_ns[keep]
    # copy=False: one block per column, not a consolidating copy of millions of rows
    pairs = pd.DataFrame({"acquisition": a.ids[owner][keep], "seq": seq[keep], "hw_ns": hw_ns, "sw_ns": sw_ns,
                          "diff_ns": hw_ns - sw_ns}, copy=False)
    return Pairing(pairs, len(a.ids), len(paired), int(len(a.widths)))
