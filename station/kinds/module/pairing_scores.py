"""The pairing's choice among the candidate alignments of a block of acquisitions
(station/kinds/module/pairing.py): each candidate first event is pre-scored by how many
consecutive residuals HW − SW of the acquisition's scoring pulses stay within MAX_SPREAD_NS of
each other; the SHORTLIST best pre-scores are ranked by the median absolute deviation of their
residuals; the best two, their spreads and the winner's median residual are the choice.

Ties are broken by the candidate's distance from the clock line's prediction (the block's centre
candidate), nearer first, then the earlier one: never by a sorting algorithm's whim (numpy's
argpartition picks among equal pre-scores differently with the CPU's SIMD extensions, so the
pairing, and the report, depended on the machine).

Two implementations, one result to the bit (tests/test_pairing.py): numpy's, which builds the
(acquisition, candidate, pulse) arrays of residuals, and a compiled one (numba:
instruments/compiled.py) that scores each candidate in one pass and computes the spreads of the
shortlisted alone: a row of consecutive candidates (the block search's) pulse by pulse across its
candidates, a loop the compiler vectorises, and the median of a row without NaN by counting each
value's place, not by sorting (0.25 → 0.11 s a seed-scale run). At seed scale the numpy path
spends seconds a run on those temporaries. "To the bit" but for the sign of a zero or of a NaN
in the centre residual: numpy's SIMD sort keeps neither (a review's fuzzing found them, with
widths of −0.0 or ±inf, in the kernel before this one too); pulse widths and latencies hold no
−0.0, and a NaN's sign changes no decision.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np

from instruments.compiled import Compiled

SHORTLIST = 3  # candidates per acquisition whose spread is computed exactly
# residuals in a block below which numpy's temporaries cost little, and numba is not imported
# (a demo-sized run's blocks; a seed-scale run's are ~270 000)
MIN_COMPILED = 100_000
MIN_COMPILED_STARTED = 4_000  # the same, where numba has been imported already (agreement)


class BlockChoice(NamedTuple):
    two: np.ndarray  # (acq, 2) the best and the runner-up candidate (indices into each row of cand)
    # (acq,) the best's spread (MAD of its residuals, ns); inf outside the records held
    best: np.ndarray
    runner_up: np.ndarray  # (acq,) the runner-up's spread
    centre_resid: np.ndarray  # (acq,) the median residual of the best


def median(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """np.median along the last axis, by a sort: several times faster on short rows."""
    s = np.sort(x, axis=-1)
    n = x.shape[-1]
    m = s[..., n // 2] if n % 2 else 0.5 * (s[..., n // 2 - 1] + s[..., n // 2])
    return m[..., None] if keepdims else m


def mad(resid: np.ndarray) -> np.ndarray:
    """Median absolute deviation along the last axis."""
    return median(np.abs(resid - median(resid, keepdims=True)))


def block_choice(widths: np.ndarray, k: np.ndarray, cand: np.ndarray, inside: np.ndarray,
                 held: np.ndarray,
                 base: int, missing: float, max_spread: float, centre: int) -> BlockChoice:
    """widths, k: (acq, pulse) the scoring pulses' widths (ns) and event offsets in their
    acquisition; cand: (acq, cand) first events, at least two, `centre` the index of the line's
    prediction; inside: (acq, cand) whether a candidate's events are all held; held: t_SW of
    events base, base + 1, …; an event outside them has t_SW `missing`."""
    # the compiled loop reads unchecked: never past an end
    if cand.shape[1] < 2 or widths.shape[1] < 1:
        raise ValueError(f"a choice needs two candidates and a pulse (got {cand.shape[1]} and "
                         f"{widths.shape[1]})")
    if widths.size * cand.shape[1] >= MIN_COMPILED and _compiled.available() is None:
        return BlockChoice(*_compiled(np.ascontiguousarray(widths, np.float64),
                                      np.ascontiguousarray(k, np.int64),
                                      np.ascontiguousarray(cand, np.int64),
                                      np.ascontiguousarray(inside, np.bool_),
                                      held, base, missing, max_spread, centre, min(SHORTLIST,
                                                                                   cand.shape[1])))
    return block_choice_numpy(widths, k, cand, inside, held, base, missing, max_spread, centre)


def scores_numpy(widths: np.ndarray, k: np.ndarray, cand: np.ndarray, held: np.ndarray, base: int,
                 missing: float, max_spread: float) -> tuple[np.ndarray, np.ndarray]:
    """(residuals (acq, cand, pulse), steady counts (acq, cand))."""
    idx = cand[:, :, None] + k[:, None, :] - base
    if len(held):
        sw = held[np.clip(idx, 0, len(held) - 1)]
        sw[(idx < 0) | (idx >= len(held))] = missing
    else:
        sw = np.full(idx.shape, missing)
    resid = widths[:, None, :] - sw
    return resid, (np.abs(np.diff(resid, axis=2)) <= max_spread).sum(axis=2)


def block_choice_numpy(widths: np.ndarray, k: np.ndarray, cand: np.ndarray, inside: np.ndarray,
                       held: np.ndarray, base: int, missing: float, max_spread: float,
                       centre: int) -> BlockChoice:
    resid, steady = scores_numpy(widths, k, cand, held, base, missing, max_spread)
    steady = np.where(inside, steady, -1)
    n_cand = cand.shape[1]
    c = np.arange(n_cand)
    # one key per candidate, unique in its row: the pre-score, then the distance from the centre
    key = (widths.shape[1] - steady) * (2 * n_cand + 2) + 2 * np.abs(c - centre) + (c > centre)
    short = np.argsort(key, axis=1, kind="stable")[:, :min(SHORTLIST, n_cand)]
    spread = np.where(np.take_along_axis(inside, short, 1),
                      mad(np.take_along_axis(resid, short[:, :, None], 1)), np.inf)
    order = np.argsort(spread, axis=1, kind="stable")
    two = np.take_along_axis(short, order[:, :2], 1)
    return BlockChoice(two, np.take_along_axis(spread, order[:, :1], 1)[:, 0],
                       np.take_along_axis(spread, order[:, 1:2], 1)[:, 0],
                       median(np.take_along_axis(resid, two[:, :1, None], 1)[:, 0, :]))


def _build() -> Any:
    import numba

    # one function, no jitted helpers: a helper referenced from this closure defeats numba's cache
    # (recompiled in every process)
    @numba.njit(cache=True, nogil=True, boundscheck=False)
    def choice_compiled(widths: Any, k: Any, cand: Any, inside: Any, held: Any, base: int,
                        missing: float,
                        max_spread: float, centre: int, shortlist: int) -> tuple:
        acqs, cands = cand.shape
        pulses = widths.shape[1]
        n = held.shape[0]
        two = np.empty((acqs, 2), np.int64)
        best = np.empty(acqs)
        runner_up = np.empty(acqs)
        centre_resid = np.empty(acqs)
        short_key = np.empty(shortlist, np.int64)
        short = np.empty(shortlist, np.int64)
        spread = np.empty(shortlist)
        centre_of = np.empty(shortlist)  # each shortlisted candidate's median residual
        order = np.empty(shortlist, np.int64)
        row = np.empty(pulses)
        dev = np.empty(pulses)
        half = pulses // 2
        count = np.empty(cands, np.int64)  # each candidate's pre-score (steady residual pairs)
        SAFE = 1 << 61  # noqa: N806 - offsets within ±this: no sum of three wraps
        prev = np.empty(cands)  # each candidate's residual at the pulse before
        for a in range(acqs):
            # A row of consecutive candidates (the block search's) is pre-scored pulse by pulse
            # across its candidates: one contiguous stretch of `held` a pulse, a loop the
            # compiler vectorises. The same residuals and comparisons as the scalar loop below
            # (which scores the others: candidates reading outside `held`, rows not consecutive).
            consecutive = True
            for c in range(1, cands):
                if cand[a, c] != cand[a, 0] + c:
                    consecutive = False
                    break
            lo_c, hi_c, f0 = 0, 0, 0  # the candidates whose every pulse reads inside `held`
            if consecutive:
                k_lo, k_hi = k[a, 0], k[a, 0]
                for j in range(1, pulses):
                    k_lo, k_hi = min(k_lo, k[a, j]), max(k_hi, k[a, j])
                f0 = cand[a, 0] - base
                # the bounds' arithmetic must not wrap (event numbers are far below 2^61; a row
                # beyond that is scored by the scalar loop, which wraps as numpy does; not abs(),
                # which leaves the most negative int64 negative)
                if -SAFE < f0 < SAFE and k_lo > -SAFE and k_hi < SAFE:
                    lo_c = min(max(0, -(f0 + k_lo)), cands)
                    hi_c = max(min(cands, n - (f0 + k_hi)), lo_c)
            if hi_c > lo_c:
                # slices and a comparison without a branch: what lets the loop vectorise (~5×)
                steady_of = count[lo_c:hi_c]
                before = prev[lo_c:hi_c]
                w = widths[a, 0]
                at = f0 + k[a, 0] + lo_c
                from_held = held[at:at + hi_c - lo_c]
                for c in range(hi_c - lo_c):
                    before[c] = w - from_held[c]
                    steady_of[c] = 0
                for j in range(1, pulses):
                    w = widths[a, j]
                    at = f0 + k[a, j] + lo_c
                    from_held = held[at:at + hi_c - lo_c]
                    for c in range(hi_c - lo_c):
                        r = w - from_held[c]
                        d = r - before[c]  # |d| <= max_spread, NaN false: as the scalar loop
                        steady_of[c] += (d <= max_spread) & (d >= -max_spread)
                        before[c] = r
            held_keys = 0  # how many of the shortlist's places are taken
            for c in range(cands):
                steady = -1
                if inside[a, c]:
                    if lo_c <= c < hi_c:
                        steady = count[c]
                    else:
                        first = cand[a, c] - base
                        steady = 0
                        before = 0.0
                        for j in range(pulses):
                            i = first + k[a, j]
                            r = widths[a, j] - (held[i] if 0 <= i < n else missing)
                            if j and abs(r - before) <= max_spread:
                                steady += 1
                            before = r
                d = c - centre
                key = (pulses - steady) * (2 * cands + 2) + 2 * abs(d) + (1 if d > 0 else 0)
                # the shortlist: the smallest keys in order (unique in the row), kept as they come
                if held_keys < shortlist or key < short_key[held_keys - 1]:
                    u = min(held_keys, shortlist - 1)
                    while u > 0 and short_key[u - 1] > key:
                        short_key[u], short[u] = short_key[u - 1], short[u - 1]
                        u -= 1
                    short_key[u], short[u] = key, c
                    held_keys = min(held_keys + 1, shortlist)
            # 2·shortlist + 1 medians of a row: each shortlisted candidate's residuals, then their
            # deviations from it (its spread); then the winner's residuals (its centre)
            m = 0.0
            for step in range(2 * shortlist + 1):
                s, deviations = step // 2, step % 2
                if step == 2 * shortlist:  # every spread known: order them, the winner's centre
                    # a stable insertion sort of the few spreads, NaN last
                    for t in range(shortlist):
                        order[t] = t
                        u = t
                        while u > 0 and (spread[order[u]] < spread[order[u - 1]] or (
                                np.isnan(spread[order[u - 1]]) and not np.isnan(spread[order[u]]))):
                            order[u], order[u - 1] = order[u - 1], order[u]
                            u -= 1
                    two[a, 0], two[a, 1] = short[order[0]], short[order[1]]
                    best[a], runner_up[a] = spread[order[0]], spread[order[1]]
                    if inside[a, two[a, 0]]:  # its residuals' median is known: step 2·order[0]
                        centre_resid[a] = centre_of[order[0]]
                        break
                c = short[s] if step < 2 * shortlist else two[a, 0]
                if step < 2 * shortlist and not inside[a, c]:
                    spread[s] = np.inf
                    continue
                first = cand[a, c] - base
                nan = False
                for j in range(pulses):
                    if deviations:
                        dev[j] = abs(row[j] - m)
                    else:
                        i = first + k[a, j]
                        row[j] = widths[a, j] - (held[i] if 0 <= i < n else missing)
                        dev[j] = row[j]
                    nan = nan or np.isnan(dev[j])
                if nan:
                    for u in range(1, pulses):  # insertion sort, NaN last as numpy's: short rows
                        x = dev[u]
                        v = u
                        while v > 0 and (x < dev[v - 1]
                                         or (np.isnan(dev[v - 1]) and not np.isnan(x))):
                            dev[v] = dev[v - 1]
                            v -= 1
                        dev[v] = x
                    m = dev[half] if pulses % 2 else 0.5 * (dev[half - 1] + dev[half])
                else:
                    # the middle of the row without sorting it: each value's place in a stable
                    # sort (those below it, and those equal before it: a -0.0 and a 0.0 keep
                    # their order, as in the insertion sort), counted without a branch
                    lower = upper = 0.0
                    for u in range(pulses):
                        x = dev[u]
                        place = 0
                        for v in range(pulses):
                            place += (dev[v] < x) | ((dev[v] == x) & (v < u))
                        if place == half:
                            upper = x
                        elif place == half - 1:
                            lower = x
                    m = upper if pulses % 2 else 0.5 * (lower + upper)
                if step == 2 * shortlist:
                    centre_resid[a] = m
                elif deviations:
                    spread[s] = m
                else:
                    centre_of[s] = m
        return two, best, runner_up, centre_resid

    return choice_compiled


_compiled = Compiled(_build)


# A wide search (pairing.py's choose) needs every candidate's spread only up to a limit: a spread
# above MIN_SEPARATION·MAX_SPREAD_NS can neither pair nor keep another candidate from pairing.
# A spread (MAD) at most L puts at least half the residuals within L of their median: inside one
# window of width 2L, which lies whole in one bin of width 4L of one of two grids offset by 2L.
# So a candidate none of whose bins, in either grid, holds half its residuals has a spread above
# L, and its exact spread is not computed (a majority vote per grid: two passes, no sort).
# The bins are SCREEN_SLACK_NS wider each side than 4L needs, so a window of 2L lies in one bin
# with 16 ns to spare: the bin's division, rounded, moves a residual by at most a few of its ulps
# (under 7 ns up to SCREEN_MAX_ABS; MISSING residuals are ~1e15 ns), far less than that.
SCREEN_SLACK_NS = 8.0
SCREEN_MAX_ABS = 1e16  # a residual beyond this (or NaN) is not binned: the spread is computed


def spreads(widths: np.ndarray, k: np.ndarray, n0: np.ndarray, held: np.ndarray, base: int,
            missing: float, limit: float) -> np.ndarray:
    """The spread (MAD) of each candidate first event n0's residuals widths − t_SW[n0 + k]
    (t_SW: held from event `base`, `missing` outside it), inf where it is above `limit`."""
    if widths.size * n0.size >= MIN_COMPILED and _spreads_compiled.available() is None:
        return _spreads_compiled(np.ascontiguousarray(widths, np.float64),
                                 np.ascontiguousarray(k, np.int64),
                                 np.ascontiguousarray(n0, np.int64), held, base, missing,
                                 float(limit), SCREEN_SLACK_NS, SCREEN_MAX_ABS)
    return spreads_numpy(widths, k, n0, held, base, missing, limit)


def deciding_spreads(widths: np.ndarray, k: np.ndarray, n0: np.ndarray, held: np.ndarray,
                     base: int, missing: float, max_spread: float,
                     separation: float) -> np.ndarray:
    """The spreads a one-by-one search's choice needs (the best at most max_spread fits; it pairs
    when the runner-up's is `separation` times its own, or 1 ns, at least), the others inf: those
    that may fit, then, when one does, those that may keep it from pairing. The choice made on
    them (which candidate is best, whether it fits, whether it pairs) is the one made on every
    spread."""
    spread = spreads(widths, k, n0, held, base, missing, max_spread)
    best = float(np.min(spread, where=~np.isnan(spread), initial=np.inf))  # NaN sorts last
    if best <= max_spread:
        spread = spreads(widths, k, n0, held, base, missing, separation * max(best, 1.0))
    return spread


def spreads_numpy(widths: np.ndarray, k: np.ndarray, n0: np.ndarray, held: np.ndarray, base: int,
                  missing: float, limit: float) -> np.ndarray:
    idx = n0[:, None] + k[None, :] - base
    sw = held[np.clip(idx, 0, max(len(held) - 1, 0))] if len(held) else np.full(idx.shape, missing)
    sw = np.where((idx < 0) | (idx >= len(held)), missing, sw)
    spread = mad(widths[None, :] - sw)
    return np.where(spread > limit, np.inf, spread)


def _build_spreads() -> Any:
    import numba

    @numba.njit(cache=True, nogil=True, boundscheck=False)
    def spreads_compiled(widths: Any, k: Any, n0: Any, held: Any, base: int, missing: float,
                         limit: float, slack: float, max_abs: float) -> Any:
        pulses = widths.shape[0]
        n = held.shape[0]
        out = np.empty(n0.shape[0])
        row = np.empty(pulses)
        labels = np.empty(pulses, np.int64)
        need = (pulses + 1) // 2  # residuals within `limit` of the median, at least
        width = 4.0 * (limit + slack)
        half = pulses // 2
        for c in range(n0.shape[0]):
            exact = False
            for j in range(pulses):
                i = n0[c] + k[j] - base
                row[j] = widths[j] - (held[i] if 0 <= i < n else missing)
                if not abs(row[j]) <= max_abs:  # NaN too
                    exact = True
            if not exact:
                for grid in range(2):
                    shift = 0.5 * width * grid
                    for j in range(pulses):
                        labels[j] = np.int64(np.floor((row[j] - shift) / width))
                    # a label held by half the residuals is the majority of all but the last
                    # one, or the last one's
                    vote, votes = labels[0], 0
                    for j in range(pulses - 1):
                        if votes == 0:
                            vote, votes = labels[j], 1
                        elif labels[j] == vote:
                            votes += 1
                        else:
                            votes -= 1
                    for guess in (vote, labels[pulses - 1]):
                        count = 0
                        for j in range(pulses):
                            if labels[j] == guess:
                                count += 1
                        if count >= need:
                            exact = True
                    if exact:
                        break
            if not exact:
                out[c] = np.inf
                continue
            s = np.sort(row)  # numpy's order: NaN last
            m = s[half] if pulses % 2 else 0.5 * (s[half - 1] + s[half])
            for j in range(pulses):
                row[j] = abs(row[j] - m)
            s = np.sort(row)
            spread = s[half] if pulses % 2 else 0.5 * (s[half - 1] + s[half])
            out[c] = np.inf if spread > limit else spread
        return out

    return spreads_compiled


_spreads_compiled = Compiled(_build_spreads)


def agreement(widths: np.ndarray, k: np.ndarray, begin: np.ndarray, end: np.ndarray,
              n0: np.ndarray, held: np.ndarray, base: int, missing: float,
              agree_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """Per acquisition j (its pulses begin[j]:end[j], aligned at first event n0[j]; t_SW held from
    event `base`, `missing` outside): how many of its pulses have a t_SW (residual above
    −missing/2: a lost record's is about −missing), and how many of those lie within agree_ns of
    their median residual (0 for none); as float counts, np.bincount's."""
    pulses = int((end - begin).sum())
    # numba's start (~0.5 s a process) is worth paying for big blocks only; once this process
    # has paid it (the block choice's kernel, a seed-scale run's first block), small blocks too:
    # the selection is ~2× numpy's padded sort from a few thousand pulses up
    started = "numba" in sys.modules and pulses >= MIN_COMPILED_STARTED
    if (pulses >= MIN_COMPILED or started) and _agreement_compiled.available() is None:
        return _agreement_compiled(np.ascontiguousarray(widths, np.float64),
                                   np.ascontiguousarray(k, np.int64),
                                   np.ascontiguousarray(begin, np.int64),
                                   np.ascontiguousarray(end, np.int64),
                                   np.ascontiguousarray(n0, np.int64), held, base, missing,
                                   float(agree_ns))
    return agreement_numpy(widths, k, begin, end, n0, held, base, missing, agree_ns)


def agreement_numpy(widths: np.ndarray, k: np.ndarray, begin: np.ndarray, end: np.ndarray,
                    n0: np.ndarray, held: np.ndarray, base: int, missing: float,
                    agree_ns: float) -> tuple[np.ndarray, np.ndarray]:
    from station.kinds.module.grouped import group_median

    sizes = end - begin
    owner = np.repeat(np.arange(len(begin)), sizes)
    rows = np.arange(int(sizes.sum())) + np.repeat(begin - np.cumsum(sizes) + sizes, sizes)
    idx = n0[owner] + k[rows] - base
    sw = held[np.clip(idx, 0, max(len(held) - 1, 0))] if len(held) else np.full(idx.shape,
                                                                                 missing)
    sw = np.where((idx < 0) | (idx >= len(held)), missing, sw)
    resid = widths[rows] - sw
    present = resid > -missing / 2
    n = np.bincount(owner, weights=present, minlength=len(begin))
    centre = group_median(np.where(present, resid, np.inf), owner, n.astype(np.int64))
    with np.errstate(invalid="ignore"):  # an infinite width about an infinite median: no
        near = present & (np.abs(resid - centre[owner]) <= agree_ns)
    return n, np.bincount(owner, weights=near, minlength=len(begin))


def _build_agreement() -> Any:
    import numba

    @numba.njit(cache=True, nogil=True, boundscheck=False)
    def agreement_compiled(widths: Any, k: Any, begin: Any, end: Any, n0: Any, held: Any,
                           base: int, missing: float, agree_ns: float) -> Any:
        m = begin.shape[0]
        n_out = np.zeros(m)
        agree_out = np.zeros(m)
        nheld = held.shape[0]
        widest = 0
        for j in range(m):
            widest = max(widest, end[j] - begin[j])
        resid = np.empty(widest)
        values = np.empty(widest)
        floor = -missing / 2
        for j in range(m):
            size = end[j] - begin[j]
            count = 0
            for p in range(size):
                q = begin[j] + p
                i = n0[j] + k[q] - base
                r = widths[q] - (held[i] if 0 <= i < nheld else missing)
                resid[p] = r
                if r > floor:  # NaN is not
                    values[count] = r
                    count += 1
            centre = 0.0
            if count > 0:
                # the median of the present residuals: order statistics (count−1)//2 and count//2
                # by a selection (Hoare's), not a sort: the same values. clock_ratio's kernel has
                # the same selection, written out there too: numba's cache of a kernel is keyed on
                # its own file only, so a shared jitted helper changed elsewhere would leave this
                # kernel's cached code stale (a silent wrong count)
                hi_k, lo_k = count // 2, (count - 1) // 2
                lo, hi = 0, count - 1
                while lo < hi:
                    pivot = values[(lo + hi) // 2]
                    a, b = lo, hi
                    while a <= b:
                        while values[a] < pivot:
                            a += 1
                        while values[b] > pivot:
                            b -= 1
                        if a <= b:
                            values[a], values[b] = values[b], values[a]
                            a += 1
                            b -= 1
                    if hi_k <= b:
                        hi = b
                    elif hi_k >= a:
                        lo = a
                    else:
                        break
                upper = values[hi_k]
                lower = upper
                if lo_k != hi_k:  # the largest left of hi_k: every value there is <= it
                    lower = values[0]
                    for q in range(1, hi_k):
                        lower = max(lower, values[q])
                centre = 0.5 * (lower + upper)
            agree = 0
            for p in range(size):
                r = resid[p]
                if r > floor and abs(r - centre) <= agree_ns:
                    agree += 1
            n_out[j] = count
            agree_out[j] = agree
        return n_out, agree_out

    return agreement_compiled


_agreement_compiled = Compiled(_build_agreement)
