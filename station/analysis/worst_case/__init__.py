"""Worst-case interrupt latency by peaks over threshold: the latency exceeded with a tiny
probability per event (1e-9 by default), with an interval and the diagnostics a reviewer needs
to decide whether that extrapolation can be trusted.

Method (Coles 2001, "An Introduction to Statistical Modeling of Extreme Values", ch. 4):

* Above a high threshold u the excesses Y = X - u of the latencies are modelled by a generalised
  Pareto distribution GPD(σ, ξ), and the fraction of events above u by ζ_u (binomial). The
  latency exceeded with probability p per event is then
  x_p = u + σ/ξ·((ζ_u/p)^ξ - 1), which tends to u + σ·log(ζ_u/p) as ξ → 0.
* Ties: latencies are integers (1 ns, 10 ns, ... quanta) while the GPD is continuous. When the top
  of the sample has ties, each value is spread by a uniform jitter of ± half the quantum (the gcd
  of the gaps between distinct values); with more than a few distinct values above u this changes
  nothing the fit can see, with fewer the result is flagged. The jitter of a value is a hash of
  ``seed`` and the value's position in the sample, not a draw from a stream, so it does not depend
  on how many top values were at hand: a ``TailSample`` gives the same fit as the whole array.
* Threshold: candidates are the quantiles 0.90 … 0.995 of the sample, then higher ones in steps
  of √2 in the number of excesses; those with 50 … 5000 excesses are fitted by maximum likelihood
  (Grimshaw's one-dimensional profile in ξ/σ) for the parameter-stability table (shape, Wald
  interval, scale, mean excess: Coles 2001 §4.3.1). The threshold used has at most √n excesses
  (at 1e-9 the bias of a low threshold, not the variance, ruins intervals; k of order √n keeps it
  a fixed fraction of the standard error for Student-t-like tails) and at least 100 when the
  sample allows: the lowest such candidate whose shape agrees with those at the higher candidates
  with at least half its excesses (nested estimates differ with variance ≈ se_high² − se_low²,
  Wadsworth 2016; Bonferroni, 1 % overall) and whose fit passes the goodness-of-fit test (up to
  three candidates tried upwards).
* Intervals: 95 % profile likelihood (Coles 2001 §4.3.3) of the full likelihood
  Binomial(n, ζ_u) × GPD(σ, ξ), so the uncertainty of ζ_u is included: for the quantile, x_p is
  fixed and (ξ, ζ_u) maximised, σ following from the constraint; for a deadline d above u,
  the exceedance probability P(X > d) is profiled the same way (x = d fixed, p varied). The
  delta method is not used: at 1e-9 the likelihood of x_p is strongly skewed. Shape and scale
  carry Wald intervals from the expected information (the ones the table shows too).
* Goodness of fit: Anderson–Darling statistic of the excesses against the fitted GPD, with a
  p-value by parametric bootstrap (each replicate refitted, so the estimation of σ and ξ is
  accounted for, as in the tables of Choulakian & Stephens 2001).
* Independence: clustered extremes (a long SMI hitting several consecutive periodic events)
  make the intervals too narrow. The extremal index θ is estimated by the intervals estimator
  of Ferro & Segers 2003 from the gaps between exceedances (θ = 1: no clustering; 1/θ: mean
  cluster size) and tested against independence by simulating geometric gaps with the same
  exceedance rate: a significant (p < 0.01) and material (θ < 0.9) clustering fails the check.
* A deadline below u gets the empirical fraction with its Clopper–Pearson interval.
* No extrapolation is called reliable: a fit's interval is trusted only where MIN_EXPECTED_BEYOND
  (10) events of the sample are expected beyond the quantile (p ≥ 10/n). No check on the data can
  see a tail component rarer than the sample resolves, and on the twin's own seed-2015 models the
  coverage of the fits' 95 % intervals, against the models' true quantiles over 50 seeded samples
  of 200 000 events (benchmarks/bench_worst_case_coverage.py --distances), was 45/50 at n·p = 10 and
  44/50 at 3, then 35/50 at 1, 23/50 at 0.3 and 17/50 at 0.1 and 0.01 (LPT: an exponential tail on
  1e-4 of the events over a gamma body; every fit passed the checks above, 49/50 called reliable
  under the earlier two-decade limit); PCIe, with its rare uniform delays, 0–35/50. Beyond 10/n
  the estimate is still given, marked unsupported, beside the distribution-free bound.
  Further out, the result is ``reliable: False`` with the reason (the estimates are still given),
  and a deadline whose fitted probability lies further out gets the observed fraction instead.
  What any sample supports is the distribution-free ``bound``: with probability LEVEL the largest
  of n values is at least the latency exceeded with probability 1 - (1 - LEVEL)^(1/n) ≈ 3/n, for
  every continuous distribution (ties only make it conservative).

A sample too large to hold (hour-long campaigns: hundreds of millions of events) is given as a
``TailSample``: its ``Distribution`` (counts, order statistics, counts above a deadline) and only
its largest values with their positions (the independence check needs them). While the kept values
include the top 10 % (at the default cap of 2**18 values: samples up to about 2.6 M events) the
result is exactly the whole array's. Beyond, the candidates with more excesses than were kept drop
out of the diagnostics table (the method says so) and nothing else changes as long as more values
were kept than a fitted candidate has excesses (MAX_EXCEEDANCES): the quantum comes from the
distribution, and a jitter below half the quantum keeps every kept value above every dropped one.

Every check that fails makes the result ``reliable: False`` with a plain-English reason; the
estimates are still given when they can be computed. ``fit_reliable`` tells whether the fit itself
passed (the extrapolation distance aside): a deadline probability from the fit needs only that.
Inputs with NaN/inf raise ValueError.

Its modules: constants.py, sample.py (the whole array or its TailSample), fit.py (the GPD fits and
their checks), quantities.py (the quantile and the deadline probability), estimate.py (the
pipeline); this package's face re-exports what the station, the tests and the benchmarks use.
"""

from __future__ import annotations

from station.analysis.worst_case.constants import EXCEEDANCE, LEVEL, MIN_SAMPLES, TAIL_CAP, optimize
from station.analysis.worst_case.estimate import _jitter, distribution_free_bound, worst_case
from station.analysis.worst_case.quantities import (
    _empirical_deadline,
    binomial_interval,
    supported_exceedance,
)
from station.analysis.worst_case.sample import TailSample, _ArrayInput

__all__ = [
    "EXCEEDANCE", "LEVEL", "MIN_SAMPLES", "TAIL_CAP", "TailSample", "_ArrayInput",
    "_empirical_deadline", "_jitter", "binomial_interval", "distribution_free_bound", "optimize",
    "supported_exceedance", "worst_case",
]
