"""Property: the record decoders take any bytes, cut anywhere, and give records or a
RecordFormatError — never another exception — and what they give does not depend on
where the stream was cut."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from station.parsers import records
from station.parsers.records import RECORD_SIZE, LegacyDecoder, RecordFormatError, V1Decoder, decoder_for

EXAMPLES = int(os.environ.get("STATION_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMATS = ("v1", "legacy")


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def decode_in_chunks(fmt: str, chunks: list[bytes]) -> tuple[bytes, dict, RecordFormatError | None]:
    """Concatenated records (as bytes), the decoder's counters, and the error if one was raised."""
    decoder = decoder_for(fmt)
    out: list[np.ndarray] = []
    try:
        for chunk in chunks:
            recs = decoder.feed(chunk)
            assert recs.dtype == decoder.dtype
            out.append(recs)
    except RecordFormatError as exc:
        return b"".join(r.tobytes() for r in out), {}, exc
    state = {"records": decoder.records, "pending": decoder.pending_bytes, "lost": decoder.losses.lost,
             "gaps": list(decoder.losses.gaps), "dropped": decoder.dropped_by_target}
    return b"".join(r.tobytes() for r in out), state, None


cuts = st.lists(st.integers(0, 4096), max_size=12)


def v1_records(seqs: list[int], draw) -> bytes:
    n = len(seqs)
    return records.encode_v1(
        np.array(seqs, dtype=np.uint64),
        np.array(draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), dtype=np.uint64),
        np.array(draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)), dtype=np.int64),
        np.array(draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n)), dtype=np.uint16),
        np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n)), dtype=np.uint32),
        np.array(sorted(draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n))), dtype=np.uint32),
    )


@st.composite
def mostly_valid_v1(draw) -> bytes:
    """v1 streams with gaps, sometimes a corrupted byte or a torn tail."""
    start = draw(st.integers(0, 2**62))
    steps = draw(st.lists(st.integers(1, 1000), max_size=40))
    seqs = list(np.cumsum([start, *steps]).tolist())[: len(steps)] if steps else []
    data = bytearray(v1_records(seqs, draw))
    if data and draw(st.booleans()):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    return bytes(data) + draw(st.binary(max_size=RECORD_SIZE - 1))


@st.composite
def valid_v1(draw) -> tuple[bytes, list[int]]:
    start = draw(st.integers(0, 2**62 - 50_000))  # plausible: the decoder refuses 2^62 and beyond
    steps = draw(st.lists(st.integers(1, 1000), min_size=1, max_size=40))
    seqs = np.cumsum([start, *steps[1:]]).tolist()
    return v1_records(seqs, draw), seqs


@st.composite
def any_seq_v1(draw) -> bytes:
    """Well-formed v1 records whose sequence numbers are anything a u64 can hold: out of
    order, repeated, across the int64 boundary."""
    edge = st.sampled_from([0, 1, 2**63 - 2, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1])
    seqs = draw(st.lists(edge | st.integers(0, 2**64 - 1), max_size=12))
    return v1_records(seqs, draw)


streams = st.binary(max_size=600) | mostly_valid_v1() | any_seq_v1()


@FUZZ
@given(st.sampled_from(FORMATS), streams, cuts)
def test_any_bytes_any_cuts_records_or_format_error(fmt, data, cut_points):
    whole_recs, whole_state, whole_err = decode_in_chunks(fmt, [data])
    recs, state, err = decode_in_chunks(fmt, split(data, cut_points))
    assert (err is None) == (whole_err is None), (err, whole_err)
    if err is None:
        assert recs == whole_recs and state == whole_state
        assert state["records"] * decoder_for(fmt).dtype.itemsize + state["pending"] == len(data)


@FUZZ
@given(valid_v1(), cuts)
def test_valid_v1_streams_decode_the_same_however_cut(stream, cut_points):
    data, seqs = stream
    recs, state, err = decode_in_chunks("v1", split(data, cut_points))
    assert err is None
    got = np.frombuffer(recs, dtype=records.V1_DTYPE)
    assert got["seq"].tolist() == seqs
    assert state["lost"] == seqs[-1] - seqs[0] + 1 - len(seqs) == sum(n for _, n in state["gaps"])
    assert state["pending"] == 0 and state["records"] == len(seqs)


@FUZZ
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50), cuts)
def test_valid_legacy_streams_decode_the_same_however_cut(latencies, cut_points):
    data = records.encode_legacy(np.array(latencies, dtype=np.int64))
    recs, state, err = decode_in_chunks("legacy", split(data, cut_points))
    assert err is None and np.frombuffer(recs, dtype="<i8").tolist() == latencies


@FUZZ
@given(st.text(max_size=20))
def test_decoder_for_knows_two_formats(fmt):
    if fmt in FORMATS:
        assert isinstance(decoder_for(fmt), V1Decoder | LegacyDecoder)
    else:
        with pytest.raises(ValueError, match="unknown record format"):
            decoder_for(fmt)


def _whole_stream_decoders():
    """The decoders of a stored raw file: from bytes, and from the file."""
    return {
        "records.decode": lambda data, fmt, path: records.decode(data, fmt),
        "records.decode_file": lambda data, fmt, path: records.decode_file(path, fmt),
    }


WHOLE = _whole_stream_decoders()


@pytest.mark.parametrize("name", sorted(WHOLE))
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(FORMATS), data=streams)
def test_stored_streams_decode_to_records_or_format_error(tmp_path, name, fmt, data):
    path = tmp_path / "sw.raw"
    path.write_bytes(data)
    df = WHOLE[name](data, fmt, path)  # never an exception: what is readable is read
    size = RECORD_SIZE if fmt == "v1" else 8
    whole = [data[i : i + size] for i in range(0, len(data) // size * size, size)]
    if fmt == "v1":  # up to the first record whose magic or version is wrong
        good = [r[:4] == b"IRQ1" and r[4:6] == b"\x01\x00" for r in whole]
        whole = whole[: good.index(False)] if False in good else whole
    assert len(df) == len(whole)


@pytest.mark.parametrize("name", sorted(WHOLE))
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(stream=valid_v1(), torn=st.binary(max_size=RECORD_SIZE - 1))
def test_stored_valid_streams_match_the_incremental_decoder(tmp_path, name, stream, torn):
    data, seqs = stream
    path = tmp_path / "sw.raw"
    path.write_bytes(data + torn)
    df = WHOLE[name](data + torn, "v1", path)
    incremental = V1Decoder().feed(data)
    assert df["seq"].tolist() == seqs
    for column in ("t_write_ns", "latency_ns", "hw_width_ns", "dropped", "flags"):
        assert df[column].tolist() == incremental[column].tolist()


@FUZZ
@given(valid_v1(), st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50), streams)
def test_detect_names_the_format_a_stream_was_written_in(v1, latencies, data):
    assert records.detect(v1[0]) == "v1"
    # a bare latency whose low 4 bytes are the v1 magic (0x31515249 ns, 0.83 s, is one) reads as v1
    looks_v1 = latencies[0] & 0xFFFFFFFF == records.RECORD_MAGIC
    legacy = records.encode_legacy(np.array(latencies, dtype=np.int64))
    assert records.detect(legacy) == ("v1" if looks_v1 else "legacy")
    assert records.detect(data) in FORMATS  # and any bytes at all are one or the other
