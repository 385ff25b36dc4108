"""Waveform transfer: the station's PyVISA path against a raw socket, measured in the same run.

A simulated MSO (in a child process by default, as a real scope is another
machine; `--in-process` runs it on a thread of this one) acquires a record of
1 M and 10 M points once; then both clients ask it for the same `CURVe?` reply:

- station: the MSO driver's `query_block("CURVe?", ...)`, i.e. ScpiSession over
  PyVISA + pyvisa-py, with every check of the block (header, length, terminator);
- raw socket: `sendall(b"CURVe?\\n")` and `recv_into` a preallocated buffer until
  the whole reply (header, data, terminator) is in, no checks: the floor;
- for reference, plain PyVISA: `query_binary_values` on a resource of its own
  (pyvisa-py's 4 KiB receives, 20 KiB reads), what the station did before;
- a noise control: the raw path again, on a second connection. What separates
  it from the first raw figure is the machine's noise, not the code.

All include the instrument's side (the sim answering, its block encoded once
per acquisition); everything is on 127.0.0.1. The paths take turns, round after
round; printed are each path's median time (with its min and max), and the
median of the ratios raw / station within one round (the target is >= 0.8, OK
or MISS; exit status 1 on a miss), which other processes disturb far less than
ratios across rounds (with 2 busy CPUs the best / best ratio of the raw path and
its control swung by +-40 % at 10 M points).

At 1 M points a transfer takes about 0.2 ms, and the station's fixed cost (the
VISA write, the header read apart) of some tens of µs shows. At any size the
station returns a new array, which the raw path's reused buffer never pays for:
cheap when the allocator reuses memory, a page fault per page (or a huge-page
compaction) when it maps new memory; the bench prints that cost beside them.

    .venv/bin/python benchmarks/bench_transfer.py [--repeat N] [--in-process]
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import multiprocessing
import multiprocessing.connection
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial

import numpy as np
import pyvisa
from pyvisa.resources import MessageBasedResource

from instruments.scope import ScopeSettings, open_scope
from instruments.scpi import ScpiInstrument
from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread

DIALECT = "tektronix_mso"
SIZES = (1_000_000, 10_000_000)
TIMEOUT_S = 30.0


def serve(conn: multiprocessing.connection.Connection) -> None:
    """Child process: a simulated MSO holding 10 M points, until told to stop."""
    with run_in_thread(sim_server()) as sim:
        conn.send(sim.port)
        conn.recv()  # anything (or EOF) ends it


def sim_server() -> SimScopeServer:
    source = PeriodicEdgeSource(period_s=100.037e-6, width_s=(1e-6, 20e-6), seed=2015)
    return SimScopeServer(source, seed=7, dialect=DIALECT, max_record_length=max(SIZES))


@contextlib.contextmanager
def scope_server(in_process: bool) -> Iterator[int]:
    """The simulated scope's TCP port on 127.0.0.1 for the duration."""
    if in_process:
        with run_in_thread(sim_server()) as sim:
            yield sim.port
        return
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=serve, args=(theirs,), name="bench-sim-scope")
    child.start()
    try:
        if not ours.poll(60):
            raise RuntimeError("the simulated scope did not start")
        yield ours.recv()
    finally:
        with contextlib.suppress(OSError):
            ours.send(None)
        child.join(10)
        if child.is_alive():
            child.terminate()
            child.join(5)


@contextlib.contextmanager
def plain_pyvisa(resource: str) -> Iterator[MessageBasedResource]:
    rm = pyvisa.ResourceManager("@py")
    res = rm.open_resource(resource, read_termination="\n", write_termination="\n", timeout=TIMEOUT_S * 1000)
    assert isinstance(res, MessageBasedResource)
    try:
        yield res
    finally:
        res.close()  # not rm.close(): resource managers share one VISA session, the driver's too


def settings(points: int) -> ScopeSettings:
    return ScopeSettings(
        volts_per_div=1.0,
        position_div=-2.0,
        time_per_div=1e-3,  # a 10 ms record: 1 ns samples at 10 M points
        record_length=points,
        trigger_level_v=1.65,
        trigger_slope="rise",
        acquire_timeout_s=TIMEOUT_S,
    )


def raw_curve(sock: socket.socket, buffer: bytearray) -> None:
    """The floor: the query out, then exactly len(buffer) bytes of reply into `buffer`."""
    sock.sendall(b"CURVe?\n")
    view = memoryview(buffer)
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError(f"the scope closed the connection after {got} bytes")
        got += n


def new_array(points: int) -> np.ndarray:
    """What the station's fresh array costs before a byte arrives: allocation and page faults."""
    array = np.empty(points, np.uint8)
    array[:: mmap.PAGESIZE] = 0
    return array


def timings(paths: Sequence[Callable[[], object]], repeat: int) -> np.ndarray:
    """Times (s) of `repeat` rounds (rows) in which the paths (columns) take turns, so that
    drifts (CPU clock, other processes, TCP windows) hit all alike."""
    times = np.empty((repeat, len(paths)))
    for row in times:
        for i, path in enumerate(paths):
            started = time.perf_counter()
            path()
            row[i] = time.perf_counter() - started
    return times


@contextlib.contextmanager
def raw_connection(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        yield sock


def measure(scope: ScpiInstrument, port: int, resource: str, points: int, repeat: int) -> bool:
    """Time the paths on the record in hand and print the figures; True when the target is met."""
    reply_bytes = len(f"#{len(str(points))}{points}") + points + 1
    buffer, control_buffer = bytearray(reply_bytes), bytearray(reply_bytes)
    with raw_connection(port) as sock, raw_connection(port) as control, plain_pyvisa(resource) as plain:
        raw_curve(sock, buffer)  # warm the paths up, and check they agree
        codes = scope.query_block("CURVe?", "b", points)
        header = reply_bytes - points - 1
        assert np.array_equal(codes, np.frombuffer(buffer, np.int8, points, header)), "the paths disagree"
        times = timings(
            [
                partial(raw_curve, sock, buffer),
                partial(scope.query_block, "CURVe?", "b", points),
                partial(raw_curve, control, control_buffer),
                partial(new_array, points),
            ],
            repeat,
        )
        # apart: its many allocations would change what the station's array costs
        plain_times = timings(
            [partial(plain.query_binary_values, "CURVe?", "b", container=np.array, data_points=points)], repeat
        )
    # the ratio within each round, where the load was the same for both: steadier than across rounds
    paired = np.median(times[:, 0] / times[:, 1]), np.median(times[:, 0] / times[:, 2])
    mb = reply_bytes / 1e6
    t_raw = float(np.median(times[:, 0]))
    print(f"{points:>10,} points ({mb:.1f} MB), median (min-max) of {repeat}:")
    for name, took in (
        ("raw socket recv_into", times[:, 0]),
        ("station query_block", times[:, 1]),
        ("raw socket again (noise)", times[:, 2]),
        ("plain PyVISA (reference)", plain_times[:, 0]),
    ):
        t = float(np.median(took))
        print(f"  {name:<26} {t * 1e3:8.2f} ms ({took.min() * 1e3:.2f}-{took.max() * 1e3:.2f})  "
              f"{mb / t / 1e3:6.2f} GB/s  raw/this {t_raw / t:5.2f}")
    print(f"  {'a new array (np.empty)':<26} {np.median(times[:, 3]) * 1e3:8.2f} ms  (in the station's time, "
          "not raw's)")
    ok = paired[0] >= 0.8
    print(f"  raw / station, median of the rounds' ratios {paired[0]:.2f} (raw / raw again {paired[1]:.2f}): "
          f"target >= 0.8 {'OK' if ok else 'MISS'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="transfers per path and size (at least 5)")
    parser.add_argument("--in-process", action="store_true", help="run the simulated scope on a thread of this process")
    args = parser.parse_args()
    if args.repeat < 5:
        parser.error("--repeat: at least 5 (a median with its min and max)")
    met = True
    with scope_server(args.in_process) as port:
        resource = f"TCPIP::127.0.0.1::{port}::SOCKET"
        print(f"simulated {DIALECT} on {resource} ({'thread' if args.in_process else 'child process'})")
        with open_scope(resource, dialect=DIALECT, timeout_s=TIMEOUT_S) as scope:
            assert isinstance(scope, ScpiInstrument)
            scope.reset()
            for points in SIZES:
                scope.configure(settings(points))
                wf = scope.acquire_single()  # one record, transferred many times
                assert len(wf) == points
                met &= measure(scope, port, resource, points, args.repeat)
    print("every target met" if met else "MISS: a target is missed (see above)")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
