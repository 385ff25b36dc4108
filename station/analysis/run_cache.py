"""A run's analysis kept once computed, so a report can use what the live analysis
(campaign/live_analysis.py) worked out while the campaign was still measuring.

A kept analysis is used only if it was made
- of this very run: its directory (the absolute path: a kept analysis holds it), the bytes of its
  manifest, and the size and modification time of each of its files, as they are now;
- by this very code: the station's and the instruments' sources, Python's and the array
  libraries' versions;
- on this machine: it is a pickle, and unpickling runs code, so a campaign directory handed over by
  someone else must not bring its own: each file is signed with a key kept in the station's cache
  (HMAC-SHA256), and one that does not verify is ignored, never loaded.
Anything else (another run, a changed file, a new commit, a foreign or damaged file) is analysed
afresh: the cache can make a report faster, never different.

The files live beside the runs, in <campaign>/.analysis-cache/<run id>.<analysis>.pickle; deleting
the folder costs only the time to analyse again.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import pickle
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from station.common.cache_dirs import station_cache

CACHE_DIR = ".analysis-cache"
MAGIC = b"irq-station run analysis 1\n"
KEY_BYTES = 32
_DIGEST = hashlib.sha256().digest_size


def analysis_name(analyse: Callable[..., Any]) -> str:
    """The kept file's name for this analysis function (its module and name)."""
    return f"{analyse.__module__}.{analyse.__qualname__}"


def cache_path(run_dir: Path, name: str) -> Path:
    return run_dir.parent.parent / CACHE_DIR / f"{run_dir.name}.{name}.pickle"


def load(run_dir: Path, name: str) -> Any | None:
    """The analysis `name` of run_dir kept earlier, if it is still this run's and this code's and
    was signed here; else None."""
    path = cache_path(run_dir, name)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(MAGIC)
    if not blob.startswith(MAGIC) or len(blob) < head + 2 * _DIGEST:
        return None
    tag, fingerprint = blob[head:head + _DIGEST], blob[head + _DIGEST:head + 2 * _DIGEST]
    payload = blob[head + 2 * _DIGEST:]
    try:
        expected = _sign(fingerprint + payload)
        current = run_fingerprint(run_dir)
    except OSError:
        return None
    if not hmac.compare_digest(tag, expected) or not hmac.compare_digest(fingerprint, current):
        return None
    try:
        analysis = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - signed here but unreadable now (a library moved on): afresh
        return None
    if hasattr(analysis, "dir"):  # the run's directory as this caller names it (relative or not)
        analysis.dir = run_dir
    return analysis


def store(run_dir: Path, name: str, analysis: Any, fingerprint: bytes) -> Path:
    """Keep `analysis`, made from the run as `fingerprint` (run_fingerprint, taken before the
    analysis read the run) describes it. Written beside and renamed: a reader sees all or none."""
    payload = pickle.dumps(analysis, protocol=pickle.HIGHEST_PROTOCOL)
    path = cache_path(run_dir, name)
    path.parent.mkdir(exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(MAGIC + _sign(fingerprint + payload) + fingerprint + payload)
    partial.replace(path)
    return path


def run_fingerprint(run_dir: Path) -> bytes:
    """This run as it is now, for this code: its path, its manifest's bytes, every file's size
    and modification time (names starting with "." are the store's own: left out)."""
    h = hashlib.sha256(code_fingerprint())
    h.update(str(run_dir.resolve()).encode())
    h.update((run_dir / "manifest.json").read_bytes())
    for entry in sorted(_files(run_dir)):
        h.update(entry)
    return h.digest()


def _files(root: Path) -> list[bytes]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            found.append(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                         .encode())
    return found


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> bytes:
    """The station's sources and the versions of what a kept analysis is made of."""
    import numpy
    import pandas
    import pyarrow

    h = hashlib.sha256(f"{sys.version}\0{numpy.__version__}\0{pandas.__version__}\0"
                       f"{pyarrow.__version__}\0".encode())
    import instruments  # the pulses' extraction and the compiled kernels the analysis runs

    root = Path(__file__).resolve().parent.parent.parent
    for package in (root / "station", Path(instruments.__file__).resolve().parent):
        for path in sorted(package.rglob("*.py")):
            h.update(f"{package.name}/{path.relative_to(package)}".encode() + b"\0")
            h.update(path.read_bytes())
    return h.digest()


def _sign(data: bytes) -> bytes:
    return hmac.new(_key(), data, hashlib.sha256).digest()


@functools.lru_cache(maxsize=1)
def _key() -> bytes:
    """This station's signing key, made once (readable by its user alone)."""
    path = station_cache("IRQ_STATION_KEY_DIR", "keys") / "analysis-cache.key"
    try:
        key = path.read_bytes()
        if len(key) == KEY_BYTES:
            return key
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(KEY_BYTES)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    try:
        os.link(partial, path)  # the first writer's key wins: two stations racing agree
    except FileExistsError:
        pass
    finally:
        partial.unlink()
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise OSError(f"{path}: not a key of {KEY_BYTES} bytes (delete it to make a new one)")
    return key
