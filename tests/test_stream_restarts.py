"""A record stream whose sequence numbers restart (issue 47): a module reloaded mid-run, a reader
that re-read its ring, streams concatenated by hand. Streamed live from a twin whose module numbers
its records from 0 again every RESTART numbers (its events go on: their truth keeps the event
numbers), the station must name each restart where the twin made it, lose nothing and join
nothing across it: the statistics are the truth's over every own event, the stored numbers are the
events' again, and the event pairing stays within one part. (Imported: tests/test_import.py.)"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.kinds.module.data import load_run
from station.parsers import records
from tests.conftest import run_station

RESTART = 15_000
SAMPLES = 40_000
CAMPAIGN = f"""name: restarts
bench:
  target: {{kind: twin, family: rtai}}
  twin:
    seed: 47
    ground_truth: true
    independent: true
    overrides:
      lpt: {{restart_every: {RESTART}}}
  scope: {{kind: twin, channel: 1, volts_per_div: 1V, position_div: -3, time_per_div: 1ms,
          record_length: 120000, trigger_level: 1.5V, threshold: auto, bus: loopback}}
matrix:
  interfaces: [lpt]
  variants: [inb]
  loads: [none]
  period: 100us
  samples: {SAMPLES}
  pulses: 3000
  max_duration: 2min
loads:
  none: []
"""
Z_TEST = 3.29  # two-sided 99.9 %: the t_rw check fails by chance with probability ≤ 0.2 % (two estimates)


@pytest.fixture(scope="module")
def restarted(tmp_path_factory):
    root = tmp_path_factory.mktemp("restarts")
    (root / "c.yaml").write_text(CAMPAIGN)
    res = run_station("run", str(root / "c.yaml"), "--out", str(root / "out"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    report = json.loads((root / "out" / "report.json").read_text())
    [run] = report["runs"]
    return root / "out" / "runs" / run["id"], run, report


def test_each_restart_is_named_where_the_twin_made_it_and_nothing_is_lost(restarted):
    run_dir, run, report = restarted
    truth = load_run(run_dir).truth
    stored = pd.read_parquet(run_dir / "sw.parquet")
    n = len(stored)
    # the twin restarted its numbering at every multiple of RESTART it wrote (no strays, no drops here)
    want = [{"record": k, "seq_before": RESTART - 1, "seq_after": 0} for k in range(RESTART, n, RESTART)]
    assert len(want) >= 2 and run["losses"]["restarts"] == want
    assert run["losses"]["sw_lost"] == 0 and run["status"] == "complete"
    assert any(f"restarted {len(want)} time(s) (at record {RESTART:,}, seq {RESTART - 1:,} → 0" in note
               for note in report["notes"]), report["notes"]
    # the stored numbers are the events' again (the twin's truth), the module's kept beside them
    assert stored["seq"].tolist() == list(range(n))
    assert stored["module_seq"].tolist() == [s % RESTART for s in range(n)]
    own = truth.set_index("seq").loc[stored["seq"].to_numpy()]
    assert (own["sw_ns"].to_numpy() == stored["latency_ns"].to_numpy()).all()
    # t_SW over every part: the truth's statistics, exactly
    sw = own["sw_ns"].to_numpy(np.float64)
    assert run["sw"]["count"] == n and (run["sw"]["min_ns"], run["sw"]["max_ns"]) == (sw.min(), sw.max())
    assert run["sw"]["mean_ns"] == pytest.approx(sw.mean(), rel=1e-12)


def test_the_pairing_stays_within_the_longest_part(restarted):
    """Pulses are paired only with the records of one part (the longest, the first of equals): the
    pulses it holds are the scope's share of that part's time, far from all of them; the t_rw
    estimates from those pairs hold the injected t_rw."""
    run_dir, run, report = restarted
    part = run["losses"]["paired_part"]
    n = len(pd.read_parquet(run_dir / "sw.parquet"))
    sizes = [min(RESTART, n - k) for k in range(0, n, RESTART)]
    assert part == {"part": int(np.argmax(sizes)), "records": max(sizes), "parts": len(sizes)}
    pulses = run["pairing"]["pulses"] if "pulses" in run["pairing"] else run["hw"]["count"]
    share = max(sizes) / n
    assert 0.5 * share * pulses <= run["pairing"]["pulses_paired"] <= 1.5 * share * pulses, (run["pairing"], share)
    for c in report["comparisons"]["t_rw"]:
        for est_key, ci_key in (("estimate_ns", "ci95_ns"), ("paired_estimate_ns", "paired_ci95_ns")):
            lo, hi = c[ci_key]
            se = (hi - lo) / 2 / 1.96
            assert abs(c[est_key] - c["truth_ns"]) <= Z_TEST * se, (est_key, c[est_key], se, c["truth_ns"])


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 50), st.lists(st.integers(1, 3), max_size=5)),
                      min_size=1, max_size=5),
       cuts=st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_the_live_count_and_the_seals_agree_however_the_stream_is_cut(parts, cuts):
    """Parts of consecutive numbers (some skipped: lost records) that start anew anywhere: fed to the
    live decoder in arbitrary pieces, its numbering, losses and restarts are the seal's (decode)."""
    seqs: list[int] = []
    for start, length, skips in parts:
        numbers = list(range(start, start + length))
        for k, skip in enumerate(skips):  # lose `skip` records after the k-th
            at = min(k + 1, len(numbers))
            numbers = numbers[:at] + [n + skip for n in numbers[at:]]
        seqs += numbers
    data = records.encode_v1(np.array(seqs, np.uint64), np.zeros(len(seqs)), np.full(len(seqs), 5000), 0)
    decoder, live, at, i = records.V1Decoder(), [], 0, 0
    while at < len(data):
        size = cuts[i % len(cuts)] * 7  # pieces that cut records anywhere
        decoder.feed(data[at:at + size])
        live += decoder.station_seq.tolist() if decoder.station_seq is not None else []
        decoder.station_seq = np.empty(0, np.int64)
        at, i = at + size, i + 1
    sealed = records.decode(data, "v1")
    assert live == sealed["seq"].tolist()
    assert np.all(np.diff(sealed["seq"].to_numpy()) > 0)
    backs = [k for k in range(1, len(seqs)) if seqs[k] <= seqs[k - 1]]
    assert [r for r, _, _ in decoder.losses.restarts] == backs
    assert ("module_seq" in sealed) == bool(backs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1 << 40), min_size=2, max_size=60), st.integers(1, 59))
def test_a_stored_stream_is_numbered_as_the_live_counter_numbers_it_in_any_chunks(seqs, cut):
    """records.renumbered (a stored stream, whole) and LossCounter.observe (live, in chunks) give
    every record the same station number, increasing through every restart."""
    seqs = np.asarray(seqs, np.int64)
    counter = records.LossCounter()
    live = np.concatenate([counter.observe(seqs[:cut]), counter.observe(seqs[cut:])])
    stored = records.renumbered(seqs)
    numbers = seqs if stored is None else stored[0]
    assert (live == numbers).all()
    assert (np.diff(numbers) > 0).all()
    assert (stored is None) == (not counter.restarts)
    if stored is not None:
        assert stored[1][-1] == len(counter.restarts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=40))
def test_renumbering_garbage_never_raises(seqs):
    records.renumbered(np.asarray(seqs, np.int64))
