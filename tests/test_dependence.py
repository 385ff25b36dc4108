"""Intervals on dependent latency (issue 46): the twin's time structure as its truth logs it, the fine
blocks a run is cut into, and a small seeded coverage study (benchmarks/bench_dependence_coverage.py
is the full one). Truth: the twin model's own logged components and a long reference draw of it,
never a figure of the code under test."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from station.analysis import dependence
from station.analysis.distribution import Distribution
from station.api import percentile_intervals
from station.twin.model import CHUNK_EVENTS, ModuleSession, load_preset

PRESET = load_preset("seed-2015")
PERIOD_NS = 100_000


def _session(material: str, preset=PRESET, t_load_ns: int = 0) -> ModuleSession:  # noqa: ANN001
    return ModuleSession(preset.interfaces["lpt"], preset.calibration_samples, PERIOD_NS, False, t_load_ns,
                         material, phases=preset.load_phases, drift_seed=3)


def _chunks(session: ModuleSession, n: int) -> list:
    return [session.chunk(i, True) for i in range(n)]


def test_the_twin_logs_phases_carryover_offsets_and_drift():
    chunks = _chunks(_session("structure"), 200)  # 20 s: four cycles of the dd loop
    phase = np.concatenate([c.phase for c in chunks])
    carry = np.concatenate([c.carryover for c in chunks]).astype(float)
    assert set(np.unique(phase)) == set(range(len(PRESET.load_phases)))
    # phases last seconds: few changes in 200 000 events, each a run of thousands
    changes = np.count_nonzero(np.diff(phase))
    assert 10 <= changes <= 60
    # the carry-over is an AR(1) with a 20 ms correlation time: lag-200-event (20 ms) autocorrelation e^-1
    lag = 200
    r = np.corrcoef(carry[:-lag], carry[lag:])[0, 1]
    assert 0.25 < r < 0.50
    # the sessions' offsets differ (one per module load), the independent twin has none of it
    offsets = {_session(f"load-{k}").run_offset_ns for k in range(8)}
    assert len(offsets) == 8 and np.std(list(offsets)) > 10
    flat = _chunks(_session("flat", PRESET.independent()), 3)
    assert all(np.all(c.phase == -1) and not c.carryover.any() and not c.drift.any() and c.run_offset == 0
               for c in flat)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1200), min_size=1, max_size=8), st.integers(0, 2**31 - 1))
def test_fine_blocks_do_not_depend_on_how_the_stream_is_batched(cuts, seed):
    x = np.random.default_rng(seed).gamma(4, 300, sum(cuts)).round()
    whole = dependence.blocks_of(x, [1000.0, 1500.0])
    parts = dependence.FineBlocks(levels=(1000.0, 1500.0))
    at = 0
    for c in cuts:
        parts.add(x[at:at + c])
        at += c
    parts.close()
    assert parts.counts == whole.counts and sum(parts.counts) == x.size
    def totals(fb: dependence.FineBlocks) -> np.ndarray:  # each block's Σx (sums are about a centre)
        return np.asarray(fb.sums) + (fb.centre or 0.0) * np.asarray(fb.counts)

    assert np.allclose(totals(parts), totals(whole), rtol=1e-9, atol=1e-6)
    assert np.array_equal(np.array(parts.below), np.array(whole.below))
    if x.size:  # block totals give back the sample's own mean and counts below each level
        assert dependence.mean_interval(whole)["estimate_ns"] == pytest.approx(x.mean())
        assert np.array(whole.below).sum(axis=0).tolist() == [np.sum(x <= 1000), np.sum(x <= 1500)]
        edges = np.cumsum([0, *whole.counts])  # and each block's own counts, read off its events
        assert [b.tolist() for b in parts.below] == [
            [int(np.sum(x[lo:hi] <= 1000)), int(np.sum(x[lo:hi] <= 1500))]
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 2), st.integers(0, 2**31 - 1))
def test_fine_blocks_come_back_from_a_worker_as_they_left(n, levels, seed):
    """A run's blocks travel pickled (worker → report, the live analysis's cache): the same lists of
    the same Python numbers, the same intervals, and still open to more events."""
    import math
    import pickle

    rng = np.random.default_rng(seed)
    x = rng.gamma(4, 300, n).round()
    lv = tuple(float(v) for v in (900, 1200)[:levels])
    blocks = dependence.blocks_of(x, list(lv)) if n else dependence.FineBlocks(levels=lv).close()
    if n:
        blocks.starts_s[0] = math.nan  # a block without a time: NaN survives as NaN
    back = pickle.loads(pickle.dumps(blocks, protocol=pickle.HIGHEST_PROTOCOL))
    for name in ("counts", "sums", "medians", "p99s"):
        assert getattr(back, name) == getattr(blocks, name)
        assert [type(v) for v in getattr(back, name)] == [type(v) for v in getattr(blocks, name)]
    assert np.array_equal(np.asarray(back.starts_s), np.asarray(blocks.starts_s), equal_nan=True)
    assert [b.tolist() for b in back.below] == [b.tolist() for b in blocks.below]
    assert back.levels == blocks.levels and back.centre == blocks.centre
    if n:
        assert dependence.mean_interval(back) == dependence.mean_interval(blocks)
        for i in range(levels):
            assert np.array_equal(back.below_at(i), blocks.below_at(i))
        more = rng.gamma(4, 300, 2 * dependence.FINE_EVENTS).round()
        blocks.add(more)
        back.add(more)
        assert back.counts == blocks.counts and back.medians == blocks.medians


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), max_size=3000))
def test_intervals_of_any_sample_are_ordered_or_withheld(values):
    x = np.asarray(values)
    if not x.size:
        return
    out = percentile_intervals(x)
    for est, lo, hi in out.values():
        assert (lo is None or lo <= est) and (hi is None or est <= hi)
    mean = dependence.mean_interval(dependence.blocks_of(x))
    assert mean["withheld"] or mean["ci95_ns"][0] <= mean["estimate_ns"] <= mean["ci95_ns"][1]


def _reference() -> np.ndarray:
    """The stationary latency: long draws with each event's logged offset and drift taken out."""
    parts = []
    for k in range(4):
        chunks = _chunks(_session(f"reference-{k}"), 600)
        parts.append(np.concatenate([c.sw - c.drift - c.run_offset for c in chunks]))
    return np.concatenate(parts).astype(float)


def test_percentile_intervals_hold_the_runs_truth_on_dependent_latency():
    """20 demo-length runs (10 s) of the twin with its time structure. The i.i.d. interval (today's
    before issue 46) held the run's true median in ~16 % of runs in the bench; the default interval
    must hold it in ≥ 14 of 20 — a right 95 % interval fails that with probability
    binom.cdf(13, 20, 0.95) = 6e-6. Withheld intervals (a run too short for its dependence) count as
    misses here, so the test also fails an interval that hides.

    Nor may it be uselessly wide: the median half-width of the mean's and the median's intervals at
    most 2 × 1.96 × the root mean square of the estimates' real errors (against the truth) over the
    20 runs. Batch means shorter than the load's cycle made it 2.7 here (each phase counted as
    independent error, where a run over whole cycles averages it away; 2.2 over the bench's 900 runs);
    the cycle's lag window 1.4 here (1.1 in the bench: these 20 runs' errors happen to be small)."""
    ref = _reference()
    truth_p50, truth_p99 = np.percentile(ref, [50, 99])
    held = {"p50": 0, "p99": 0}
    held_iid = 0
    errors: dict[str, list[float]] = {"mean": [], "p50": []}
    halves: dict[str, list[float]] = {"mean": [], "p50": []}
    for k in range(20):
        s = _session(f"run-{k}", t_load_ns=k * 12 * 10**9)
        chunks = _chunks(s, 100)
        sw = np.concatenate([c.sw for c in chunks])
        state = s.run_offset_ns + np.mean(np.concatenate([c.drift for c in chunks]))
        got = percentile_intervals(sw)
        for key, truth in (("p50", truth_p50), ("p99", truth_p99)):
            _, lo, hi = got[key]
            held[key] += lo is not None and hi is not None and lo <= truth + state <= hi
        _, lo, hi = percentile_intervals(sw, independent=True)["p50"]
        held_iid += lo <= truth_p50 + state <= hi
        mean = dependence.mean_interval(dependence.blocks_of(sw))
        errors["mean"].append(float(sw.mean()) - (float(ref.mean()) + state))
        errors["p50"].append(float(np.percentile(sw, 50)) - (truth_p50 + state))
        if mean["ci95_ns"] is not None:
            halves["mean"].append((mean["ci95_ns"][1] - mean["ci95_ns"][0]) / 2)
        if got["p50"][1] is not None and got["p50"][2] is not None:
            halves["p50"].append((got["p50"][2] - got["p50"][1]) / 2)
    assert held["p50"] >= 14 and held["p99"] >= 14, (held, held_iid)
    # the failure the issue reported, still there in the i.i.d. interval: it cannot be the default
    assert held_iid <= 10, held_iid
    for key in ("mean", "p50"):
        ideal = 1.96 * float(np.sqrt(np.mean(np.square(errors[key]))))
        assert float(np.median(halves[key])) <= 2.0 * ideal, (key, np.median(halves[key]), ideal)


def test_on_independent_latency_the_interval_is_the_iid_one():
    """No dependence: the effective sample is (nearly) the sample, the interval about as wide as the
    distribution-free one, and the sentence says so."""
    s = _session("iid", PRESET.independent())
    sw = np.concatenate([c.sw for c in _chunks(s, 100)])
    dep, iid = percentile_intervals(sw), percentile_intervals(sw, independent=True)
    for key in ("p50", "p99"):
        assert dep[key][0] == iid[key][0]
        width, iid_width = dep[key][2] - dep[key][1], iid[key][2] - iid[key][1]
        assert width <= 1.3 * iid_width, (key, width, iid_width)
    d = Distribution.of(sw)
    levels = [d.describe()["percentiles_ns"][k] for k in dependence.PERCENTILES]
    blocks = dependence.blocks_of(sw, levels)
    q = dependence.quantile_intervals(d, blocks)
    assert q["p50"]["effective_n"] > 0.8 * sw.size
    mean = dependence.mean_interval(blocks)
    sentence = dependence.summary_sentence(mean, q, sw.size, dependence.cycle_seconds(blocks, 1e-4), 1e-4)
    assert sentence.startswith("No dependence") or mean["batches"] >= 100, sentence


def test_a_run_too_short_for_its_dependence_is_withheld_not_pretended():
    """2 s of a twin whose phases last seconds: no interval at the median, with the reason."""
    sw = np.concatenate([c.sw for c in _chunks(_session("short"), 20)])
    _, lo, hi = percentile_intervals(sw)["p50"]
    d = Distribution.of(sw)
    blocks = dependence.blocks_of(sw, [d.describe()["percentiles_ns"][k] for k in dependence.PERCENTILES])
    q = dependence.quantile_intervals(d, blocks)["p50"]
    assert (lo, hi) == (None, None) and "too short" in q["withheld"]


def test_welch_on_runs_needs_the_runs_spread():
    """The findings' run-level test (station/analysis/run_level.py) against scipy's Welch test."""
    from station.analysis.run_level import run_level, welch_differs

    rng = np.random.default_rng(7)
    for _ in range(50):
        a, b = rng.normal(0, 50, 3), rng.normal(rng.choice([0, 200]), 50, 4)
        ours = welch_differs(run_level(a), run_level(b))[0]
        theirs = stats.ttest_ind(a, b, equal_var=False).pvalue < 0.05
        assert ours == theirs


def test_chunks_stay_deterministic_whatever_order_they_are_asked_in():
    a, b = _session("order"), _session("order")
    forward = [a.chunk(i, True).sw for i in range(6)]
    backward = [b.chunk(i, True).sw for i in reversed(range(6))][::-1]
    assert all(np.array_equal(x, y) for x, y in zip(forward, backward, strict=True))
    assert len(forward[0]) == CHUNK_EVENTS


def test_the_shift_interval_holds_the_runs_own_difference_on_dependent_events():
    """The HW−SW shift of a run, from a scope whose acquisitions (50 pulses each, irregular dead time
    between them) are spread over a 10 s run of the twin with its time structure. Truth: the run's
    own mean of fall − rise − t_SW over every event, from the twin's logged edges. The interval must
    be stated (never withheld: the scope's subset and the records share the run's phases) and hold in
    ≥ 15 of 20 runs (a right 95 % interval fails that with probability binom.cdf(14, 20, 0.95) = 3e-4)."""
    from station.kinds.module import correlation

    held = 0
    for k in range(20):
        session = ModuleSession(PRESET.interfaces["lpt"], PRESET.calibration_samples, PERIOD_NS, True,
                                k * 12 * 10**9, f"shift-{k}", phases=PRESET.load_phases, drift_seed=3)
        chunks = _chunks(session, 100)
        sw = np.concatenate([c.sw for c in chunks])
        hw = np.concatenate([c.fall - c.rise for c in chunks]).astype(np.float64)
        truth = float(np.mean(hw - sw))
        starts = np.cumsum(np.random.default_rng(k).integers(60, 800, sw.size // 60))
        starts = starts[starts < sw.size - 50]
        acquisition = np.repeat(np.arange(starts.size), 50)
        caught = (starts[:, None] + np.arange(50)[None, :]).ravel()
        shift = correlation.shift(sw, hw[caught], acquisition)
        lo, hi = shift["ci95_ns"]
        held += lo <= truth <= hi
    assert held >= 15, held


def _clustered(seed: int, n: int = 200_000, q: float = 5e-5, run: int = 8):
    """Latency N(1000, 10) ns per event; a disturbance starts at an event with probability q and delays
    it and the run − 1 after it by one Exp(500 ns) draw: exceedances come `run` at a time."""
    rng = np.random.default_rng(seed)
    x = rng.normal(1000.0, 10.0, n)
    starts = np.flatnonzero(rng.random(n) < q)
    delay = rng.exponential(500.0, starts.size)
    for s, d in zip(starts, delay, strict=True):
        x[s:s + run] += d
    return x


def test_a_deadline_probability_counts_clustered_exceedances_as_fewer_chances():
    """The probability of exceeding a deadline when exceedances come 8 in a row (one disturbance, as an
    SMI or a load's burst): truth is the injector's, P = (1 − (1 − q)^8)·P(N + Exp > d). The interval
    over the effective events must hold it in ≥ 34 of 40 seeded samples (40 here; an interval of exactly
    95 % would fail that with probability binom.cdf(33, 40, 0.95) = 0.003); the interval over every
    event, as if independent, holds far less (23 here) — the check that the data carry the clustering
    the test is about."""
    from station.analysis import worst_case

    deadline, q = 1500.0, 5e-5
    sigma, scale = 10.0, 500.0
    beyond = np.exp(-(deadline - 1000.0) / scale + sigma**2 / (2 * scale**2))  # P(N(1000, σ) + Exp > d)
    truth = (1 - (1 - q) ** 8) * beyond
    held = held_iid = 0
    for k in range(40):
        x = _clustered(k)
        block = worst_case.worst_case(x, deadline_ns=deadline)["deadline"]
        held += block["ci_low"] <= truth <= block["ci_high"]
        lo, hi = worst_case.binomial_interval(block["observed_exceedances"], x.size)
        held_iid += lo <= truth <= hi
        assert block["effective_n"] < 0.5 * x.size, block  # 8 to a cluster: far fewer chances than events
    assert held >= 34 and held_iid <= 30, (held, held_iid)


def test_the_distribution_free_bound_counts_clustered_maxima_as_fewer_chances():
    """With the largest values 8 to a cluster, the bound's probability is taken over n·θ events; truth:
    the injector's P(X > max) for the sample's own maximum. It must hold (P(X > max) ≤ p) in ≥ 34 of
    40 seeded samples (37 here); the bound over n events, as if independent, holds far less (13)."""
    from station.analysis import worst_case

    q, sigma, scale = 5e-5, 10.0, 500.0
    held = held_iid = 0
    for k in range(40):
        x = _clustered(100 + k)
        bound = worst_case.distribution_free_bound(worst_case._ArrayInput.of(x))
        tail = (1 - (1 - q) ** 8) * np.exp(-(x.max() - 1000.0) / scale + sigma**2 / (2 * scale**2))
        held += tail <= bound["exceedance"]
        held_iid += tail <= -np.expm1(np.log1p(-0.95) / x.size)
        assert bound["effective_n"] < 0.5 * x.size
    assert held >= 34 and held_iid <= 30, (held, held_iid)


def test_a_shift_from_fewer_than_ten_acquisitions_states_no_interval():
    """Six acquisitions of 50 pulses from a loaded 3 s run: the pulses of one acquisition move together,
    and the independent-pulse SE held the run's shift in about half such runs (review, 16/30); the
    interval is withheld and says why, while the estimate stays."""
    from station.kinds.module import correlation

    session = ModuleSession(PRESET.interfaces["lpt"], PRESET.calibration_samples, PERIOD_NS, True, 0, "few",
                            phases=PRESET.load_phases, drift_seed=3)
    chunks = _chunks(session, 30)
    sw = np.concatenate([c.sw for c in chunks])
    hw = np.concatenate([c.fall - c.rise for c in chunks]).astype(np.float64)
    starts = np.linspace(0, sw.size - 50, 6).astype(int)
    caught = (starts[:, None] + np.arange(50)[None, :]).ravel()
    shift = correlation.shift(sw, hw[caught], np.repeat(np.arange(6), 50))
    assert shift["se_ns"] is None and shift["ci95_ns"] is None and "6 scope acquisitions" in shift["ci_withheld"]
    assert abs(shift["hw_minus_sw_mean_ns"] - float(np.mean(hw - sw))) < 500


def test_runs_without_any_spread_are_not_taken_as_certain():
    """Every run gave the same median on each side (whole-ns medians of a quiet bench): no test, not
    p = 0 (review)."""
    from station.analysis.run_level import welch, welch_differs

    got = welch([1000.0, 1000.0], [1000.5, 1000.5])
    assert got["p_value"] is None and got["no_spread"] and got["diff_ns"] == 0.5
    assert welch_differs((1000.0, 0.0, 2), (1000.5, 0.0, 2))[0] is False
    spread = welch([1000.0, 1002.0, 998.0], [1010.0, 1012.0, 1008.0])
    assert spread["p_value"] < 0.05 and spread["ci95_ns"][0] > 0


def test_no_run_estimate_on_a_side_is_no_test_and_no_warning():
    from station.analysis.run_level import welch

    got = welch([], [1.0, 2.0])
    assert got["p_value"] is None and got["runs"] == [0, 2] and got["diff_ns"] is None


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(1, 600), st.integers(0, 2**32 - 1),
       st.sampled_from(["ints", "spread", "ties", "infinite", "nan"]))
def test_the_blocks_median_and_p99_are_numpys_percentiles_to_the_bit(m, size, seed, kind):
    """FineBlocks' per-block median and p99 (a sort and numpy's interpolation written out, where
    np.percentile partitions): the same values, bit for bit, on whole-ns latencies, spread floats,
    long ties, infinities and NaN, over every block size up to the default's 500 and past it (no
    −0: tied with +0, the sort and the partition may put either first)."""
    rng = np.random.default_rng(seed)
    rows = {"ints": lambda: rng.integers(0, 10**6, (m, size)).astype(np.float64),
            "spread": lambda: rng.lognormal(8, 2, (m, size)),
            "ties": lambda: rng.integers(0, 3, (m, size)).astype(np.float64) * 1e3,
            "infinite": lambda: np.where(rng.random((m, size)) < 0.05, np.inf, rng.random((m, size))),
            "nan": lambda: np.where(rng.random((m, size)) < 0.05, np.nan, rng.random((m, size)))}[kind]()
    ours = dependence.rows_median_p99(rows)
    with np.errstate(invalid="ignore"):  # infinities: numpy's NaN, and its warning
        theirs = np.percentile(rows, [50, 99], axis=1)
    assert ours.shape == theirs.shape
    assert ours.tobytes() == theirs.tobytes()
