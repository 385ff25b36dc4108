"""cyclictest.slices: a run as consecutive cyclictest invocations, one histogram each, so its
percentiles and its deadline get intervals that see the cycles' dependence
(station/analysis/slices.py). Real cyclictest outputs of the fixtures glued as a sliced run's
stdout; a seeded latency process with phases and carry-over, whose long-run percentiles are known
from its own parameters, for the intervals' coverage (the long study: benchmarks/bench_slice_coverage.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.analysis import slices
from station.analysis.histogram import Histogram
from station.kinds.cyclictest import analysis as ct
from station.kinds.cyclictest.on_target import SLICE_MARK
from station.parsers.cyclictest import CyclictestOutputError, parse_histogram
from station.twin.phased_process import PhasedProcess

FIXTURES = Path(__file__).parent / "fixtures" / "cyclictest" / "rt-tests-2.8"


def _sliced(parts: list[str]) -> str:
    return "".join(f"{SLICE_MARK} {i} of {len(parts)}\n{p}" for i, p in enumerate(parts, 1))


def test_a_sliced_runs_histograms_add_up_to_the_whole_run(tmp_path):
    """Three real histograms as three slices: per thread, every bucket's count, the cycles and the
    overflows are their sums, the minimum the least and the maximum the greatest of the slices'."""
    names = ("q-h100-b40-t2-a", "q-h100-b1-t2-a", "q-h100-b40-t2-a")
    texts = [(FIXTURES / name / "stdout.txt").read_text() for name in names]
    parsed = [parse_histogram(t) for t in texts]
    (tmp_path / "cyclictest.out").write_text(_sliced(texts))
    out = ct.read_outputs(tmp_path)
    assert len(out.slices) == 3 and out.json is None
    for i, t in enumerate(out.threads):
        parts = [p.threads[i] for p in parsed]
        want: dict[int, int] = {}
        for part in parts:
            for b, c in part.histogram.items():
                want[b] = want.get(b, 0) + c
        assert t.histogram == want
        assert t.cycles == sum(p.cycles for p in parts)
        assert t.overflows == sum(p.overflows for p in parts)
        assert t.min == min(p.min for p in parts) and t.max == max(p.max for p in parts)
    per_thread, unaligned = ct.slice_histograms(out)
    assert unaligned is None and [len(p) for p in per_thread] == [3] * len(out.threads)


def test_a_last_slice_cut_while_it_printed_is_left_out_and_said(tmp_path):
    """The run stopped while the last slice printed its histogram: the slices before it stand (their
    sum is the run), the cut one is named in the notes; a cut slice before the last is an error."""
    text = (FIXTURES / "q-h100-b40-t2-a" / "stdout.txt").read_text()
    cut = text[: text.index("# Max Latencies")] + "# Max Latenc"
    (tmp_path / "cyclictest.out").write_text(_sliced([text, text, cut]))
    out = ct.read_outputs(tmp_path)
    assert len(out.slices) == 2 and "slice 3 of 3 cannot be read" in out.problems[0]
    whole = parse_histogram(text)
    assert [t.cycles for t in out.threads] == [2 * t.cycles for t in whole.threads]
    (tmp_path / "cyclictest.out").write_text(_sliced([text, cut, text]))
    with pytest.raises(CyclictestOutputError, match="slice 2 of 3"):
        ct.read_outputs(tmp_path)


def test_slices_missing_a_threads_histogram_give_no_slice_interval_and_say_why(tmp_path):
    import dataclasses

    text = (FIXTURES / "q-h100-b40-t2-a" / "stdout.txt").read_text()
    (tmp_path / "cyclictest.out").write_text(_sliced([text, text]))
    out = ct.read_outputs(tmp_path)
    second = out.slices[1]
    hollow = dataclasses.replace(second, threads=(second.threads[0], dataclasses.replace(
        second.threads[1], has_histogram=False)))
    per_thread, why = ct.slice_histograms(dataclasses.replace(out, slices=(out.slices[0], hollow)))
    assert per_thread == [[], []] and "slice 2 of 2 has no histogram of thread(s) 1" in why


def test_a_slice_that_printed_nothing_is_no_slice_and_a_garbled_one_is_named(tmp_path):
    text = (FIXTURES / "q-h100-quote-json" / "stdout.txt").read_text()
    (tmp_path / "cyclictest.out").write_text(_sliced([text, text, ""]))  # stopped before the third printed
    assert len(ct.read_outputs(tmp_path).slices) == 2
    (tmp_path / "cyclictest.out").write_text(_sliced([text.replace("# Max Latencies", "# Max Latenc1es"), text]))
    with pytest.raises(CyclictestOutputError, match="slice 1 of 2"):
        ct.read_outputs(tmp_path)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=4))
def test_garbage_between_slice_marks_is_refused_never_a_crash(tmp_path_factory, parts):
    d = tmp_path_factory.mktemp("garbage")
    (d / "cyclictest.out").write_text(_sliced(parts))
    try:
        out = ct.read_outputs(d)
    except CyclictestOutputError:
        return
    assert out.slices  # whatever was accepted is a run of at least one slice


def _histograms(latency_us: np.ndarray, per_slice: int, range_us: int = 10_000) -> list[Histogram]:
    out = []
    for part in latency_us.reshape(-1, per_slice):
        k = np.floor(part).astype(np.int64)
        b, c = np.unique(np.minimum(k, range_us), return_counts=True)
        over = int(c[b == range_us].sum())
        keep = b < range_us
        out.append(Histogram(b[keep], c[keep], over, range_us=range_us))
    return out


RUNS = 60


def test_slice_intervals_hold_the_long_run_percentiles_where_the_independent_ones_do_not():
    """60 seeded runs of a process in phases (three levels cycling, durations jittered) with
    carry-over between cycles: the slices' 95 % intervals of p50 and p99 hold the process's long-run
    percentile (from its parameters) in 90-99 % of them; the histogram's own order-statistic
    interval, which takes the cycles as independent, holds it in fewer than 90 %. Risk: at a true 95 %
    coverage, fewer than 52 of 60 held has probability ~0.5 % per percentile."""
    process = PhasedProcess()
    truth = {key: process.quantile(p) for key, p in (("p50", 0.5), ("p99", 0.99))}
    held = {key: 0 for key in truth}
    held_iid = dict(held)
    rng = np.random.default_rng(46)
    for _ in range(RUNS):
        parts = _histograms(process.sample(rng, 20 * 4000), 4000)
        got = slices.percentile_intervals(parts)
        iid = slices.combine(parts).percentile_ci95_ns()
        for key, xi in truth.items():
            lo, hi = got[key]["ci95_ns"]
            held[key] += lo is not None and hi is not None and lo <= xi * 1000 <= hi
            lo, hi = iid[key]
            held_iid[key] += lo <= xi * 1000 <= hi
    for key in truth:
        assert 52 <= held[key] <= 60, (key, held[key])
        assert held_iid[key] < 54, (key, held_iid[key])  # the independent interval: below the 90 % goal


def test_too_few_slices_give_no_interval_and_say_so():
    process = PhasedProcess()
    parts = _histograms(process.sample(np.random.default_rng(1), 5 * 4000), 4000)
    got = slices.percentile_intervals(parts)
    assert got["p50"]["ci95_ns"] == [None, None] and "5 slices: too few" in got["p50"]["withheld"]
    deadline = slices.exceedance(parts, process.quantile(0.99) * 1000)
    assert deadline["effective_n"] == deadline["cycles"] and "taken as independent" in deadline["method"]


def test_the_deadline_interval_from_slices_holds_the_long_run_probability():
    """The probability of reaching a deadline at the process's long-run p99: the slices' interval
    holds it in 52-60 of 60 seeded runs (same risk as above); taking cycles as independent, fewer."""
    process = PhasedProcess()
    deadline_us = math.floor(process.quantile(0.99))  # a bucket edge: 'reaching' is ≥ its bucket
    truth = 1 - process.cdf(deadline_us)
    rng = np.random.default_rng(4646)
    held = held_iid = 0
    for _ in range(RUNS):
        parts = _histograms(process.sample(rng, 20 * 4000), 4000)
        got = slices.exceedance(parts, deadline_us * 1000)
        held += got["ci_low"] <= truth <= got["ci_high"]
        lo, hi = slices.binomial_interval(got["above"], got["cycles"])
        held_iid += lo <= truth <= hi
    assert 52 <= held <= 60, held
    assert held_iid < 54, held_iid
