"""The worst-case method's constants (its risk levels, sample-size floors, test replicates) and the
scipy parts it imports only when a fit needs them."""

from __future__ import annotations

import functools

from station.analysis.quantile_functions import chi2_1_ppf
from station.common.lazy_import import lazy_module

stats = lazy_module("scipy.stats")  # a Clopper-Pearson interval's beta quantiles
optimize = lazy_module("scipy.optimize")  # imported by the first fit, not by every report

EXCEEDANCE = 1e-9  # the default worst case: the latency exceeded once in a billion events
LEVEL = 0.95
MIN_SAMPLES = 1000
MIN_EXCEEDANCES = 50  # a candidate threshold needs at least this many to be fitted at all
RELIABLE_EXCEEDANCES = 100  # fewer, and the result is not publishable
MAX_EXCEEDANCES = 5000  # candidates fitted for the stability table
MIN_DISTINCT_TOP = 10  # distinct values in the top 10 %: below, nothing to fit
MIN_DISTINCT_EXCEEDANCES = 30  # distinct (unjittered) values above the threshold
GOF_REPLICATES = 199
GOF_ALPHA = 0.05
GOF_TRIES = 3  # thresholds tried upwards when the fit is rejected
STABILITY_ALPHA = 0.01
STABILITY_WINDOW = 2.0  # compare with higher candidates down to 1/STABILITY_WINDOW of the excesses
INDEPENDENCE_REPLICATES = 299
INDEPENDENCE_ALPHA = 0.01
MATERIAL_THETA = 0.9
HEAVY_SHAPE = 0.5  # ξ ≥ 0.5: infinite variance, the extrapolation is unbounded in practice
IRREGULAR_SHAPE = -0.5  # ξ ≤ -0.5: maximum likelihood loses its usual properties (Smith 1985)
MIN_EXPECTED_BEYOND = 10.0  # a fit is trusted down to probability this / n per event, no further
# Tail fractions of the candidate thresholds: the quantiles 0.90 … 0.995, then higher for big n.
_BASE_TAILS = (0.10, 0.08, 0.06, 0.05, 0.04, 0.03, 0.02, 0.015, 0.01, 0.005)



@functools.cache
def _chi2_half() -> float:
    """Half the χ²(1) quantile at LEVEL: the profile-likelihood interval's drop."""
    return float(chi2_1_ppf(LEVEL)) / 2.0


_TINY_THETA = 1e-7  # |ξ/σ| below this (in units of the mean excess) is ξ = 0 for the fit
TAIL_CAP = 1 << 18  # values a TailSample keeps by default: far more than any fitted candidate needs
