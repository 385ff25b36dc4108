"""Is a phase's latest cycle worse than its history? A one-sided rank test on window maxima.

Under no change, the windows of a phase are exchangeable: every way of choosing which m of the
n + m maxima are the latest cycle's is equally likely. The p-value is the exact share of those
choices whose rank sum is at least the latest cycle's (ties get mid-ranks), so flagging at
p ≤ α raises a false alarm with probability at most α, whatever the latency distribution.
A verdict needs enough history for p to reach α at all: C(n + m, m) ≥ 1/α.

Exchangeable windows are an assumption a bench can break (issue 46): a machine that drifts, or
cycles that each meet their own machine state. So the history is checked first, at a strict
ASSUMPTION_ALPHA: a trend over time (Kendall's τ of the window maxima against their order) or
cycles that differ beyond their windows' spread (one-way ANOVA of the log maxima across the
earlier cycles: a rank test cannot reach a strict level with a few windows a cycle). Where
either is seen, the windows' p is optimistic: the cycles become the units (each cycle's median
window maximum; the latest cycle's rank among them, exact for exchangeable cycles), and a flag
needs both tests; the trend is reported either way.

What the checks cannot see: cycle offsets small against the windows' spread (a fifth of it) or with
too few windows a cycle to test (one window a cycle: no check at all) still leave the windows' p
optimistic (a review measured 4–7 % false alarms at a nominal 1 % there); and with the cycles as
units, a flag needs 1/α − 1 earlier cycles (99 at 1 %). A latest cycle still incomplete is ranked
by the median of the windows it has."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# the latest windows of a phase that make its history (bounded work, recent behaviour)
HISTORY_MAX = 200
#: the history's own checks (a trend, cycles that differ): strict, so a steady machine is rarely
#: moved to the cycles' much slower test (2 chances in 1000 per verdict)
ASSUMPTION_ALPHA = 0.001


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
    # choose-or-not, each value once (the right side is read before it is written)
    for r in doubled:
        ways[1:, r:] = ways[1:, r:] + ways[:-1, : ways.shape[1] - r]
    return float(ways[m, observed:].sum() / ways[m].sum())


def history_checks(history: list[float], cycles: list[int] | None) -> dict[str, Any]:
    """The history's trend over its windows' order and, with their cycles, whether cycles differ."""
    from scipy import stats

    out: dict[str, Any] = {"trend_tau": None, "trend_p": None, "cycles_p": None, "moves": None}
    if len(history) >= 4 and len(set(history)) > 1:
        tau = stats.kendalltau(np.arange(len(history)), history)
        out.update(trend_tau=float(tau.statistic), trend_p=float(tau.pvalue))
    groups = _by_cycle(history, cycles)
    # a cycle with one window (a gap took the others) still counts: the others give the spread
    # within
    if len(groups) >= 2 and sum(len(g) - 1 for g in groups) >= 2 and len(set(history)) > 1:
        logs = [np.log(np.maximum(np.asarray(g, float), 1e-9)) for g in groups]
        if any(np.ptp(g) > 0 for g in logs):  # no spread within any cycle: no test
            out["cycles_p"] = float(stats.f_oneway(*logs).pvalue)
    why = []
    if out["trend_p"] is not None and out["trend_p"] < ASSUMPTION_ALPHA:
        why.append(f"a trend over the earlier windows (Kendall τ = {out['trend_tau']:+.2f}, p = "
                   f"{out['trend_p']:.1g})")
    if out["cycles_p"] is not None and out["cycles_p"] < ASSUMPTION_ALPHA:
        why.append("earlier cycles that differ beyond their windows' spread "
                   f"(ANOVA of the log maxima, p = {out['cycles_p']:.1g})")
    out["moves"] = "; ".join(why) or None
    return out


def _by_cycle(values: list[float], cycles: list[int] | None) -> list[list[float]]:
    if cycles is None or len(cycles) != len(values):
        return []
    groups: dict[int, list[float]] = {}
    for c, v in zip(cycles, values, strict=True):
        groups.setdefault(c, []).append(v)
    return [groups[c] for c in sorted(groups)]


def cycles_p_value(history: list[float], cycles: list[int], latest: list[float]) -> tuple[float,
                                                                                          int]:
    """The latest cycle's median window maximum ranked among the earlier cycles' medians: the share
    of the k + 1 cycles at or above it (exact for exchangeable cycles), and k."""
    medians = [float(np.median(g)) for g in _by_cycle(history, cycles)]
    mine = float(np.median(latest))
    return (1 + sum(m >= mine for m in medians)) / (len(medians) + 1), len(medians)


def verdict(history: list[float], latest: list[float], false_alarm: float,
            cycles: list[int] | None = None) -> dict[str, Any]:
    """The phase's verdict; `cycles` the cycle of each history window (its checks need them)."""
    all_history, all_cycles = history, cycles  # the cycles' test keeps every earlier cycle
    history = history[-HISTORY_MAX:]
    cycles = cycles[-HISTORY_MAX:] if cycles is not None else None
    n, m = len(history), len(latest)
    base = {"history_windows": n, "latest_windows": m, "false_alarm": false_alarm,
            "test": "one-sided exact rank test (Mann-Whitney) of the latest cycle's window maxima "
                    "against the "
                    "phase's earlier ones", **history_checks(history, cycles)}
    if m == 0:
        return {**base, "verdict": "no new window", "p_value": None}
    if n == 0 or math.comb(n + m, m) * false_alarm < 1:
        need = next(k for k in range(1, 100_000) if math.comb(k + m, m) * false_alarm >= 1)
        return {**base, "verdict": f"not enough history ({n} earlier windows; {need} needed at a "
                f"{false_alarm:.1%} false-alarm rate)", "p_value": None}
    p = rank_p_value(np.array(history), np.array(latest))
    if base["moves"] is None:
        return {**base, "verdict": "regression" if p <= false_alarm else "no regression",
                "p_value": p}
    # the windows are not exchangeable: the cycles are the units, and a flag needs both
    p_cycles, k = cycles_p_value(all_history, all_cycles or [], latest)
    need = math.ceil(1 / false_alarm) - 1
    if p <= false_alarm and p_cycles <= false_alarm:
        word = "regression"
    elif p <= false_alarm:
        word = ("unlike its history, not called a regression: the history is not exchangeable "
                f"({base['moves']}); with the cycles as units {k} earlier cycles give p ≥ "
                f"{p_cycles:.2g} ({need} needed to reach {false_alarm:.1%})")
    else:
        word = "no regression"
    return {**base, "verdict": word, "p_value": p, "p_value_cycles": p_cycles}
