"""Stray IRQs and drifting clocks (issue 27): a foreign interrupt on the module's line makes the
module write a NOT_OURS record whose latency is measured from an unrelated write, and it takes a
sequence number; the target's clock runs 150 ppm off the host's and is slewed twice (±400 ppm for
2 s, NTP-style) while the scope's timebase runs off too and its trigger places each record 20 ns
off (rms). On such a twin (its truth logs every stray
it made) the strays must stay out of t_SW — the statistics are the truth's over the module's own
events, exactly — be counted as the truth counts them, leave the event pairing right (seq is no
longer the event number, arm times are on another clock than the events), and t_rw's intervals
must hold the injected t_rw."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from station.kinds.module.data import load_run
from station.kinds.module.pairing import EventNumbers, pair_run
from tests.conftest import run_station
from tests.pulse_truth import pairs_right, pulse_events

STRAY_FRACTION = 1e-3
CAMPAIGN = """name: strays
bench:
  target: {kind: twin, family: rtai}
  twin:
    seed: 27
    ground_truth: true
    overrides:
      lpt: {stray_fraction: 1.0e-3}
      pcie: {stray_fraction: 1.0e-3}
    clocks:
      target_drift_ppm: 150
      target_slews: [{at: 6s, ppm: 400, duration: 2s}, {at: 14s, ppm: -400, duration: 2s}]
      scope_timebase_ppm: -25
      scope_trigger_error_ns: 20   # forty times the default: time zero 20 ns off, rms
  scope: {kind: twin, channel: 1, volts_per_div: 1V, position_div: -3, time_per_div: 1ms,
          record_length: 120000, trigger_level: 1.5V, threshold: auto, bus: loopback}
matrix:
  interfaces: [lpt, pcie]
  variants: [inb, no-inb]
  loads: [none]
  period: 100us
  samples: 40000
  pulses: 3000
  max_duration: 2min
loads:
  none: []
"""


@pytest.fixture(scope="module")
def strays_campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("strays")
    (root / "strays.yaml").write_text(CAMPAIGN)
    res = run_station("run", str(root / "strays.yaml"), "--out", str(root / "out"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    return root / "out", json.loads((root / "out" / "report.json").read_text())


def _truth(run_dir) -> pd.DataFrame:
    """The twin's truth for the records this run holds: own events and strays."""
    data = load_run(run_dir)
    t = data.truth.set_index("seq")
    return t.loc[t.index.intersection(data.sw["seq"].to_numpy())]


def test_stray_records_are_counted_and_kept_out_of_t_sw(strays_campaign):
    out, report = strays_campaign
    for run in report["runs"]:
        run_dir = out / "runs" / run["id"]
        truth = _truth(run_dir)
        own = truth[~truth["stray"]]["sw_ns"].to_numpy(np.float64)
        strays = int(truth["stray"].sum())
        # the truth made strays at about the rate asked (Poisson: within 6 sigma), so the test tests
        expected = STRAY_FRACTION * len(own)
        assert abs(strays - expected) <= 6 * np.sqrt(expected), (strays, expected)
        assert run["strays"]["count"] == strays
        assert run["truth"]["strays_injected"] == strays
        assert run["strays"]["share"] == pytest.approx(strays / len(truth))
        sw = run["sw"]
        assert sw["count"] == len(own)
        assert (sw["min_ns"], sw["max_ns"]) == (own.min(), own.max())
        assert sw["mean_ns"] == pytest.approx(own.mean(), rel=1e-12)
        assert sw["std_ns"] == pytest.approx(own.std(ddof=1), rel=1e-9)
        assert sw["percentiles_ns"]["p50"] == np.percentile(own, 50)
        assert sw["percentiles_ns"]["p99"] == pytest.approx(np.percentile(own, 99), rel=1e-12)
        # said in the notes and in the runs table
        assert any(f"Run {run['id']}: {strays} stray IRQs" in n for n in report["notes"]), report["notes"]
    assert "Stray IRQs" in (out / "report.md").read_text()


def test_pairing_counts_the_modules_events_not_its_records(strays_campaign):
    out, report = strays_campaign
    for run in report["runs"]:
        data = load_run(out / "runs" / run["id"])
        truth = data.truth.set_index("seq")
        pairing = pair_run(data.sw, data.hw, data.arrivals, int(data.period_ns))
        pairs = pairing.pairs
        assert len(pairs) >= 0.9 * len(data.hw), (len(pairs), len(data.hw))
        t = truth.loc[pairs["seq"].to_numpy()]
        assert not t["stray"].any(), "a stray record paired: it has no pulse"
        # every pulse paired to its event's record, by identity: the event behind each pulse found
        # from the twin's truth alone (its rises on the scope's timebase, through both slews)
        events = truth[~truth["stray"]].reset_index().set_index("event").sort_index()
        behind = pulse_events(data.hw, events, int(data.period_ns), 2 * 83.4, 1.0)
        right = pairs_right(pairs, data.hw, events["seq"].to_numpy()[behind])
        assert right.all(), (int((~right).sum()), len(pairs))
        assert run["pairing"]["pulses_paired"] == len(pairs)


# A 95 % interval misses its truth one time in twenty by design: four of them in one test would
# fail about one CI run in six (CI r1 of this session: PCIe paired [899.884, 901.690] for 899.882,
# 2.0 standard errors off). The test checks the estimator is unbiased and its standard error right
# at a stated risk instead: each estimate within 3.29 of its standard errors (two-sided 99.9 %) of
# the injected t_rw, so the test fails by chance with probability ≤ 4 × 0.1 %.
Z_TEST = 3.29


def test_t_rw_estimates_hold_the_injected_t_rw(strays_campaign):
    _, report = strays_campaign
    estimates = report["comparisons"]["t_rw"]
    assert len(estimates) == 2
    for c in estimates:
        for est_key, ci_key in (("estimate_ns", "ci95_ns"), ("paired_estimate_ns", "paired_ci95_ns")):
            lo, hi = c[ci_key]
            se = (hi - lo) / 2 / 1.96  # the report's interval is the estimate ± 1.96 standard errors
            assert c[est_key] == pytest.approx((lo + hi) / 2, abs=1e-6 * se + 1e-9)
            assert abs(c[est_key] - c["truth_ns"]) <= Z_TEST * se, (c["interface"], est_key, c[est_key], se,
                                                                   c["truth_ns"])


def test_event_numbers_skip_the_strays():
    numbers = EventNumbers(np.array([3, 7, 8]))
    seq = np.array([0, 1, 2, 4, 5, 6, 9, 10])  # the module's own records
    events = numbers.to_event(seq)
    assert events.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert numbers.to_seq(events).tolist() == seq.tolist()


def test_an_imported_v1_stream_keeps_its_strays_apart(tmp_path):
    """A dump taken without the station: its NOT_OURS records are counted, its statistics are the
    module's own records' exactly."""
    from station import api
    from station.importers import ImportOptions
    from station.parsers import records

    rng = np.random.default_rng(27)
    n = 200_000
    lat = (3_000 + rng.gamma(4.0, 1_300.0, n)).astype(np.int64)
    stray = rng.random(n) < 1e-3
    lat[stray] = rng.integers(20_000, 99_000, int(stray.sum()))  # measured from an unrelated write
    seq = np.arange(n, dtype=np.uint64)
    flags = np.full(n, records.pack_flags(records.Interface.LPT, True))
    flags[stray] |= records.Flag.NOT_OURS
    dump = tmp_path / "lpt-inb.bin"
    dump.write_bytes(records.encode_v1(seq, seq * 100_000, lat, flags))
    out = tmp_path / "out"
    api.import_results([dump], out, ImportOptions(period_ns=100_000, load="none"))
    report = json.loads((out / "report.json").read_text())
    [run] = report["runs"]
    own = lat[~stray].astype(np.float64)
    assert run["strays"]["count"] == int(stray.sum()) > 0
    assert run["sw"]["count"] == len(own)
    assert (run["sw"]["min_ns"], run["sw"]["max_ns"], run["sw"]["mean_ns"]) == (own.min(), own.max(), own.mean())
    assert run["sw"]["percentiles_ns"]["p99.99"] == np.percentile(own, 99.99)
    assert any(f"{int(stray.sum())} stray IRQs" in note for note in report["notes"])
    assert "stray IRQs" in (out / "report.md").read_text()


MANY_STRAYS = CAMPAIGN.replace("name: strays", "name: many-strays").replace(
    "lpt: {stray_fraction: 1.0e-3}", "lpt: {stray_fraction: 0.5}").replace(
    "interfaces: [lpt, pcie]", "interfaces: [lpt]").replace("variants: [inb, no-inb]", "variants: [inb]").replace(
    "pulses: 3000", "pulses: 1500")


def test_the_capture_ratio_counts_the_modules_events_not_its_records(tmp_path):
    """Half as many foreign IRQs as events: each takes a sequence number but makes no pulse, so a
    capture ratio over sequence numbers would be a third low. The events emitted in the capture
    window must be the module's own, as the twin made them (its truth's write times)."""
    from station.parsers.records import RECORD_SIZE

    (tmp_path / "c.yaml").write_text(MANY_STRAYS)
    res = run_station("run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    [run_dir] = (tmp_path / "out" / "runs").iterdir()
    cap = json.loads((run_dir / "manifest.json").read_text())["capture"]
    assert cap["events_from"] == "record stream"
    truth = pd.read_parquet(run_dir / "twin-truth.parquet", columns=["seq", "t_write_ns", "stray"])
    own = truth[~truth["stray"]].sort_values("seq")
    assert truth["stray"].sum() >= 0.4 * len(own)  # the twin made them, so the test tests
    emitted_s = np.diff(own["t_write_ns"].to_numpy()).mean() * 1e-9
    # the arrival log trails the twin by at most one 64 KiB read plus its 20 ms of held records
    # (see test_segmented_capture); strays only make that fewer events
    trail = (1 << 16) // RECORD_SIZE + round(20e-3 / emitted_s) + 1
    expected = cap["window_s"] / emitted_s
    assert expected > 10 * trail, (expected, trail)  # long enough that a third off cannot hide in it
    assert abs(cap["events_emitted"] - expected) <= trail + 1, (cap["events_emitted"], expected, trail)


def test_the_result_store_and_its_documented_query_leave_strays_out(strays_campaign):
    """A lab reads the store without the station: the `sw_own` view, `RunData.own_sw` and the
    query docs/result-store.md gives must all hold exactly the module's own events (the truth's)."""
    import re

    from station import api
    from tests.conftest import REPO

    out, report = strays_campaign
    own = {}
    for run in report["runs"]:
        truth = _truth(out / "runs" / run["id"])
        own[run["id"]] = truth[~truth["stray"]]["sw_ns"].to_numpy(np.float64)
        assert truth["stray"].any()
        data = load_run(out / "runs" / run["id"])
        assert np.array_equal(np.sort(data.own_sw["latency_ns"].to_numpy(np.float64)), np.sort(own[run["id"]]))
    store = api.open_results([out])
    assert {"sw", "sw_own"} <= set(store.register())
    got = store.con.sql("SELECT run_id, count(*), max(latency_ns) FROM sw_own GROUP BY run_id").fetchall()
    assert {r: (n, m) for r, n, m in got} == {r: (len(v), v.max()) for r, v in own.items()}
    # the documented DuckDB query, on this campaign as its lab
    doc = (REPO / "docs" / "result-store.md").read_text()
    [sql] = [b for b in re.findall(r"```sql\n(.*?)```", doc, re.S) if "sw.parquet" in b]
    sql = sql.replace("lab/*/runs/*/sw.parquet", f"{out.parent}/*/runs/*/sw.parquet")
    rows = store.con.sql(sql).fetchall()
    by_interface = {}
    for run in report["runs"]:
        by_interface.setdefault(run["interface"], []).append(own[run["id"]])
    assert {r[1]: (r[3], r[5]) for r in rows} == {
        i: (sum(len(v) for v in vs), max(v.max() for v in vs)) for i, vs in by_interface.items()}
