"""A session sshd refuses on a live connection (station/target/ssh.py): a real SSH server in
this process (asyncssh) that refuses the first exec requests it gets and logs every request and
every command it ran — the truth the tests read, not the station's messages."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest

from station.target import SSHEndpoint, TargetConnection, TargetError


@dataclass
class ServerLog:
    refuse: int  # exec requests still to refuse
    requests: list[str] = field(default_factory=list)  # every exec request, refused or not
    ran: list[str] = field(default_factory=list)  # the commands the server ran


class _RefusingSession(asyncssh.SSHServerSession):
    def __init__(self, log: ServerLog) -> None:
        self.log = log
        self.command = ""
        self.chan: asyncssh.SSHServerChannel | None = None

    def connection_made(self, chan: asyncssh.SSHServerChannel) -> None:
        self.chan = chan

    def exec_requested(self, command: str) -> bool:
        self.log.requests.append(command)
        if self.log.refuse > 0:  # as sshd whose fork failed: the request fails, the connection lives
            self.log.refuse -= 1
            return False
        self.command = command
        return True

    def session_started(self) -> None:
        self.log.ran.append(self.command)
        asyncio.get_running_loop().call_soon(self._finish)  # once the exec request is answered

    def _finish(self) -> None:
        assert self.chan is not None
        self.chan.write(f"ran {self.command}\n")
        self.chan.exit(0)


class _KeyOnly(asyncssh.SSHServer):
    def __init__(self, log: ServerLog) -> None:
        self.log = log

    def begin_auth(self, username: str) -> bool:
        return True

    def session_requested(self) -> asyncssh.SSHServerSession:
        return _RefusingSession(self.log)


async def _with_server(tmp_path: Path, log: ServerLog, scenario):  # noqa: ANN001, ANN202
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / "id").write_bytes(client_key.export_private_key())
    (tmp_path / "id").chmod(0o600)
    server = await asyncssh.create_server(
        lambda: _KeyOnly(log), "127.0.0.1", 0, server_host_keys=[host_key],
        authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()))
    port = server.sockets[0].getsockname()[1]
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
    endpoint = SSHEndpoint("127.0.0.1", port, "root", str(tmp_path / "id"), str(tmp_path / "known_hosts"), 5.0)
    conn = await TargetConnection.open(endpoint)
    try:
        return await scenario(conn)
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


def test_a_command_whose_exec_sshd_refused_is_asked_again_and_runs_once(tmp_path):
    log = ServerLog(refuse=2)
    result = asyncio.run(_with_server(tmp_path, log, lambda conn: conn.run("echo hello")))
    assert result.stdout == "ran echo hello\n"
    assert log.requests == ["echo hello"] * 3  # two refused, the third ran
    assert log.ran == ["echo hello"]


def _refusal(tmp_path: Path, log: ServerLog, call) -> str:  # noqa: ANN001
    """The TargetError `call(conn)` raises, as text."""
    async def scenario(conn: TargetConnection) -> str:
        with pytest.raises(TargetError) as refused:
            await call(conn)
        return str(refused.value)

    return asyncio.run(_with_server(tmp_path, log, scenario))


def test_a_command_refused_every_time_is_a_clear_error_after_the_tries(tmp_path):
    log = ServerLog(refuse=100)
    text = _refusal(tmp_path, log, lambda conn: conn.run("echo never"))
    assert log.ran == [] and len(log.requests) == 5
    assert "sshd refused a session running `echo never` 5 times" in text and "out of processes" in text, text


def test_a_load_whose_exec_sshd_refused_is_not_started_again(tmp_path):
    """start() (loads, probes) asks once: a second start of a command that did run would be an orphan."""
    log = ServerLog(refuse=1)
    text = _refusal(tmp_path, log, lambda conn: conn.start("load-forever"))
    assert log.requests == ["load-forever"] and log.ran == []
    assert "sshd refused a session starting `load-forever`" in text and "not asked again" in text, text
