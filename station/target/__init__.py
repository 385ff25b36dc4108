"""The target: one SSH session plus what the station has set up on it, torn
down in reverse order on every exit path (labgrid's activate/deactivate idea)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from station.config import TargetSettings
from station.target import loads as load_ctl
from station.target import modules
from station.target.ssh import SSHEndpoint, TargetConnection, TargetError

__all__ = ["Target", "TargetError", "SSHEndpoint", "endpoint_from_settings"]


def endpoint_from_settings(s: TargetSettings) -> SSHEndpoint:
    return SSHEndpoint(s.host, s.port, s.user, s.identity_file, s.known_hosts, s.connect_timeout)


class Target:
    def __init__(self, endpoint: SSHEndpoint, settings: TargetSettings) -> None:
        self.endpoint = endpoint
        self.settings = settings
        self.conn: TargetConnection | None = None

    async def connect(self) -> TargetConnection:
        self.conn = await TargetConnection.open(self.endpoint)
        return self.conn

    async def live_connection(self) -> TargetConnection:
        """The session, re-opened if it dropped (teardown must still reach the target)."""
        if self.conn is None or self.conn.is_closed:
            self.conn = await TargetConnection.open(self.endpoint)
        return self.conn

    def forget_connection(self) -> None:
        """Drop a session that failed (a half-dead link looks open): the next call reconnects."""
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.abort()
        self.conn = None

    def module_path(self, interface: str) -> str:
        stem = modules.module_stem(self.settings.family, interface)
        return f"{self.settings.module_dir.rstrip('/')}/{stem}.ko"

    def device(self, interface: str) -> str:
        return modules.stream_device(self.settings.family, interface, self.settings.fifo)

    async def cleanup(self, within_s: float = 60.0) -> dict[str, list[str]]:
        """Stop every recorded process (loads and the stream reader, which holds the
        device), then unload every station module. Reconnects and retries until the
        target is clean or `within_s` has passed; then raises TargetError."""
        deadline = time.monotonic() + within_s
        stopped: list[str] = []
        unloaded: list[str] = []
        delay = 0.5
        while True:
            try:
                conn = await self.live_connection()
                stopped += await load_ctl.kill_recorded_loads(conn, self.settings.work_dir)
                done, errors = await modules.unload_ours(conn)
                unloaded += done
                if not errors:
                    return {"modules_unloaded": sorted(set(unloaded)), "loads_stopped": sorted(set(stopped))}
                problem = "; ".join(errors)
            except TargetError as exc:
                problem = str(exc)
                self.forget_connection()
            if time.monotonic() + delay > deadline:
                raise TargetError(f"the target is not clean after {within_s:g} s: {problem}; "
                                  "run `station cleanup` when it is reachable")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 8.0)

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
            self.conn = None
