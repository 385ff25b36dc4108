"""Descriptive statistics of a latency sample, in ns."""

from __future__ import annotations

import math

import numpy as np

PERCENTILES = {"p50": 50.0, "p99": 99.0, "p99.99": 99.99, "p99.999": 99.999}


def describe(values_ns: np.ndarray) -> dict | None:
    v = np.asarray(values_ns, dtype=np.float64)
    if v.size == 0:
        return None
    pct = np.percentile(v, list(PERCENTILES.values()))
    return {
        "count": int(v.size),
        "min_ns": float(v.min()),
        "mean_ns": float(v.mean()),
        "std_ns": float(v.std(ddof=1)) if v.size > 1 else 0.0,
        "max_ns": float(v.max()),
        "percentiles_ns": {k: float(p) for k, p in zip(PERCENTILES, pct, strict=True)},
    }


def mean_se(values: np.ndarray) -> tuple[float, float]:
    """Mean and its standard error."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return (float(v.mean()) if v.size else math.nan, math.inf)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
