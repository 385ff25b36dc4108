"""A TCP relay on 127.0.0.1 that a test can break like a real link: cut it (every
connection reset, new ones refused), drop it (every connection reset, new ones
taken), freeze it (connections stay open, no byte passes either way), and restore
it. The station and the twin keep speaking their real protocols through it; only
the link misbehaves."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from pathlib import Path


class FaultyLink:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.connections = 0  # accepted connection attempts, whatever happened to them
        self._mode = "pass"
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = None  # asyncio.Event, set while bytes may pass
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faulty-link", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    # ---- control (from the test's thread) ------------------------------------------------
    def __enter__(self) -> FaultyLink:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def cut(self) -> None:
        self._call(self._set, "cut")

    def freeze(self) -> None:
        self._call(self._set, "freeze")

    def drop(self) -> None:
        """Reset every open connection, and go on accepting new ones: a link that drops for an
        instant (an event, not a duration, so a busy machine cannot stretch it)."""
        self._call(self._set, "cut")
        self._call(self._set, "pass")

    def wait_for_connections(self, count: int, timeout_s: float) -> bool:
        """Until `connections` reaches count (a client giving up a session and opening a new one)."""
        import time

        deadline = time.monotonic() + timeout_s
        while self.connections < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def restore(self) -> None:
        self._call(self._set, "pass")

    def _call(self, fn, *args) -> None:  # noqa: ANN001
        async def run() -> None:
            fn(*args)

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    # ---- the relay (on its own loop) -----------------------------------------------------
    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = await asyncio.start_server(self._serve, sock=sock)

    async def _stop(self) -> None:
        self._set("cut")
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _set(self, mode: str) -> None:
        self._mode = mode
        if mode == "pass":
            self._flowing.set()
        else:
            self._flowing.clear()
        if mode == "cut":
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.transport.abort()  # a reset, as when a cable or a daemon goes away
            self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self._mode == "cut":
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer),
                             return_exceptions=True)
        for w in (writer, up_writer):
            self._writers.discard(w)
            with contextlib.suppress(Exception):
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(65536)
            if not data:
                with contextlib.suppress(Exception):
                    writer.write_eof()
                return
            await self._flowing.wait()  # frozen: hold the bytes, keep the sockets open
            if writer.is_closing():
                return
            writer.write(data)
            await writer.drain()


def relay_known_hosts(known_hosts: str, port: int, path: Path) -> Path:
    """A known_hosts file (written at `path`) holding the host key of `known_hosts` (a twin's, one
    line) under the relay's port on 127.0.0.1: the station checks the key it meets through the
    relay as it would the twin's own."""
    key = Path(known_hosts).read_text().split(" ", 1)[1]
    path.write_text(f"[127.0.0.1]:{port} {key}")
    return path
