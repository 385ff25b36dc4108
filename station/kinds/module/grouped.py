"""Statistics of values grouped by an owner index (each value's group, 0..groups-1, groups one
after another): the pairing's per-acquisition medians and least-squares slopes, vectorised over
every group at once."""

from __future__ import annotations

import numpy as np


def group_median(values: np.ndarray, owner: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The median of each group's finite values (owner: group of each value, in 0..len(n)-1,
    grouped together in group order; n: each group's count of finite values; 0 where it has
    none)."""
    sizes = np.bincount(owner, minlength=len(n))
    start = np.r_[0, np.cumsum(sizes)[:-1]]
    widest = int(sizes.max()) if len(sizes) else 0
    # groups of like sizes: a row each, sorted
    if len(values) and len(n) * widest <= 4 * len(values):
        grid = np.full((len(n), widest), np.inf)
        grid[owner, np.arange(len(values)) - start[owner]] = values
        grid.sort(axis=1)
        rows = np.arange(len(n))
        lo, hi = np.maximum(n - 1, 0) // 2, np.maximum(n, 1) // 2
        return np.where(
            n > 0,
            0.5 * (grid[rows, np.minimum(lo, widest - 1)] + grid[rows, np.minimum(hi, widest - 1)]),
            0.0,
        )
    order = np.lexsort((values, owner))
    lo, hi = start + np.maximum(n - 1, 0) // 2, start + np.maximum(n, 1) // 2
    sorted_values = values[order] if len(values) else np.zeros(1)
    lo, hi = np.minimum(lo, len(sorted_values) - 1), np.minimum(hi, len(sorted_values) - 1)
    return np.where(n > 0, 0.5 * (sorted_values[lo] + sorted_values[hi]), 0.0)


def group_slopes(y: np.ndarray, x: np.ndarray, owner: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Per group (indexed by owner value): the least-squares slope of y on x over `use`. The sums
    run in index order (np.bincount's), as a compiled loop over the same values adds them."""
    size = owner.max() + 1
    n = np.bincount(owner[use], minlength=size).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        x0 = np.bincount(owner[use], weights=x[use], minlength=size) / n
        y0 = np.bincount(owner[use], weights=y[use], minlength=size) / n
        dx = np.where(use, x - np.nan_to_num(x0[owner]), 0.0)
        dy = np.where(use, y - np.nan_to_num(y0[owner]), 0.0)
        return np.bincount(owner, weights=dx * dy, minlength=size) / np.bincount(owner,
                                                                                 weights=dx * dx,
                                                                                  minlength=size)
