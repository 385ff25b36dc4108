"""One input file of `station import`: its bytes, their checksum, which format they hold,
and the one error type every importer raises for input it cannot take."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from station.parsers import records

# what --format can force; "auto" reads the content
FORMATS = ("auto", "legacy", "v1", "cyclictest", "scope")
# a legacy value beyond this is no latency: the file is something else (or --format says otherwise)
PLAUSIBLE_LATENCY_NS = 10 * 10**9
_STATUS_LINE = re.compile(r"^\s*T: *[0-9]+ \( *[0-9]+\) P:", re.MULTILINE)


class ImportInputError(ValueError):
    """Input `station import` cannot take: names the file and where (byte offset or line)."""

    def __init__(self, path: Path | str, reason: str, *, offset: int | None = None,
                 line: int | None = None) -> None:
        where = (
            f"byte {offset}: "
            if offset is not None
            else f"line {line}: "
            if line is not None
            else ""
        )
        super().__init__(f"{path}: {where}{reason}")
        self.file = str(path)
        self.offset = offset
        self.line = line


# station scope capture --mode measurement
MEASUREMENT_COLUMNS = frozenset({"count", "mean_s", "min_s", "max_s"})
MEASUREMENT_FILE = ("a `station scope capture --mode measurement` file: the scope's own width "
                    "statistics per acquisition, not one row per pulse, so there are no pulses to "
                    "import (docs/scope-capture.md)")


def is_measurement_capture(columns: object) -> bool:
    """Whether a header's columns are those of a measurement-mode capture (no per-pulse widths)."""
    names = {str(c).strip().lower() for c in columns}  # type: ignore[attr-defined]
    return names >= MEASUREMENT_COLUMNS


@dataclass(frozen=True)
class Source:
    """A file as read once: everything imported from it comes from these bytes."""

    path: Path
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def describe(self) -> dict[str, Any]:
        """What the manifest says of where a run came from."""
        return {"path": str(self.path.resolve()), "name": self.path.name, "size": self.size,
                "sha256": hashlib.sha256(self.data).hexdigest()}

    def text(self) -> str:
        """The file as UTF-8 text; a byte that is not names its offset."""
        try:
            return self.data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ImportInputError(self.path, "not UTF-8 text", offset=exc.start) from None


def read_source(path: Path) -> Source:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ImportInputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not data:
        raise ImportInputError(path, "empty file")
    return Source(Path(path), data)


def detect(src: Source) -> str:
    """The file's format when its content leaves no doubt; otherwise an error asking for
    --format."""
    data = src.data
    # Parquet: a scope capture with the CSV's columns
    if len(data) >= 12 and data[:4] == data[-4:] == b"PAR1":
        return "scope"
    if records.detect(data) == "v1":  # the v1 magic: a legacy value with these bytes would be > 4 s
        return "v1"
    if b"\0" not in data:  # text (a latency below 2^56 ns always has a zero top byte)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            head = text.lstrip()
            if head.startswith("{") or "# Histogram" in text or _STATUS_LINE.search(text):
                return "cyclictest"
            first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")),
                         "")
            if "," in first and "width" in first.lower():
                return "scope"
            if is_measurement_capture(first.split(",")):
                raise ImportInputError(src.path, MEASUREMENT_FILE, line=1)
            raise ImportInputError(src.path, "text that is neither cyclictest output (JSON, '# "
                                   "Histogram' or 'T: n' status lines) nor a scope CSV (a header "
                                   "naming a width column)", line=1)
    n = len(data) // records.LEGACY_DTYPE.itemsize
    values = np.frombuffer(data[: n * records.LEGACY_DTYPE.itemsize], dtype=records.LEGACY_DTYPE)
    odd = first_implausible(values)
    if n and odd is None:
        return "legacy"
    where = odd * 8 if odd is not None else 0
    what = (
        f"{int(values[odd])} ns is no plausible latency"
        if odd is not None
        else "shorter than one record"
    )
    raise ImportInputError(src.path, "binary data without the v1 magic "
                           f"0x{records.RECORD_MAGIC:08x}, and as the seed's legacy int64 stream "
                           f"{what}: give --format legacy or v1 if it is one",
                           offset=where)


def first_implausible(latency_ns: np.ndarray) -> int | None:
    """Index of the first value no latency could be (beyond ±PLAUSIBLE_LATENCY_NS), if any."""
    values = np.asarray(latency_ns)
    # abs() wraps at -2^63
    odd = np.flatnonzero((values > PLAUSIBLE_LATENCY_NS) | (values < -PLAUSIBLE_LATENCY_NS))
    return int(odd[0]) if odd.size else None
