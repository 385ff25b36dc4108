"""A module run's tables (the LPT/PCIe latency module's kind): t_SW records (`sw`), scope pulses
(`hw`), the twin's truth and the records' arrival times — read whole (`load_run`) or in batches
(`iter_table`), from the Parquet files once the run is sealed, else from what streamed (sw.raw
decoded by its record format, hw_pulses.csv). The generic store (store/run_store.py) knows none of
these."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from station.parsers import records
from station.store.manifest import Manifest, read_manifest
from station.store.run_store import read_csv_lines, sealed_or_streamed


@dataclass
class RunData:
    dir: Path
    manifest: Manifest
    sw: pd.DataFrame
    hw: pd.DataFrame
    truth: pd.DataFrame | None
    arrivals: pd.DataFrame | None = None

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def period_ns(self) -> int | None:
        """The module's period as the run's manifest says (None: it does not)."""
        return self.manifest.extra("period_ns")

    @property
    def stray_records(self) -> np.ndarray:
        """Which software records are stray IRQs (NOT_OURS: a foreign interrupt on the module's
        line, its latency measured from an unrelated write); none where the format has no flags."""
        if "flags" not in self.sw:
            return np.zeros(len(self.sw), bool)
        return (self.sw["flags"].to_numpy().astype(np.int64) & int(records.Flag.NOT_OURS)) != 0

    @property
    def own_sw(self) -> pd.DataFrame:
        """The module's own records: t_SW as the report computes it (strays left out)."""
        return self.sw[~self.stray_records]


def _read_parquet(path: Path, columns: Sequence[str] | None) -> pd.DataFrame:
    """A Parquet file's columns (all, or those of `columns` it has) as a DataFrame."""
    if columns is None:
        return pd.read_parquet(path)
    names = set(pq.read_schema(path).names)
    # split_blocks: a block per column, without pandas stacking same-typed columns into a copy
    return pq.read_table(path,
                         columns=[c for c in columns if c in names]).to_pandas(split_blocks=True)


def load_run(run_dir: Path, columns: Mapping[str, Sequence[str]] | None = None) -> RunData:
    """A run's data; `columns` (by table: "sw", "hw", "truth") restricts what is read of its
    Parquet files to the columns named that the file has."""
    columns = columns or {}
    manifest = read_manifest(run_dir)
    sw = _table(run_dir, "sw", manifest, columns.get("sw"))
    hw = _table(run_dir, "hw", manifest, columns.get("hw"))
    truth_path = run_dir / "twin-truth.parquet"
    truth = _read_parquet(truth_path, columns.get("truth")) if truth_path.exists() else None
    arrivals_path = run_dir / "sw_arrivals.csv"
    arrivals = read_csv_lines(arrivals_path) if arrivals_path.exists() else None
    return RunData(run_dir, manifest, sw, hw, truth, arrivals)


def _table(run_dir: Path, table: str, manifest: Manifest,
           columns: Sequence[str] | None) -> pd.DataFrame:
    """A run's "sw" or "hw" table: its Parquet file once sealed, else what streamed."""
    # interrupted before seal: what streamed
    if table == "sw" and not (run_dir / "sw.parquet").exists():
        fmt = manifest.extra("format", "v1")
        try:
            return records.decode_file(run_dir / "sw.raw", fmt)
        # the run failed on this very stream; its manifest says why
        except records.RecordFormatError:
            return records.decode(b"", fmt)
    if table == "sw":
        return _read_parquet(run_dir / "sw.parquet", columns)
    frame = sealed_or_streamed(run_dir, table, "hw_pulses.csv", lambda path: _read_parquet(path,
                                                                                           columns))
    return frame if frame is not None else pd.DataFrame({"acquisition": [], "start_s": [],
                                                         "width_s": []})


# rows per batch when a run's tables are read in pieces: a batch's columns and the analysis's
# temporaries (a few MB) stay in the caches of a core shared with another worker; at 1 << 20 a
# demo-shape run's analysis took ~5 % longer beside a second one (2 cores), for no fewer passes
BATCH_ROWS = 1 << 18


class RunFiles:
    """One module run's tables as one analysis reads them, again and again: the manifest read once
    (when a table was never sealed: it names the record format), a table that streamed but was
    never sealed decoded once, the sealed ones streamed from their Parquet files at every read."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self._manifest: Manifest | None = None
        self._streamed: dict[str, pd.DataFrame] = {}

    @property
    def manifest(self) -> Manifest:
        if self._manifest is None:
            self._manifest = read_manifest(self.dir)
        return self._manifest

    def _unsealed(self, table: str) -> pd.DataFrame:
        if table not in self._streamed:
            self._streamed[table] = _table(self.dir, table, self.manifest, None)
        return self._streamed[table]

    def iter_table(self, table: str, columns: Sequence[str],
                   rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """The "sw" or "hw" table in batches of about `rows` rows, in file order, as arrays by
        column: the columns named that the table has. From the Parquet file when the run was sealed
        (no pandas conversion: it costs twice the decoding), else from what streamed (sw.raw,
        hw_pulses.csv: decoded once, then cut). `rows`: BATCH_ROWS unless given."""
        rows = rows or BATCH_ROWS
        path = self.dir / f"{table}.parquet"
        if table == "sw" and (raw := _raw_twin_of(path, columns)) is not None:
            yield from _raw_batches(raw, columns, rows)
            return
        if path.exists():
            # pre_buffer (pyarrow's default) keeps every row group read so far: memory would grow
            # with the run
            f = pq.ParquetFile(path, pre_buffer=False)
            have = [c for c in columns if c in set(f.schema_arrow.names)]
            # one thread: the columns' decoding split over threads took half as long again here (2
            # cores)
            for batch in f.iter_batches(batch_size=rows, columns=have, use_threads=False):
                # zero-copy unless a column has nulls (an imported capture's missing start times:
                # NaN)
                yield {name: column.to_numpy(zero_copy_only=False)
                       for name, column in zip(batch.schema.names, batch.columns, strict=True)}
            return
        frame = self._unsealed(table)
        arrays = {c: frame[c].to_numpy() for c in columns if c in frame}
        for at in range(0, len(frame), rows):
            yield {c: a[at:at + rows] for c, a in arrays.items()}

    def columns(self, table: str) -> set[str]:
        """The columns the table has (without reading its rows when it is sealed)."""
        path = self.dir / f"{table}.parquet"
        if path.exists():
            return set(pq.read_schema(path).names)
        return set(self._unsealed(table).columns)


def iter_table(run_dir: Path, table: str, columns: Sequence[str],
               rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """RunFiles(run_dir).iter_table: one read of a run's table."""
    return RunFiles(run_dir).iter_table(table, columns, rows)


def _raw_twin_of(parquet: Path, columns: Sequence[str]) -> Path | None:
    """The v1 record stream sw.parquet was decoded from, when it holds the same records (as many
    whole records as the file has rows: the seal decodes every one, up to a corrupt one) and the
    columns asked are record fields: read as it is, it costs a third of decoding the Parquet."""
    raw = parquet.with_name("sw.raw")
    if not (raw.exists() and parquet.exists()) or not set(columns) <= set(records.V1_DTYPE.names):
        return None
    with raw.open("rb") as f:
        if records.detect(f.read(6)) != "v1":
            return None
    meta = pq.ParquetFile(parquet)
    if raw.stat().st_size // records.RECORD_SIZE != meta.metadata.num_rows:
        return None
    # the module's numbers restarted: the seal renumbered them
    if "module_seq" in meta.schema_arrow.names:
        return None
    return raw


def _raw_batches(raw: Path, columns: Sequence[str], rows: int) -> Iterator[dict[str, np.ndarray]]:
    """The columns of a v1 stream's records, `rows` at a time, as views of the file mapped a batch
    at a time: no copy out of the page cache, and memory of a batch whatever the run's length (a
    mapping lives as long as a view of it: callers keep copies, not views; a torn last record is
    left, as the seal did)."""
    total = raw.stat().st_size // records.RECORD_SIZE
    for at in range(0, total, rows):
        mapped = np.memmap(raw, dtype=records.V1_DTYPE, mode="r", offset=at * records.RECORD_SIZE,
                           shape=(min(rows, total - at),))
        block = np.asarray(mapped)  # plain arrays: what a caller derives is no memmap
        yield {c: block[c] for c in columns}


def table_columns(run_dir: Path, table: str) -> set[str]:
    """RunFiles(run_dir).columns: the columns a run's table has."""
    return RunFiles(run_dir).columns(table)
