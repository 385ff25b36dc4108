"""Statistics accumulated batch by batch give the whole sample's, however the batches are cut."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from station.analysis.distribution import Distribution
from station.analysis.streaming import WIDTH_QUANTUM_NS, ClusterMoments, DistributionBuilder, Moments
from station.kinds.module.correlation import cluster_mean_se
from station.kinds.module.pairing import StreamPairer, pair_run

latencies = hnp.arrays(np.int64, st.integers(1, 3000), elements=st.integers(0, 3_000_000))
widths = hnp.arrays(np.float64, st.integers(2, 3000),
                    elements=st.floats(100.0, 1e6, allow_nan=False, allow_infinity=False))


def _cuts(draw: st.DrawFn, n: int) -> list[int]:
    """Batch boundaries inside [0, n]: some empty batches, some of one value."""
    inner = sorted(draw(st.lists(st.integers(0, n), max_size=8)))
    return [0, *inner, n]


@st.composite
def batched(draw: st.DrawFn, arrays: st.SearchStrategy) -> tuple[np.ndarray, list[np.ndarray]]:
    a = draw(arrays)
    cuts = _cuts(draw, a.size)
    return a, [a[lo:hi] for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]


@settings(max_examples=150, deadline=None)
@given(batched(latencies))
def test_integer_distribution_in_batches_is_the_whole_samples(case: tuple[np.ndarray, list[np.ndarray]]) -> None:
    a, batches = case
    builder = DistributionBuilder()
    for b in batches:
        builder.add(b)
    d, whole = builder.result(), Distribution.of(a)
    assert np.array_equal(d.values, whole.values) and np.array_equal(d.counts, whole.counts)


@settings(max_examples=150, deadline=None)
@given(batched(widths), st.lists(st.floats(0, 100), min_size=1, max_size=5))
def test_binned_widths_keep_every_order_statistic_within_half_a_bin(case, q: list[float]) -> None:
    a, batches = case
    builder = DistributionBuilder(WIDTH_QUANTUM_NS)
    for b in batches:
        builder.add(b)
    d = builder.result()
    assert d.count == a.size
    # each sample moved by at most half a bin, so each order statistic (and their interpolation) too
    assert np.all(np.abs(d.samples() - np.sort(a)) <= WIDTH_QUANTUM_NS / 2 * (1 + 1e-9))
    assert np.all(np.abs(d.percentiles(q) - np.percentile(a, q)) <= WIDTH_QUANTUM_NS / 2 * (1 + 1e-9))


@settings(max_examples=150, deadline=None)
@given(batched(widths))
def test_moments_in_batches_are_numpys(case) -> None:
    a, batches = case
    m = Moments()
    for b in batches:
        m.add(b)
    assert m.count == a.size and m.min == a.min() and m.max == a.max()
    assert math.isclose(m.mean, float(np.mean(a)), rel_tol=1e-12)
    assert math.isclose(m.std(1), float(np.std(a, ddof=1)), rel_tol=1e-9, abs_tol=1e-9 * float(np.abs(a).max()))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_cluster_robust_error_with_clusters_cut_across_batches(data: st.DataObject) -> None:
    sizes = data.draw(st.lists(st.integers(1, 60), min_size=1, max_size=40))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    clusters = np.repeat(np.arange(len(sizes)) * 3, sizes)  # ids need not be consecutive
    values = rng.normal(5000, 300, clusters.size) + np.repeat(rng.normal(0, 100, len(sizes)), sizes)
    cuts = _cuts(data.draw, clusters.size)
    cm = ClusterMoments()
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        cm.add(clusters[lo:hi], values[lo:hi])
    mean, se = cm.mean_se()
    want_mean, want_se = cluster_mean_se(values, clusters)
    assert math.isclose(mean, want_mean, rel_tol=1e-12)
    assert math.isclose(se, want_se, rel_tol=1e-7)


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.int64, st.integers(2, 500), elements=st.integers(-(2**40), 2**40)))
def test_integer_std_is_the_exact_value_rounded(a: np.ndarray) -> None:
    n = a.size
    s1, s2 = sum(Fraction(int(v)) for v in a), sum(Fraction(int(v)) ** 2 for v in a)
    exact = math.sqrt((n * s2 - s1 * s1) / (n * (n - 1)))  # one rounding of the exact variance
    got = Distribution.of(a).std(1)
    assert got == exact
    assert math.isclose(got, float(np.std(a.astype(np.float64), ddof=1)), rel_tol=1e-9, abs_tol=1e-6)


def _twin_like_run(seed: int, n: int = 60_000, acquisitions: int = 120, per_acq: int = 30):
    """Records, pulses and arrivals with the truth of which event each pulse is (test_pairing's model)."""
    rng = np.random.default_rng(seed)
    period = 100_000
    lat = np.round(6000 + rng.gamma(9, 270, n)).astype(np.int64)
    host0 = 1_700_000_000.0
    ends = np.arange(199, n, 200)
    arrivals = pd.DataFrame({"host_s": host0 + ends * period * 1e-9 + rng.uniform(0.04, 0.09, len(ends)),
                             "last_seq": ends})
    firsts = np.sort(rng.choice(np.arange(2000, n - 100), acquisitions, replace=False))
    idx = (firsts[:, None] + np.arange(per_acq)[None, :]).ravel()
    acq = np.repeat(np.arange(acquisitions), per_acq)
    hw = pd.DataFrame({"acquisition": acq,
                       "start_s": (idx - np.repeat(firsts, per_acq)) * period * 1e-9
                       + rng.exponential(500e-9, idx.size),
                       "width_s": (lat[idx] + 900 + rng.normal(0, 20, idx.size)) * 1e-9,
                       "armed_host_s": host0 + np.repeat(firsts, per_acq) * period * 1e-9 - 0.001})
    return pd.DataFrame({"seq": np.arange(n), "latency_ns": lat}), hw, arrivals, idx, period


def test_stream_pairing_in_small_batches_pairs_exactly_the_injected_events() -> None:
    sw, hw, arrivals, truth_seq, period = _twin_like_run(5)
    whole = pair_run(sw, hw, arrivals, period)
    pairer = StreamPairer(arrivals, period)
    sw_batches = ((sw["seq"].to_numpy()[i:i + 4096], sw["latency_ns"].to_numpy()[i:i + 4096])
                  for i in range(0, len(sw), 4096))
    # 7 pulses per batch: every acquisition is cut across batches
    hw_batches = ({c: hw[c].to_numpy()[i:i + 7] for c in hw} for i in range(0, len(hw), 7))
    streamed = pd.concat(list(pairer.pairs(sw_batches, hw_batches)), ignore_index=True)
    assert pairer.acquisitions == pairer.acquisitions_paired == 120
    assert np.array_equal(streamed["seq"].to_numpy(), truth_seq)
    assert np.array_equal(whole.pairs["seq"].to_numpy(), truth_seq)
    assert np.allclose(streamed["diff_ns"].mean(), 900, atol=5)


def test_the_verdict_from_the_kept_candidates_is_the_verdict_from_every_pair() -> None:
    """A run read in batches keeps only the paired events that can be outliers (t_SW or t_HW above
    its threshold); with the median and bulk of all pairs, the verdict must be the same."""
    from station.kinds.module.correlation import PAIRED_OUTLIER_MADS, bulk
    from station.kinds.module.outliers import outlier_verdict, outlier_verdict_of_candidates, verdict_thresholds

    rng = np.random.default_rng(11)
    n = 200_000
    sw = np.round(6000 + rng.gamma(9, 270, n)).astype(np.int64)
    hw = sw + 900 + rng.normal(0, 20, n)
    late_sw = rng.choice(n, 40, replace=False)  # software-side: a delay before the write
    sw[late_sw] += 30_000
    late_hw = rng.choice(n, 25, replace=False)  # hardware-side: a stretched pulse
    hw[late_hw] += 30_000
    seen = rng.random(n) < 0.4
    pairs = pd.DataFrame({"sw_ns": sw[seen].astype(np.float64), "hw_ns": hw[seen]})
    pairs["diff_ns"] = pairs["hw_ns"] - pairs["sw_ns"]
    full = outlier_verdict(sw, hw[seen], pairs)
    sw_thr, hw_thr = verdict_thresholds(sw, hw[seen])
    kept = pairs[(pairs["sw_ns"] > sw_thr) | (pairs["hw_ns"] > hw_thr)]
    assert len(kept) < len(pairs) / 100
    diff = pairs["diff_ns"].to_numpy()
    median = float(np.median(diff))
    # correlation.bulk's rule, applied to the kept events with the whole run's median and MAD
    sigma = 1.4826 * float(np.median(np.abs(diff - median)))
    in_bulk = np.abs(kept["diff_ns"].to_numpy() - median) <= PAIRED_OUTLIER_MADS * sigma
    assert np.array_equal(in_bulk, bulk(diff, median)[kept.index.to_numpy()])
    from_candidates = outlier_verdict_of_candidates(sw, hw[seen], kept, median, in_bulk, len(pairs))
    assert from_candidates == full
    assert full["verdict"] == "both" and full["sw_only"] > 5 and full["hw_only"] > 5


def test_pairing_a_sparse_capture_keeps_the_window_of_records_small(monkeypatch) -> None:
    """A scope that catches few events spreads a batch of pulses over most of the run: the pairer
    pairs it in groups of at most SPAN_EVENTS events, so the records it holds stay that many."""
    from station.kinds.module import pairing

    sw, hw, arrivals, truth_seq, period = _twin_like_run(8)
    monkeypatch.setattr(pairing, "SPAN_EVENTS", 4000)
    held = []
    forget = pairing._SeqWindow._forget_below

    def spy(self, lo):  # noqa: ANN001 - the window, as it reads on
        forget(self, lo)
        held.append(self._len)

    monkeypatch.setattr(pairing._SeqWindow, "_forget_below", spy)
    pairer = StreamPairer(arrivals, period)
    sw_batches = ((sw["seq"].to_numpy()[i:i + 1000], sw["latency_ns"].to_numpy()[i:i + 1000])
                  for i in range(0, len(sw), 1000))
    streamed = pd.concat(list(pairer.pairs(sw_batches, [{c: hw[c].to_numpy() for c in hw}])), ignore_index=True)
    assert np.array_equal(streamed["seq"].to_numpy(), truth_seq)
    # a group's span, the search margins (2 × 3000 each side) and one batch of records
    assert max(held) <= 4000 + 4 * 3000 + 30 + 2 * 1000, max(held)


def test_board_widths_above_a_threshold_below_the_kept_tail_are_read_again(tmp_path) -> None:
    """The cross-interface criterion's board maximum among late events: from the kept tail when it
    reaches that low, else from the run's records read again; both give numpy's answer."""
    from types import SimpleNamespace

    from station.analysis.worst_case import TailSample
    from station.kinds.module.analysis import _board_max_above
    from station.parsers import records
    from station.store.run_store import write_parquet

    rng = np.random.default_rng(3)
    n = 50_000
    lat = np.round(6000 + rng.gamma(9, 270, n)).astype(np.int64)
    board = np.round(lat * 0.9 + rng.normal(0, 30, n)).astype(np.uint32)
    flags = np.where(rng.random(n) < 0.7, int(records.Flag.HW_WIDTH), 0).astype(np.uint16)
    (tmp_path / "manifest.json").write_text('{"run_id": "pcie-inb-r0"}')
    write_parquet(pd.DataFrame({"seq": np.arange(n, dtype=np.uint64), "latency_ns": lat, "flags": flags,
                                "hw_width_ns": board}), tmp_path / "sw.parquet", identity={})
    tail = TailSample.of(lat, cap=500)
    has = (flags & int(records.Flag.HW_WIDTH)) != 0
    run = SimpleNamespace(dir=tmp_path, sw=Distribution.of(lat), tail=tail,
                          tail_board_ns=np.where(has[tail.positions], board[tail.positions], np.nan))
    for threshold in (float(np.sort(lat)[-100]), float(np.median(lat))):  # inside the tail, then below it
        want = float(board[has & (lat > threshold)].max())
        assert _board_max_above([run], threshold) == want


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 1200), st.integers(0, 39), st.integers(0, 2**32 - 1))
def test_a_sealed_runs_records_read_from_its_stream_in_batches_are_the_sealed_tables(n, rows, torn, seed) -> None:
    """iter_table reads a sealed run's records from sw.raw (mapped a batch at a time, fields as
    views) when it holds the records sw.parquet was decoded from: every batch size gives the same
    columns, values and dtypes as the Parquet file, a torn last record left out as the seal did."""
    import tempfile

    from station.kinds.module.data import iter_table
    from station.parsers import records
    from station.store.run_store import write_parquet

    rng = np.random.default_rng(seed)
    seq = np.arange(n, dtype=np.uint64)
    raw = records.encode_v1(seq, np.cumsum(rng.integers(90_000, 110_000, n)), rng.integers(1, 10**6, n),
                            rng.integers(0, 2**16, n).astype(np.uint16), rng.integers(0, 2**32, n, dtype=np.uint64))
    columns = ("seq", "latency_ns", "flags", "hw_width_ns", "t_write_ns")
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "sw.raw").write_bytes(raw + bytes(torn))
        sealed = records.decode(raw, "v1")
        write_parquet(sealed, run / "sw.parquet", identity={})
        batches = list(iter_table(run, "sw", columns, rows=rows))
        assert all(len(b["seq"]) <= rows for b in batches)
        for c in columns:
            got = np.concatenate([b[c] for b in batches])
            want = pq.read_table(run / "sw.parquet", columns=[c]).column(c).to_numpy()
            assert got.dtype == want.dtype and np.array_equal(got, want), c
        del batches  # the mappings go with the views


def _coarse_run(seed: int, widths_of: str, n: int = 30_000, acquisitions: int = 10, per_acq: int = 50):
    """A GPIB-like run: records with t_SW ~ N(8 µs, 400 ns), ten acquisitions of 50 consecutive events
    whose widths are the events' t_SW + 2 µs rounded to a 333 ns sample grid (15 000 points over 5 ms:
    the seed's TDS 460A) — or the widths of another signal on that grid: a steady 10 µs pulse, another
    target's latencies, or anything from 6 to 14 µs."""
    rng = np.random.default_rng(seed)
    period = 100_000
    lat = np.round(8000 + rng.normal(0, 400, n)).astype(np.int64)
    host0 = 1_700_000_000.0
    ends = np.arange(224, n, 225)
    arrivals = pd.DataFrame({"host_s": host0 + ends * period * 1e-9 + rng.uniform(0.01, 0.03, len(ends)),
                             "last_seq": ends})
    firsts = 2000 + np.arange(acquisitions) * 2500
    idx = (firsts[:, None] + np.arange(per_acq)[None, :]).ravel()
    step = 5e-3 / 15_000 * 1e9
    true = {"ours": lat[idx] + 2000.0, "steady": 10_000 + rng.normal(0, 5, idx.size),
            "another target": 10_000 + rng.normal(0, 400, idx.size), "anything": rng.uniform(6000, 14000, idx.size)}
    hw = {"acquisition": np.repeat(np.arange(acquisitions), per_acq),
          "start_s": (idx - np.repeat(firsts, per_acq)) * period * 1e-9,
          "width_s": np.round(true[widths_of] / step) * step * 1e-9,
          "armed_host_s": host0 + np.repeat(firsts, per_acq) * period * 1e-9 - 0.001}
    return lat, hw, arrivals, period


def test_a_record_too_coarse_to_tell_events_apart_is_unpaired_not_a_scope_on_another_signal() -> None:
    """On the seed's GPIB scope (333 ns samples) the right alignment fits (its residuals within
    MAX_SPREAD_NS, beyond chance) but others fit almost as well: the acquisitions go unpaired, and the
    run must not be called unmatched ("the scope's pulses match none of the target's events": exit 4);
    the note says why. A scope on another signal on the same grid — steady, another target's, or
    anything — fits no alignment beyond chance: unmatched."""
    from station.kinds.module.run_analysis import _pairing_summary, _unmatched

    for widths_of in ("ours", "steady", "another target", "anything"):
        lat, hw, arrivals, period = _coarse_run(11, widths_of)
        pairer = StreamPairer(arrivals, period, share=None)
        list(pairer.pairs([(np.arange(len(lat)), lat)], [hw]))
        assert pairer.pairable == 10
        if widths_of == "ours":
            assert pairer.fitting >= 8 and pairer.acquisitions_paired < 3, (pairer.fitting, pairer.acquisitions_paired)
            assert not _unmatched(pairer)
            note = _pairing_summary(pairer, None)["note"] or ""
            assert "fit more than one alignment alike" in note, note
        else:
            assert pairer.fitting == pairer.acquisitions_paired == 0, widths_of
            assert _unmatched(pairer)


def test_a_run_cut_before_its_seal_is_decoded_once_per_analysis_and_paired_as_injected(tmp_path, monkeypatch):
    """A run the station was stopped in before its seal has only what streamed (sw.raw,
    hw_pulses.csv): one analysis decodes each once (RunFiles), however many passes read them, and
    its pairs are still the injected events."""
    from station.kinds.module import data as module_data
    from station.kinds.module.run_analysis import analyse_run
    from station.parsers import records

    sw, hw, arrivals, truth_seq, period = _twin_like_run(11)
    run = tmp_path / "lpt-inb-none-r0"
    run.mkdir()
    n = len(sw)
    (run / "sw.raw").write_bytes(records.encode_v1(sw["seq"].to_numpy(), np.arange(n) * period,
                                                   sw["latency_ns"].to_numpy(), 0))
    hw.to_csv(run / "hw_pulses.csv", index=False)
    arrivals.to_csv(run / "sw_arrivals.csv", index=False)
    (run / "manifest.json").write_text(
        '{"run_id": "lpt-inb-none-r0", "status": "interrupted", "format": "v1", "period_ns": 100000,'
        ' "run": {"interface": "lpt", "variant": "inb", "load": "none", "repetition": 0}}')
    decoded = []
    decode_file, read_streamed = module_data.records.decode_file, module_data.sealed_or_streamed
    monkeypatch.setattr(module_data.records, "decode_file",
                        lambda path, fmt: decoded.append(path.name) or decode_file(path, fmt))
    monkeypatch.setattr(module_data, "sealed_or_streamed",
                        lambda d, table, *a, **k: decoded.append(table) or read_streamed(d, table, *a, **k))
    result = analyse_run(run)
    assert decoded == ["sw.raw", "hw"]  # each once, for the analysis's three passes and its pairing
    assert result.entry["sw"]["count"] == n and result.entry["hw"]["count"] == len(hw)
    pairing = result.entry["pairing"]
    # paired to the injected events: the scope's widths are t_SW + 900 ns + N(0, 20 ns)
    assert pairing["pulses_paired"] == len(hw) == len(truth_seq)
    assert abs(pairing["hw_minus_sw_paired_median_ns"] - 900) < 5
    assert pairing["hw_minus_sw_paired_std_ns"] < 30


def test_acquisitions_armed_after_the_last_arrival_are_not_held_as_one_group(monkeypatch) -> None:
    """A reader that stalls while the module and the scope go on leaves arm times past the last
    arrival: they all map to one stretch of the stream. The pairer still holds at most
    GROUP_ACQUISITIONS acquisitions at once (whatever the batches), and pairs the same in batches."""
    from station.kinds.module import pairing

    sw, hw, arrivals, _, period = _twin_like_run(8)
    arrivals = arrivals.iloc[: len(arrivals) // 4]  # the stream's arrivals stop a quarter of the way in
    monkeypatch.setattr(pairing, "GROUP_ACQUISITIONS", 16)
    held = []
    pair_acquisitions = StreamPairer._pair_acquisitions
    monkeypatch.setattr(StreamPairer, "_pair_acquisitions",
                        lambda self, a, win: held.append(len(a.ids)) or pair_acquisitions(self, a, win))
    pulses = {c: hw[c].to_numpy() for c in hw}
    runs = []
    for rows in (len(hw), 97):
        held.clear()
        pairer = StreamPairer(arrivals, period)
        batches = [{c: a[i:i + rows] for c, a in pulses.items()} for i in range(0, len(hw), rows)]
        sw_batches = [(sw["seq"].to_numpy(), sw["latency_ns"].to_numpy())]
        runs.append(pd.concat(list(pairer.pairs(iter(sw_batches), batches)), ignore_index=True))
        assert max(held) <= 16 and sum(held) == hw["acquisition"].nunique(), held
    pd.testing.assert_frame_equal(runs[0], runs[1])
