"""`station scope capture` end to end: the CLI as a user runs it (a subprocess) against the
simulated scopes over TCP, one row per pulse in CSV and Parquet, the sidecar, `station import`
and `station report` of the file; a scope that goes silent or away mid-capture; bad options.
The truth is the pulse source's own table (`source.width_ns(k)`) and the sim's acquisition log
and configured rise time, never a number from the station's code. --mode measurement: the
scope's own width measurement per acquisition against the source's pulses in each record.
Then rise_times itself on known ramps and on garbage (hypothesis), and the importer's reading
of capture files."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from instruments.rise_time import histogram_levels, record_levels, rise_times, rise_times_at
from instruments.scope import CodeScale, Frames, Waveform, WidthMeasurement
from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from station import api
from station.capture.scope_capture import capture_mode_of
from station.importers import ImportInputError, import_files
from tests.conftest import run_station, station_cmd
from tests.scope_helpers import pulse_source

RISE_S = 100e-9  # the sims' 10-90 % rise time: resolved at the fine setting, not at the coarse one
DIALECTS = ("tektronix_tds", "tektronix_mso", "keysight_infiniivision")
SEGMENTED = ("tektronix_mso", "keysight_infiniivision")
IDN_START = {"tektronix_tds": "TEKTRONIX,TDS", "tektronix_mso": "TEKTRONIX,MSO", "keysight_infiniivision": "KEYSIGHT"}
COMMON = ("--trigger-level", "1.65V", "--timeout", "5s")
# dt 10 ns (TDS: 1 ms over 120 000 points, 8.3 ns): 8 samples on a 100 ns edge
FINE = ("--time-per-div", "100us", "--record-length", "100000", *COMMON)
# dt 250 ns (TDS 208 ns): the edge lies between two samples
COARSE = ("--time-per-div", "2.5ms", "--record-length", "100000", *COMMON)
# 50 frames of 25 us (dt 10 ns; InfiniiVision: 5000 points, 5 ns), one pulse each
SEGMENTS = ("--mode", "segmented", "--segments", "50", "--time-per-div", "2.5us", "--record-length", "2500", *COMMON)
# the scope's own measurement of 1 ms records (about ten pulses each), dt 10 ns (TDS 8.3 ns)
MEASUREMENT = ("--mode", "measurement", "--time-per-div", "100us", "--record-length", "100000", *COMMON)
# 1 us records, 0.9 us after the trigger on a rise: no pulse (1-20 us) lies whole in one
NO_PULSE = ("--mode", "measurement", "--time-per-div", "100ns", "--record-length", "1000", *COMMON)
MEASUREMENT_COLUMNS = ["acquisition", "armed_host_s", "count", "mean_s", "min_s", "max_s",
                       "host_count", "host_mean_s", "host_min_s", "host_max_s"]  # the campaign's scope_measurements


@contextlib.contextmanager
def sim(dialect: str, source: PeriodicEdgeSource, **options: object) -> Iterator[SimScopeServer]:
    server = SimScopeServer(source, seed=11, rise_time_s=RISE_S, noise_v=0.02, dialect=dialect, **options)
    with run_in_thread(server):
        yield server


@pytest.fixture(scope="module")
def source() -> PeriodicEdgeSource:
    return pulse_source()  # a pulse every 100.037 us, widths 1-20 us from its table


@pytest.fixture(scope="module", params=DIALECTS)
def scope(request, source) -> Iterator[tuple[str, SimScopeServer]]:
    with sim(request.param, source) as server:
        yield request.param, server


def _run_capture(server: SimScopeServer, dialect: str, out: Path, n: int,
                 args: tuple[str, ...]) -> tuple[subprocess.CompletedProcess, pd.DataFrame]:
    """`station scope capture` as a user runs it, which must succeed; its output and the file's rows."""
    res = run_station("scope", "capture", "--resource", server.resource, "--dialect", dialect, "-n", str(n),
                      "--out", str(out), *args, timeout=120)
    assert res.returncode == 0, res.stderr
    return res, pd.read_csv(out) if out.suffix == ".csv" else pd.read_parquet(out)


def capture(server: SimScopeServer, dialect: str, out: Path, *args: str,
            n: int = 3) -> tuple[pd.DataFrame, dict, list]:
    """Run the CLI; the rows, with each pulse's truth, and the sidecar."""
    before = len(server.acquisitions)
    res, rows = _run_capture(server, dialect, out, n, args)
    assert f"wrote {out}" in res.stdout and f"wrote {out.with_suffix('.json')}" in res.stdout
    assert list(rows.columns) == ["acquisition", "frame", "start_s", "width_s", "rise_s", "armed_host_s"]
    infos = server.acquisitions[before:]
    assert len(infos) == n and set(rows["acquisition"]) <= set(range(n))
    sidecar = json.loads(out.with_suffix(".json").read_text())
    return rows, sidecar, infos


def check_truth(rows: pd.DataFrame, infos: list, source: PeriodicEdgeSource, dt: float) -> None:
    """Every pulse is one of the source's, placed on its clock by its acquisition's trigger, and
    its width is the source's within a sample interval."""
    trigger_ns = np.array([infos[a].trigger_ns for a in rows["acquisition"]])
    lead_ns = trigger_ns + rows["start_s"].to_numpy() * 1e9
    k = np.rint(lead_ns / source.period_ns).astype(np.int64)
    assert np.all(np.abs(lead_ns - k * source.period_ns) < (dt + RISE_S) * 1e9), "starts on the source's grid"
    assert len(np.unique(k)) == len(k), "each pulse once"
    err = rows["width_s"].to_numpy() - source.width_ns(k) * 1e-9
    assert np.all(np.abs(err) < dt), np.abs(err).max()
    for a, info in enumerate(infos):  # the sim's sample interval is the one the sidecar says was applied
        assert info.dt_ns * 1e-9 == pytest.approx(dt, rel=1e-9), a


def check_sidecar(sidecar: dict, dialect: str, server: SimScopeServer, rows: pd.DataFrame, mode: str, n: int) -> None:
    assert sidecar["schema"] == "irq-station/scope-capture" and sidecar["schema_version"] == 1
    assert sidecar["status"] == "complete" and sidecar["error"] is None
    assert sidecar["idn"] == server.model.idn and sidecar["idn"].startswith(IDN_START[dialect])
    assert (sidecar["resource"], sidecar["dialect"], sidecar["mode"]) == (server.resource, dialect, mode)
    assert sidecar["acquisitions"] == sidecar["acquisitions_requested"] == n
    assert sidecar["pulses"] == len(rows) and sidecar["rise_resolved"] == int(rows["rise_s"].notna().sum())
    applied, asked = sidecar["settings_applied"], sidecar["settings_requested"]
    assert applied["sample_interval_s"] == pytest.approx(10 * applied["time_per_div"] / applied["record_length"])
    assert applied["record_length"] >= asked["record_length"] and applied["trigger_level_v"] == pytest.approx(1.65)
    assert asked["capture"] == mode and asked["threshold"] == "auto" and asked["dialect"] == dialect
    assert applied["segments"] == (asked["segments"] if mode == "segmented" else 1)
    assert datetime.fromisoformat(sidecar["start_utc"]) <= datetime.fromisoformat(sidecar["end_utc"])
    assert sidecar["station_version"]
    units = {name: c["unit"] for name, c in sidecar["columns"].items()}
    assert units == {"acquisition": None, "frame": None, "start_s": "s", "width_s": "s", "rise_s": "s",
                     "armed_host_s": "s"}
    armed = rows.groupby("acquisition")["armed_host_s"].first().to_numpy()
    assert np.all(np.diff(armed) > 0) and abs(armed[0] - time.time()) < 600


def test_waveform_fine_csv(scope, source, tmp_path) -> None:
    """Widths within a sample interval of the truth, rise times near the sim's where dt resolves them."""
    dialect, server = scope
    out = tmp_path / "fine.csv"
    rows, sidecar, infos = capture(server, dialect, out, *FINE)
    dt = sidecar["settings_applied"]["sample_interval_s"]
    assert dt < RISE_S / 6
    assert len(rows) >= 20 and (rows["frame"] == 0).all()
    check_truth(rows, infos, source, dt)
    check_sidecar(sidecar, dialect, server, rows, "waveform", 3)
    rise = rows["rise_s"].to_numpy()
    assert np.isfinite(rise).all()
    assert np.all(np.abs(rise - RISE_S) < 0.1 * RISE_S), rise
    assert abs(np.median(rise) - RISE_S) < 0.03 * RISE_S


def test_waveform_coarse_parquet_import_and_report(scope, source, tmp_path) -> None:
    """dt above the rise time: NaN rise times; the Parquet file imports and reports."""
    dialect, server = scope
    out = tmp_path / "coarse.parquet"
    rows, sidecar, infos = capture(server, dialect, out, *COARSE, n=2)
    dt = sidecar["settings_applied"]["sample_interval_s"]
    assert dt > RISE_S
    assert len(rows) >= 300 and rows["rise_s"].isna().all() and sidecar["rise_resolved"] == 0
    assert rows["acquisition"].dtype == np.int64 and rows["frame"].dtype == np.int64
    check_truth(rows, infos, source, dt)
    check_sidecar(sidecar, dialect, server, rows, "waveform", 2)
    embedded = json.loads(pq.read_schema(out).metadata[b"irq_station.scope_capture"])
    assert embedded["pulses"] == len(rows) and embedded["idn"] == sidecar["idn"]
    check_import_and_report(out, tmp_path / "results", rows)


@pytest.mark.parametrize("dialect", SEGMENTED)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_segmented(dialect, suffix, source, tmp_path) -> None:
    """One pulse a frame, frames numbered, placed by the time tags on the source's clock."""
    with sim(dialect, source) as server:
        out = tmp_path / f"segmented{suffix}"
        rows, sidecar, infos = capture(server, dialect, out, *SEGMENTS)
    dt = sidecar["settings_applied"]["sample_interval_s"]
    assert dt < RISE_S / 6 and sidecar["frames"] == 150
    assert sidecar["frames_without_pulse"] == 0  # every frame held its pulse whole (one row each)
    for a, acq in rows.groupby("acquisition"):
        assert acq["frame"].tolist() == list(range(50)), a
    check_truth(rows, infos, source, dt)
    check_sidecar(sidecar, dialect, server, rows, "segmented", 3)
    assert np.all(np.abs(rows["rise_s"] - RISE_S) < 0.1 * RISE_S)
    check_import_and_report(out, tmp_path / "results", rows)


def check_import_and_report(capture_file: Path, results: Path, rows: pd.DataFrame) -> None:
    res = run_station("import", str(capture_file), "--out", str(results), "--no-report")
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr  # every column is mapped
    res = run_station("report", str(results))
    assert res.returncode == 0, res.stderr
    run_id = capture_file.stem
    report = json.loads((results / "report.json").read_text())
    (run,) = report["runs"]
    assert run["id"] == run_id and run["hw"]["count"] == len(rows)
    assert run["hw"]["max_ns"] == pytest.approx(rows["width_s"].max() * 1e9)
    hw = pd.read_parquet(results / "runs" / run_id / "hw.parquet")
    # acquisition is the acquisition (frame no alias of it here), and frame and rise time are kept
    np.testing.assert_array_equal(hw["acquisition"], rows["acquisition"])
    np.testing.assert_array_equal(hw["frame"], rows["frame"])
    np.testing.assert_allclose(hw["rise_s"], rows["rise_s"], rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(hw["start_s"], rows["start_s"], rtol=1e-11)
    manifest = json.loads((results / "runs" / run_id / "manifest.json").read_text())
    assert manifest["imported"]["hw_columns"] == {c: c for c in ("acquisition", "frame", "start_s", "width_s",
                                                                 "rise_s", "armed_host_s")}


# --- --mode measurement ----------------------------------------------------------------------------
def capture_measurements(server: SimScopeServer, dialect: str, out: Path, *args: str,
                         n: int = 4) -> tuple[pd.DataFrame, dict, list]:
    """Run the CLI in measurement mode; the rows (one per acquisition), the sidecar and the
    sim's log of the acquisitions."""
    before = len(server.acquisitions)
    res, rows = _run_capture(server, dialect, out, n, args)
    assert f"wrote {out}: {n} acquisitions" in res.stdout and f"wrote {out.with_suffix('.json')}" in res.stdout
    assert list(rows.columns) == MEASUREMENT_COLUMNS
    assert rows["acquisition"].tolist() == list(range(n))  # one row per acquisition, a cross-check no extra one
    infos = server.acquisitions[before:]
    assert len(infos) == n
    sidecar = json.loads(out.with_suffix(".json").read_text())
    return rows, sidecar, infos


def record_truth_s(source: PeriodicEdgeSource, info) -> np.ndarray:  # noqa: ANN001 - AcquisitionInfo
    """The widths (s) of the source's pulses wholly inside the acquisition's record, in order."""
    t0 = info.first_sample_ns
    t1 = t0 + (info.record_length - 1) * info.dt_ns
    k = np.arange(max(int(t0 // source.period_ns) - 1, 0), int(t1 // source.period_ns) + 1)
    lead = source.lead_ns(k)
    whole = (lead >= t0) & (lead + source.width_ns(k) <= t1)
    return source.width_ns(k[whole]) * 1e-9


def expected_measurement(dialect: str, truth: np.ndarray) -> tuple[int, float, float, float]:
    """What the scope reports of a record: every pulse's statistics (MSO MEAS1), or the first
    pulse's width (TDS MEASUrement:IMMed, InfiniiVision :MEASure:PWIDth)."""
    same = truth if dialect == "tektronix_mso" else truth[:1]
    if not len(same):
        return 0, math.nan, math.nan, math.nan
    return len(same), same.mean(), same.min(), same.max()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_measurement_mode_is_the_scopes_numbers_per_acquisition(scope, source, suffix, tmp_path) -> None:
    """Each row is the scope's measurement of its acquisition: the source's pulses in that
    record within a sample interval; every second one cross-checked on the host, the others not."""
    dialect, server = scope
    out = tmp_path / f"measured{suffix}"
    rows, sidecar, infos = capture_measurements(server, dialect, out, *MEASUREMENT, "--cross-check-every", "2")
    dt = sidecar["settings_applied"]["sample_interval_s"]
    assert dt < 1e-7
    for a, info in enumerate(infos):
        assert info.dt_ns * 1e-9 == pytest.approx(dt, rel=1e-9), a
        truth = record_truth_s(source, info)
        assert len(truth) >= 5, a
        count, *widths = expected_measurement(dialect, truth)
        row = rows.iloc[a]
        assert row["count"] == count, (a, row["count"], count)
        got = row[["mean_s", "min_s", "max_s"]].to_numpy(np.float64)
        assert np.all(np.abs(got - widths) < dt), (a, got, widths, dt)
        if a % 2:  # not cross-checked: empty, not a number
            assert row[["host_count", "host_mean_s", "host_min_s", "host_max_s"]].isna().all(), a
        else:  # the host's extraction of the same record and the same pulses, beside the scope's
            assert row["host_count"] == count, a
            host = row[["host_mean_s", "host_min_s", "host_max_s"]].to_numpy(np.float64)
            assert np.all(np.abs(host - widths) < dt), (a, host, widths, dt)
    # the sidecar: the mode, the counts and the scope's statistics over the capture
    assert sidecar["schema"] == "irq-station/scope-capture" and sidecar["status"] == "complete"
    assert (sidecar["mode"], sidecar["dialect"], sidecar["idn"]) == ("measurement", dialect, server.model.idn)
    assert sidecar["acquisitions"] == sidecar["acquisitions_requested"] == len(rows) == sidecar["frames"]
    assert sidecar["pulses"] == rows["count"].sum() and sidecar["rise_resolved"] is None
    assert "rise_time" not in sidecar
    asked, applied = sidecar["settings_requested"], sidecar["settings_applied"]
    assert (asked["capture"], asked["cross_check_every"]) == ("measurement", 2) and "segments" not in asked
    assert applied["measurement"] is True and applied["segments"] == 1
    assert sidecar["live_s"] == pytest.approx(len(rows) * 10 * applied["time_per_div"])
    m = sidecar["measurement"]
    assert m["scope_measures"] == ("all" if dialect == "tektronix_mso" else "first")
    assert (m["acquisitions"], m["valid"], m["pulses"]) == (len(rows), (rows["count"] > 0).sum(), rows["count"].sum())
    assert m["min_s"] == pytest.approx(rows["min_s"].min()) and m["max_s"] == pytest.approx(rows["max_s"].max())
    checked = rows.dropna(subset=["host_count"])
    assert m["cross_checked"] == len(checked) == (len(rows) + 1) // 2
    largest = max((checked[s] - checked[h]).abs().max() for s, h in (("mean_s", "host_mean_s"),
                                                                     ("min_s", "host_min_s"), ("max_s", "host_max_s")))
    assert m["largest_difference_s"] == pytest.approx(largest, rel=1e-6, abs=1e-15) and largest < dt
    units = {name: c["unit"] for name, c in sidecar["columns"].items()}
    assert list(units) == MEASUREMENT_COLUMNS
    assert [name for name, unit in units.items() if unit == "s"] == [c for c in MEASUREMENT_COLUMNS if c.endswith("_s")]
    assert capture_mode_of(out) == "measurement"
    if suffix == ".parquet":  # whole numbers are int64, and a row not cross-checked is null (not NaN)
        table = pq.read_table(out)
        types = {f.name: str(f.type) for f in table.schema}
        assert types == {name: c["type"].replace("float64", "double") for name, c in sidecar["columns"].items()}
        assert table.column("host_count").null_count == table.column("host_mean_s").null_count == len(rows) // 2
        embedded = json.loads(table.schema.metadata[b"irq_station.scope_capture"])
        assert embedded["measurement"] == m


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_record_without_a_pulse_is_nan_not_a_crash(scope, source, suffix, tmp_path) -> None:
    """The scope's 9.9E37 (no valid value) is count 0 and NaN; the host, cross-checking, finds
    none either (0 and NaN, not empty)."""
    dialect, server = scope
    out = tmp_path / f"none{suffix}"
    rows, sidecar, infos = capture_measurements(server, dialect, out, *NO_PULSE, "--cross-check-every", "1", n=3)
    assert [len(record_truth_s(source, info)) for info in infos] == [0, 0, 0]
    assert rows["count"].tolist() == [0, 0, 0] and rows["host_count"].tolist() == [0, 0, 0]
    assert rows[["mean_s", "min_s", "max_s", "host_mean_s", "host_min_s", "host_max_s"]].isna().all().all()
    if suffix == ".csv":
        lines = out.read_text().splitlines()[1:]
        assert all(line.split(",")[2:] == ["0", "nan", "nan", "nan", "0", "nan", "nan", "nan"] for line in lines)
    else:
        table = pq.read_table(out)
        assert table.column("mean_s").null_count == table.column("host_mean_s").null_count == 0  # NaN, not null
    m = sidecar["measurement"]
    assert sidecar["status"] == "complete" and sidecar["pulses"] == 0
    assert (m["valid"], m["pulses"], m["mean_s"], m["min_s"], m["max_s"]) == (0, 0, None, None, None)
    assert m["cross_checked"] == 3


def test_a_scope_going_mute_mid_measurement_keeps_the_rows(source, tmp_path) -> None:
    out = tmp_path / "measured-then-mute.csv"
    with sim("keysight_infiniivision", source) as server:
        proc = _started(server, out, "--mode", "measurement", "--time-per-div", "100us", "--record-length", "10000",
                        "--timeout", "1s")
        _wait_for(lambda: out.exists() and out.read_text().count("\n") > 5)  # the header and 5 rows
        server.mute = True
        _, stderr = proc.communicate(timeout=60)
        infos = server.acquisitions
    assert proc.returncode == 1
    line = one_error_line(stderr)
    assert server.resource in line and "timed out" in line
    rows = pd.read_csv(out)
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["status"] == "failed" and sidecar["error"] in line and sidecar["mode"] == "measurement"
    assert f"kept the measurements of {len(rows)} acquisitions" in line
    assert len(rows) == sidecar["acquisitions"] >= 5 and rows["acquisition"].tolist() == list(range(len(rows)))
    dt = sidecar["settings_applied"]["sample_interval_s"]
    for a, got in enumerate(rows["mean_s"]):  # every row written is whole: the scope's number of its record
        _, first, _, _ = expected_measurement("keysight_infiniivision", record_truth_s(source, infos[a]))
        assert abs(got - first) < dt, (a, got, first)


def test_a_measurement_file_is_refused_by_import(source, tmp_path) -> None:
    """No row of a measurement-mode file is a pulse: `station import` refuses it (one line,
    exit 2, nothing made) rather than reading statistics as pulses."""
    with sim("tektronix_mso", source) as server:
        for suffix in (".csv", ".parquet"):
            out = tmp_path / f"m-{suffix[1:]}{suffix}"
            capture_measurements(server, "tektronix_mso", out, *MEASUREMENT, n=2)
            res = run_station("import", str(out), "--out", str(tmp_path / f"results{suffix}"), "--no-report")
            assert res.returncode == 2, res.stdout
            assert one_error_line(res.stderr).startswith(f"error: {out}")
            assert "--mode measurement" in res.stderr and "no pulses" in res.stderr  # says why, by the mode
            assert not (tmp_path / f"results{suffix}").exists()


def test_the_python_api_in_measurement_mode(source, tmp_path) -> None:
    with pytest.raises(api.CaptureOptionError, match=r"^--segments: "):
        api.capture_settings("R", "tektronix_mso", "measurement", segments=10)
    with pytest.raises(api.CaptureOptionError, match=r"^--cross-check-every: .*--mode measurement"):
        api.capture_settings("R", "tektronix_mso", "waveform", cross_check_every=3)
    seen: list[WidthMeasurement] = []
    with sim("tektronix_tds", source) as server:
        cfg = api.capture_settings(server.resource, "tektronix_tds", "measurement", time_per_div=100e-6,
                                   record_length=100_000, trigger_level=1.65, timeout=5)
        summary = api.capture_to_file(cfg, tmp_path / "m.parquet", 3, on_acquisition=lambda s, m: seen.append(m))
        infos = server.acquisitions[-3:]
    dt = summary.applied["sample_interval_s"]
    assert summary.status == "complete" and summary.mode == "measurement" and summary.acquisitions == 3
    assert all(isinstance(m, WidthMeasurement) for m in seen) and sum(m.count for m in seen) == summary.pulses
    for m, info in zip(seen, infos, strict=True):
        assert abs(m.mean_s - record_truth_s(source, info)[0]) < dt
    rows = pd.read_parquet(summary.path)
    np.testing.assert_array_equal(rows["mean_s"], [m.mean_s for m in seen])
    assert rows["host_count"].isna().all() and summary.measurement["cross_checked"] == 0


# --- a scope that fails ---------------------------------------------------------------------------
def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def test_a_mute_scope_is_one_line_and_no_file(source, tmp_path) -> None:
    out = tmp_path / "mute.csv"
    with sim("tektronix_mso", source, mute=True) as server:
        res = run_station("scope", "capture", "--resource", server.resource, "--dialect", "tektronix_mso", "-n", "2",
                          "--out", str(out), "--timeout", "500ms", timeout=60)
    assert res.returncode == 1
    line = one_error_line(res.stderr)
    assert server.resource in line and "*IDN?" in line and "timed out" in line
    assert not out.exists() and not out.with_suffix(".json").exists()


def _started(server: SimScopeServer, out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(station_cmd("scope", "capture", "--resource", server.resource, "--dialect",
                                        server.dialect, "-n", "100000", "--out", str(out), *args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(condition, timeout: float = 60) -> None:  # noqa: ANN001 - a callable
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_scope_going_mute_mid_capture_keeps_the_rows(source, tmp_path) -> None:
    out = tmp_path / "going-mute.csv"
    with sim("keysight_infiniivision", source) as server:
        proc = _started(server, out, "--time-per-div", "100us", "--record-length", "10000", "--timeout", "1s")
        _wait_for(lambda: out.exists() and out.read_text().count("\n") > 30)
        server.mute = True
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1
    line = one_error_line(stderr)
    assert server.resource in line and "timed out" in line and "kept" in line
    rows = pd.read_csv(out)
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["status"] == "failed" and sidecar["error"] in line
    assert len(rows) == sidecar["pulses"] > 30 and rows["acquisition"].nunique() == sidecar["acquisitions"]
    assert f"kept {len(rows)} pulses of {sidecar['acquisitions']} acquisitions" in line
    # every acquisition whose rows are there is whole: its pulses are those the source emitted
    assert rows.groupby("acquisition").size().min() >= 8


def test_a_scope_gone_mid_capture_still_writes_the_parquet(source, tmp_path) -> None:
    out = tmp_path / "gone.parquet"
    with sim("tektronix_mso", source) as server:
        proc = _started(server, out, "--time-per-div", "100us", "--record-length", "10000", "--timeout", "2s")
        _wait_for(lambda: len(server.acquisitions) >= 5)
    _, stderr = proc.communicate(timeout=60)  # the server stopped with the block above
    assert proc.returncode == 1
    line = one_error_line(stderr)
    assert server.resource in line and "kept" in line
    rows = pd.read_parquet(out)
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["status"] == "failed" and sidecar["acquisitions"] >= 4
    assert len(rows) == sidecar["pulses"] and rows["acquisition"].max() == sidecar["acquisitions"] - 1
    assert not out.with_name(out.name + ".tmp").exists()


# --- options ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "option"), [
    (("--time-per-div", "250"), "--time-per-div"),  # a bare number: which unit?
    (("--volts-per-div", "5GV"), "--volts-per-div"),
    (("--channel", "5"), "--channel"),
    (("--threshold", "high"), "--threshold"),
    (("--trigger-position-pct", "120"), "--trigger-position-pct"),
    (("--record-length", "0"), "--record-length"),
    (("--timeout", "0s"), "--timeout"),
    (("--mode", "segmented"), "--mode"),  # the TDS has no segmented memory
    (("--segments", "10"), "--segments"),  # waveform mode
    (("--mode", "measurement", "--segments", "10"), "--segments"),  # the scope measures a single record
    (("--cross-check-every", "4"), "--cross-check-every"),  # waveform mode: every record is transferred
    (("--mode", "measurement", "--cross-check-every", "-1"), "--cross-check-every"),
    (("--mode", "measurement", "--threshold", "1.65V"), "--threshold"),  # no record for the host to threshold
    (("--out", "capture.txt"), "--out"),
])
def test_bad_options_name_the_option(args, option, tmp_path) -> None:
    argv = {"--resource": "TCPIP::127.0.0.1::9::SOCKET", "-n": "2", "--out": str(tmp_path / "c.csv")}
    extra = list(args)
    if args[0] in argv:
        argv[args[0]] = str(tmp_path / args[1])
        extra = []
    res = run_station("scope", "capture", *[x for kv in argv.items() for x in kv], *extra, timeout=60)
    assert res.returncode == 2
    assert one_error_line(res.stderr).startswith(f"error: {option}: "), res.stderr
    assert not list(tmp_path.iterdir())


def test_usage_errors_name_the_option(tmp_path) -> None:
    res = run_station("scope", "capture", "--resource", "R", "-n", "0", "--out", str(tmp_path / "c.csv"))
    assert res.returncode == 2 and "--acquisitions" in res.stderr
    res = run_station("scope", "capture", "--resource", "R", "-n", "1", "--out", str(tmp_path / "c.csv"),
                      "--dialect", "rigol")
    assert res.returncode == 2 and "--dialect" in res.stderr


def test_an_existing_file_is_kept_unless_overwrite(source, tmp_path) -> None:
    out = tmp_path / "c.csv"
    out.write_text("mine\n")
    with sim("tektronix_tds", source) as server:
        args = ("scope", "capture", "--resource", server.resource, "-n", "1", "--out", str(out), *FINE)
        res = run_station(*args)
        assert res.returncode == 2 and "--overwrite" in one_error_line(res.stderr)
        assert out.read_text() == "mine\n"
        res = run_station(*args, "--overwrite")
    assert res.returncode == 0, res.stderr
    assert pd.read_csv(out).columns[0] == "acquisition"


def test_station_scope_resource_still_checks_the_scope(source) -> None:
    with sim("tektronix_mso", source) as server:
        for argv in (("scope", server.resource, "--dialect", "tektronix_mso"),
                     ("scope", "--dialect", "tektronix_mso", server.resource),
                     ("scope", "check", server.resource, "--dialect", "tektronix_mso")):
            res = run_station(*argv, timeout=60)
            assert res.returncode == 0, (argv, res.stderr)
            assert res.stdout.strip() == server.model.idn


def test_a_scope_error_is_one_exit_status_whichever_command_met_it(tmp_path) -> None:
    """No instrument at the resource: `scope check` and `scope capture` both exit 1 (an instrument
    error; 2 is a usage error), both naming the resource."""
    from tests.conftest import free_port

    resource = f"TCPIP::127.0.0.1::{free_port()}::SOCKET"
    check = run_station("scope", "check", resource, "--timeout", "2", timeout=60)
    capture = run_station("scope", "capture", "--resource", resource, "-n", "1", "--timeout", "2s",
                          "--out", str(tmp_path / "c.csv"), timeout=60)
    assert check.returncode == capture.returncode == 1, (check.stderr, capture.stderr)
    assert resource in check.stderr and resource in capture.stderr


def test_the_python_api(source, tmp_path) -> None:
    """The CLI's calls: settings checked as the campaign file's, a summary per acquisition."""
    with pytest.raises(api.CaptureOptionError, match=r"^--time-per-div: 250 has no unit"):
        api.capture_settings("R", time_per_div="250", require_units=True)
    cfg = api.capture_settings("R", "tektronix_mso", "segmented")
    assert (cfg.time_per_div, cfg.record_length, cfg.segments, cfg.threshold) == (500e-6, 120_000, 1000, "auto")
    seen = []
    with sim("tektronix_mso", source) as server:
        cfg = api.capture_settings(server.resource, "tektronix_mso", time_per_div=100e-6, record_length=10_000,
                                   trigger_level=1.65, timeout=5)
        summary = api.capture_to_file(cfg, tmp_path / "c.parquet", 2,
                                      on_acquisition=lambda s, got: seen.append((s.acquisitions, len(got.rise_s))))
    assert summary.status == "complete" and summary.acquisitions == 2 and summary.idn == server.model.idn
    assert [a for a, _ in seen] == [1, 2] and sum(n for _, n in seen) == summary.pulses
    assert api.read_capture_sidecar(summary.path)["pulses"] == summary.pulses == len(pd.read_parquet(summary.path))


# --- rise_times --------------------------------------------------------------------------------------
def ramp_record(rise_samples: float, n: int = 400, at: float = 150.3, low: float = 0.2, high: float = 3.1):
    """A linear edge whose 10-90 % takes `rise_samples` samples, its 50 % point at sample `at`."""
    full = rise_samples / 0.8
    t = np.arange(n, dtype=np.float64)
    return low + (high - low) * np.clip((t - at) / full + 0.5, 0, 1)


@pytest.mark.parametrize("rise_samples", [8.0, 11.7, 40.0, 3000.0])
def test_rise_times_of_linear_ramps_are_exact(rise_samples) -> None:
    """Exact while the samples around each crossing lie on the ramp (10 % of the ramp is a
    sample or more: rises of 8 samples and up)."""
    n = 12_000 if rise_samples > 1000 else 400
    v = ramp_record(rise_samples, n=n, at=n / 2 + 0.3)
    wf = Waveform(-1e-6, 2e-9, v)
    start = -1e-6 + (n / 2 + 0.3) * 2e-9
    assert record_levels(wf) == pytest.approx((0.2, 3.1))
    assert rise_times(wf, np.array([start]))[0] == pytest.approx(rise_samples * 2e-9, rel=1e-9)
    assert rise_times_at(v, [n / 2 + 0.3], 1.0)[0] == pytest.approx(rise_samples, rel=1e-9)
    # the falling edge of an active-low line: its 90-10 % time
    assert rise_times(Waveform(-1e-6, 2e-9, 3.3 - v), np.array([start]), polarity="low")[0] == pytest.approx(
        rise_samples * 2e-9, rel=1e-9)


@pytest.mark.parametrize("rise_samples", [2.0, 2.5, 3.3, 5.0])
def test_short_rises_are_near(rise_samples) -> None:
    """A sample on the plateau beside a crossing bends the line: off by less than half a sample;
    NaN only when fewer than 2 samples lie between 10 and 90 % (never for a rise above 2 samples)."""
    for phase in np.linspace(0, 1, 7, endpoint=False):
        got = rise_times_at(ramp_record(rise_samples, at=150 + phase), [150 + phase], 1.0)[0]
        if rise_samples > 2:
            assert abs(got - rise_samples) < 0.5, (phase, got)
        else:
            assert np.isnan(got) or abs(got - rise_samples) < 0.5, (phase, got)


def test_unresolved_edges_are_nan() -> None:
    steep = ramp_record(1.0)  # at most one sample between 10 and 90 %
    assert np.isnan(rise_times_at(steep, [150.3], 1.0)[0])
    assert np.isfinite(rise_times_at(steep, [150.3], 1.0, min_samples=0)[0])  # a number of the sample grid
    v = ramp_record(20.0)
    assert np.isnan(rise_times_at(v, [150.3], 1.0, max_edge_samples=5)[0])  # beyond the search
    assert np.isnan(rise_times_at(v[142:], [8.3], 1.0, levels=(0.2, 3.1))[0])  # the 10 % point (140.3) cut off
    assert rise_times_at(v[139:], [11.3], 1.0, levels=(0.2, 3.1))[0] == pytest.approx(20.0)  # ... kept
    runt = np.concatenate([np.zeros(50), np.linspace(0, 2, 10), np.full(10, 2.0), np.zeros(50), np.full(50, 3.0)])
    assert np.isnan(rise_times_at(runt, [55.0], 1.0, levels=(0.0, 3.0))[0])  # falls back before 90 %
    assert np.isnan(rise_times_at(np.full(100, 1.0), [50.0], 1.0)).all()  # one level
    assert np.isnan(rise_times_at(v, [np.nan, -1.0, 400.0, 1e300], 1.0)).all()  # no edge there


def test_frames_and_codes_match_the_volts() -> None:
    rows = np.stack([ramp_record(6.0 + i, n=200, at=80.4 + i) for i in range(5)])
    scale = CodeScale(0.01, -100.0, 0.0)
    codes = np.rint(rows / 0.01 - 100).astype(np.int16)
    frames = Frames(-1e-7, 1e-9, codes, scale, trigger_s=np.arange(5) * 1e-4)
    frame = np.arange(5)
    start = frames.trigger_s + -1e-7 + (80.4 + frame) * 1e-9
    from_codes = rise_times(frames, start, frame)
    from_volts = rise_times_at(scale.volts(codes), 80.4 + frame, 1e-9, rows=frame)
    np.testing.assert_allclose(from_codes, from_volts, rtol=1e-12)
    np.testing.assert_allclose(from_codes, (6.0 + frame) * 1e-9, rtol=0.02)
    assert np.isnan(rise_times(frames, start, np.array([0, 1, 2, 3, 9]))[-1])  # no frame 9


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)


@FUZZ
@given(volts=hnp.arrays(np.float64, st.integers(0, 300), elements=_FLOATS | st.sampled_from([0.0, 3.3])),
       positions=st.lists(_FLOATS | st.floats(-5, 305), max_size=12), dt=_FLOATS | st.just(1e-9),
       levels=st.none() | st.tuples(_FLOATS, _FLOATS), min_samples=st.integers(-2, 5),
       max_edge=st.integers(-5, 400))
def test_rise_times_at_on_garbage(volts, positions, dt, levels, min_samples, max_edge) -> None:
    got = rise_times_at(volts, positions, dt, levels, min_samples=min_samples, max_edge_samples=max_edge)
    assert got.shape == (len(positions),) and got.dtype == np.float64
    assert np.all(np.isnan(got) | (np.isfinite(got) & (got >= 0)))


@FUZZ
@given(codes=hnp.arrays(st.sampled_from([np.int8, np.uint8, np.dtype(">i2"), np.int16, np.int32]),
                        st.tuples(st.integers(0, 6), st.integers(0, 120))),
       volts_per_code=_FLOATS, offset=_FLOATS, start_s=st.lists(_FLOATS | st.floats(-1e-6, 2e-6), max_size=8),
       frame=st.lists(st.integers(-3, 8), max_size=8), t0=_FLOATS | st.just(-1e-7), dt=_FLOATS | st.just(1e-8),
       as_frames=st.booleans(), polarity=st.sampled_from(["high", "low"]))
def test_rise_times_on_garbage_records(codes, volts_per_code, offset, start_s, frame, t0, dt, as_frames,
                                       polarity) -> None:
    scale = CodeScale(volts_per_code, 0.0, offset)
    with np.errstate(all="ignore"):
        if as_frames:
            record = Frames(t0, dt, codes, scale, trigger_s=np.arange(len(codes)) * 1e-4)
            f = np.resize(np.asarray(frame or [0], np.int64), len(start_s))
            got = rise_times(record, np.array(start_s), f, polarity=polarity)
        else:
            record = Waveform(t0, dt, codes=codes.reshape(-1), scale=scale)
            got = rise_times(record, np.array(start_s), polarity=polarity)
    assert got.shape == (len(start_s),)
    assert np.all(np.isnan(got) | (np.isfinite(got) & (got >= 0)))


@FUZZ
@given(values=hnp.arrays(np.float64, st.integers(0, 50), elements=_FLOATS),
       weights=st.none() | hnp.arrays(np.float64, 50, elements=_FLOATS))
def test_histogram_levels_on_garbage(values, weights) -> None:
    with np.errstate(all="ignore"):
        got = histogram_levels(values, None if weights is None else weights[: len(values)])
    assert got is None or (math.isfinite(got[0]) and math.isfinite(got[1]) and got[0] < got[1])


# --- the importer and capture files ------------------------------------------------------------------
def test_import_keeps_frame_and_rise_beside_acquisition(tmp_path) -> None:
    csv = tmp_path / "own.csv"
    csv.write_text("acquisition,frame,start_s,width_s,rise_s,armed_host_s\n"
                   "0,0,1e-6,5e-6,2e-8,1700000000.5\n0,1,1e-4,6e-6,nan,1700000000.5\n1,0,2e-6,7e-6,,1700000001.5\n")
    station_layout = tmp_path / "hw_pulses.csv"  # what a module run writes: acquisition and frame
    station_layout.write_text("acquisition,start_s,width_s,armed_host_s,frame\n0,1e-6,5e-6,1700000000.5,3\n")
    legacy = tmp_path / "legacy.csv"  # frame alone is the acquisition, rise_us alone the start (docs/import.md)
    legacy.write_text("frame,rise_us,width_ns\n4,1.5,5000\n")
    result = import_files([csv, station_layout, legacy], tmp_path / "out")
    assert [r.warnings for r in result.runs] == [[], [], []]
    runs = tmp_path / "out" / "runs"
    own = pd.read_parquet(runs / "own" / "hw.parquet")
    assert own["acquisition"].tolist() == [0, 0, 1] and own["frame"].tolist() == [0, 1, 0]
    assert own["rise_s"].iloc[0] == 2e-8 and own["rise_s"].iloc[1:].isna().all()
    assert own["start_s"].tolist() == [1e-6, 1e-4, 2e-6]
    hw = pd.read_parquet(runs / "hw_pulses" / "hw.parquet")
    assert hw["acquisition"].tolist() == [0] and hw["frame"].tolist() == [3]
    old = pd.read_parquet(runs / "legacy" / "hw.parquet")
    assert old["acquisition"].tolist() == [4] and old["start_s"].tolist() == [1.5e-6] and "frame" not in old


def _parquet(path: Path, **columns: object) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_import_parquet_errors_name_the_row(tmp_path) -> None:
    good = dict(acquisition=pa.array([0, 1], pa.int64()), width_s=[1e-6, 2e-6])
    cases = [
        (dict(good, width_s=[1e-6, -2e-6]), r"row 2: column 'width_s': -2e-06 is not a positive width"),
        (dict(good, width_s=pa.array([1e-6, None])), r"row 2: column 'width_s' is empty"),
        (dict(good, acquisition=[0.0, 1.5]), r"row 2: column 'acquisition': 1.5 is not a whole number"),
        (dict(good, acquisition=pa.array([-1, 0], pa.int64())), r"row 1: column 'acquisition': -1 is out of range"),
        (dict(good, start_s=["a", "b"]), r"column 'start_s': string values, not numbers"),
        (dict(good, start_s=[0.0, math.inf]), r"row 2: column 'start_s': inf is not a finite number"),
        (dict(good, rise_s=[1e-9, -1e-9], start_s=[0.0, 1.0]), r"row 2: column 'rise_s': -1e-09 is no rise time"),
        (dict(acquisition=[0], start_s=[0.0]), r"has no width column"),
        (dict(good, width_s=pa.array([], pa.float64()), acquisition=pa.array([], pa.int64())), r"no pulse rows"),
    ]
    for k, (columns, message) in enumerate(cases):
        path = _parquet(tmp_path / f"bad{k}.parquet", **columns)
        with pytest.raises(ImportInputError, match=message):
            import_files([path], tmp_path / f"out{k}")
        assert not (tmp_path / f"out{k}").exists()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1" + b"\0" * 20 + b"PAR1")
    with pytest.raises(ImportInputError, match="not a Parquet file pyarrow can read"):
        import_files([broken], tmp_path / "outb")
    # nulls in the rise column are rise times not resolved; other columns are listed as not imported
    ok = _parquet(tmp_path / "ok.parquet", **good, start_s=[0.0, 1.0], rise_s=pa.array([None, 2e-9]), volts=[1, 2])
    result = import_files([ok], tmp_path / "ok")
    assert any("volts" in w for w in result.runs[0].warnings)
    hw = pd.read_parquet(tmp_path / "ok" / "runs" / "ok" / "hw.parquet")
    assert hw["rise_s"].isna().tolist() == [True, False]


_INTS = st.lists(st.integers(-5, 2**63 - 1) | st.none(), min_size=1, max_size=5).map(
    lambda v: pa.array(v, pa.int64()))
_REALS = st.lists(_FLOATS | st.none(), min_size=1, max_size=5).map(lambda v: pa.array(v, pa.float64()))
_TEXT = st.lists(st.text(max_size=4), min_size=1, max_size=5).map(pa.array)


@FUZZ
@given(columns=st.dictionaries(
    st.sampled_from(["acquisition", "frame", "start_s", "width_s", "rise_s", "rise_us", "armed_host_s", "x"]),
    _INTS | _REALS | _TEXT, min_size=1))
def test_garbage_parquet_is_imported_or_refused(tmp_path_factory, columns) -> None:
    n = min(len(v) for v in columns.values())
    tmp = tmp_path_factory.mktemp("garbage")
    path = _parquet(tmp / "g.parquet", **{name: values[:n] for name, values in columns.items()})
    try:
        import_files([path], tmp / "out")
    except ImportInputError as exc:
        assert str(exc).startswith(str(path))
        return
    hw = pd.read_parquet(tmp / "out" / "runs" / "g" / "hw.parquet")
    assert (hw["width_s"] > 0).all() and (hw["acquisition"] >= 0).all() and np.isfinite(hw["start_s"].fillna(0)).all()


def test_a_first_capture_with_defaults_works_on_a_base_tds(source, tmp_path) -> None:
    """A TDS 400 without Option 1M (the sim limited to 30 000 points, as the base model) takes the
    command's defaults: the default record length there is what it has (issue 28); asked for
    120 000 it still refuses with its own error, named."""
    with sim("tektronix_tds", source, max_record_length=30_000) as server:
        ok = run_station("scope", "capture", "--resource", server.resource, "-n", "1",
                         "--out", str(tmp_path / "base.csv"), timeout=120)
        assert ok.returncode == 0, ok.stderr
        sidecar = json.loads((tmp_path / "base.json").read_text())
        applied = sidecar["settings_applied"]
        assert applied.get("record_length") == 30_000, sidecar
        big = run_station("scope", "capture", "--resource", server.resource, "-n", "1", "--record-length", "120000",
                          "--out", str(tmp_path / "big.csv"), timeout=120)
        assert big.returncode == 1 and "Data out of range" in big.stderr, big.stderr
