"""The scope's own pulse-width measurement (capture: measurement), per dialect, over real TCP
against the simulated instruments: what a user with an old scope and a slow bus can always do.
Its statistics must agree with the host's extraction from the same record (transferred after
the measurement) within one sample interval, and both with the edge source's truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from instruments.pulses import extract_pulses
from instruments.scope import WidthMeasurement, open_scope
from instruments.sim import SimScopeServer, run_in_thread
from tests.scope_helpers import pulse_source, settings

DIALECTS = ("tektronix_tds", "tektronix_mso", "keysight_infiniivision")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_scopes_measurement_agrees_with_host_extraction_of_the_same_pulses(dialect):
    source = pulse_source()
    with run_in_thread(SimScopeServer(source, dialect=dialect, seed=7)) as server:
        scope = open_scope(server.resource, dialect=dialect)
        try:
            scope.reset()
            applied = scope.configure(settings(record_length=60_000 if dialect != "tektronix_mso" else 50_000,
                                               measurement=True))
            dt = applied.sample_interval_s
            disagreement = []
            for _ in range(4):
                measured = scope.acquire_measurement()
                record = scope.fetch()
                assert record.index == measured.index, "the record and the measurement name one acquisition"
                host = extract_pulses(record, threshold=1.65).width_s
                assert len(host) >= 5
                if dialect == "tektronix_mso":  # every pulse of the record, with its statistics
                    assert measured.scope == "all" and measured.count == len(host)
                    expected = (host.mean(), host.min(), host.max())
                else:  # the record's first pulse
                    assert measured.scope == "first" and measured.count == 1
                    expected = (host[0],) * 3
                got = (measured.mean_s, measured.min_s, measured.max_s)
                assert np.all(np.abs(np.subtract(got, expected)) < dt), (got, expected, dt)
                disagreement.append(np.abs(np.subtract(got, expected)).max())
                # and the truth: every width the scope can report is one of the source's
                info = server.acquisitions[-1]
                k = np.arange(int(info.first_sample_ns // source.period_ns) - 1,
                              int((info.first_sample_ns + info.record_length * info.dt_ns) // source.period_ns) + 1)
                truth = source.width_ns(k) * 1e-9
                assert np.min(np.abs(truth - measured.max_s)) < dt
            # the scope measures its own record (its levels, its reference, its interpolation), the
            # host its transfer of it with its own threshold: they differ, by less than a sample
            assert max(disagreement) > 0, disagreement
        finally:
            scope.close()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_complete_pulse_is_no_measurement_not_a_number(dialect):
    """A record too short to hold a whole pulse: the scope answers 9.9E37, which is no width."""
    source = pulse_source()
    with run_in_thread(SimScopeServer(source, dialect=dialect, seed=7)) as server:
        scope = open_scope(server.resource, dialect=dialect)
        try:
            scope.reset()
            # 1 µs records triggered on the rise, 0.9 µs of it after the trigger: the pulses last
            # 1-20 µs and come every 100 µs, so no record holds a whole one
            scope.configure(settings(time_per_div=100e-9, record_length=1000, measurement=True))
            measurements, hosts = [], []
            for _ in range(3):
                measurements.append(scope.acquire_measurement())
                hosts.append(len(extract_pulses(scope.fetch(), threshold=1.65)))
        finally:
            scope.close()
    assert hosts == [0, 0, 0]
    assert [m.count for m in measurements] == [0, 0, 0], measurements
    assert all(math.isnan(v) for m in measurements for v in (m.mean_s, m.min_s, m.max_s))


def test_a_single_value_of_9_9e37_or_garbage_is_no_measurement():
    assert WidthMeasurement.single(9.9e37, 3).count == 0
    assert WidthMeasurement.single(float("inf"), 3).count == 0
    assert WidthMeasurement.single(-1e-6, 3).count == 0
    m = WidthMeasurement.single(4.2e-6, 3)
    assert (m.count, m.mean_s, m.min_s, m.max_s, m.index) == (1, 4.2e-6, 4.2e-6, 4.2e-6, 3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_measurement_campaign_keeps_the_scopes_numbers_beside_the_hosts(dialect, tmp_path):
    """capture: measurement in a module run: no waveform crosses the bus but every fourth
    acquisition's (the cross-check); the manifest and the report hold the scope's statistics,
    its capture ratio and dead time, and the cross-check agrees within one sample interval."""
    import json

    import pandas as pd
    import yaml

    from tests.conftest import REPO, run_station

    cfg = yaml.safe_load((REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text())
    cfg["bench"]["scope"] |= {"dialect": dialect, "capture": "measurement", "cross_check_every": 4,
                              "time_per_div": "50us", "record_length": 50_000}
    cfg["matrix"] |= {"interfaces": ["lpt"], "variants": ["inb"], "samples": 10_000, "pulses": 100}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    (run,) = report["runs"]
    rows = pd.read_csv(out / "runs" / run["id"] / "scope_measurements.csv")
    m = run["scope_measurement"]
    assert m["acquisitions"] == len(rows) and m["pulses"] == rows["count"].sum() >= 100
    assert m["scope_measures"] == ("all" if dialect == "tektronix_mso" else "first")
    checked = rows.dropna(subset=["host_count"])
    assert m["cross_checked"] == len(checked) >= 2 and set(checked["acquisition"] % 4) == {0}
    # the same pulses, measured twice: within one sample interval (the record's 10 divisions)
    dt = 10 * 50e-6 / 50_000
    valid = checked[checked["count"] > 0]
    assert (valid["count"] == valid["host_count"]).all()
    for scope_col, host_col in (("mean_s", "host_mean_s"), ("min_s", "host_min_s"), ("max_s", "host_max_s")):
        assert (valid[scope_col] - valid[host_col]).abs().max() < dt
    assert m["largest_difference_s"] < dt
    # the twin's truth: each measured width lies within the board's true widths
    truth = pd.read_parquet(out / "runs" / run["id"] / "twin-truth.parquet")
    assert truth["hw_ns"].min() - dt * 1e9 <= 1e9 * m["min_s"] <= 1e9 * m["max_s"] <= truth["hw_ns"].max() + dt * 1e9
    cap = run["capture"]
    assert cap["strategy"] == "measurement" and cap["pulses"] == m["pulses"] and cap["capture_ratio"] > 0
    md = (out / "report.md").read_text()
    assert "The scope's own pulse-width measurement" in md and "Scope capture" in md
