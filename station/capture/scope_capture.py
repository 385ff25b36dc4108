"""A standalone scope capture (`station scope capture`, docs/scope-capture.md): K acquisitions
of one channel, one row per pulse — acquisition, frame, start, width, 10–90 % rise time and
when the acquisition was armed — in CSV (appended and flushed per acquisition) or Parquet
(written at the end, or at the failure), and a sidecar JSON beside it (FILE.json) saying what
was asked of which instrument, what it applied, and how the capture ended.

In measurement mode no waveform crosses the bus: one row per acquisition with the scope's own
pulse-width measurement of it (the campaign's scope_measurements.csv columns), and, every Nth
acquisition with `cross_check_every`, the host's extraction of the same record beside it.

The scope is opened and configured by the campaign's own path (ScopeSession.open with a
ScopeSettingsConfig, so a setting is checked, and refused with the message, as in a campaign
file); `station import FILE` makes the file a results directory that `station report` reads."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from instruments.rise_time import MIN_SAMPLES
from instruments.scope import ScopeError, WidthMeasurement
from station.bench.scope_session import DetailedCapture, ScopeSession
from station.capture.accounting import MeasurementTally
from station.capture.pulses import CAPTURE_ORDER, PULSE_COLUMNS
from station.common.atomic_file import replace_atomically, write_text_atomically
from station.config import ScopeSettingsConfig, explain_validation_error
from station.store.run_store import Appender, StoreError, station_version

SCHEMA = "irq-station/scope-capture"
SCHEMA_VERSION = 1
MODES = ("waveform", "segmented", "measurement")
FORMATS = {".csv": "csv", ".parquet": "parquet"}
MAX_ACQUISITIONS = 10_000_000
# the sidecar, in the Parquet file's key-value metadata
PARQUET_METADATA_KEY = b"irq_station.scope_capture"

#: The file's columns, in order: (type, unit, meaning).
COLUMNS: dict[str, tuple[str, str | None,
                         str]] = {name: PULSE_COLUMNS[name] for name in CAPTURE_ORDER}

#: The columns of a measurement-mode file, in order: the campaign's scope_measurements.csv.
MEASUREMENT_COLUMNS: dict[str, tuple[str, str | None, str]] = {
    "acquisition": PULSE_COLUMNS["acquisition"],
    "armed_host_s": PULSE_COLUMNS["armed_host_s"],
    "count": ("int64", None,
              "the pulses the scope's width measurement covers: every complete pulse of the record "
              "(scope_measures \"all\": the measurement's population) or the record's first "
              "(\"first\": 1); 0 when the scope had no valid value (9.9E37)"),
    "mean_s": ("float64", "s",
               "the mean positive pulse width the scope measured (NaN where count is 0)"),
    "min_s": ("float64", "s",
              "the smallest positive pulse width the scope measured (NaN where count is 0)"),
    "max_s": ("float64", "s",
              "the largest positive pulse width the scope measured (NaN where count is 0)"),
    "host_count": ("int64", None,
                   "cross-checked acquisitions: the same pulses (all of the record's, or its "
                   "first) as the host extracts them from the transferred record; empty (Parquet: "
                   "null) where the acquisition was not cross-checked"),
    "host_mean_s": ("float64", "s",
                    "the host's mean width of those pulses (NaN where host_count is 0; empty / "
                    "null where not cross-checked)"),
    "host_min_s": ("float64", "s", "the host's smallest width of those pulses (as host_mean_s)"),
    "host_max_s": ("float64", "s", "the host's largest width of those pulses (as host_mean_s)"),
}
_NULLABLE = ("host_count", "host_mean_s", "host_min_s", "host_max_s")  # null: not cross-checked

#: ScopeSettingsConfig field -> the `station scope capture` option that sets it.
OPTIONS = {"capture": "--mode", "resource": "--resource", "dialect": "--dialect"}


class CaptureOptionError(ValueError):
    """A setting that cannot be: the message names the option (as the CLI spells it) and why."""


@dataclass
class CaptureSummary:
    """What a capture wrote. `status`: complete, failed (the scope: `error`) or interrupted."""

    path: Path
    sidecar: Path
    idn: str
    resource: str
    dialect: str
    mode: str
    acquisitions_requested: int
    acquisitions: int = 0
    pulses: int = 0
    resolved_rise: int = 0  # pulses whose rise time the sample interval resolves
    # measurement mode: the scope's numbers over the capture (MeasurementTally.summary()), else None
    measurement: dict[str, Any] | None = None
    frames: int = 0
    frames_without_pulse: int = 0  # segmented frames whose pulse outlasted them (width lost)
    live_s: float = 0.0
    status: str = "running"
    error: str | None = None
    start_utc: str = ""
    end_utc: str | None = None
    applied: dict[str, Any] = field(default_factory=dict)


class CaptureFailed(Exception):
    """The scope failed mid-capture: `str()` is its message; the rows of the acquisitions before
    are in the file, and `summary` says how many."""

    def __init__(self, summary: CaptureSummary) -> None:
        super().__init__(summary.error or "capture failed")
        self.summary = summary


# The default record length where the campaign file's (120 000) needs an option the base model
# lacks: a TDS 400 without Option 1M stops at 30 000 points (docs/scopes/tektronix-tds.md) and
# refuses 120 000 with 222,"Data out of range".
BASE_RECORD_LENGTH = {"tektronix_tds": 30_000}


def option_name(field_name: str) -> str:
    return OPTIONS.get(field_name, "--" + field_name.replace("_", "-"))


def capture_settings(resource: str, dialect: str = "tektronix_tds", mode: str = "waveform", *,
                     require_units: bool = False, **settings: Any) -> ScopeSettingsConfig:
    """The campaign file's scope settings (`bench.scope`) for a capture: ScopeSettingsConfig with
    kind visa, checked as a campaign file's are. `settings` are its fields (timeout, channel,
    volts_per_div, position_div, time_per_div, record_length, trigger_level,
    trigger_position_pct, threshold, segments); None leaves the default. With
    `require_units`, durations and voltages given as text must say their unit ("500us", "1V"),
    as in a file. Raises CaptureOptionError naming the options at fault."""
    if mode not in MODES:
        raise CaptureOptionError(f"--mode: {mode!r}: expected {' or '.join(MODES)}")
    if mode != "segmented" and settings.get("segments") is not None:
        raise CaptureOptionError("--segments: frames per acquisition are for --mode segmented")
    if mode != "measurement" and settings.get("cross_check_every") is not None:
        raise CaptureOptionError("--cross-check-every: transfers a record beside the scope's own "
                                 "measurement: for --mode measurement")
    if (
        mode == "measurement"
        and settings.get("threshold") is not None
        and not settings.get("cross_check_every")
    ):
        raise CaptureOptionError("--threshold: the scope measures at its own reference level; the "
                                 "host's threshold is for the records of --cross-check-every in "
                                 "--mode measurement")
    unknown = sorted(set(settings) - (set(ScopeSettingsConfig.model_fields) - {"kind", "resource",
                                                                               "dialect",
                                                                                "capture"}))
    if unknown:
        raise TypeError(f"capture_settings: no setting {unknown[0]!r}")
    data = {"kind": "visa", "resource": resource, "dialect": dialect, "capture": mode,
            **{k: v for k, v in settings.items() if v is not None}}
    if settings.get("record_length") is None and dialect in BASE_RECORD_LENGTH:
        # a first command works on the base model
        data["record_length"] = BASE_RECORD_LENGTH[dialect]
    try:
        return ScopeSettingsConfig.model_validate(data, context={"from_file": require_units})
    except ValidationError as exc:
        problems = [explain_validation_error(e, ScopeSettingsConfig) for e in exc.errors()]
        raise CaptureOptionError("; ".join(
            f"{option_name(str(loc[0])) if loc else 'settings'}: {message}"
            for loc, message in problems
        )) from None


def sidecar_path(out: Path) -> Path:
    """FILE.json beside FILE.csv or FILE.parquet."""
    return Path(out).with_suffix(".json")


def check_capture_output(out: Path, overwrite: bool = False) -> str:
    """The output's format ("csv" or "parquet"); CaptureOptionError (naming --out) for a path that
    cannot be one, or that exists (without `overwrite`)."""
    out = Path(out)
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise CaptureOptionError(f"--out: {out.name!r}: name a .csv or a .parquet file")
    if not out.parent.is_dir():
        raise CaptureOptionError(f"--out: {out.parent} is not a directory")
    if out.is_dir():
        raise CaptureOptionError(f"--out: {out} is a directory")
    if not overwrite:
        for path in (out, sidecar_path(out)):
            if path.exists():
                raise CaptureOptionError(f"--out: {path} exists (choose another file, or "
                                         "--overwrite)")
    return fmt


def capture_to_file(settings: ScopeSettingsConfig, out: Path, acquisitions: int, *,
                    overwrite: bool = False,
                    on_acquisition: Callable[[CaptureSummary, DetailedCapture | WidthMeasurement],
                                             None]
                    | None = None,
                    ) -> CaptureSummary:
    """Open and configure the scope `settings` name, take `acquisitions` acquisitions, and write
    one row per pulse to `out` (.csv or .parquet) and the sidecar FILE.json; in measurement mode
    one row per acquisition, the scope's own width measurement of it (MEASUREMENT_COLUMNS).

    A scope that cannot be opened raises its ScopeError, and nothing is written. A ScopeError
    during the capture raises CaptureFailed once the rows of the acquisitions before it are in
    the file (and the sidecar says "failed" with the scope's message); an interruption
    (KeyboardInterrupt) leaves the file and the sidecar likewise ("interrupted") and is raised.
    `on_acquisition` is called after each acquisition's rows are written, with the summary and
    the acquisition (a DetailedCapture; measurement mode: the scope's WidthMeasurement)."""
    out = Path(out)
    fmt = check_capture_output(out, overwrite)
    if settings.capture not in MODES:
        raise CaptureOptionError(f"--mode: {settings.capture}: expected {' or '.join(MODES)}")
    if not 1 <= acquisitions <= MAX_ACQUISITIONS:
        raise CaptureOptionError(
            f"--acquisitions: {acquisitions}: between 1 and {MAX_ACQUISITIONS}"
        )
    if not settings.resource:
        raise CaptureOptionError("--resource: a capture needs the scope's VISA resource")
    session = ScopeSession.open(settings, settings.resource)  # ScopeError: nothing written
    try:
        applied = session.scope.applied
        summary = CaptureSummary(
            out,
            sidecar_path(out),
            session.idn,
            settings.resource,
            settings.dialect,
            settings.capture,
            acquisitions,
            start_utc=_utc_now(),
            applied={}
            if applied is None
            else _plain_json(
                {**dataclasses.asdict(applied), "sample_interval_s": applied.sample_interval_s}
            ),
        )
        for path in (out, summary.sidecar):
            if overwrite and path.exists():
                path.unlink()
        measuring = settings.capture == "measurement"
        columns = MEASUREMENT_COLUMNS if measuring else COLUMNS
        writer = _CsvWriter(out, columns) if fmt == "csv" else _ParquetWriter(out, columns)
        tally = MeasurementTally() if measuring else None
        if tally is not None:
            summary.measurement = _measurement_summary(tally)
        # "running": a capture killed outright still says what it was
        _write_sidecar(summary, settings)
        try:
            for k in range(acquisitions):
                if tally is not None:
                    got: DetailedCapture | WidthMeasurement = _measure(session, tally, writer, k,
                                                                       settings.cross_check_every)
                    summary.measurement = _measurement_summary(tally)
                    summary.pulses += got.count
                    summary.frames += 1
                    summary.live_s += session.record_span_s
                else:
                    got = session.capture_detailed()
                    writer.add_rows(_pulse_rows(k, got))
                    summary.pulses += len(got.width_s)
                    summary.resolved_rise += int(np.isfinite(got.rise_s).sum())
                    summary.frames += got.frames
                    summary.frames_without_pulse += got.frames_without_pulse
                    summary.live_s += got.live_s
                summary.acquisitions += 1
                if on_acquisition is not None:
                    on_acquisition(summary, got)
            summary.status = "complete"
        except ScopeError as exc:
            summary.status, summary.error = "failed", str(exc)
        except StoreError as exc:  # the file cannot be written (a full disk): what is in it stays
            summary.status, summary.error = "failed", str(exc)
            raise
        # Ctrl-C ("interrupted"), or a fault of the station's ("failed")
        except BaseException as exc:
            summary.status = (
                "interrupted" if isinstance(exc, KeyboardInterrupt | SystemExit) else "failed"
            )
            summary.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise
        finally:
            summary.end_utc = _utc_now()
            try:
                writer.close(_sidecar(summary, settings))
            finally:
                _write_sidecar(summary, settings)
    finally:
        session.close()
    if summary.status == "failed":
        raise CaptureFailed(summary)
    return summary


def _measure(session: ScopeSession, tally: MeasurementTally, writer: _Writer, acquisition: int,
             every: int) -> WidthMeasurement:
    """One acquisition measured by the scope (the campaign's ScopeSession.measure and
    MeasurementTally: with a cross-check every `every`th, from 0, the host's numbers of the
    same pulses beside the scope's), its row written."""
    armed = time.time()
    m, host = session.measure(cross_check=every > 0 and acquisition % every == 0)
    same = tally.add(m.count, m.mean_s, m.min_s, m.max_s, m.scope, host)
    # None (a null: not cross-checked) is not NaN (cross-checked, and the host found no pulse)
    host_count, *host_s = (None,) * 4 if same is None else same
    writer.add_rows({
        "acquisition": np.array([acquisition], np.int64), "armed_host_s": np.array([armed]),
        "count": np.array([m.count], np.int64), "mean_s": np.array([m.mean_s]),
        "min_s": np.array([m.min_s]),
        "max_s": np.array([m.max_s]), "host_count": np.array([host_count], object),
        **{name: np.array([v], object) for name, v in zip(_NULLABLE[1:], host_s, strict=True)},
    })
    return m


def _measurement_summary(tally: MeasurementTally) -> dict[str, Any]:
    """The sidecar's `measurement`: the campaign's summary of the scope's numbers (the manifest's
    scope_measurement), `scope_measures` None before the first acquisition."""
    return {**tally.summary(), "scope_measures": tally.kind or None}


def _pulse_rows(acquisition: int, got: DetailedCapture) -> dict[str, np.ndarray]:
    n = len(got.width_s)
    return {
        "acquisition": np.full(n, acquisition, np.int64), "frame": np.asarray(got.frame, np.int64),
        "start_s": np.asarray(got.start_s, np.float64), "width_s": np.asarray(got.width_s,
                                                                              np.float64),
        "rise_s": np.asarray(got.rise_s, np.float64), "armed_host_s": np.full(n, got.armed_host_s,
                                                                              np.float64),
    }


# --- the file
# --------------------------------------------------------------------------------------


class _Writer:
    def add_rows(self, rows: dict[str, np.ndarray]) -> None:
        """One acquisition's rows, a column each (in any order; object arrays hold None for
        null)."""
        raise NotImplementedError

    def close(self, sidecar: dict[str, Any]) -> None:
        raise NotImplementedError


#: How a CSV writes a value of each column (None, a null: an empty field).
_CSV_FORMAT: dict[str, Callable[[Any], str]] = {
    "start_s": lambda v: f"{v:.12e}", "width_s": lambda v: f"{v:.12e}",
    "rise_s": lambda v: _number(v),
    "armed_host_s": lambda v: f"{v:.6f}",
    **{name: lambda v: _number(v, 12) for name in ("mean_s", "min_s", "max_s", "host_mean_s",
                                                   "host_min_s",
                                                   "host_max_s")},
}


class _CsvWriter(_Writer):
    """Appended and flushed per acquisition: a failure keeps every row written before it."""

    def __init__(self, path: Path, columns: Mapping[str, tuple[str, str | None, str]]) -> None:
        self.columns = list(columns)
        self.file = Appender(path, header=",".join(self.columns) + "\n")

    def add_rows(self, rows: dict[str, np.ndarray]) -> None:
        formats = [_CSV_FORMAT.get(name, str) for name in self.columns]
        values = zip(*(rows[name].tolist() for name in self.columns), strict=True)
        self.file.write("".join(
            ",".join("" if v is None else fmt(v) for fmt, v in zip(formats, row,
                                                                   strict=True)) + "\n"
            for row in values
        ), flush=True)

    def close(self, sidecar: dict[str, Any]) -> None:
        self.file.close()


class _ParquetWriter(_Writer):
    """Rows collected, then written whole (to a temporary name, then renamed) at the end or at
    the failure; the sidecar rides along in the file's key-value metadata."""

    def __init__(self, path: Path, columns: Mapping[str, tuple[str, str | None, str]]) -> None:
        self.path = path
        self.columns = columns
        self.parts: list[dict[str, np.ndarray]] = []

    def add_rows(self, rows: dict[str, np.ndarray]) -> None:
        self.parts.append(rows)

    def close(self, sidecar: dict[str, Any]) -> None:
        columns = {
            name: pa.array(
                np.concatenate([p[name] for p in self.parts]) if self.parts else [],
                type=pa.from_numpy_dtype(np.dtype(kind)), from_pandas=False
            )
            for name, (kind, _, _) in self.columns.items()
        }
        table = pa.table(columns).replace_schema_metadata(
            {PARQUET_METADATA_KEY: json.dumps(sidecar).encode()}
        )
        try:
            replace_atomically(self.path, lambda tmp: pq.write_table(table, tmp))
        except OSError as exc:
            raise StoreError(f"cannot write {self.path}: {exc.strerror or exc}") from None


def _number(value: float, digits: int = 6) -> str:
    return f"{value:.{digits}e}" if math.isfinite(value) else "nan"


# --- the sidecar
# -----------------------------------------------------------------------------------


def _sidecar(summary: CaptureSummary, settings: ScopeSettingsConfig) -> dict[str, Any]:
    # bus: the twin's only
    asked = settings.model_dump(exclude={"kind", "resource", "bus", "bus_rate"})
    if settings.capture != "segmented":
        asked.pop("segments", None)
    measuring = settings.capture == "measurement"
    if not measuring:
        asked.pop("cross_check_every", None)
    columns = MEASUREMENT_COLUMNS if measuring else COLUMNS
    return _plain_json({
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "station_version": station_version(),
        "file": summary.path.name,
        "format": FORMATS[summary.path.suffix.lower()],
        "status": summary.status,
        "error": summary.error,
        "idn": summary.idn,
        "resource": summary.resource,
        "dialect": summary.dialect,
        "mode": summary.mode,
        "acquisitions_requested": summary.acquisitions_requested,
        "acquisitions": summary.acquisitions,
        "pulses": summary.pulses,
        "rise_resolved": None if measuring else summary.resolved_rise,
        "frames": summary.frames,
        "frames_without_pulse": summary.frames_without_pulse,
        "live_s": summary.live_s,
        "start_utc": summary.start_utc,
        "end_utc": summary.end_utc,
        "settings_requested": _plain_json(asked),
        "settings_applied": summary.applied,
        **({"measurement": summary.measurement} if measuring else {
            "rise_time": {"low_pct": 10, "high_pct": 90,
                          "levels": "histogram modes of the record's lower and "
                          "upper halves", "min_samples_on_edge": MIN_SAMPLES}}),
        "columns": {name: {"type": kind, "unit": unit, "description": text}
                    for name, (kind, unit, text) in columns.items()},
    })


def _write_sidecar(summary: CaptureSummary, settings: ScopeSettingsConfig) -> None:
    path = summary.sidecar
    try:
        write_text_atomically(path, json.dumps(_sidecar(summary, settings), indent=2) + "\n")
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_capture_sidecar(path: Path) -> dict[str, Any]:
    """The sidecar of a capture file (FILE.csv or FILE.parquet), or the sidecar itself."""
    path = Path(path)
    return json.loads((path if path.suffix == ".json" else sidecar_path(path)).read_text())


def capture_mode_of(path: Path) -> str | None:
    """The mode of a `station scope capture` file — a Parquet file's embedded sidecar, else the
    sidecar beside it — or None when it has neither (not a capture's, or its sidecar is gone)."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".parquet":
            meta = pq.read_schema(path).metadata or {}
            if PARQUET_METADATA_KEY in meta:
                return _mode_in(json.loads(meta[PARQUET_METADATA_KEY]))
        return _mode_in(read_capture_sidecar(path))
    except (OSError, ValueError, pa.ArrowException):
        return None


def _mode_in(sidecar: object) -> str | None:
    if isinstance(sidecar,
                  dict) and sidecar.get("schema") == SCHEMA and sidecar.get("mode") in MODES:
        return sidecar["mode"]
    return None


def _plain_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_json(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):  # 25us parses as 2.4999999999999998e-05: 15 digits say 2.5e-05
        return float(f"{value:.15g}") if math.isfinite(value) else None
    return value


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
