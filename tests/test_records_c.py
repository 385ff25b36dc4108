"""The record stream round trip: C writer (compiled from irqs_record.h) → Python decoder.

The writer prints every field as text as well as writing the binary records, so the
decoder is checked against values that never went through the layout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from station.parsers.records import (
    RECORD_SIZE,
    LegacyDecoder,
    RecordFormatError,
    V1Decoder,
    decoder_for,
)
from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[1]
WRITER_SRC = ROOT / "tests" / "c" / "irqs_write_records.c"
DUMP_SRC = ROOT / "target_modules" / "tools" / "irqs-dump.c"
HEADER = ROOT / "target_modules" / "include" / "irqs_record.h"
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"]

N = 1000
GAP_AT, GAP_LEN = 500, 3


def _cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        missing("no C compiler (gcc) on PATH (apt-get install gcc)")
    return cc


def _compile(src: Path, out: Path) -> Path:
    subprocess.run([_cc(), *CFLAGS, "-o", str(out), str(src)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def writer(tmp_path_factory) -> Path:
    return _compile(WRITER_SRC, tmp_path_factory.mktemp("c") / "irqs_write_records")


@pytest.fixture(scope="module")
def v1_stream(writer, tmp_path_factory) -> tuple[bytes, np.ndarray]:
    out = tmp_path_factory.mktemp("v1") / "records.bin"
    res = subprocess.run(
        [str(writer), "v1", str(out), str(N), str(GAP_AT), str(GAP_LEN)],
        check=True,
        capture_output=True,
        text=True,
    )
    fields = np.array(
        [[int(v) for v in line.split()] for line in res.stdout.splitlines()], dtype=object
    )
    return out.read_bytes(), fields


@pytest.fixture(scope="module")
def legacy_stream(writer, tmp_path_factory) -> tuple[bytes, list[int]]:
    out = tmp_path_factory.mktemp("legacy") / "latencies.bin"
    res = subprocess.run(
        [str(writer), "legacy", str(out), "257"], check=True, capture_output=True, text=True
    )
    return out.read_bytes(), [int(v) for v in res.stdout.split()]


def _feed_in_chunks(dec, data: bytes, sizes) -> np.ndarray:
    parts, pos, i = [], 0, 0
    while pos < len(data):
        step = sizes[i % len(sizes)]
        parts.append(dec.feed(data[pos : pos + step]))
        pos += step
        i += 1
    return np.concatenate(parts) if parts else dec.feed(b"")


def test_header_size_matches_decoder():
    text = HEADER.read_text()
    assert int(re.search(r"#define IRQS_RECORD_SIZE\s+(\d+)", text).group(1)) == RECORD_SIZE


def test_v1_round_trip_exact(v1_stream):
    data, fields = v1_stream
    assert len(data) == N * RECORD_SIZE
    dec = V1Decoder()
    recs = dec.feed(data)
    assert len(recs) == N
    names = [
        "magic",
        "version",
        "flags",
        "seq",
        "t_write_ns",
        "latency_ns",
        "hw_width_ns",
        "dropped",
    ]
    for col, name in enumerate(names):
        assert [int(v) for v in recs[name]] == list(fields[:, col]), name
    assert dec.records == N
    assert dec.pending_bytes == 0
    # INT64 extremes survive the layout (writer puts them at records 3 and 4).
    assert int(recs["latency_ns"][3]) == -(2**63)
    assert int(recs["latency_ns"][4]) == 2**63 - 1


def test_v1_gap_counts_as_lost_samples(v1_stream):
    data, _ = v1_stream
    dec = V1Decoder()
    dec.feed(data)
    assert dec.losses.lost == GAP_LEN
    assert dec.losses.gaps == [(GAP_AT, GAP_LEN)]
    assert dec.dropped_by_target == GAP_LEN
    assert dec.losses.expected_seq == N + GAP_LEN


@pytest.mark.parametrize("sizes", [[1], [7], [39, 41], [13, 40, 3, 97], [4096]])
def test_v1_chunked_feed_same_result(v1_stream, sizes):
    data, _ = v1_stream
    whole = V1Decoder()
    ref = whole.feed(data)
    dec = V1Decoder()
    got = _feed_in_chunks(dec, data, sizes)
    assert got.tobytes() == ref.tobytes()
    assert dec.losses.lost == whole.losses.lost
    assert dec.losses.gaps == whole.losses.gaps
    assert dec.dropped_by_target == whole.dropped_by_target
    assert dec.records == whole.records == N


def test_v1_gap_across_chunk_boundary(v1_stream):
    data, _ = v1_stream
    dec = V1Decoder()
    # Split exactly between the last record before the gap and the first after it.
    cut = GAP_AT * RECORD_SIZE
    dec.feed(data[:cut])
    assert dec.losses.lost == 0
    dec.feed(data[cut:])
    assert dec.losses.gaps == [(GAP_AT, GAP_LEN)]


def test_v1_rejects_legacy_bytes(legacy_stream):
    data, _ = legacy_stream
    with pytest.raises(RecordFormatError, match="magic"):
        V1Decoder().feed(data[: 5 * RECORD_SIZE])


def test_legacy_round_trip(legacy_stream):
    data, values = legacy_stream
    dec = decoder_for("legacy")
    assert isinstance(dec, LegacyDecoder)
    got = _feed_in_chunks(dec, data, [3, 8, 13])
    assert [int(v) for v in got] == values
    assert dec.records == len(values)
    assert dec.losses.lost == 0
    assert dec.pending_bytes == 0


@pytest.fixture(scope="module")
def irqs_dump(tmp_path_factory) -> Path:
    return _compile(DUMP_SRC, tmp_path_factory.mktemp("tools") / "irqs-dump")


def _summary(stderr: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stderr.splitlines() if ": " in line)


def test_irqs_dump_copies_and_summarises_v1(irqs_dump, v1_stream, tmp_path):
    data, fields = v1_stream
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    out = tmp_path / "out.bin"
    res = subprocess.run(
        [str(irqs_dump), "-s", str(src), str(out)], check=True, capture_output=True, text=True
    )
    assert out.read_bytes() == data
    s = _summary(res.stderr)
    assert s["records"] == str(N)
    assert s["lost (seq gaps)"] == f"{GAP_LEN} in 1 gaps"
    assert s["dropped by module"] == str(GAP_LEN)
    flags = fields[:, 2].astype(int)
    ours = (flags & 0x2) == 0
    lat = fields[ours, 5]
    assert s["not ours"] == str(int((~ours).sum()))
    assert s["overrun"] == str(int(((flags & 0x8) != 0).sum()))
    assert s["bad records"] == "0"
    assert s["latency ns"].startswith(f"min {min(lat)} mean ")
    assert s["latency ns"].endswith(f" max {max(lat)}")


def test_irqs_dump_record_limit_and_legacy(irqs_dump, legacy_stream, tmp_path):
    data, values = legacy_stream
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    res = subprocess.run(
        [str(irqs_dump), "-f", "legacy", "-n", "10", "-s", str(src), "-"],
        check=True,
        capture_output=True,
    )
    assert res.stdout == data[: 10 * 8]
    s = _summary(res.stderr.decode())
    assert s["records"] == "10"
    assert s["latency ns"].startswith(f"min {min(values[:10])} ")


FAKE_OLD_KERNEL_TYPES = """\
#ifndef _LINUX_TYPES_H
#define _LINUX_TYPES_H
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef long long __s64;
#endif
"""


@pytest.mark.parametrize("check", ["_Static_assert", "negative array"])
def test_the_record_header_builds_where_the_rtai_kernels_are(tmp_path, check) -> None:
    """A 3.x kernel tree (RTAI 3.9 on 3.4.55) has no <linux/build_bug.h> (4.13) and no one-argument
    static_assert (5.1), and builds with -std=gnu89: the header must compile in kernel mode against
    only a <linux/types.h>, through either size check, and a wrong record size must still fail."""
    include = tmp_path / "include" / "linux"
    include.mkdir(parents=True)
    (include / "types.h").write_text(FAKE_OLD_KERNEL_TYPES)
    src = tmp_path / "use.c"
    src.write_text(f'#include "{HEADER}"\nint irqs_size(void) {{ return (int)sizeof(struct irqs_record_v1); }}\n')
    # the second: as a compiler before gcc 4.6 sees it (no _Static_assert, no C11)
    older = ["-U__GNUC__", "-U__STDC_VERSION__", "-Wno-builtin-macro-redefined"] if check == "negative array" else []
    cmd = [_cc(), "-D__KERNEL__", "-std=gnu89", "-nostdinc", "-I", str(tmp_path / "include"), "-Wall", "-Wextra",
           "-Werror", *older, "-fsyntax-only", str(src)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    broken = tmp_path / "irqs_record.h"
    broken.write_text(HEADER.read_text().replace("irqs_u32 dropped;", "irqs_u64 dropped;"))
    src.write_text(src.read_text().replace(str(HEADER), str(broken)))
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode != 0 and ("record size" in res.stderr or "size_check" in res.stderr), res.stderr
