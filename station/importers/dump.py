"""A raw FIFO dump of the latency modules, legacy or v1, checked whole before anything is
written: parsers/records.py decodes it (the one place that knows the formats); this module only
says where in the file a record is wrong and what a torn last record left over."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from station.importers.source import (
    PLAUSIBLE_LATENCY_NS,
    ImportInputError,
    Source,
    first_implausible,
)
from station.parsers import records

INTERFACES = {records.Interface.LPT: "lpt", records.Interface.PCIE: "pcie"}


@dataclass
class SwDump:
    source: Source
    format: str
    records: int
    torn_bytes: int  # a trailing partial record: ignored, and said so
    losses: dict[str, Any] = field(default_factory=dict)
    interface: str | None = None  # what v1 flags say, when every record says the same
    variant: str | None = None


def read_dump(src: Source, fmt: str) -> SwDump:
    decoder = records.decoder_for(fmt)
    size = records.RECORD_SIZE if fmt == "v1" else records.LEGACY_DTYPE.itemsize
    try:
        recs = decoder.feed(src.data)
    except records.RecordFormatError as exc:
        raise ImportInputError(src.path, f"{exc}", offset=_bad_record(src.data,
                                                                      size) * size) from None
    if decoder.records == 0:
        raise ImportInputError(src.path,
                               f"{src.size} bytes: not one whole {fmt} record ({size} bytes)",
                               offset=0)
    # --format forces how the bytes are read, not that they are latencies: the check auto-detection
    # makes holds here too, so a file of anything else is refused, never reported as a run
    latency = recs if fmt != "v1" else recs["latency_ns"]
    odd = first_implausible(latency)
    if odd is not None:
        raise ImportInputError(src.path, f"as a {fmt} stream, record {odd} holds "
                               f"{int(latency[odd])} ns: no plausible latency (beyond "
                               f"±{PLAUSIBLE_LATENCY_NS // 10**9} s); not a latency dump of this "
                               "format", offset=odd * size)
    dump = SwDump(src, fmt, decoder.records, decoder.pending_bytes)
    dump.losses = {
        "sw_lost": decoder.losses.lost,
        "gaps": len(decoder.losses.gaps),
        "first_gaps": decoder.losses.gaps[:20],
        "sw_dropped_by_target": decoder.dropped_by_target,
        "torn_bytes": decoder.pending_bytes,
        "restarts": decoder.losses.summary(),
    }
    if fmt == "v1":
        flags = recs["flags"].astype(np.int64)
        ifaces = np.unique((flags & records.IFACE_MASK) >> records.IFACE_SHIFT)
        checks = np.unique(flags & int(records.Flag.CHECK))
        if ifaces.size == 1:
            dump.interface = INTERFACES.get(int(ifaces[0]))  # IntEnum keys: an int finds them
        if checks.size == 1:
            dump.variant = "inb" if checks[0] else "no-inb"
    return dump


def _bad_record(data: bytes, size: int) -> int:
    """Index of the record a v1 decoding error is about: a wrong magic or version, else the
    first sequence number not above the one before."""
    recs = np.frombuffer(data[: len(data) // size * size], dtype=records.V1_DTYPE)
    bad = records.first_bad_v1(recs)
    if bad is not None:
        return bad
    seqs = recs["seq"]
    out_of_range = np.flatnonzero(seqs >= 1 << 62)
    back = np.flatnonzero(np.diff(seqs.astype(np.int64)) <= 0) + 1
    return int(min([*out_of_range[:1], *back[:1]], default=0))
