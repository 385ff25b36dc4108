"""Worst cases on the twin's own latency model (issue 29, point 5): its true quantiles computed
from the model (tests/twin_latency_truth.py), its samples drawn by the generator the twin streams
(ModuleSession, under the demo's load), at the demo's size: 200 000 events per interface.

The model's tail has a component on 1e-4 of the events (20 of them in such a sample) that sets
its 1e-9 quantile (LPT 29 µs) but barely shows in the sample: a GPD fit extrapolated to 1e-9 held
the truth in 25 of 50 such samples, every one of them passing the fit's checks
(benchmarks/bench_worst_case_coverage.py). So the station must not call that figure reliable, and what it
does state — the distribution-free bound, at most 1 event in about n/3 above the sample's
maximum — must hold at its stated 95 %, checked here over 100 seeded samples per interface."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from station.analysis.distribution import Distribution
from station.analysis.worst_case import distribution_free_bound, supported_exceedance, worst_case
from station.twin.model import CHUNK_EVENTS, ModuleSession, latency_shape, load_preset
from tests.twin_latency_truth import TrueLatency

EVENTS = 200_000  # the demo: 2 variants × 100 000 samples per interface, pooled for its worst case
SAMPLES = 100
LEVEL = 0.95
# the demo campaign's override (configs/rtai-lpt-vs-pcie.yaml): PCIe outliers at 5e-5
INTERFACES = {"lpt": {}, "pcie": {"outlier_fraction": 5.0e-5}}


def _model(interface: str):  # noqa: ANN202 - (params, calibration samples)
    # its truth is the i.i.d. model's (dependence: bench_dependence_coverage)
    preset = load_preset("seed-2015").independent()
    return replace(preset.interfaces[interface], **INTERFACES[interface]), preset.calibration_samples


def _draw(interface: str, seed: int) -> np.ndarray:
    params, calibration = _model(interface)
    session = ModuleSession(params, calibration, period_ns=100_000, check=False, t_load_ns=0,
                            seed_material=f"worst-case-twin-{interface}-{seed}")
    return np.concatenate([session.chunk(i, loaded=True).sw for i in range(EVENTS // CHUNK_EVENTS)])


@pytest.fixture(scope="module", params=list(INTERFACES))
def twin(request) -> tuple[str, TrueLatency, list[np.ndarray]]:
    params, calibration = _model(request.param)
    truth = TrueLatency.of(params, latency_shape(params, calibration))
    return request.param, truth, [_draw(request.param, seed) for seed in range(SAMPLES)]


def test_the_truth_is_the_twins_distribution_where_a_sample_can_tell(twin):
    # the computed truth against 20 M draws of the generator, at quantiles the draws resolve well
    _, truth, samples = twin
    pooled = np.concatenate(samples)
    for p in (0.5, 1e-2, 1e-3, 1e-4):
        seen = np.count_nonzero(pooled > truth.quantile(p))
        lo, hi = stats.binom.interval(0.999, pooled.size, p)
        assert lo - 2 * pooled.size * 1e-6 <= seen <= hi + 2 * pooled.size * 1e-6, (p, seen, lo, hi)


def test_the_distribution_free_bound_holds_at_its_level(twin):
    interface, truth, samples = twin
    covered = 0
    for sw in samples:
        bound = distribution_free_bound(Distribution.of(sw))
        assert bound["level"] == LEVEL and bound["bound_ns"] == sw.max()
        assert (1 - bound["exceedance"]) ** EVENTS == pytest.approx(1 - LEVEL)
        covered += truth.quantile(bound["exceedance"]) <= bound["bound_ns"]
    # 95 % of 100: a method that holds its level falls below 89 with probability 0.4 % (binomial)
    print(f"{interface}: the bound held the true quantile in {covered}/{SAMPLES}")
    assert covered >= 89, covered


def test_the_1e9_figure_is_refused_at_this_size_and_the_bound_is_stated(twin):
    interface, truth, samples = twin
    for sw in samples[:3]:  # the refusal depends on n alone; benchmarks/bench_worst_case_coverage.py fits 50
        result = worst_case(sw, seed=1)
        assert result["exceedance"] == 1e-9 and supported_exceedance(EVENTS) > 1e-9
        assert result["reliable"] is False
        assert any("decades beyond the 1 in 200,000" in r for r in result["reasons"]), result["reasons"]
        assert result["quantile_ns"]["estimate"] is not None  # still given, for report.json's readers
        assert result["bound"]["bound_ns"] == sw.max()
    print(f"{interface}: true 1e-9 quantile {truth.quantile(1e-9) / 1000:.2f} µs")


def test_inside_the_data_the_stated_intervals_hold_at_their_level(twin):
    # At the edge of what a sample of n supports (10 events expected beyond p) the station states the
    # empirical quantile with its order-statistic interval, and a deadline's probability as the observed
    # fraction with its Clopper-Pearson interval; both must hold the model's truth at 95 %. (The GPD's
    # own intervals held only 43-45 of 50 here: benchmarks/bench_worst_case_coverage.py --distances 30,10.)
    interface, truth, samples = twin
    p, deadline_p = 10 / EVENTS, 30 / EVENTS
    deadline = truth.quantile(deadline_p)
    held = deadline_held = 0
    for seed, sw in enumerate(samples):
        result = worst_case(sw, exceedance=p, deadline_ns=deadline, seed=seed)
        q, d = result["quantile_ns"], result["deadline"]
        assert q["interval"] == "empirical, order statistics" and q["exceedance"] == p
        assert d["source"] == "empirical" and d["observed_exceedances"] == np.count_nonzero(sw > deadline)
        held += q["ci_low"] <= truth.quantile(p) <= q["ci_high"]
        deadline_held += d["ci_low"] <= deadline_p <= d["ci_high"]
    print(f"{interface}: quantile at {p:g} held {held}/{SAMPLES}, deadline probability held {deadline_held}/{SAMPLES}")
    assert held >= 89 and deadline_held >= 89, (held, deadline_held)  # as above: 0.4 % for an exact method
