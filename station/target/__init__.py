"""The target: one SSH session plus what the station has set up on it, torn
down in reverse order on every exit path (labgrid's activate/deactivate idea)."""

from __future__ import annotations

import contextlib
import logging

from station.config import TargetSettings
from station.target import loads as load_ctl
from station.target import modules
from station.target.ssh import SSHEndpoint, TargetConnection, TargetError

log = logging.getLogger(__name__)

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

    def module_path(self, interface: str) -> str:
        stem = modules.module_stem(self.settings.family, interface)
        return f"{self.settings.module_dir.rstrip('/')}/{stem}.ko"

    def device(self, interface: str) -> str:
        return modules.stream_device(self.settings.family, interface, self.settings.fifo)

    async def cleanup(self) -> dict[str, list[str]]:
        """Unload every station module and stop every recorded load (idempotent)."""
        conn = await self.live_connection()
        unloaded = await modules.unload_ours(conn)
        stopped = await load_ctl.kill_recorded_loads(conn, self.settings.work_dir)
        return {"modules_unloaded": unloaded, "loads_stopped": stopped}

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
            self.conn = None
