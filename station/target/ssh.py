"""One SSH session to a target (or a load host), with errors a person can act on."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh


class TargetError(Exception):
    """Something on or about the target went wrong; the message says what and where."""


@dataclass(frozen=True)
class SSHEndpoint:
    host: str
    port: int = 22
    user: str = "root"
    identity_file: str | None = None
    known_hosts: str | None = None
    connect_timeout: float = 10.0

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


class TargetConnection:
    def __init__(self, endpoint: SSHEndpoint, conn: asyncssh.SSHClientConnection) -> None:
        self.endpoint = endpoint
        self._conn = conn

    @classmethod
    async def open(cls, ep: SSHEndpoint) -> TargetConnection:
        known_hosts = os.path.expanduser(ep.known_hosts) if ep.known_hosts else ()
        options = {
            "username": ep.user,
            "known_hosts": known_hosts,
            "connect_timeout": ep.connect_timeout,
            "keepalive_interval": 5,
            "keepalive_count_max": 3,
        }
        if ep.identity_file:
            key = Path(os.path.expanduser(ep.identity_file))
            if not key.exists():
                raise TargetError(f"identity file {key} does not exist (bench.target.identity_file)")
            options["client_keys"] = [str(key)]
        try:
            conn = await asyncssh.connect(ep.host, ep.port, **options)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise TargetError(
                f"host key of {ep.where} is not trusted ({exc.reason}); add it to "
                f"{ep.known_hosts or '~/.ssh/known_hosts'} (ssh-keyscan -p {ep.port} {ep.host}) — "
                "the station never skips host key checks"
            ) from None
        except asyncssh.PermissionDenied:
            raise TargetError(
                f"{ep.where} refused our key (identity_file: {ep.identity_file or 'agent/default keys'})"
            ) from None
        except TimeoutError:
            raise TargetError(f"no answer from {ep.where} within {ep.connect_timeout:g} s") from None
        except OSError as exc:
            raise TargetError(f"cannot reach {ep.where}: {exc.strerror or exc}") from None
        except asyncssh.Error as exc:
            raise TargetError(f"SSH to {ep.where} failed: {exc.reason}") from None
        return cls(ep, conn)

    @property
    def is_closed(self) -> bool:
        return self._conn.is_closed() if hasattr(self._conn, "is_closed") else False

    async def run(self, command: str, check: bool = True, timeout: float = 30.0) -> asyncssh.SSHCompletedProcess:
        try:
            async with asyncio.timeout(timeout):  # not wait_for: it can swallow Ctrl-C on 3.11
                result = await self._conn.run(command, check=False)
        except TimeoutError:
            raise TargetError(f"{self.endpoint.where}: `{command}` did not finish within {timeout:g} s") from None
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"{self.endpoint.where}: lost the SSH session running `{command}`: {exc}") from None
        if check and result.exit_status != 0:
            stderr = (result.stderr or "").strip() or f"exit status {result.exit_status}"
            raise TargetError(f"{self.endpoint.where}: `{command}` failed: {stderr}")
        return result

    async def upload(self, data: bytes, remote_path: str) -> None:
        """Write a file on the target through `cat >` (works on any shell, no SFTP needed)."""
        import shlex

        try:
            async with asyncio.timeout(60):
                result = await self._conn.run(f"cat > {shlex.quote(remote_path)}", input=data, encoding=None)
        except (TimeoutError, asyncssh.Error, OSError) as exc:
            raise TargetError(f"{self.endpoint.where}: uploading {remote_path} failed: {exc}") from None
        if result.exit_status != 0:
            err = (result.stderr or b"").decode(errors="replace").strip()
            raise TargetError(f"{self.endpoint.where}: uploading {remote_path} failed: {err}")

    async def start(self, command: str, binary: bool = False) -> asyncssh.SSHClientProcess:
        try:
            return await self._conn.create_process(command, encoding=None if binary else "utf-8")
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"{self.endpoint.where}: cannot start `{command}`: {exc}") from None

    def abort(self) -> None:
        self._conn.abort()

    async def close(self) -> None:
        self._conn.close()
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(5):
                await self._conn.wait_closed()
