"""The result store: the Parquet files of one or many campaign directories, read as one
dataset per table with DuckDB (docs/result-store.md).

Each run's files carry the run's identity as columns and the store's schema version in
their key-value metadata (station/store/run_store.py writes both); this module checks that version
before a file is read, so a file from a newer or an unknown station is refused by name
rather than misread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from station import kind_registry
from station.parsers.records import Flag
from station.store.run_store import META_SCHEMA_VERSION, META_TABLE, list_runs

#: The schema versions this reader understands (station/store/run_store.py's SCHEMA_VERSION and
#older ones).
READABLE_VERSIONS = frozenset({"1"})


def tables() -> tuple[str, ...]:
    """Tables a run may write: each run kind declares its own (kind_registry.Kind.store_tables)."""
    return kind_registry.store_tables()

_MAX_META_TEXT = 64  # a version or table name is short: anything longer is not ours
#: The filter that keeps a module's own records of `sw` (a stray IRQ's record, NOT_OURS, holds no
#: latency of the module's); `register` names the view `sw_own`.
OWN_RECORDS = f"flags IS NULL OR (CAST(flags AS INTEGER) & {int(Flag.NOT_OURS)}) = 0"


class ResultStoreError(Exception):
    """A directory or file that cannot join the store; the message names it."""


@dataclass(frozen=True)
class FileSchema:
    version: str
    table: str


def parse_file_metadata(meta: Mapping[bytes, bytes] | None, path: Path | str) -> FileSchema:
    """The store's schema version and table name from a Parquet file's key-value metadata
    (outside input: any bytes). Raises ResultStoreError naming the file when they are absent,
    not text, or a version this reader does not know."""
    meta = meta or {}
    raw_version, raw_table = meta.get(META_SCHEMA_VERSION), meta.get(META_TABLE)
    if raw_version is None:
        raise ResultStoreError(f"{path}: no {META_SCHEMA_VERSION.decode()} in its metadata: not "
                               "written by irq-station's result store (a station older than the "
                               "store, or another program)")
    version, table = _text(raw_version, path, META_SCHEMA_VERSION), _text(raw_table or b"", path,
                                                                          META_TABLE)
    if version not in READABLE_VERSIONS:
        raise ResultStoreError(f"{path}: result-store schema version {version!r}; this station "
                               f"reads version(s) {', '.join(sorted(READABLE_VERSIONS))} (a newer "
                               "station wrote it?)")
    if table not in tables():
        raise ResultStoreError(f"{path}: {META_TABLE.decode()} is {table!r}, not one of "
                               f"{', '.join(tables())}")
    return FileSchema(version, table)


def _text(raw: bytes, path: Path | str, key: bytes) -> str:
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        text = None
    if text is None or len(text) > _MAX_META_TEXT or not text.isprintable():
        shown = raw[:_MAX_META_TEXT]
        raise ResultStoreError(f"{path}: {key.decode()} is not a short text ({shown!r}): a damaged "
                               "or foreign file")
    return text


def file_schema(path: Path) -> FileSchema:
    """Read and check one file's metadata (its footer only, not its data)."""
    try:
        meta = pq.read_metadata(path).metadata
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ResultStoreError(f"{path}: not a readable Parquet file ({exc})") from None
    return parse_file_metadata(meta, path)


def not_a_campaign(d: Path) -> str:
    """Why `d` is not a campaign directory, in words."""
    if not d.exists():
        return f"{d} does not exist"
    if not d.is_dir():
        return f"{d} is a file, not a campaign directory"
    return f"{d} is not a campaign directory (no runs/ inside)"


def campaign_dirs(dirs: Iterable[Path | str]) -> list[Path]:
    """The given directories, each checked to be a campaign directory (runs/ inside)."""
    out = []
    for d in map(Path, dirs):
        if not (d / "runs").is_dir():
            raise ResultStoreError(not_a_campaign(d))
        out.append(d)
    if not out:
        raise ResultStoreError("no campaign directory given")
    return out


class ResultStore:
    """One or many campaign directories' Parquet files, one DuckDB relation per table.

    Only the latest attempt of each run is read (as the report does); every file's schema
    version is checked when its table is first asked for."""

    def __init__(self, dirs: Iterable[Path | str],
                 connection: duckdb.DuckDBPyConnection | None = None) -> None:
        self.dirs = campaign_dirs(dirs)
        self.con = connection if connection is not None else duckdb.connect()

    def files(self, table: str) -> list[Path]:
        if table not in tables():
            raise ResultStoreError(f"no table {table!r} in the result store (tables: "
                                   f"{', '.join(tables())})")
        found = [run / f"{table}.parquet" for d in self.dirs for run in list_runs(d)]
        found = [f for f in found if f.exists()]
        for f in found:
            schema = file_schema(f)
            if schema.table != table:
                raise ResultStoreError(f"{f}: its metadata says table {schema.table!r}, its name "
                                       f"{table!r}")
        return found

    def relation(self, table: str) -> duckdb.DuckDBPyRelation | None:
        """All the table's rows across the directories (None when no run wrote it); columns are
        united by name, so a file without one of them reads it as NULL."""
        files = self.files(table)
        if not files:
            return None
        return self.con.read_parquet([str(f) for f in files], union_by_name=True)

    def register(self) -> list[str]:
        """Each table that has files as a view of that name on the connection, for plain SQL
        (``store.con.sql("select … from sw")``), and ``sw_own``: the records of `sw` that are
        module latencies (stray IRQs left out, as every report does); returns the names
        registered."""
        names = []
        for table in tables():
            rel = self.relation(table)
            if rel is not None:
                rel.create_view(table, replace=True)
                names.append(table)
                if table == "sw":
                    own = rel.filter(OWN_RECORDS) if "flags" in rel.columns else rel
                    own.create_view("sw_own", replace=True)
                    names.append("sw_own")
        return names
