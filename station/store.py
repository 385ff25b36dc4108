"""Run directories: raw data appended while it streams, Parquet at seal time,
and a manifest that says what the run is and whether it is complete.

    <out>/campaign.yaml            the campaign file as given
    <out>/runs/<run-id>/
        manifest.json              config, versions, audit, counts, losses, checksums, status
        sw.raw                     the target's record stream, byte for byte as received
        hw_pulses.csv              scope pulses, one line each, appended per acquisition,
                                   with the host time the scope was armed
        sw_arrivals.csv            host time at which each batch of records arrived (event pairing)
        sw.parquet, hw.parquet     written at seal time
        twin-truth.parquet         the twin's injected events (twin benches only)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np
import pandas as pd

from station import records

STATUS_RUNNING = "running"


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


class RunStore:
    def __init__(self, campaign_dir: Path, run_id: str) -> None:
        self.dir = campaign_dir / "runs" / run_id
        self.run_id = run_id
        self.manifest: dict[str, Any] = {}
        self._sw: BinaryIO | None = None
        self._hw: TextIO | None = None
        self._arrivals: TextIO | None = None
        self._last_flush = 0.0

    # ---- lifecycle ---------------------------------------------------------------------
    def open(self, manifest: dict[str, Any]) -> None:
        if self.dir.exists():
            # an earlier attempt that did not complete: keep it, never overwrite data
            n = 1
            while (self.dir.parent / f"{self.run_id}.attempt-{n}").exists():
                n += 1
            self.dir.rename(self.dir.parent / f"{self.run_id}.attempt-{n}")
        self.dir.mkdir(parents=True)
        self.manifest = {
            "run_id": self.run_id,
            "status": STATUS_RUNNING,
            "started_utc": now_utc(),
            "versions": versions(),
            **manifest,
        }
        self.write_manifest()
        self._sw = open(self.dir / "sw.raw", "ab")  # noqa: SIM115 - open for the run's life
        self._hw = open(self.dir / "hw_pulses.csv", "a")  # noqa: SIM115
        self._hw.write("acquisition,start_s,width_s,armed_host_s\n")
        self._arrivals = open(self.dir / "sw_arrivals.csv", "a")  # noqa: SIM115
        self._arrivals.write("host_s,last_seq\n")

    def write_manifest(self) -> None:
        tmp = self.dir / "manifest.json.tmp"
        tmp.write_text(json.dumps(self.manifest, indent=2, sort_keys=True, default=_jsonable) + "\n")
        os.replace(tmp, self.dir / "manifest.json")

    def append_sw(self, data: bytes) -> None:
        assert self._sw is not None
        self._sw.write(data)
        self._maybe_flush()

    def append_pulses(self, acquisition: int, start_s: np.ndarray, width_s: np.ndarray, armed_host_s: float) -> None:
        assert self._hw is not None
        lines = "".join(
            f"{acquisition},{s:.12e},{w:.12e},{armed_host_s:.6f}\n" for s, w in zip(start_s, width_s, strict=True)
        )
        self._hw.write(lines)
        self._hw.flush()

    def append_arrival(self, host_s: float, last_seq: int) -> None:
        assert self._arrivals is not None
        self._arrivals.write(f"{host_s:.6f},{last_seq}\n")

    def _maybe_flush(self) -> None:
        now = time.monotonic()
        if now - self._last_flush > 0.5:  # a crash loses at most the last half second
            for f in (self._sw, self._arrivals):
                if f is not None:
                    f.flush()
            self._last_flush = now

    def close_files(self) -> None:
        for f in (self._sw, self._hw, self._arrivals):
            if f is not None and not f.closed:
                f.flush()
                os.fsync(f.fileno())
                f.close()

    def seal(self, status: str, fmt: str, extra: dict[str, Any]) -> None:
        """Close the raw files, record the outcome, then convert to Parquet with counts and
        checksums. Never raises: a failed conversion (a full disk, say) is recorded and the
        raw files, which hold everything, stay as they are."""
        self.manifest.update(extra)
        self.manifest["status"] = status
        self.manifest["ended_utc"] = now_utc()
        try:
            self.close_files()
            self.write_manifest()  # the outcome first, whatever happens next
            sw = decode_raw(self.dir / "sw.raw", fmt)
            sw.to_parquet(self.dir / "sw.parquet", index=False)
            hw = pd.read_csv(self.dir / "hw_pulses.csv")
            hw.to_parquet(self.dir / "hw.parquet", index=False)
            self.manifest["counts"] = {"sw_records": int(len(sw)), "hw_pulses": int(len(hw))}
            self.manifest["checksums_sha256"] = {
                name: sha256(self.dir / name) for name in ("sw.raw", "hw_pulses.csv")
            }
            self.write_manifest()
        except Exception as exc:  # noqa: BLE001 - the run's data must survive its own bookkeeping
            self.manifest["seal_error"] = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                self.write_manifest()


def decode_raw(path: Path, fmt: str) -> pd.DataFrame:
    """Whole records of a raw stream file; a torn last record (crash) is ignored."""
    data = path.read_bytes() if path.exists() else b""
    if fmt == "v1":
        n = len(data) // records.RECORD_SIZE
        recs = np.frombuffer(data[: n * records.RECORD_SIZE], dtype=records.V1_DTYPE)
        df = pd.DataFrame({name: recs[name] for name in records.V1_DTYPE.names if name not in ("magic", "version")})
        return df
    n = len(data) // 8
    return pd.DataFrame({"latency_ns": np.frombuffer(data[: n * 8], dtype=records.LEGACY_DTYPE)})


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


@dataclass
class RunData:
    dir: Path
    manifest: dict[str, Any]
    sw: pd.DataFrame
    hw: pd.DataFrame
    truth: pd.DataFrame | None
    arrivals: pd.DataFrame | None = None

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]


def load_run(run_dir: Path) -> RunData:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    fmt = manifest.get("format", "v1")
    if (run_dir / "sw.parquet").exists():
        sw = pd.read_parquet(run_dir / "sw.parquet")
    else:  # interrupted before seal: read what streamed
        sw = decode_raw(run_dir / "sw.raw", fmt)
    if (run_dir / "hw.parquet").exists():
        hw = pd.read_parquet(run_dir / "hw.parquet")
    elif (run_dir / "hw_pulses.csv").exists():
        hw = pd.read_csv(run_dir / "hw_pulses.csv")
    else:
        hw = pd.DataFrame({"acquisition": [], "start_s": [], "width_s": []})
    truth_path = run_dir / "twin-truth.parquet"
    truth = pd.read_parquet(truth_path) if truth_path.exists() else None
    arrivals_path = run_dir / "sw_arrivals.csv"
    arrivals = pd.read_csv(arrivals_path) if arrivals_path.exists() else None
    return RunData(run_dir, manifest, sw, hw, truth, arrivals)


def list_runs(campaign_dir: Path) -> list[Path]:
    """Run directories of a campaign (latest attempts only), in run order."""
    runs_dir = campaign_dir / "runs"
    if not runs_dir.exists():
        return []
    dirs = [d for d in runs_dir.iterdir() if d.is_dir() and ".attempt-" not in d.name]
    dirs = [d for d in dirs if (d / "manifest.json").exists()]
    return sorted(dirs, key=lambda d: json.loads((d / "manifest.json").read_text()).get("order", 0))
