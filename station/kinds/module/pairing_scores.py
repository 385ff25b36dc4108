"""The pairing's pre-score of every candidate alignment of a block of acquisitions: the residuals
HW − SW of each acquisition's scoring pulses at each candidate first event, and how many
consecutive residuals stay within MAX_SPREAD_NS of each other (station/kinds/module/pairing.py).

Two implementations, one result to the bit (tests/test_pairing.py): numpy's, which builds the
(acquisition, candidate, pulse) arrays of event numbers, t_SW, differences and comparisons, and a
compiled one (numba: instruments/compiled.py) that makes only the residuals and the counts, in
one pass. At seed scale the numpy path spends seconds a run on those temporaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from instruments.compiled import Compiled

# residuals in a block below which numpy's temporaries cost little, and numba is not imported
# (a demo-sized run's blocks; a seed-scale run's are ~270 000)
MIN_COMPILED = 100_000


def scores(widths: np.ndarray, k: np.ndarray, cand: np.ndarray, held: np.ndarray, base: int, missing: float,
           max_spread: float) -> tuple[np.ndarray, np.ndarray]:
    """(residuals (acq, cand, pulse), steady counts (acq, cand)). widths, k: (acq, pulse) the
    scoring pulses' widths (ns) and event offsets in their acquisition; cand: (acq, cand) first
    events; held: t_SW of events base, base + 1, …; an event outside them has t_SW `missing`."""
    if widths.size * cand.shape[1] >= MIN_COMPILED and _compiled.available() is None:
        return _compiled(np.ascontiguousarray(widths, np.float64), np.ascontiguousarray(k, np.int64),
                         np.ascontiguousarray(cand, np.int64), held, base, missing, max_spread)
    return scores_numpy(widths, k, cand, held, base, missing, max_spread)


def scores_numpy(widths: np.ndarray, k: np.ndarray, cand: np.ndarray, held: np.ndarray, base: int,
                 missing: float, max_spread: float) -> tuple[np.ndarray, np.ndarray]:
    idx = cand[:, :, None] + k[:, None, :] - base
    if len(held):
        sw = held[np.clip(idx, 0, len(held) - 1)]
        sw[(idx < 0) | (idx >= len(held))] = missing
    else:
        sw = np.full(idx.shape, missing)
    resid = widths[:, None, :] - sw
    return resid, (np.abs(np.diff(resid, axis=2)) <= max_spread).sum(axis=2)


def _build() -> Any:
    import numba

    @numba.njit(cache=True, nogil=True, boundscheck=False)
    def scores_compiled(widths: Any, k: Any, cand: Any, held: Any, base: int, missing: float,
                        max_spread: float) -> tuple[np.ndarray, np.ndarray]:
        acqs, cands = cand.shape
        pulses = widths.shape[1]
        n = held.shape[0]
        resid = np.empty((acqs, cands, pulses))
        steady = np.empty((acqs, cands), np.int64)
        for a in range(acqs):
            for c in range(cands):
                first = cand[a, c] - base
                count = 0
                before = 0.0
                for j in range(pulses):
                    i = first + k[a, j]
                    r = widths[a, j] - (held[i] if 0 <= i < n else missing)
                    resid[a, c, j] = r
                    if j and abs(r - before) <= max_spread:
                        count += 1
                    before = r
                steady[a, c] = count
        return resid, steady

    return scores_compiled


_compiled = Compiled(_build)
