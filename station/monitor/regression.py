"""Is a phase's latest cycle worse than its history? A one-sided rank test on window maxima.

Under no change, the windows of a phase are exchangeable: every way of choosing which m of the
n + m maxima are the latest cycle's is equally likely. The p-value is the exact share of those
choices whose rank sum is at least the latest cycle's (ties get mid-ranks), so flagging at
p ≤ α raises a false alarm with probability at most α, whatever the latency distribution.
A verdict needs enough history for p to reach α at all: C(n + m, m) ≥ 1/α."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

HISTORY_MAX = 200  # the latest windows of a phase that make its history (bounded work, recent behaviour)


def rank_p_value(history: np.ndarray, latest: np.ndarray) -> float:
    """P(rank sum of m values drawn at random from all ≥ the latest's), exactly."""
    values = np.concatenate([np.asarray(history, float), np.asarray(latest, float)])
    m = len(latest)
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):  # mid-ranks of ties
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    doubled = np.rint(ranks * 2).astype(np.int64)  # mid-ranks are halves: integer sums
    observed = int(doubled[-m:].sum())
    ways = np.zeros((m + 1, int(doubled.sum()) + 1))
    ways[0, 0] = 1.0
    for r in doubled:  # choose-or-not, each value once (the right side is read before it is written)
        ways[1:, r:] = ways[1:, r:] + ways[:-1, : ways.shape[1] - r]
    return float(ways[m, observed:].sum() / ways[m].sum())


def verdict(history: list[float], latest: list[float], false_alarm: float) -> dict[str, Any]:
    history = history[-HISTORY_MAX:]
    n, m = len(history), len(latest)
    base = {"history_windows": n, "latest_windows": m, "false_alarm": false_alarm,
            "test": "one-sided exact rank test (Mann-Whitney) of the latest cycle's window maxima against the "
                    "phase's earlier ones"}
    if m == 0:
        return {**base, "verdict": "no new window", "p_value": None}
    if n == 0 or math.comb(n + m, m) * false_alarm < 1:
        need = next(k for k in range(1, 100_000) if math.comb(k + m, m) * false_alarm >= 1)
        return {**base, "verdict": f"not enough history ({n} earlier windows; {need} needed at a "
                f"{false_alarm:.1%} false-alarm rate)", "p_value": None}
    p = rank_p_value(np.array(history), np.array(latest))
    return {**base, "verdict": "regression" if p <= false_alarm else "no regression", "p_value": p}
