"""The twin's SSH server: a real asyncssh server on 127.0.0.1 in front of the
emulated target. Fresh host key at every start, public-key authentication only.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import asyncssh

from station.twin.processes import CommandResult, LoadProcess
from station.twin.target import EmulatedTarget, LoadedModule


class _Server(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return True  # always ask for a key

    def password_auth_supported(self) -> bool:
        return False


class TwinSSHServer:
    def __init__(self, target: EmulatedTarget, authorized_public_key: str,
                 host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self._authorized = asyncssh.import_authorized_keys(authorized_public_key)
        self._server: asyncssh.SSHAcceptor | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self._server = await asyncssh.create_server(
            _Server,
            self.host,
            port,
            server_host_keys=[self.host_key],
            authorized_client_keys=self._authorized,
            process_factory=self._handle,
            encoding=None,
            allow_scp=False,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key().decode().strip()
        return f"[{self.host}]:{self.port} {key}\n"

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        try:
            if process.command is None:
                await self._interactive(process)
                return
            status = await self._run(process, process.command)
            if status is not None:
                process.exit(status)
        except (asyncssh.Error, BrokenPipeError, ConnectionError):
            pass  # the client went away; the target's state is what it is

    async def _run(self, process: asyncssh.SSHServerProcess, command: str) -> int | None:
        words = command.split()
        if words[:2] == ["sudo", "-n"]:
            words = words[2:]
        if (len(words) == 3 and words[:2] == ["cat", ">"]) or (len(words) == 3 and words[0] == "tee"
                                                               and words[2] == ">/dev/null"):
            # the station's file upload (as root through sudo: tee): stdin to a file
            self.target.write_file(words[2] if words[0] == "cat" else words[1],
                                   await process.stdin.read())
            return 0
        result = self.target.run(command)
        if isinstance(result, CommandResult):
            process.stdout.write(result.stdout)
            process.stderr.write(result.stderr)
            return result.status
        kind, obj = result
        closed = asyncio.Event()
        watcher = asyncio.ensure_future(self._watch_close(process, closed))
        try:
            if kind == "stream":
                mod, tracked = obj
                assert isinstance(mod, LoadedModule)
                if tracked is not None and tracked.echo_pid:
                    process.stdout.write(f"{tracked.pid}\n".encode())
                return await self.target.serve_stream(mod, process.stdout, process.stdout.drain,
                                                      closed, tracked)
            assert isinstance(obj, LoadProcess)
            if obj.echo_pid:
                process.stdout.write(f"{obj.pid}\n".encode())
                await process.stdout.drain()
            await self._run_load(obj, closed)
            # a load whose channel closed keeps running (no pty, as on a real target)
            return obj.status if obj.status is not None else None
        finally:
            watcher.cancel()

    async def _run_load(self, proc: LoadProcess, closed: asyncio.Event) -> None:
        while proc.status is None and not closed.is_set():
            self.target.loads_running()  # reaps timed-out loads
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.ended.wait(), 0.2)

    @staticmethod
    async def _watch_close(process: asyncssh.SSHServerProcess, closed: asyncio.Event) -> None:
        with contextlib.suppress(Exception):
            await process.channel.wait_closed()
        closed.set()

    async def _interactive(self, process: asyncssh.SSHServerProcess) -> None:
        """A minimal prompt for people who ssh into the twin by hand."""
        process.stdout.write(b"irq-station twin (emulated RTAI target). Commands: uname, lsmod, "
                             b"insmod, rmmod, "
                             b"cat, ls, ps, kill, exit\n")
        while True:
            process.stdout.write(b"# ")
            line = await process.stdin.readline()
            if not line or line.strip() in (b"exit", b"logout"):
                process.exit(0)
                return
            result = self.target.run(line.decode(errors="replace").strip())
            if isinstance(result, CommandResult):
                process.stdout.write(result.stdout.replace(b"\n", b"\r\n"))
                process.stdout.write(result.stderr.replace(b"\n", b"\r\n"))
            else:
                process.stdout.write(b"(streaming commands need a non-interactive ssh: ssh twin "
                                     b"'cat /dev/rtf0')\r\n")


def write_client_key(path: Path) -> str:
    """Create a client key pair for talking to the twin; returns the public key line."""
    key = asyncssh.generate_private_key("ssh-ed25519", comment="irq-station-twin-client")
    path.parent.mkdir(parents=True, exist_ok=True)
    key.write_private_key(str(path))
    path.chmod(0o600)
    key.write_public_key(str(path) + ".pub")
    return key.export_public_key().decode()
