"""The few quantile functions of scipy.stats the reports need, computed as scipy.stats computes
them, without importing scipy.stats: its import builds every distribution's docstring, 0.3 s of
each report (tests/test_worst_case.py checks them equal to scipy.stats' to the bit)."""

from __future__ import annotations

import importlib
from typing import Any

from station.common.lazy_import import lazy_module

special = lazy_module("scipy.special")
stats = lazy_module("scipy.stats")  # only where scipy.special does not carry binom_ppf's quantile


def chi2_1_ppf(q: float) -> float:
    """scipy.stats.chi2.ppf(q, 1): its _ppf, 2·gammaincinv(df/2, q)."""
    return float(2 * special.gammaincinv(0.5, q))


def norm_isf(q: Any) -> Any:
    """scipy.stats.norm.isf(q): its _isf, -ndtri(q)."""
    return -special.ndtri(q)


def binom_ppf(q: float, n: int, p: float) -> float:
    """scipy.stats.binom.ppf(q, n, p) for 0 < q < 1: its _ppf, Boost's quantile, which scipy.special
    carries (privately; scipy.stats' own where it does not, as before scipy 1.12)."""
    boost = getattr(importlib.import_module("scipy.special._ufuncs"), "_binom_ppf", None)
    return float(boost(q, n, p) if boost is not None else stats.binom.ppf(q, n, p))
