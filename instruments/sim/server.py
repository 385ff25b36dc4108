"""The simulated instruments on TCP: a raw SCPI socket as PyVISA's SOCKET resources expect.

Messages are lines ending in "\\n" ("\\r\\n" accepted); each reply is one line
(binary blocks included) ending in "\\n". `SCPIServer` serves any instrument
model that executes one message at a time (the scopes' here, the function
generator's in `instruments.sim.funcgen`); `SimScopeServer` is the scope. A
server runs on the caller's asyncio loop (the twin's); `run_in_thread` gives
tests a loop of their own. Every message received is logged in `commands`,
so tests can assert the exact sequence a driver sent, and `tamper` lets a test
corrupt the reply to a given message (a preamble field, a block header) to see
what a driver makes of a faulty instrument. `bus` holds each reply back for the time the
instrument's bus would take to carry it (instruments/sim/bus.py); the loopback's by default.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, Self, TypeVar

import numpy as np

from instruments.sim.bus import BUSES, BusProfile, bus_profile
from instruments.sim.infiniivision import InfiniiVisionModel
from instruments.sim.mso import STAMP_FORMS, MsoModel
from instruments.sim.scope_model import AcquisitionInfo, ScopeModel
from instruments.sim.signal import LogicSignal
from instruments.sim.source import EdgeSource
from instruments.sim.tds import TdsModel

LONG_REPLY = 1 << 16  # bytes from which a reply is sent without concatenating its terminator
PACED_SLICE = 4096  # bytes a paced reply sends at a time, at least
PACED_SLICE_S = 0.002  # ... or what the bus carries in this long (fewer wake-ups on a fast bus)
# the dialect names of instruments.dialects.DIALECTS -> the instrument model speaking it
DIALECTS: dict[str, type[ScopeModel]] = {
    "tektronix_tds": TdsModel,
    "keysight_infiniivision": InfiniiVisionModel,
    "tektronix_mso": MsoModel,
}


class InstrumentModel(Protocol):
    """What `SCPIServer` needs of an instrument: run one program message, stop background work."""

    async def execute(self, message: str) -> bytes | None:
        """The reply to the message's queries (without terminator), or None if it has none."""
        ...

    def shutdown(self) -> None: ...


class SCPIServer:
    """`model` on a raw SCPI socket: the TCP serving, the command log, `tamper`, start/stop.

    `mute=True` accepts connections and reads everything but never answers
    (for timeout tests). Subclasses set `line_limit` (the longest message
    read, in bytes) and `thread_name` (for `run_in_thread`).
    """

    line_limit = 1 << 20
    thread_name = "sim-instrument"

    def __init__(
        self,
        model: InstrumentModel,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        mute: bool = False,
        command_log_size: int = 100_000,
        bus: BusProfile = BUSES["loopback"],
    ) -> None:
        self.host = host
        self.bus = bus
        self._requested_port = port
        self.mute = mute
        self.model = model
        self._log: collections.deque[str] = collections.deque(maxlen=command_log_size)
        self._log_lock = threading.Lock()  # read from test threads, written on the loop
        self._tampered: dict[str, Callable[[bytes], bytes]] = {}  # guarded by _log_lock
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    # --- what tests and the twin look at ----------------------------------------------
    @property
    def resource(self) -> str:
        return f"TCPIP::{self.host}::{self.port}::SOCKET"

    @property
    def commands(self) -> list[str]:
        with self._log_lock:
            return list(self._log)

    def clear_log(self) -> None:
        with self._log_lock:
            self._log.clear()

    def tamper(self, message: str, edit: Callable[[bytes], bytes] | None) -> None:
        """Fault injection: send `edit(reply)` instead of the reply to `message`.

        `message` is matched whole, ignoring case ("WFMPre?", "CURVe?"); the
        instrument executes it as usual and `edit` gets the reply without its
        terminator (the server adds "\\n" after whatever `edit` returns). None
        restores the genuine reply.
        """
        with self._log_lock:
            if edit is None:
                self._tampered.pop(message.strip().upper(), None)
            else:
                self._tampered[message.strip().upper()] = edit

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self._requested_port,
                                                  limit=self.line_limit)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.model.shutdown()
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- one connection ----------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                message = line.decode("latin-1").strip()
                if not message:
                    continue
                with self._log_lock:
                    self._log.append(message)
                    edit = self._tampered.get(message.upper())
                if self.mute:
                    continue
                reply = await self.model.execute(message)
                if reply is not None and edit is not None:
                    reply = edit(reply)
                if reply is not None:
                    await send_over(writer, reply, self.bus)
        except (ConnectionError, ValueError, asyncio.CancelledError):
            pass  # client gone, over-long line, or server stopping
        # end normally even when stop() cancelled us: on Python 3.11 a connection task
        # that ends cancelled makes asyncio's stream callback log a spurious error
        writer.close()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await writer.wait_closed()
        self._handlers.discard(task)


async def send_over(writer: asyncio.StreamWriter, reply: bytes, bus: BusProfile) -> None:
    """`reply` as it would cross `bus`: the reply's fixed cost first, then its bytes paced at the
    bus's rate, a slice at a time, none sooner than the bus would deliver it.

    Pacing (not one sleep, then the whole reply at once) lets the host read and parse the
    first frames while the last are still on the wire, as it does on a real interface.
    """
    total = bus.reply_s(len(reply) + 1)  # one charge per reply, its terminator included
    if total <= 0:  # the loopback
        send(writer, reply)
        await writer.drain()
        return
    loop = asyncio.get_running_loop()
    begun = loop.time()
    await asyncio.sleep(bus.overhead_s)
    step = (
        max(PACED_SLICE, round(bus.bytes_per_s * PACED_SLICE_S))
        if math.isfinite(bus.bytes_per_s)
        else len(reply)
    )
    if len(reply) <= step:
        await asyncio.sleep(begun + total - loop.time())
        send(writer, reply)
        await writer.drain()
        return
    view, carried = memoryview(reply), total - bus.overhead_s
    for start in range(0, len(reply), step):
        end = min(start + step, len(reply))
        # this slice's last byte is due once the bytes up to it have crossed at the bus's rate
        await asyncio.sleep(
            begun + bus.overhead_s + carried * (end / (len(reply) + 1)) - loop.time()
        )
        writer.write(view[start:end])
        await writer.drain()
    await asyncio.sleep(begun + total - loop.time())
    writer.write(b"\n")
    await writer.drain()


def send(writer: asyncio.StreamWriter, reply: bytes) -> None:
    """`reply` and its terminator, a long one (a waveform block) without copying it first.

    A short reply goes as one segment. A long one is not concatenated with the
    terminator, and goes as a memoryview: what the socket does not take at once
    is copied once into the transport's buffer, rather than sliced into a new
    bytes object first.
    """
    if len(reply) < LONG_REPLY:
        writer.write(reply + b"\n")
    else:
        writer.write(memoryview(reply))
        writer.write(b"\n")


Server = TypeVar("Server", bound=SCPIServer)


@contextlib.contextmanager
def run_in_thread(server: Server) -> Iterator[Server]:
    """Run `server` on a fresh event loop in a daemon thread for the duration."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=server.thread_name, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
        yield server
    finally:
        try:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


def _set_replies(model: InstrumentModel, replies: dict[str, str]) -> None:
    if not isinstance(model, MsoModel):
        raise ValueError(f"reply forms are the MSO's (tektronix_mso), not {type(model).__name__}'s")
    separator = replies.pop("frame_separator", "none")
    stamps = replies.pop("time_stamps", "numbered")
    if replies or separator not in ("none", "semicolon") or stamps not in STAMP_FORMS:
        raise ValueError("reply forms: frame_separator none|semicolon, time_stamps "
                         f"{'|'.join(STAMP_FORMS)}; not {separator!r}, "
                         f"{stamps!r}{', ' + ', '.join(replies) if replies else ''}")
    model.frame_separator = b";" if separator == "semicolon" else b""
    model.stamp_form = stamps


class SimScopeServer(SCPIServer):
    """A scope whose CH1 probe sees the pulses of `source`: a TDS 400, an MSO 5 or an InfiniiVision.

    `dialect` picks the instrument (a name from `DIALECTS`); `max_record_length`
    and `idn` default to that instrument's own.

    Signal options: `levels` (idle, active) in V, `rise_time_s`/`fall_time_s`
    (10-90 %, linear edges), `noise_v` (Gaussian sigma). `seed` makes noise and
    sample-clock phase reproducible. `channel_sources` probes more channels
    (e.g. {2: a ResponseSource}), on `source`'s clock. `mute=True` accepts connections and reads
    everything but never answers (for timeout tests); `tamper` alters chosen replies.

    `slowest_time_per_div`: a time base that goes no slower (a record shorter than asked for).

    `trigger_error_ns`: the rms error of where the scope puts its time zero against the true
    crossing (default `instruments.sim.scope_model.TRIGGER_ERROR_NS`; 0: exact).

    `bus` is how replies reach the host: "loopback" (no delay, the default), a name from
    `instruments.sim.bus.BUSES`, "model" for the instrument's own interface (GPIB for the
    TDS, LAN for the InfiniiVision, gigabit LAN for the MSO), or a `BusProfile`.
    """

    thread_name = "sim-scope"
    model: ScopeModel

    def __init__(
        self,
        source: EdgeSource,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        seed: int | None = None,
        levels: tuple[float, float] = (0.0, 3.3),
        rise_time_s: float = 15e-9,
        fall_time_s: float | None = None,
        noise_v: float = 0.02,
        mute: bool = False,
        dialect: str = "tektronix_tds",
        probe_channel: int = 1,
        max_record_length: int | None = None,
        idn: str | None = None,
        command_log_size: int = 100_000,
        channel_sources: Mapping[int, EdgeSource] | None = None,
        bus: str | BusProfile = "loopback",
        trigger_error_ns: float | None = None,
        replies: Mapping[str, str] | None = None,
        slowest_time_per_div: float | None = None,
    ) -> None:
        """replies: how an MSO frames what its vendor leaves undocumented (frame_separator: none or
        semicolon; time_stamps: one of instruments/sim/mso.py STAMP_FORMS)."""
        if dialect not in DIALECTS:
            raise ValueError(f"the sim speaks {tuple(DIALECTS)}, not {dialect!r}")
        self.signal = LogicSignal(tuple(levels), rise_time_s, fall_time_s, noise_v)
        self.dialect = dialect
        model = DIALECTS[dialect](
            source,
            self.signal,
            np.random.default_rng(seed),
            probe_channel=probe_channel,
            max_record_length=max_record_length,
            idn=idn,
            channel_sources=channel_sources,
        )
        if trigger_error_ns is not None:
            if not (math.isfinite(trigger_error_ns) and trigger_error_ns >= 0):
                raise ValueError("trigger_error_ns must be a finite rms >= 0, not "
                                 f"{trigger_error_ns!r}")
            model.trigger_error_ns = trigger_error_ns
        if replies:
            _set_replies(model, dict(replies))
        model.slowest_time_per_div = slowest_time_per_div
        if isinstance(bus, str):
            bus = bus_profile(model.default_bus if bus == "model" else bus)
        super().__init__(model, host, port, mute=mute, command_log_size=command_log_size, bus=bus)

    @property
    def acquisitions(self) -> list[AcquisitionInfo]:
        return list(self.model.acquisitions)
