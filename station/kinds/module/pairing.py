"""Event pairing: which software record is each scope pulse?

Within one acquisition the pulses are consecutive events, so their start times
say their event-number offsets k (start spacing / period). The scope's arm time
(host clock) and the stream's arrival times (host clock → last sequence number)
place the acquisition within a few thousand events. Among those candidate
first events n0, the right one makes the residuals t_HW − t_SW of all the
acquisition's pulses nearly constant (one bus access or none, plus scope
resolution); a wrong one leaves residuals spread like the latency itself.
An acquisition is paired only when the best candidate is clearly better than
the runner-up and when no wrong alignment among the candidates searched could
have fitted as well by chance: a pairing is either right or absent.

How sure: station/kinds/module/false_pairs.py (an acquisition is paired only when no
wrong alignment could have fitted as well by chance but with probability FALSE_PAIR_BOUND).

Events, not records. A stray IRQ (a NOT_OURS record: a foreign interrupt on the
module's line) takes a sequence number but is no event of the module and leaves
no pulse: pairing counts the module's own events (EventNumbers), so one stray
does not shift every later pair by one. A lost record (a sequence gap) counts
as an event, whatever it was.

Cost. The first few acquisitions are searched one by one over the whole window
the arrival times allow. Once BOOTSTRAP of them are paired, the arm time → first
event relation is a straight line (the host and target clocks drift slowly), and
the rest are searched in blocks, all acquisitions of a block at once, over the
few candidates around that line that its residuals allow, each scored on at most
SCORE_PULSES of its pulses; the winner is then checked on every pulse by a count.
That is linear in the run: an hour at 10 kHz pairs in seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from station.capture.pulses import PAIRING_ORDER
from station.kinds.module.clock_ratio import clock_ratios
from station.kinds.module.correlation import bulk
from station.kinds.module.false_pairs import (
    AGREE_NS,
    FALSE_PAIR_BOUND,
    MAX_SPREAD_NS,
    MIN_PULSES,
    BlockShare,
    false_pair_log_bound,
    max_share_within,
    never_significant,
)
from station.kinds.module.pairing_scores import (
    agreement,
    block_choice,
    deciding_spreads,
    spreads,
)
from station.parsers.records import Flag

NOT_OURS = int(Flag.NOT_OURS)

MISSING = 1e15  # a lost record: never a plausible residual
# the candidates an acquisition may be searched among, per `window`: the arrival estimate ± window,
# and the clock line's or the median lag's neighbourhoods, which may lie beside it (a union bound)
CANDIDATES_PER_WINDOW = 4
MIN_SEPARATION = 4.0
SCORE_PULSES = 16  # pulses per acquisition that score the candidates of a block
BOOTSTRAP = 8  # acquisitions paired one by one before the clock line is trusted
BLOCK = 512  # acquisitions searched at once
MODEL_POINTS = 512  # the latest paired acquisitions the clock line is fitted to
MIN_HALF_WIDTH = 16  # candidates each side of the line, at least
# a one-by-one search over more candidates × pulses than this computes the exact spread of the
# WIDE_SHORTLIST best pre-scored candidates only (_shortlist)
WIDE_PRESCORED = 200_000
WIDE_SHORTLIST = 256
SPAN_EVENTS = 1 << 18  # events of the stream one group of acquisitions is paired against at most
# (a group is held whole: at the demo's 43 % capture, ~110 k pulses, as many as a batch held before)
# and GROUP_ACQUISITIONS acquisitions at most, by their numbers (arm times past the last arrival all
# map to one stretch of the stream: a stalled reader must not make one group of the rest of the run)
GROUP_ACQUISITIONS = 2048
HW_COLUMNS = PAIRING_ORDER  # what pairing reads of the pulses


class EventNumbers:
    """Sequence number <-> the module's own event number, given the stray IRQs' sequence numbers
    (each takes one): event = seq - strays before it."""

    def __init__(self, stray_seqs: np.ndarray | None = None) -> None:
        self.stray_seqs = np.unique(np.asarray(stray_seqs if stray_seqs is not None else [],
                                               np.int64))
        # own events before each stray: where it sits among the events
        self._stray_events = self.stray_seqs - np.arange(len(self.stray_seqs))

    def to_event(self, seq: np.ndarray) -> np.ndarray:
        seq = np.asarray(seq).astype(np.int64)
        if not len(self.stray_seqs):
            return seq
        return seq - np.searchsorted(self.stray_seqs, seq, side="left")

    def to_seq(self, event: np.ndarray) -> np.ndarray:
        event = np.asarray(event)
        if not len(self.stray_seqs):
            return event
        return event + np.searchsorted(self._stray_events, event, side="right")


@dataclass
class Pairing:
    pairs: pd.DataFrame  # acquisition, seq, hw_ns, sw_ns, diff_ns
    acquisitions: int
    acquisitions_paired: int
    pulses: int
    expected_false_pairs: float = 0.0  # sum of the paired acquisitions' false-pair bounds
    pairable: int = 0  # acquisitions whose pulses could be paired at all, all agreeing

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
            "expected_false_pairs": self.expected_false_pairs,
            "pairable": self.pairable,
            "method": METHOD,
        }


METHOD = ("per-acquisition offset search on pulse spacing; accepted when the median absolute "
          f"deviation of HW−SW is < {MAX_SPREAD_NS:g} ns, {MIN_SEPARATION:g}× better than the next "
          "candidate, and no wrong alignment among the candidates could agree as well with "
          f"probability above {FALSE_PAIR_BOUND:g}")


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
    starts: np.ndarray  # s, each pulse's start on the scope's timebase


def _acquisitions(hw: Mapping[str, np.ndarray], period_ns: int) -> _Acquisitions:
    """`hw`: acquisition, start_s, width_s, armed_host_s arrays (a DataFrame or a batch)."""
    acquisition = np.asarray(hw["acquisition"])
    # written in acquisition order: no reordering copy (millions of pulses in an hour's run)
    order = None if np.all(acquisition[1:] >= acquisition[:-1]) else np.argsort(acquisition,
                                                                                kind="stable")

    def column(name: str) -> np.ndarray:
        values = np.asarray(hw[name])
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
        starts=starts,
    )


def _scoring_columns(begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(acquisitions, SCORE_PULSES) pulse indices spread over each acquisition; a short one
    repeats its pulses (a repeat changes no candidate's ranking)."""
    n = (end - begin)[:, None]
    j = np.arange(SCORE_PULSES)[None, :]
    spread = np.where(n >= SCORE_PULSES, (j * (n - 1)) // (SCORE_PULSES - 1), j % n)
    return begin[:, None] + spread


def _shortlist(a: _Acquisitions, i: int, n0: np.ndarray, predicted: int,
               win: _SeqWindow) -> np.ndarray | None:
    """The candidates (indices into n0, in n0's order) of acquisition i whose spread a wide search
    computes first: the WIDE_SHORTLIST whose residuals over the scoring pulses stay together most
    often (the block search's pre-score), with every candidate tied with the last of them, or,
    when more than twice that many tie at the cut, every candidate above it; None when the
    pre-score cannot tell (fewer than two above a crowd of ties: a run whose t_SW hardly varies,
    where every alignment looks steady). The shortlist only orders the work: its pick is kept
    only when no other candidate could have changed it (search_one), else every candidate is
    searched, as without one (a wide search of a 500-pulse acquisition over 6 001 candidates
    computes 3 M residuals' spreads twice; the true alignment's residuals agree all along)."""
    cols = _scoring_columns(a.begin[i:i + 1], a.end[i:i + 1])[0]
    resid = a.widths[cols][None, :] - win.at(n0[:, None] + a.k[cols][None, :])
    steady = (np.abs(np.diff(resid, axis=1)) <= MAX_SPREAD_NS).sum(axis=1)
    cut = np.sort(steady)[::-1][WIDE_SHORTLIST - 1]
    chosen = np.flatnonzero(steady >= cut)
    if len(chosen) > 2 * WIDE_SHORTLIST:
        # too many tied at the cut: those strictly above it, all of them, when there are any (an
        # acquisition off the line whose true alignment stays together at every scoring pulse
        # where thousands of others do at 4 of 15: seen on every wide search of a dense run)
        chosen = np.flatnonzero(steady > cut)
    return chosen if 2 <= len(chosen) <= 2 * WIDE_SHORTLIST else None  # a choice needs two


def none_within(widths: np.ndarray, k: np.ndarray, rest: np.ndarray, held: np.ndarray,
                base: int, limit: float) -> bool:
    """Whether every candidate first event of `rest` has a spread of at least `limit` (those
    above it come back inf, those under it exact; NaN sorts last in a search, as here): what a
    shortlist's pick needs to be the whole search's."""
    return not len(rest) or not bool((spreads(widths, k, rest, held, base, MISSING, limit)
                                      < limit).any())


def _rows(begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pulse indices of the slices [begin, end) one after another, and each one's slice
    number."""
    sizes = end - begin
    owner = np.repeat(np.arange(len(begin)), sizes)
    return np.arange(int(sizes.sum())) + np.repeat(begin - np.cumsum(sizes) + sizes, sizes), owner


class _SeqWindow:
    """t_SW (and the write's time on the target's clock, when given) by event number over a sliding
    range of the stream: [base, end). Batches of (event, latency[, t_write]) are read as far as
    asked; numbers below the range are forgotten. The range lives at [_off, _off + _len) of its
    buffers: forgetting moves the offset, and the held part is moved to the front only when an
    append needs the room (a campaign of many small groups forgot, by copying the whole range, a
    thousand times a run)."""

    def __init__(self, batches: Iterable[tuple[np.ndarray, ...]]) -> None:
        self._batches = iter(batches)
        self.base = 0
        self._buf = np.empty(0, np.float64)  # the range, then room to grow into
        self._writes = np.empty(0, np.float64)  # t_write_ns, NaN where unknown
        self._off = 0
        self._len = 0
        self.done = False

    @property
    def end(self) -> int:
        return self.base + self._len

    def cover(self, lo: int, hi: int) -> None:
        """Hold [lo, hi] as far as the stream reaches (lost records: MISSING)."""
        self._forget_below(lo)
        while not self.done and self.end <= hi:
            batch = next(self._batches, None)
            if batch is None:
                self.done = True
                break
            self._append(*batch)
            self._forget_below(lo)  # records a scope stall skipped are not kept while reading on

    def _forget_below(self, lo: int) -> None:
        if lo > self.base:
            drop = min(lo - self.base, self._len)
            self._off += drop
            self._len -= drop
            self.base = lo if not self._len else self.base + drop
            if not self._len:
                self._off = 0

    def _room(self, top: int) -> None:
        """Room for the range's first `top` numbers: the held part moved to the front, the
        buffers grown by half again at least (appends stay linear)."""
        if self._off + top <= len(self._buf):
            return
        if self._off:
            held = slice(self._off, self._off + self._len)
            self._buf[:self._len] = self._buf[held]
            self._writes[:self._len] = self._writes[held]
            self._off = 0
        if top > len(self._buf):
            size = max(top, len(self._buf) * 3 // 2)
            self._buf = np.concatenate([self._buf[:self._len], np.empty(size - self._len)])
            self._writes = np.concatenate([self._writes[:self._len], np.empty(size - self._len)])

    def _append(self, seq: np.ndarray, latency: np.ndarray,
                t_write: np.ndarray | None = None) -> None:
        if not len(seq):
            return
        seq = np.asarray(seq, np.int64)
        if not self._len:  # the stream's first numbers (or a restart after a long gap)
            self.base = max(self.base, int(seq.min()))
        first, last = int(seq[0]), int(seq[-1])
        contiguous = first == self.end and last == first + len(seq) - 1 and first >= self.base
        writes: np.ndarray | float = np.nan if t_write is None else t_write  # cast as it is stored
        if not contiguous:
            keep = seq >= self.base  # numbers already forgotten come too late to be paired
            seq, latency = seq[keep], np.asarray(latency)[keep]
            writes = writes if t_write is None else np.asarray(t_write)[keep]
            if not len(seq):
                return
        top = (last if contiguous else int(seq.max())) + 1 - self.base
        self._room(top)
        o = self._off
        if top > self._len:
            # numbers skipped (lost records) stay lost; a contiguous batch fills it all
            if not contiguous:
                self._buf[o + self._len:o + top] = MISSING
                self._writes[o + self._len:o + top] = np.nan
            self._len = top
        at = slice(o + first - self.base, o + top) if contiguous else seq - self.base + o
        self._buf[at] = latency
        self._writes[at] = writes

    def writes(self, seq: np.ndarray) -> np.ndarray:
        """t_write of each event number (target ns), NaN outside the range, where lost or not
        given."""
        idx = np.asarray(seq, np.int64) - self.base
        inside = (idx >= 0) & (idx < self._len)
        out = np.full(idx.shape, np.nan)
        out[inside] = self._writes[self._off + idx[inside]]
        return out

    def share_within(self, width: float) -> float:
        """max_share_within of the latencies held (the lost left out)."""
        held = self.held()
        return max_share_within(held[held < MISSING], None, width)

    def held(self) -> np.ndarray:
        """t_SW of the events base, base + 1, … end - 1 (MISSING where lost): a view."""
        return self._buf[self._off:self._off + self._len]

    def at(self, seq: np.ndarray) -> np.ndarray:
        """t_SW of each sequence number, MISSING outside the range or where lost."""
        if not self._len:
            return np.full(np.shape(seq), MISSING)
        held = self.held()
        idx = np.asarray(seq, np.int64) - self.base
        if idx.size and idx.min() >= 0 and idx.max() < self._len:  # the usual case: all inside
            return held[idx]
        out = held[np.clip(idx, 0, self._len - 1)]
        out[(idx < 0) | (idx >= self._len)] = MISSING
        return out


class StreamPairer:
    """pair_run over a run's records and pulses in batches (memory: a batch of pulses and the
    records they can be paired with). `pairs()` yields each batch's pairs; the counts for
    Pairing are filled in as it goes."""

    def __init__(self, arrivals: pd.DataFrame, period_ns: int, window: int = 3000,
                 numbers: EventNumbers | None = None, share: float | None = None) -> None:
        """share: BlockShare's result over the run's own t_SW; None: from the records as read."""
        self.numbers = numbers or EventNumbers()
        self.share = share
        self.expected_false_pairs = 0.0
        self.pairable = 0
        # pairable acquisitions with an alignment whose residuals fit (MAD ≤ MAX_SPREAD_NS) beyond
        # chance (the false-pair bound), paired or not: a scope on another signal fits none; a
        # coarse record fits, but other alignments nearly as well: unpaired
        self.fitting = 0
        self.share_used = 0.0  # the largest share any stretch of the run was judged with
        self.arrival_host = arrivals["host_s"].to_numpy(np.float64)
        # the stream's progress in events (the pairer's numbering), not records
        self.arrival_seq = self.numbers.to_event(arrivals["last_seq"].to_numpy(np.int64)).astype(
            np.float64
        )
        self.period_ns = period_ns
        self.window = window
        self.acquisitions = self.acquisitions_paired = self.pulses = 0
        self._lags: list[int] = []
        # the latest paired acquisitions: arm time, first event
        self._line_armed = np.empty(0, np.float64)
        self._line_first = np.empty(0, np.int64)

    def pairs(self, sw_batches: Iterable[tuple[np.ndarray, ...]],
              hw_batches: Iterable[Mapping[str, np.ndarray]]) -> Iterator[pd.DataFrame]:
        """sw_batches: (event number, latency_ns[, t_write_ns]) of the module's own records in
        stream order (no stray IRQ's: EventNumbers.to_event of their seq; t_write_ns gives the
        clocks' ratio, None if unknown); hw_batches: arrays acquisition, start_s, width_s,
        armed_host_s in acquisition order (an acquisition may continue into the next batch). The
        pairs name each pulse's record by its sequence number."""
        win = _SeqWindow(sw_batches)
        carry: dict[str, np.ndarray] | None = None
        for batch in hw_batches:
            hw = {c: np.asarray(batch[c]) for c in HW_COLUMNS} if carry is None else \
                {c: np.concatenate([carry[c], np.asarray(batch[c])]) for c in HW_COLUMNS}
            if not len(hw["acquisition"]):
                continue
            starts = self._group_starts(hw)
            cut = int(starts[-1])  # the last group (and its last acquisition) may go on
            carry = {c: a[cut:] for c, a in hw.items()}
            yield from self._pair_groups({c: a[:cut] for c, a in hw.items()}, starts[:-1], win)
        if carry is not None and len(carry["acquisition"]):
            yield from self._pair_groups(carry, self._group_starts(carry), win)

    def _group_starts(self, hw: dict[str, np.ndarray]) -> np.ndarray:
        """Where each group of whole acquisitions starts: a group holds the acquisitions armed while
        the stream was in one stretch of SPAN_EVENTS events and numbered within one block of
        GROUP_ACQUISITIONS (both counted from the start, so that the groups, and with them the
        pairs, are the same however the pulses were read in batches); the window of records stays
        that size whatever fraction the scope caught."""
        acq = hw["acquisition"]
        starts = np.flatnonzero(np.r_[True, acq[1:] != acq[:-1]])
        arrived = np.interp(hw["armed_host_s"][starts], self.arrival_host, self.arrival_seq)
        stretch = np.floor(arrived / SPAN_EVENTS)
        block = np.asarray(acq[starts], np.int64) // GROUP_ACQUISITIONS
        change = (np.diff(stretch) != 0) | (np.diff(block) != 0)
        return starts[np.r_[0, np.flatnonzero(change) + 1]]

    def _pair_groups(self, hw: dict[str, np.ndarray], starts: np.ndarray,
                     win: _SeqWindow) -> Iterator[pd.DataFrame]:
        bounds = np.r_[starts, len(hw["acquisition"])].astype(np.int64)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            yield self._pair_acquisitions(_acquisitions({c: a[lo:hi] for c, a in hw.items()},
                                                        self.period_ns), win)

    def _pair_acquisitions(self, a: _Acquisitions, win: _SeqWindow) -> pd.DataFrame:
        window = self.window
        near = max(window // 10, 50)
        arrived = np.interp(a.armed, self.arrival_host, self.arrival_seq)
        first = np.full(len(a.ids), -1, dtype=np.int64)  # the paired first event, -1: not paired
        last_k = a.k[a.end - 1]
        todo = np.flatnonzero(a.usable)
        lags = self._lags
        if len(todo):  # the records this batch's acquisitions can be paired with
            lag = int(np.median(lags)) if lags else 0
            centres = arrived[todo] + lag
            if len(self._line_armed) >= 2 and np.ptp(self._line_armed) > 0:
                slope, intercept = np.polyfit(self._line_armed - self._line_armed[0],
                                              self._line_first.astype(np.float64), 1)
                centres = np.r_[centres, slope * (a.armed[todo] - self._line_armed[0]) + intercept]
            win.cover(int(centres.min()) - 2 * window,
                      int(centres.max()) + 2 * window + int(last_k.max()))
        share = self.share if self.share is not None else win.share_within(2 * AGREE_NS)
        self.share_used = max(self.share_used, share)
        log_bound_max = np.log(FALSE_PAIR_BOUND)
        bound = np.zeros(len(a.ids))  # each paired acquisition's false-pair bound
        sizes_all = a.end - a.begin
        pairable = a.usable & (false_pair_log_bound(sizes_all, sizes_all,
                                                    CANDIDATES_PER_WINDOW * window + 1, share)
                               <= log_bound_max)
        self.pairable += int(pairable.sum())
        fits = np.zeros(len(a.ids), bool)
        # too few pulses to beat chance, however well they agree: searching one would cost a sort
        # of every candidate in the window (ms each) and find nothing it may keep
        hopeless = never_significant(sizes_all, CANDIDATES_PER_WINDOW * window + 1, share)
        todo = todo[~hopeless[todo]]  # a campaign of 5-pulse acquisitions: a loop of nothing

        def significant(i: np.ndarray, n0: np.ndarray) -> np.ndarray:
            """Whether aligning acquisitions i at first events n0 beats chance among every candidate
            the search may look at (CANDIDATES_PER_WINDOW·window + 1, however narrowly it looked:
            the bound does not depend on the path it took); their bounds are kept."""
            n, agree = agreement(a.widths, a.k, a.begin[i], a.end[i], n0, win.held(), win.base,
                                 MISSING, AGREE_NS)
            log_bound = false_pair_log_bound(n, agree, np.full(len(i),
                                                               CANDIDATES_PER_WINDOW * window + 1),
                                                               share)
            ok = log_bound <= log_bound_max
            bound[i[ok]] = np.exp(log_bound[ok])
            return ok

        def search_one(i: int, predicted: int, half: int) -> None:
            if hopeless[i]:
                return
            lo = max(predicted - half, 0, win.base)
            hi = min(predicted + half, win.end - 1 - int(last_k[i]))
            if hi - lo < 2:
                return
            n0 = np.arange(lo, hi + 1)
            if n0.size > WIDE_SHORTLIST and n0.size * (a.end[i] - a.begin[i]) > WIDE_PRESCORED:
                short = _shortlist(a, i, n0, predicted, win)
                if short is not None and choose(i, n0[short], rest=np.delete(n0, short)):
                    return  # else every candidate, as if there were no shortlist
            choose(i, n0)

        def choose(i: int, n0: np.ndarray, rest: np.ndarray | None = None) -> bool:
            """The best of the candidates n0 by spread; whether it paired. With `rest` (the
            candidates a shortlist left out), nothing is noted unless it paired and no candidate
            of `rest` is within MIN_SEPARATION of its spread: then the search over n0 and rest
            together would make the same choice (the best, its fit, the pairing; ties to the
            earlier candidate, and every spread of rest is above the best)."""
            widths, k = a.widths[a.begin[i]:a.end[i]], a.k[a.begin[i]:a.end[i]]
            spread = deciding_spreads(widths, k, n0, win.held(), win.base, MISSING, MAX_SPREAD_NS,
                                      MIN_SEPARATION)
            two = np.argsort(spread, kind="stable")[:2]  # ties: the earlier candidate, on any CPU
            best, runner_up = spread[two[0]], spread[two[1]]
            # it fits: its residuals agree, beyond what chance gives the best of the candidates
            # searched
            fit = best <= MAX_SPREAD_NS and significant(np.array([i]), n0[two[:1]])[0]
            limit = MIN_SEPARATION * max(best, 1.0)
            paired = bool(fit and runner_up >= limit)
            accept_only = rest is not None
            if paired and accept_only:
                paired = none_within(widths, k, rest, win.held(), win.base, limit)
            if not accept_only or paired:
                fits[i] |= fit
            if paired:
                first[i] = n0[two[0]]
            return paired

        def paired_here(i: int) -> None:
            if first[i] >= 0:
                self._remember(a.armed[i : i + 1], first[i : i + 1])

        # bootstrap: one by one, over the window the arrival times allow
        done_upto = 0
        while done_upto < len(todo) and len(lags) < BOOTSTRAP:
            i = int(todo[done_upto])
            done_upto += 1
            predicted, half = int(arrived[i]), window
            if lags:  # the clock relation is roughly known: look closer
                predicted += int(np.median(lags))
                half = near
            search_one(i, predicted, half)
            if first[i] < 0 and half < window:
                # the lags so far may come from acquisitions armed inside the stream's opening
                # backlog (thousands of records arriving at once), off by hundreds of events:
                # a narrow search that finds nothing looks over the whole window again
                search_one(i, int(arrived[i]), window)
            if first[i] >= 0:
                lags.append(int(first[i] - int(arrived[i])))
                paired_here(i)
        block_start = done_upto
        while block_start < len(todo):
            paired_armed, paired_first = self._line_armed, self._line_first
            # the line is extrapolated no further than the span it was fitted on
            idx = todo[block_start:block_start + min(BLOCK, max(len(paired_armed), BOOTSTRAP))]
            block_start += len(idx)
            if len(paired_armed) < 2 or np.ptp(paired_armed) <= 0:
                for i in idx:  # no line yet: one by one around the arrival estimate
                    search_one(int(i), int(arrived[i]) + (int(np.median(lags)) if lags else 0),
                               near if lags else window)
                    # as in the bootstrap: a lag from the backlog misleads
                    if first[i] < 0 and lags:
                        search_one(int(i), int(arrived[i]), window)
                    if first[i] >= 0:
                        lags.append(int(first[i] - int(arrived[i])))
                        paired_here(int(i))
                continue
            t0 = paired_armed[0]
            slope, intercept = np.polyfit(paired_armed - t0, paired_first.astype(np.float64), 1)
            off_line = np.abs(paired_first - (slope * (paired_armed - t0) + intercept))
            half = int(np.clip(np.ceil(4 * off_line.max()) + 8, MIN_HALF_WIDTH, near))
            centre = np.rint(slope * (a.armed[idx] - t0) + intercept).astype(np.int64)
            cand = centre[:, None] + np.arange(-half, half + 1)[None, :]  # (acq, candidates)
            cols = _scoring_columns(a.begin[idx], a.end[idx])  # (acq, pulses)
            inside = (cand >= win.base) & (cand + last_k[idx][:, None] < win.end)
            # a cheap pre-score (how many consecutive residuals stay together) keeps SHORTLIST
            # candidates; the median absolute deviation then decides among those alone
            two, best, runner_up, centre_resid = block_choice(a.widths[cols], a.k[cols], cand,
                                                              inside, win.held(),
                                                              win.base, MISSING, MAX_SPREAD_NS,
                                                              half)
            won = (best <= MAX_SPREAD_NS) & (runner_up >= MIN_SEPARATION * np.maximum(best, 1.0))
            edge = (two[:, 0] == 0) | (two[:, 0] == 2 * half)
            chosen = cand[np.arange(len(idx)), two[:, 0]]
            # the winner against every pulse of its acquisition: most residuals near the scored
            # centre
            rows, owner = _rows(a.begin[idx], a.end[idx])
            sizes = a.end[idx] - a.begin[idx]
            near_centre = (
                np.abs(a.widths[rows] - win.at(chosen[owner] + a.k[rows]) - centre_resid[owner])
                <= MAX_SPREAD_NS
            )
            agree = np.bincount(owner, weights=near_centre, minlength=len(idx)) >= (sizes + 1) // 2
            ok = won & ~edge & agree
            if ok.any():
                ok[ok] = significant(idx[ok], chosen[ok])
            first[idx[ok]] = chosen[ok]
            fits[idx[ok]] = True  # the others that fit at all are searched one by one below
            # off the line (a stalled scope, a clock step): the wide search
            for i in idx[~ok & (edge | ~won)]:
                search_one(int(i), int(arrived[i]) + int(np.median(lags)), near)
                if first[i] < 0:
                    # as in the bootstrap: a scope armed late on a loaded host (tens of ms after
                    # its arm time was noted) is hundreds of events off the line and the median
                    # lag, yet inside the whole window the arrival times allow
                    search_one(int(i), int(arrived[i]), window)
            done = idx[first[idx] >= 0]
            self._remember(a.armed[done], first[done])
        self.acquisitions += len(a.ids)
        self.acquisitions_paired += int((first >= 0).sum())
        self.fitting += int((pairable & (fits | (first >= 0))).sum())
        self.expected_false_pairs += float(bound[first >= 0].sum())
        self.pulses += int(len(a.widths))
        return _pairs(a, first, win, self.numbers)

    def _remember(self, armed: np.ndarray, first: np.ndarray) -> None:
        """The clock line is fitted to the MODEL_POINTS latest paired acquisitions."""
        if len(armed):
            self._line_armed = np.r_[self._line_armed, armed][-MODEL_POINTS:]
            self._line_first = np.r_[self._line_first, first][-MODEL_POINTS:]


def stray_mask(flags: np.ndarray | None, n: int) -> np.ndarray:
    """Which records are stray IRQs (NOT_OURS): none without flags (legacy streams cannot say)."""
    if flags is None:
        return np.zeros(n, bool)
    flags = np.asarray(flags)
    if flags.dtype.kind != "u":  # a signed or float column read from elsewhere: as integers
        flags = flags.astype(np.int64)
    return (flags & NOT_OURS) != 0  # in the column's own width: no widened copy of a million flags


def _sw_batches(sw: pd.DataFrame, numbers: EventNumbers,
                rows: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    own = ~stray_mask(sw["flags"].to_numpy() if "flags" in sw else None, len(sw))
    seq, lat = sw["seq"].to_numpy()[own], sw["latency_ns"].to_numpy()[own]
    writes = sw["t_write_ns"].to_numpy()[own] if "t_write_ns" in sw else None
    for at in range(0, len(seq), rows):
        yield (numbers.to_event(seq[at:at + rows]), lat[at:at + rows],
               None if writes is None else writes[at:at + rows])


def pair_run(sw: pd.DataFrame, hw: pd.DataFrame, arrivals: pd.DataFrame | None, period_ns: int,
             window: int = 3000, batch_rows: int | None = None) -> Pairing | None:
    """Pair the pulses of one run with its v1 records; None when the run cannot be paired
    (legacy stream without sequence numbers, no scope, or no arrival times). `batch_rows`: the
    pulses handed over that many at a time, as the analysis reads a run's table (the pairs do not
    depend on it); None: all at once."""
    if "seq" not in sw or not len(sw) or not len(hw) or arrivals is None or not len(arrivals):
        return None
    if "armed_host_s" not in hw:
        return None
    pulses = {c: hw[c].to_numpy() for c in HW_COLUMNS}
    # the stream pairer takes acquisitions in order
    if not hw["acquisition"].is_monotonic_increasing:
        order = np.argsort(pulses["acquisition"], kind="stable")
        pulses = {c: a[order] for c, a in pulses.items()}
    flags = sw["flags"].to_numpy() if "flags" in sw else None
    numbers = EventNumbers(sw["seq"].to_numpy()[stray_mask(flags, len(sw))])
    own_mask = ~stray_mask(flags, len(sw))
    own = sw["latency_ns"].to_numpy()[own_mask]
    blocks = BlockShare()
    blocks.add(numbers.to_event(sw["seq"].to_numpy()[own_mask].astype(np.int64)), own)
    share = blocks.result(max_share_within(own, None, 2 * AGREE_NS))
    pairer = StreamPairer(arrivals, period_ns, window, numbers, share=share)
    rows = batch_rows or max(len(pulses["acquisition"]), 1)
    batches = [
        {c: a[at : at + rows] for c, a in pulses.items()}
        for at in range(0, len(pulses["acquisition"]), rows)
    ]
    parts = list(pairer.pairs(_sw_batches(sw, numbers), batches))
    pairs = pd.concat(parts,
                      ignore_index=True) if len(parts) > 1 else parts[0] if parts else pairs_frame()
    return Pairing(pairs, pairer.acquisitions, pairer.acquisitions_paired, pairer.pulses,
                   pairer.expected_false_pairs, pairer.pairable)


def pairs_frame(**columns: np.ndarray) -> pd.DataFrame:
    """Pairs as a frame: acquisition, seq, hw_ns (the scope's), sw_ns, diff_ns (HW−SW with the width
    on the target's clock: hw_ns / clock_ratio − sw_ns), clock_ratio (empty when none are given)."""
    names = ("acquisition", "seq", "hw_ns", "sw_ns", "diff_ns", "clock_ratio")
    empty = {"acquisition": np.empty(0, np.int64), "seq": np.empty(0, np.int64)}
    # copy=False: one block per column, not a consolidating copy of millions of rows
    return pd.DataFrame({n: columns.get(n, empty.get(n, np.empty(0))) for n in names}, copy=False)


def _pairs(a: _Acquisitions, first: np.ndarray, win: _SeqWindow,
           numbers: EventNumbers) -> pd.DataFrame:
    paired = np.flatnonzero(first >= 0)
    rows, owner = _rows(a.begin[paired], a.end[paired])
    event = first[paired][owner] + a.k[rows]
    owner = paired[owner]
    sw_ns = win.at(event)
    keep = sw_ns < MISSING
    rows, owner, event, sw_ns = rows[keep], owner[keep], event[keep], sw_ns[keep]
    hw_ns = a.widths[rows]
    # the scope's widths on the target's clock (the one t_SW is measured on): each acquisition's
    # pulses are its events' writes seen on the scope's timebase, so their spacing against the
    # writes' spacing is the ratio of the two clocks there (drift, a slew, the scope's timebase)
    ratio = clock_ratios(a.starts[rows] * 1e9, win.writes(event), owner)
    return pairs_frame(acquisition=a.ids[owner], seq=numbers.to_seq(event), hw_ns=hw_ns,
                       sw_ns=sw_ns,
                       diff_ns=hw_ns / ratio - sw_ns, clock_ratio=ratio)
