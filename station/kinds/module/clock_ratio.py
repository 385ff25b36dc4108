"""Each paired acquisition's scope-clock / target-clock rate, from its pulses' starts (the scope's
timebase) against its events' write times (the target's clock): the least-squares slope over the
pulses within RATIO_OUTLIER_NS of a robust first line (the median of consecutive pulses' slopes,
through the median point), so one write delayed on the software side (its timestamp moves, not its
pulse) cannot tilt it.

Two implementations, one result to the bit (tests/test_clock_ratio.py): numpy's, vectorised over
every acquisition at once, and a compiled one (numba: instruments/compiled.py), a loop per
acquisition, for pulses that come as pairing gives them (acquisitions in order, writes increasing
within each). Both sum in the same order (np.bincount's is the index order), so the sums agree to
the bit. At seed scale numpy's temporaries cost ~0.4 s a run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from instruments.compiled import Compiled
from station.kinds.module.grouped import group_median, group_slopes

RATIO_OUTLIER_NS = 300.0  # a pulse this far off its acquisition's fitted spacing is left out of it
RATIO_MIN_SPAN_NS = 1e6  # writes spanning less than this say too little about the clocks' ratio
# a ratio further from 1 is no clock's: the fit failed (the twin allows ±3000 ppm)
MAX_RATIO_OFF = 5e-3
# pulses below which numpy's temporaries cost little, and numba is not imported
MIN_COMPILED = 10_000


def clock_ratios(scope_ns: np.ndarray, target_ns: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Per pulse, its acquisition's scope-clock / target-clock rate (owner: each pulse's
    acquisition, grouped together in order). 1 where it cannot be told (no write times, fewer than
    3 pulses, a span under RATIO_MIN_SPAN_NS, a slope further than MAX_RATIO_OFF from 1)."""
    if len(owner) >= MIN_COMPILED and _in_order(target_ns, owner) and _compiled.available() is None:
        return _compiled(
            np.ascontiguousarray(scope_ns, np.float64), np.ascontiguousarray(target_ns, np.float64),
            np.ascontiguousarray(owner, np.int64), RATIO_OUTLIER_NS, RATIO_MIN_SPAN_NS,
            MAX_RATIO_OFF
        )
    return clock_ratios_numpy(scope_ns, target_ns, owner)


def _in_order(target_ns: np.ndarray, owner: np.ndarray) -> bool:
    """Acquisitions in order and writes increasing within each (a NaN write is not): as pulses
    come."""
    same = owner[1:] == owner[:-1]
    return bool(
        (owner[1:] >= owner[:-1]).all() and (~same | (target_ns[1:] >= target_ns[:-1])).all()
    )


def clock_ratios_numpy(scope_ns: np.ndarray, target_ns: np.ndarray,
                       owner: np.ndarray) -> np.ndarray:
    ratio = np.ones(len(owner))
    known = np.isfinite(target_ns)
    if not known.any():
        return ratio
    size = owner.max() + 1
    if _in_order(target_ns, owner):
        # as pulses come: in order already (lexsort's, as it is stable)
        o, x, y = owner, target_ns, scope_ns
    else:
        order = np.lexsort((target_ns, owner))
        o, x, y = owner[order], target_ns[order], scope_ns[order]
    # a missing start (NaN) makes its steps and offsets NaN: such an acquisition's ratio is 1,
    # quietly
    with np.errstate(invalid="ignore", divide="ignore"):
        step = (o[1:] == o[:-1]) & np.isfinite(x[1:]) & np.isfinite(x[:-1]) & (x[1:] > x[:-1])
        steps = np.where(step, (y[1:] - y[:-1]) / (x[1:] - x[:-1]), np.inf)
        n_steps = np.bincount(o[1:], weights=step, minlength=size).astype(np.int64)
        slope = group_median(steps, o[1:], n_steps)
        offset = np.where(known, scope_ns - slope[owner] * np.nan_to_num(target_ns), np.inf)
        centre = group_median(offset, owner, np.bincount(owner, weights=known,
                                                         minlength=size).astype(np.int64))
        resid = np.abs(scope_ns - slope[owner] * np.nan_to_num(target_ns) - centre[owner])
        use = known & (n_steps[owner] > 0) & (resid <= RATIO_OUTLIER_NS)
        slope = group_slopes(scope_ns, target_ns, owner, use)
        span = np.zeros(size)
        np.maximum.at(span, owner[use], target_ns[use])
        low = np.full(size, np.inf)
        np.minimum.at(low, owner[use], target_ns[use])
        count = np.bincount(owner[use], minlength=size)
        good = (count >= 3) & (span - low >= RATIO_MIN_SPAN_NS) & np.isfinite(slope) & \
            (np.abs(slope - 1) < MAX_RATIO_OFF)
        return np.where(good[owner], slope[owner], 1.0)


def _build() -> Any:
    import numba

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def ratios(y: Any, x: Any, owner: Any, outlier: float, min_span: float, max_off: float) -> Any:
        total = owner.shape[0]
        ratio = np.ones(total)
        scratch = np.empty(total)  # a group's slopes, then its offsets: no allocation per group
        use = np.zeros(total, np.bool_)
        b = 0
        while b < total:
            e = b + 1
            while e < total and owner[e] == owner[b]:
                e += 1
            # the robust line: the median of consecutive slopes (an entry per pulse but the run's
            # first, inf where there is no step: the first of a group, a write not after the last),
            # then the median offset through it. numpy's group median of each: the middle of the
            # group's n finite values (inf sort after them), 0 for none
            first = b if b > 0 else 1
            n_steps = 0
            slope = 0.0
            centre = 0.0
            for phase in range(2):
                m = 0
                count = 0
                nan = False
                if phase == 0:
                    for p in range(first, e):
                        if (
                            owner[p] == owner[p - 1]
                            and np.isfinite(x[p])
                            and np.isfinite(x[p - 1])
                            and x[p] > x[p - 1]
                        ):
                            scratch[m] = (y[p] - y[p - 1]) / (x[p] - x[p - 1])
                            count += 1
                        else:
                            scratch[m] = np.inf
                        nan = nan or np.isnan(scratch[m])
                        m += 1
                    n_steps = count
                else:
                    for p in range(b, e):
                        if np.isfinite(x[p]):
                            scratch[m] = y[p] - slope * x[p]
                            count += 1
                        else:
                            scratch[m] = np.inf
                        nan = nan or np.isnan(scratch[m])
                        m += 1
                median = 0.0
                if count > 0:
                    values = scratch[:m]
                    hi_k, lo_k = count // 2, (count - 1) // 2
                    if nan:  # NaN sorts last in numpy's order, and compares false in a selection
                        values.sort()
                        median = 0.5 * (values[lo_k] + values[hi_k])
                    else:  # a selection (Hoare's), not a sort: the same order statistics, faster
                        lo, hi = 0, m - 1
                        while lo < hi:
                            pivot = values[(lo + hi) // 2]
                            i, j = lo, hi
                            while i <= j:
                                while values[i] < pivot:
                                    i += 1
                                while values[j] > pivot:
                                    j -= 1
                                if i <= j:
                                    values[i], values[j] = values[j], values[i]
                                    i += 1
                                    j -= 1
                            if hi_k <= j:
                                hi = j
                            elif hi_k >= i:
                                lo = i
                            else:
                                break
                        upper = values[hi_k]
                        lower = upper
                        if lo_k != hi_k:  # the largest below it: every value left of hi_k is <= it
                            lower = values[0]
                            for q in range(1, hi_k):
                                lower = max(lower, values[q])
                        median = 0.5 * (lower + upper)
                if phase == 0:
                    slope = median
                else:
                    centre = median
            # the least-squares refit over the pulses near that line, summed in index order
            n = 0
            sx = 0.0
            sy = 0.0
            span = 0.0
            low = np.inf
            for p in range(b, e):
                use[p - b] = (
                    n_steps > 0
                    and np.isfinite(x[p])
                    and abs(y[p] - slope * x[p] - centre) <= outlier
                )
                if use[p - b]:
                    n += 1
                    sx += x[p]
                    sy += y[p]
                    span = max(span, x[p])
                    low = min(low, x[p])
            if n == 0:
                b = e
                continue
            x0 = sx / n
            y0 = sy / n
            sxy = 0.0
            sxx = 0.0
            for p in range(b, e):
                if use[p - b]:
                    dx = x[p] - x0
                    sxy += dx * (y[p] - y0)
                    sxx += dx * dx
                else:
                    sxy += 0.0
                    sxx += 0.0
            fit = sxy / sxx
            if n >= 3 and span - low >= min_span and np.isfinite(fit) and abs(fit - 1) < max_off:
                for p in range(b, e):
                    ratio[p] = fit
            b = e
        return ratio

    return ratios


_compiled = Compiled(_build)
