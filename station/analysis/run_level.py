"""Runs as the units of a comparison (issue 46).

Two runs of one condition are never the same machine: each module load meets its own machine state
(caches, frequency, what ran before), and a bench drifts between runs. A difference between two
conditions is therefore judged against the spread *between runs* of each, not the spread of the
events inside one run: each run gives one estimate (its median, its p99, its mean), and the
conditions' run estimates are compared with Welch's t test (unequal spreads, Welch–Satterthwaite
degrees of freedom). With one run of a condition that spread is not estimated and no test is made:
the caller says so, and how many runs would settle it (`runs_needed`).

Assumes the runs of a condition are independent draws of its machine states (the matrix's
interleaved order keeps slow drift from lining up with a condition) and their estimates roughly
normal (a median or a mean of many events; few runs make Welch's test exact only for normal ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from station.analysis.dependence import t_ppf
from station.common.lazy_import import lazy_module

special = lazy_module("scipy.special")

ALPHA = 0.05


def run_level(estimates: Sequence[float]) -> tuple[float, float, int]:
    """(mean, its standard error, runs) of run-level estimates: the runs as units."""
    a = np.asarray(estimates, np.float64)
    # no run gave an estimate (a cyclictest run whose median is among its overflows)
    if a.size == 0:
        return math.nan, math.nan, 0
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan
    return float(a.mean()), se, int(a.size)


def welch_differs(a: tuple[float, float, int], b: tuple[float, float, int]) -> tuple[bool, float,
                                                                                     float]:
    """Whether two conditions' run-level means differ (two-sided 5 %, Welch–Satterthwaite), with the
    difference's standard error and degrees of freedom."""
    (ma, sa, na), (mb, sb, nb) = a, b
    se = math.hypot(sa, sb)
    if se == 0:  # runs that all gave one value: no spread to judge against, which is no certainty
        return False, 0.0, math.inf
    df = se**4 / (
        (sa**4 / (na - 1) if na > 1 else 0) + (sb**4 / (nb - 1) if nb > 1 else 0) or math.inf
    )
    return abs(ma - mb) > t_ppf(1 - ALPHA / 2, max(df, 1.0)) * se, se, df


def welch(baseline: Sequence[float], other: Sequence[float], confidence: float = 0.95) -> dict[str,
                                                                                               Any]:
    """other − baseline of the runs' mean estimate, with Welch's interval and two-sided p-value;
    with fewer than two runs on a side, or no spread at all between the runs of either, the
    difference alone and `p_value` None (`no_spread` says which)."""
    (ma, sa, na), (mb, sb, nb) = run_level(baseline), run_level(other)
    out: dict[str, Any] = {"diff_ns": mb - ma if na and nb else None, "se_ns": None, "df": None,
                           "ci95_ns": None, "p_value": None, "runs": [na, nb]}
    if na < 2 or nb < 2:
        return out
    differs, se, df = welch_differs((ma, sa, na), (mb, sb, nb))
    if se == 0:  # every run gave the same value on each side (a quantised quiet bench): not tested
        out["no_spread"] = True
        return out
    df = max(df, 1.0)
    half = t_ppf(0.5 + confidence / 2, df) * se
    p = float(2 * special.stdtr(df, -abs(mb - ma) / se))
    out.update(se_ns=se, df=df, ci95_ns=[mb - ma - half, mb - ma + half], p_value=min(p, 1.0))
    return out


def runs_needed(difference: float, sd: float | None, most: int = 50) -> int | None:
    """Runs per condition for a two-sided 5 % test of run-level estimates (Welch, equal spread `sd`)
    to tell `difference` apart: the smallest r ≥ 2 with t_{2r−2}·sd·√(2/r) < |difference|; None:
    unknown."""
    if sd is None or not math.isfinite(difference) or difference == 0 or not math.isfinite(sd):
        return None
    for r in range(2, most + 1):
        if t_ppf(1 - ALPHA / 2, 2 * r - 2) * sd * math.sqrt(2 / r) < abs(difference):
            return r
    return None


def untested_reason(result: dict[str, Any], what: str,
                    baseline: str = "the baseline") -> str | None:
    """Why welch() made no test of `what` (e.g. "this campaign") against `baseline`; None if it
    did."""
    if result.get("no_spread"):
        return (
            "every run on each side has the same estimate: no spread between runs to judge a "
            "difference against"
        )
    if result["p_value"] is None:
        na, nb = result["runs"]
        return (f"{na} run(s) of {baseline} and {nb} of {what}: with one run on a side the "
                "run-to-run variation is not estimated, so no difference can be told from it "
                "(repetitions ≥ 2 each)")
    return None
