"""Run directories: raw data appended while it streams, Parquet at seal time,
and a manifest that says what the run is and whether it is complete. The store knows no
run kind: each kind names the raw files it appends to and the conversions it seals with
(station/kinds/); reading a module run's tables is station/kinds/module/data.py's.

    <out>/campaign.yaml            the campaign file as given
    <out>/runs/<run-id>/
        manifest.json              config, versions, audit, counts, losses, checksums, status
        <the kind's raw files>     appended as they stream (a module run: sw.raw, hw_pulses.csv, …)
        <table>.parquet            written at seal time by the kind's conversions

Every Parquet file a run writes through write_parquet carries the run's identity as constant
columns (IDENTITY_COLUMNS) and, in its key-value metadata, the result store's schema version and
its table name, so that many campaigns read as one dataset (docs/result-store.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from station.common.atomic_file import replace_atomically, write_text_atomically
from station.store.manifest import MANIFEST, MANIFEST_VERSION, read_manifest_json

STATUS_RUNNING = "running"
STATUS_ABANDONED = "abandoned"  # an attempt that never sealed (the station was killed)
# space set aside when a run opens and given back at seal time, so that a disk filled by
# the run's own data still takes the manifest that says what happened
RESERVE_FILE, RESERVE_BYTES = ".space-reserve", 256 * 1024


class StoreError(Exception):
    """Writing the run's data failed (a full disk, say); what was written before stays readable."""


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def station_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("irq-station")
    except PackageNotFoundError:
        return "unknown"


def versions() -> dict[str, str]:
    import asyncssh
    import pyvisa

    return {
        "station": station_version(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "asyncssh": asyncssh.__version__,
        "pyvisa": pyvisa.__version__,
    }


class Appender:
    """One raw file of a run, appended as data arrives and flushed at least every
    half second (a crash loses at most that). A failed write raises StoreError
    naming the file; the bytes before it stay on disk."""

    FLUSH_EVERY_S = 0.5

    def __init__(self, path: Path, header: str | None = None) -> None:
        self.path = path
        self._last_flush = 0.0
        try:
            self._file: BinaryIO = open(path, "ab")  # noqa: SIM115 - open for the run's life
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
        if header is not None:
            self.write(header, flush=True)

    def write(self, data: bytes | str, flush: bool = False) -> None:
        try:
            self._file.write(data if isinstance(data, bytes) else data.encode())
            now = time.monotonic()
            if flush or now - self._last_flush > self.FLUSH_EVERY_S:
                self._file.flush()
                self._last_flush = now
        except OSError as exc:
            raise StoreError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError:
            pass  # a full disk: what reached the file is all there is, and seal records the error
        finally:
            with contextlib.suppress(OSError):
                self._file.close()


# A conversion at seal time: reads the run directory, writes its Parquet files and
# returns the counts it wants in the manifest.
Conversion = Callable[[Path], dict[str, int]]


class RunStore:
    """A run's directory: the manifest plus the raw files the run's kind appends to."""

    def __init__(self, campaign_dir: Path, run_id: str) -> None:
        self.dir = campaign_dir / "runs" / run_id
        self.run_id = run_id
        self.manifest: dict[str, Any] = {}
        self._files: dict[str, Appender] = {}

    def open(self, manifest: dict[str, Any]) -> None:
        try:
            if self.dir.exists():
                self._keep_earlier_attempt()
            self.dir.mkdir(parents=True)
        except OSError as exc:
            raise StoreError(f"cannot create {self.dir}: {exc.strerror or exc}") from None
        self.manifest = {
            "manifest_version": MANIFEST_VERSION,
            "run_id": self.run_id,
            "status": STATUS_RUNNING,
            "started_utc": now_utc(),
            "versions": versions(),
            **manifest,
        }
        self.write_manifest()
        try:
            (self.dir / RESERVE_FILE).write_bytes(b"\0" * RESERVE_BYTES)
        except OSError as exc:
            raise StoreError(
                f"cannot write {self.dir / RESERVE_FILE}: {exc.strerror or exc}"
            ) from None

    def _keep_earlier_attempt(self) -> None:
        """An earlier attempt that did not complete: keep it, never overwrite data. One the
        station never sealed (killed with SIGKILL, a power cut) is marked abandoned."""
        n = 1
        while (self.dir.parent / f"{self.run_id}.attempt-{n}").exists():
            n += 1
        kept = self.dir.parent / f"{self.run_id}.attempt-{n}"
        self.dir.rename(kept)
        path = kept / MANIFEST
        with contextlib.suppress(OSError, ValueError):
            data = read_manifest_json(kept)
            if data.get("status") == STATUS_RUNNING:
                data["status"] = STATUS_ABANDONED
                data["error"] = (
                    data.get("error") or "the station stopped without sealing this attempt"
                )
                _write_json(path, data)

    def appender(self, name: str, header: str | None = None) -> Appender:
        """A raw file of this run, created now (raw files are checksummed at seal time)."""
        self._files[name] = Appender(self.dir / name, header)
        return self._files[name]

    def write_manifest(self) -> None:
        try:
            _write_json(self.dir / MANIFEST, self.manifest)
        except OSError as exc:
            raise StoreError(f"cannot write {self.dir / MANIFEST}: {exc.strerror or exc}") from None

    def close_files(self) -> None:
        for f in self._files.values():
            f.close()

    def seal(self, status: str, extra: dict[str, Any],
             conversions: Sequence[Conversion] = ()) -> None:
        """Close the raw files, record the outcome, then convert to Parquet with counts and
        checksums. Never raises: a failed conversion (a full disk, say) is recorded and the
        raw files, which hold everything, stay as they are."""
        self.manifest.update(extra)
        self.manifest["status"] = status
        self.manifest["ended_utc"] = now_utc()
        self.close_files()
        with contextlib.suppress(OSError):
            (self.dir / RESERVE_FILE).unlink()
        try:
            self.write_manifest()  # the outcome first, whatever happens next
            counts: dict[str, int] = {}
            for convert in conversions:
                counts |= convert(self.dir)
            self.manifest["counts"] = counts
            self.manifest["checksums_sha256"] = {
                name: sha256(self.dir / name) for name in self._files
            }
            self.write_manifest()
        except Exception as exc:  # noqa: BLE001 - the run's data must survive its own bookkeeping
            self.manifest["seal_error"] = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                self.write_manifest()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: the old file stays whole if the new one cannot be written."""
    text = json.dumps(data, indent=2, sort_keys=True, default=_json_default) + "\n"
    write_text_atomically(path, text)


# ---- the result store: what every run's Parquet file carries
# --------------------------------------
#: Bumped on any change a reader must know of (a renamed or retyped column, a new meaning);
#: station/store/result_store.py lists the versions it reads.
SCHEMA_VERSION = "1"
META_SCHEMA_VERSION = b"irq_station.schema_version"
META_TABLE = b"irq_station.table"
#: The run's identity, one constant column each, in every file (null where the run has none: a
#: probe run's interface, a single-target campaign's target). ``variant`` is a module run's
#: handler variant, or a gpio run's case. Fixed types so that files union by name.
IDENTITY_COLUMNS: dict[str, pa.DataType] = {
    "campaign": pa.string(), "run_id": pa.string(), "kind": pa.string(), "interface": pa.string(),
    "variant": pa.string(), "load": pa.string(), "repetition": pa.int64(), "target": pa.string(),
}


def run_identity(run_dir: Path) -> dict[str, Any]:
    """The identity columns' values from a run's manifest.json (None where it says nothing). Read
    as written, unchecked: the seal's conversions must not fail on a kind's manifest that its schema
    would refuse (the raw files and their Parquet matter more)."""
    manifest = read_manifest_json(run_dir)
    run = manifest.get("run") if isinstance(manifest.get("run"), dict) else {}
    campaign = manifest.get("campaign") if isinstance(manifest.get("campaign"), dict) else {}
    return {
        "campaign": campaign.get("name"),
        "run_id": manifest.get("run_id", run_dir.name),
        "kind": manifest.get("kind", "module"),
        **{key: run.get(key) for key in ("interface", "variant", "load", "repetition", "target")},
    }


def _constant(value: Any, type_: pa.DataType, n: int) -> pa.Array:
    """n copies of one value as a dictionary array: one byte per row in memory (int8 indices),
    a run-length-encoded dictionary page in the file, whatever n is."""
    kind = pa.dictionary(pa.int8(), type_)
    if value is None:
        return pa.nulls(n, kind)
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int8)), pa.array([value], type=type_)
    )


def with_identity(table: pa.Table, identity: dict[str, Any], name: str) -> pa.Table:
    """The table with the identity columns appended and the schema version and table name in its
    metadata (the pandas metadata, if any, kept)."""
    clash = [c for c in IDENTITY_COLUMNS if c in table.column_names]
    if clash:
        raise ValueError(f"{name}: data columns {clash} would be hidden by the run's identity "
                         "columns")
    for column, type_ in IDENTITY_COLUMNS.items():
        table = table.append_column(column, _constant(identity.get(column), type_, table.num_rows))
    meta = dict(table.schema.metadata or {})
    meta |= {META_SCHEMA_VERSION: SCHEMA_VERSION.encode(), META_TABLE: name.encode()}
    return table.replace_schema_metadata(meta)


def write_parquet(frame: pd.DataFrame, path: Path, identity: dict[str, Any] | None = None,
                  table: str | None = None) -> None:
    """Whole or not at all: a full disk must not leave a truncated Parquet file that the
    report would then trust over the raw data.

    The file joins the result store: ``table`` (default: the file's stem, "sw", "hw" …) and
    ``identity`` (default: read from the manifest.json beside it, which seal writes before its
    conversions) as described at IDENTITY_COLUMNS."""
    if identity is None:
        identity = run_identity(path.parent) if (path.parent / MANIFEST).exists() else {}
    data = with_identity(pa.Table.from_pandas(frame, preserve_index=False), identity,
                         table or path.stem)
    replace_atomically(path, lambda tmp: pq.write_table(data, tmp))


def sealed_or_streamed(
    run_dir: Path, table: str, streamed: str,
    read_sealed: Callable[[Path], pd.DataFrame] = pd.read_parquet
) -> pd.DataFrame | None:
    """A run's table: `<table>.parquet` once the run was sealed (read by `read_sealed`), else the
    CSV that streamed it (a run cut before its seal: up to its last complete line); None when
    neither is there."""
    parquet = run_dir / f"{table}.parquet"
    if parquet.exists():
        return read_sealed(parquet)
    if (run_dir / streamed).exists():
        return read_csv_lines(run_dir / streamed)
    return None


def read_csv_lines(path: Path) -> pd.DataFrame:
    """A CSV the station appended to, up to its last complete line: a line torn by a
    crash or a full disk could otherwise read as a plausible but wrong number."""
    data = path.read_bytes()
    return pd.read_csv(io.BytesIO(data[: data.rfind(b"\n") + 1]))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    return repr(obj)  # a manifest that says something beats one that cannot be written


def list_runs(campaign_dir: Path) -> list[Path]:
    """Run directories of a campaign (latest attempts only), in run order."""
    runs_dir = campaign_dir / "runs"
    if not runs_dir.exists():
        return []
    dirs = [d for d in runs_dir.iterdir() if d.is_dir() and ".attempt-" not in d.name]
    dirs = [d for d in dirs if (d / MANIFEST).exists()]
    return sorted(dirs, key=_order)


def _order(run_dir: Path) -> int:
    """A run's place in its campaign's order, as its manifest says (0 where it cannot say: each
    reader of the run then says what is wrong with its manifest)."""
    try:
        order = read_manifest_json(run_dir).get("order", 0)
    except (OSError, ValueError):
        return 0
    return order if isinstance(order, int) and not isinstance(order, bool) else 0
