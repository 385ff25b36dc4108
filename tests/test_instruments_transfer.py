"""Waveform transfer: the block read straight from a SOCKET resource's socket, the VISA
path elsewhere, and the simulated scopes encoding a record's block once."""

from __future__ import annotations

import socket
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np
import pytest
import pyvisa
from pyvisa import errors

from instruments.scope import ScopeDataError, ScopeTimeout, open_scope
from instruments.scpi import BLOCK_CHUNK, ScpiSession, SocketReader, read_block
from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from instruments.sim.scope_model import ScopeModel
from instruments.tektronix_mso import TektronixMSO
from tests.scope_helpers import pulse_source, settings

POINTS = 1_000_000  # at width 2 a block of two BLOCK_CHUNKs: the VISA path reads it in pieces


# --- the simulated scopes: a record's block is built once --------------------------------------
def spy_builds(model: ScopeModel, monkeypatch: pytest.MonkeyPatch) -> list[Hashable]:
    """The keys of the blocks `model` builds from now on (not those it serves from its cache)."""
    built: list[Hashable] = []
    block = model._block

    def spy(key: Hashable, build: Callable[[], bytes]) -> bytes:
        return block(key, lambda: built.append(key) or build())

    monkeypatch.setattr(model, "_block", spy)
    return built


@pytest.fixture(scope="module")
def tds_server() -> Iterator[SimScopeServer]:
    with run_in_thread(SimScopeServer(PeriodicEdgeSource(seed=5), seed=11)) as sim:
        yield sim


@pytest.fixture
def tds(tds_server: SimScopeServer) -> Iterator[Any]:
    rm = pyvisa.ResourceManager("@py")
    res = rm.open_resource(tds_server.resource, read_termination="\n", write_termination="\n", timeout=2000)
    res.write("*RST;*CLS;HEADer OFF;:SELect:CH1 ON;:SELect:CH2 ON;:HORizontal:RECOrdlength 5000")
    res.write("HORizontal:MAIn:SCAle 50e-6;:TRIGger:MAIn:LEVel 0;:TRIGger:MAIn:MODe AUTO")
    res.write("DATa:SOUrce CH1;ENCdg RIBinary;WIDth 1;STARt 1;STOP 5000")
    yield res
    res.close()


def acquire(res: Any) -> None:
    res.write("ACQuire:STOPAfter SEQuence;:ACQuire:STATE RUN")
    assert res.query("*OPC?") == "1"


def curve(res: Any, datatype: str, points: int) -> np.ndarray:
    return res.query_binary_values(
        "CURVe?", datatype=datatype, is_big_endian=True, container=np.array, data_points=points
    )


def test_a_curve_is_encoded_once_until_the_record_or_its_transfer_settings_change(
    tds: Any, tds_server: SimScopeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = spy_builds(tds_server.model, monkeypatch)
    acquire(tds)
    codes = tds_server.model.record.codes
    first = curve(tds, "b", 5000)
    assert all(np.array_equal(curve(tds, "b", 5000), first) for _ in range(3))
    np.testing.assert_array_equal(first, codes[1])
    assert len(built) == 1  # four transfers, one encoding

    tds.write("DATa:WIDth 2")  # each change of what the bytes hold builds them anew, once
    np.testing.assert_array_equal(curve(tds, "h", 5000), codes[1].astype(np.int32) * 256)
    tds.write("DATa:ENCdg RPBinary")
    np.testing.assert_array_equal(curve(tds, "H", 5000), (codes[1].astype(np.int32) + 128) * 256)
    tds.write("DATa:WIDth 1;STARt 101;STOP 600")
    np.testing.assert_array_equal(curve(tds, "B", 500), codes[1][100:600].astype(np.int32) + 128)
    tds.write("DATa:ENCdg RIBinary;SOUrce CH2;STARt 1;STOP 5000")
    np.testing.assert_array_equal(curve(tds, "b", 5000), codes[2])
    np.testing.assert_array_equal(curve(tds, "b", 5000), codes[2])
    assert len(built) == 5

    tds.write("DATa:SOUrce CH1")
    acquire(tds)  # a new record: new samples, newly encoded
    assert tds_server.model.record.codes is not codes
    again = curve(tds, "b", 5000)
    np.testing.assert_array_equal(again, tds_server.model.record.codes[1])
    assert not np.array_equal(again, first) and len(built) == 6
    assert len(set(built)) == 6  # never the same block twice


def test_keysight_data_is_encoded_once_per_record_and_source(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimScopeServer(pulse_source(), seed=3, dialect="keysight_infiniivision")
    with run_in_thread(sim), open_scope(sim.resource, dialect="keysight_infiniivision", timeout_s=2.0) as scope:
        scope.reset()
        scope.configure(settings(record_length=10_000, time_per_div=50e-6, extra_channels=(2,)))
        built = spy_builds(sim.model, monkeypatch)
        waves = scope.acquire_channels()
        assert len(built) == 2  # one block per channel
        for _ in range(2):
            codes = scope.query_block(":WAVeform:DATA?", "B", 10_000)
        np.testing.assert_array_equal(codes, sim.model.record.codes[1])
        assert len(built) == 2 and len(waves[1]) == 10_000
        scope.acquire_single()  # a new record
        assert len(built) == 3 and built[-1] not in built[:2]


# --- the block read: straight from the socket, or through VISA -------------------------------
@pytest.fixture(scope="module")
def mso_server() -> Iterator[SimScopeServer]:
    with run_in_thread(SimScopeServer(pulse_source(), seed=5, dialect="tektronix_mso")) as sim:
        yield sim


@pytest.fixture(scope="module")
def mso(mso_server: SimScopeServer) -> Iterator[TektronixMSO]:
    """An MSO with a record of POINTS samples, transferred at 2 bytes a sample."""
    with open_scope(mso_server.resource, dialect="tektronix_mso", timeout_s=2.0) as scope:
        assert isinstance(scope, TektronixMSO)
        scope.reset()
        scope.configure(settings(record_length=POINTS, time_per_div=100e-6))
        scope.acquire_single()
        scope.data_width = 2
        yield scope


def visa_path(session: ScpiSession, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | None]]:
    """Make `session` read as on a resource without a socket (GPIB, USB, another backend);
    the (count, chunk_size) of each VISA read from now on."""
    reads: list[tuple[int, int | None]] = []
    resource = session._res
    read_bytes = resource.read_bytes

    def spy(count: int, chunk_size: int | None = None, **kwargs: Any) -> bytes:
        reads.append((count, chunk_size))
        return read_bytes(count, chunk_size, **kwargs)

    monkeypatch.setattr(session, "_raw_socket", lambda: None)
    monkeypatch.setattr(resource, "read_bytes", spy)
    return reads


@pytest.mark.parametrize(("encoding", "big_endian"), [("SRIbinary", False), ("RIBinary", True)])
def test_socket_and_visa_paths_read_the_same_samples(
    mso: TektronixMSO, mso_server: SimScopeServer, monkeypatch: pytest.MonkeyPatch, encoding: str, big_endian: bool
) -> None:
    mso.data_encoding = encoding
    truth = mso_server.model.record.codes[1].astype(np.int16) * 256
    assert mso.session._raw_socket() is not None  # a SOCKET resource: its socket is read directly
    fast = mso.query_block("CURVe?", "h", POINTS, big_endian=big_endian)
    with monkeypatch.context() as patch:
        reads = visa_path(mso.session, patch)
        slow = mso.query_block("CURVe?", "h", POINTS, big_endian=big_endian)
    np.testing.assert_array_equal(fast, truth)
    np.testing.assert_array_equal(slow, truth)
    assert fast.dtype == slow.dtype == np.dtype(np.int16) and fast.flags.writeable and slow.flags.writeable
    # the VISA path: one VISA read per piece of at most BLOCK_CHUNK bytes, not one per 20 KiB
    data = [count for count, chunk_size in reads if count == chunk_size and count > 16]
    assert sum(data) == 2 * POINTS and max(data) == BLOCK_CHUNK
    assert all(count == chunk_size for count, chunk_size in reads)


@pytest.mark.parametrize("path", ["socket", "visa"])
def test_a_long_block_that_stops_half_way_times_out_saying_how_far_it_got(
    mso: TektronixMSO, mso_server: SimScopeServer, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    mso_server.tamper("CURVe?", lambda reply: reply[: len(reply) // 2])
    try:
        with open_scope(mso_server.resource, dialect="tektronix_mso", timeout_s=0.3) as scope:
            if path == "visa":
                visa_path(scope.session, monkeypatch)
            with pytest.raises(ScopeTimeout) as caught:
                scope.query_block("CURVe?", "h", POINTS)
    finally:
        mso_server.tamper("CURVe?", None)
    message = str(caught.value)
    assert "'CURVe?' timed out" in message and "the block is shorter than its header says" in message
    header = len(f"#7{2 * POINTS}")
    if path == "socket":  # the whole data part was due, and the socket reader counted what came
        arrived = (header + 2 * POINTS) // 2 - header + 1  # half the reply, then its "\n"
        assert f"{header} bytes into the reply, while {2 * POINTS} more were due ({arrived} of them arrived)" in message
    else:  # VISA's read_bytes keeps nothing of a read that timed out: whole pieces only
        assert f"{header} bytes into the reply, while {BLOCK_CHUNK} more were due:" in message


# --- the socket reader on its own: bytes pyvisa-py already holds come first ------------------
class HeldBytes:
    """What the reader needs of a pyvisa-py socket session: the bytes it read ahead."""

    def __init__(self, held: bytes) -> None:
        self._pending_buffer = bytearray(held)


def test_socket_reader_takes_what_pyvisa_py_holds_before_the_socket() -> None:
    codes = np.arange(-3000, 3000, dtype=">i2")
    reply = f"#5{codes.nbytes}".encode() + codes.tobytes() + b"\n"
    ours, theirs = socket.socketpair()
    with ours, theirs:
        session = HeldBytes(reply[:5000])  # the header and part of the data, read ahead
        theirs.sendall(reply[5000:])
        reader = SocketReader(ours, session, timeout_s=2.0)
        got = read_block(reader.read, "CURVe?", "h", len(codes), read_into=reader.read_into)
        np.testing.assert_array_equal(got, codes)
        assert got.dtype == np.dtype(np.int16) and not session._pending_buffer

        theirs.sendall(reply[:100])  # a block that stops: a VISA timeout, as pyvisa-py gives
        reader = SocketReader(ours, HeldBytes(b""), timeout_s=0.05)
        with pytest.raises(errors.VisaIOError) as caught:
            read_block(reader.read, "CURVe?", "h", len(codes), read_into=reader.read_into)
        assert caught.value.error_code == pyvisa.constants.StatusCode.error_timeout
        assert reader.arrived == 100 - 7  # all of it but the header, "#512000"

        theirs.close()  # the peer went away: the reply ended, say where
        reader = SocketReader(ours, HeldBytes(reply[:9]), timeout_s=2.0)
        with pytest.raises(ScopeDataError) as ended:
            read_block(reader.read, "CURVe?", "h", len(codes), read_into=reader.read_into)
        assert ended.value.field == "block data" and "the reply ended after 2 of 12000 bytes" in str(ended.value)
