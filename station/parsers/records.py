"""Decoders for the software record streams (the Python side of
``target_modules/include/irqs_record.h``).

Two formats exist:

* ``legacy``: one little-endian int64 latency in ns per event, as the 2015 RTAI
  modules wrote to their FIFO. No sequence numbers, so no loss accounting.
* ``v1``: 40-byte records with a sequence number, the target-clock time of the
  write, the latency, the board-measured width and a cumulative drop counter.

Both decoders are incremental: feed them bytes as they arrive from the target
and they return whole records, keeping any partial tail for the next call.
This module is the one place in Python that knows the formats: the run, the
store and the twin all go through it (``decoder_for``, ``decode``, ``detect``,
``encode_v1``/``encode_legacy``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("v1", "legacy")

RECORD_MAGIC = 0x31515249
RECORD_VERSION = 1
RECORD_SIZE = 40

V1_DTYPE = np.dtype(
    [
        ("magic", "<u4"),
        ("version", "<u2"),
        ("flags", "<u2"),
        ("seq", "<u8"),
        ("t_write_ns", "<u8"),
        ("latency_ns", "<i8"),
        ("hw_width_ns", "<u4"),
        ("dropped", "<u4"),
    ]
)
assert V1_DTYPE.itemsize == RECORD_SIZE

LEGACY_DTYPE = np.dtype("<i8")


class Flag(IntFlag):
    CHECK = 0x0001
    NOT_OURS = 0x0002
    HW_WIDTH = 0x0004
    OVERRUN = 0x0008
    HELD = 0x0010  # the module's test_hold_us made the handler wait before its timestamp (a test)
    OFF_CPU = 0x0020  # cpu=N pinned the IRQ, but the kernel took this one on another CPU


IFACE_SHIFT = 8
IFACE_MASK = 0x0F00


class Interface(IntEnum):
    UNKNOWN = 0
    LPT = 1
    PCIE = 2


def pack_flags(interface: Interface, check: bool, extra: int = 0) -> int:
    return (int(interface) << IFACE_SHIFT) | (Flag.CHECK if check else 0) | extra


class RecordFormatError(ValueError):
    """The byte stream is not what the chosen format says it is."""


@dataclass
class LossCounter:
    """Sequence-gap accounting: every missing sequence number is a lost sample. A number not above
    the one before is a restart (a module reloaded mid-run, a reader that re-read its ring, streams
    concatenated by hand): counted in `restarts` (record index, number before, number after), never
    a loss; the station numbers the records on from there (`offset`: add it to a module's
    number)."""

    expected_seq: int | None = None
    lost: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (first missing seq, count)
    restarts: list[tuple[int, int, int]] = field(default_factory=list)
    offset: int = 0  # station number − module number in the current part

    def observe(self, seqs: np.ndarray, first_index: int = 0) -> np.ndarray:
        """Account for the next records' numbers; returns the station's numbers for them (the
        module's, plus an offset that grows at each restart so they keep increasing)."""
        if seqs.size == 0:
            return np.empty(0, np.int64)
        if int(seqs.max()) >= 1 << 62:  # 10^18 events: centuries at 10 kHz, so a corrupt record
            bad = int(np.argmax(seqs >= 1 << 62))
            raise RecordFormatError(f"sequence number {int(seqs[bad])} is out of any plausible "
                                    "range")
        seqs = seqs.astype(np.int64)
        before = None if self.expected_seq is None else self.expected_seq - 1
        numbers, starts, self.offset = _numbering(seqs, before, self.offset)
        prev = np.r_[seqs[0] - 1 if before is None else before, seqs[:-1]]
        self.restarts += [(first_index + i, int(prev[i]), int(seqs[i])) for i in starts.tolist()]
        step = seqs - prev
        for i in np.flatnonzero(step > 1):
            missing = int(step[i] - 1)
            self.gaps.append((int(prev[i] + 1), missing))
            self.lost += missing
        self.expected_seq = int(seqs[-1]) + 1
        return numbers

    def summary(self) -> list[dict[str, int]]:
        """The restarts for a manifest: where (record index) and how the module's number jumped."""
        return [{"record": r, "seq_before": a, "seq_after": b} for r, a, b in self.restarts]


def _numbering(seqs: np.ndarray, before: int | None, offset: int) -> tuple[np.ndarray, np.ndarray,
                                                                           int]:
    """The station's numbers for module numbers `seqs` (int64) that follow a record numbered
    `before` by the module (None: no record before) and `before + offset` by the station: a record
    whose number is not above the one before starts a part that follows on from the last record's
    station number, with no loss between. Returns (the numbers, the indices where parts start, the
    offset after them)."""
    prev = np.r_[np.int64(seqs[0] if before is None else before), seqs[:-1]]
    with np.errstate(over="ignore"):  # numbers near 2^63 are garbage already; wrapping is no worse
        starts = np.flatnonzero(seqs - prev <= 0)
        if before is None:
            starts = starts[starts > 0]
        part = np.zeros(len(seqs), np.int64)
        part[starts] = 1
        offsets = offset + np.r_[0, np.cumsum(prev[starts] - seqs[starts] + 1)]
        return seqs + offsets[np.cumsum(part)], starts, int(offsets[-1])


def renumbered(seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A whole stream's station numbers and part index per record where its module's numbers
    restart (LossCounter's numbering); None where they never do. Never raises: a stored stream is
    read as far as it goes."""
    seqs = np.asarray(seqs).astype(np.int64)
    if len(seqs) < 2:
        return None
    numbers, starts, _ = _numbering(seqs, None, 0)
    if not len(starts):
        return None
    part = np.zeros(len(seqs), np.int64)
    part[starts] = 1
    return numbers, np.cumsum(part)


def first_bad_v1(recs: np.ndarray) -> int | None:
    """Index of the first record whose magic or version is not ours (None: all are)."""
    bad = (recs["magic"] != RECORD_MAGIC) | (recs["version"] != RECORD_VERSION)
    return int(np.argmax(bad)) if np.any(bad) else None


def checked_v1(data: bytes, first_index: int = 0) -> np.ndarray:
    """Whole v1 records of `data` (its length a multiple of RECORD_SIZE), magic and
    version checked; `first_index` numbers the records in the error message."""
    recs = np.frombuffer(data, dtype=V1_DTYPE)
    i = first_bad_v1(recs)
    if i is None:
        return recs
    if recs["magic"][i] != RECORD_MAGIC:
        raise RecordFormatError(
            f"record {first_index + i}: magic 0x{int(recs['magic'][i]):08x}, expected "
            f"0x{RECORD_MAGIC:08x} (is the module writing format=legacy?)"
        )
    raise RecordFormatError(
        f"record {first_index + i}: version {int(recs['version'][i])}, this station reads version "
        f"{RECORD_VERSION}"
    )


class V1Decoder:
    """Incremental decoder for v1 records."""

    format = "v1"
    dtype = V1_DTYPE

    def __init__(self) -> None:
        self._tail = b""
        self.losses = LossCounter()
        self.records = 0
        self.station_seq = np.empty(0, np.int64)  # the last batch's numbers on the station's count
        # NOT_OURS records: a foreign IRQ on the module's line, no latency of the module's
        self.strays = 0
        self.dropped_by_target = 0

    def feed(self, data: bytes) -> np.ndarray:
        buf = self._tail + data
        n = len(buf) // RECORD_SIZE
        self._tail = buf[n * RECORD_SIZE :]
        recs = checked_v1(buf[: n * RECORD_SIZE], self.records)
        if n == 0:
            return recs
        self.station_seq = self.losses.observe(recs["seq"], self.records)
        self.dropped_by_target = int(recs["dropped"][-1])
        self.records += n
        self.strays += int(np.count_nonzero(recs["flags"] & Flag.NOT_OURS))
        return recs

    @property
    def pending_bytes(self) -> int:
        return len(self._tail)

    @staticmethod
    def latencies(recs: np.ndarray) -> np.ndarray:
        """The module's own latencies: a stray IRQ's record measures from an unrelated write."""
        return recs["latency_ns"][(recs["flags"] & Flag.NOT_OURS) == 0]

    def last_seq(self, recs: np.ndarray) -> int | None:
        """The last record's number on the station's count (the module's, past any restart)."""
        return int(self.station_seq[-1]) if len(recs) and len(self.station_seq) else None

    @staticmethod
    def columns(recs: np.ndarray) -> dict[str, np.ndarray]:
        """The records' fields; where the module's numbers restart, `seq` is the station's count
        (each part following the one before), `module_seq` the module's own and `part` which
        part."""
        out = {name: recs[name] for name in V1_DTYPE.names if name not in ("magic", "version")}
        if (again := renumbered(recs["seq"])) is not None:
            out["module_seq"] = recs["seq"]
            out["seq"], out["part"] = again
        return out


class LegacyDecoder:
    """Incremental decoder for the seed's bare int64 latencies."""

    format = "legacy"
    dtype = LEGACY_DTYPE

    def __init__(self) -> None:
        self._tail = b""
        self.losses = LossCounter()  # never increments: legacy has no sequence numbers
        self.strays = None  # no flags: a stray IRQ cannot be told apart
        self.records = 0
        self.dropped_by_target = 0

    def feed(self, data: bytes) -> np.ndarray:
        buf = self._tail + data
        n = len(buf) // 8
        self._tail = buf[n * 8 :]
        out = np.frombuffer(buf[: n * 8], dtype=LEGACY_DTYPE)
        self.records += n
        return out

    @property
    def pending_bytes(self) -> int:
        return len(self._tail)

    @staticmethod
    def latencies(recs: np.ndarray) -> np.ndarray:
        return recs

    @staticmethod
    def last_seq(recs: np.ndarray) -> int | None:
        return None  # no sequence numbers: nothing to pair arrivals with

    @staticmethod
    def columns(recs: np.ndarray) -> dict[str, np.ndarray]:
        return {"latency_ns": recs}


Decoder = V1Decoder | LegacyDecoder


def decoder_for(fmt: str) -> Decoder:
    if fmt == "v1":
        return V1Decoder()
    if fmt == "legacy":
        return LegacyDecoder()
    raise ValueError(f"unknown record format {fmt!r} (expected 'v1' or 'legacy')")


def detect(data: bytes) -> str:
    """The format of a stream from its first bytes: v1 records start with their magic and
    version; anything else is taken as the seed's bare int64 latencies."""
    if len(data) >= 6 and int.from_bytes(data[:4], "little") == RECORD_MAGIC:
        return "v1"
    return "legacy"


def decode(data: bytes, fmt: str) -> pd.DataFrame:
    """Every whole record of a stream as columns, up to the first one whose magic or
    version is wrong (the run that received it failed there and says so); sequence
    gaps are the incremental decoder's business; a torn last record, as a crash
    leaves, is ignored."""
    import pandas as pd

    decoder = decoder_for(fmt)  # unknown formats are refused here
    if fmt == "v1":
        n = len(data) // RECORD_SIZE
        recs = np.frombuffer(data[: n * RECORD_SIZE], dtype=V1_DTYPE)
        bad = first_bad_v1(recs)
        # the records before the first corrupt one: what the run did receive whole
        if bad is not None:
            recs = recs[:bad]
        return pd.DataFrame(V1Decoder.columns(recs))
    n = len(data) // LEGACY_DTYPE.itemsize
    return pd.DataFrame(decoder.columns(np.frombuffer(data[: n * LEGACY_DTYPE.itemsize],
                                                      dtype=LEGACY_DTYPE)))


def decode_file(path: Path, fmt: str) -> pd.DataFrame:
    return decode(path.read_bytes() if path.exists() else b"", fmt)


def encode_v1(
    seq: np.ndarray,
    t_write_ns: np.ndarray,
    latency_ns: np.ndarray,
    flags: int | np.ndarray,
    hw_width_ns: np.ndarray | int = 0,
    dropped: np.ndarray | int = 0,
) -> bytes:
    """Pack records exactly as the kernel modules do (used by the twin)."""
    recs = np.zeros(len(seq), dtype=V1_DTYPE)
    recs["magic"] = RECORD_MAGIC
    recs["version"] = RECORD_VERSION
    recs["flags"] = flags
    recs["seq"] = seq
    recs["t_write_ns"] = t_write_ns
    recs["latency_ns"] = latency_ns
    recs["hw_width_ns"] = hw_width_ns
    recs["dropped"] = dropped
    return recs.tobytes()


def encode_legacy(latency_ns: np.ndarray) -> bytes:
    return np.asarray(latency_ns, dtype=LEGACY_DTYPE).tobytes()
