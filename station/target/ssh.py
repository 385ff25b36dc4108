"""One SSH session to a target (or a load host), with errors a person can act on.

The user's OpenSSH client configuration (~/.ssh/config: Host aliases, HostName,
User, Port, IdentityFile, ProxyJump) applies as it does for `ssh`: the station
passes only what the campaign sets explicitly. Host keys are always checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import asyncssh

from station.target.errors import TargetError


class AuthenticationRefused(TargetError):
    """The host refused our key, or its host key is not the one we trust: retrying cannot help."""


SUDO_PASSWORD_WORDS = ("a password is required", "a terminal is required", "no tty present")

# A busy sshd may refuse a new session on a live connection, and the connection stays good: it
# refuses to open the channel (its MaxSessions all in use: OpenSSH's 'open failed'), or it refuses
# the exec request on it (its fork failed: seen under hackbench in the PREEMPT_RT guest, 'Session
# request failed', the next command fine). A refused open never sent the command: asked again
# anywhere. A refused exec is asked again for run() alone: OpenSSH answers an exec request before
# the command could end, so a refusal means it never started; a load started twice (start()) would
# be an orphan if a server closed the channel instead of answering. A refused PTY or X11 request is
# the user's ssh configuration: never asked again.
SESSION_TRIES = 5
SESSION_RETRY_FIRST_S = 0.25  # doubled after each refusal: 0.25 + 0.5 + 1 + 2 s in all
OPEN_REFUSED = (asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, asyncssh.OPEN_CONNECT_FAILED,
                asyncssh.OPEN_RESOURCE_SHORTAGE)

T = TypeVar("T")


@dataclass(frozen=True)
class SSHEndpoint:
    host: str
    port: int | None = None  # None: ~/.ssh/config's Port, else 22
    user: str | None = None  # None: ~/.ssh/config's User, else the local user name
    identity_file: str | None = None
    known_hosts: str | None = None
    connect_timeout: float = 10.0
    # privileged commands (insmod, rmmod, the stream reader, kill) through `sudo -n`
    sudo: bool = False
    # how long a run's teardown keeps reconnecting to clean this host up, and a host that failed a
    # run may take to answer again before it is called lost
    reconnect_for: float = 60.0

    @property
    def where(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


def _known_host_entry_exists(known_hosts: str | None, host: str, port: int | None) -> bool:
    """Whether known_hosts already holds a key for this host (then a mismatch means it changed)."""
    path = Path(os.path.expanduser(known_hosts or "~/.ssh/known_hosts"))
    try:
        trusted = asyncssh.read_known_hosts(str(path))
    except (OSError, ValueError, asyncssh.Error):
        return False
    names = [host] if not port or port == 22 else [f"[{host}]:{port}"]
    with contextlib.suppress(Exception):
        for name in names:
            host_keys, ca_keys, *_ = trusted.match(name, "", None)
            if host_keys or ca_keys:
                return True
    return False


class TargetConnection:
    def __init__(self, endpoint: SSHEndpoint, conn: asyncssh.SSHClientConnection) -> None:
        self.endpoint = endpoint
        self._conn = conn

    @classmethod
    async def open(cls, ep: SSHEndpoint) -> TargetConnection:
        options: dict = {"connect_timeout": ep.connect_timeout, "keepalive_interval": 5,
                         "keepalive_count_max": 3}
        if ep.user:
            options["username"] = ep.user
        if ep.known_hosts:
            options["known_hosts"] = os.path.expanduser(ep.known_hosts)
        if ep.identity_file:
            key = Path(os.path.expanduser(ep.identity_file))
            if not key.exists():
                raise AuthenticationRefused(f"identity file {key} does not exist "
                                            "(bench.target.identity_file)")
            options["client_keys"] = [str(key)]
        try:
            conn = await asyncssh.connect(ep.host, ep.port or (), **options)
        except asyncssh.HostKeyNotVerifiable as exc:
            if _known_host_entry_exists(ep.known_hosts, ep.host, ep.port):
                file = ep.known_hosts or "~/.ssh/known_hosts"
                name = ep.host if not ep.port or ep.port == 22 else f"[{ep.host}]:{ep.port}"
                raise AuthenticationRefused(
                    f"the host key of {ep.where} has CHANGED since it was recorded in {file}: "
                    "someone may be intercepting the connection (man-in-the-middle), or the "
                    "target was reinstalled. The station refuses to connect. Only if you know why "
                    f"it changed: ssh-keygen -R '{name}' -f {file}, then add the new key after "
                    "checking its fingerprint on the target's console"
                ) from None
            raise AuthenticationRefused(
                f"host key of {ep.where} is not trusted ({exc.reason}); add it to "
                f"{ep.known_hosts or '~/.ssh/known_hosts'} (ssh-keyscan -p {ep.port or 22} "
                f"{ep.host}, after checking its fingerprint) — the station never skips host key "
                "checks"
            ) from None
        except (asyncssh.KeyImportError, ValueError) as exc:
            files = ", ".join(f for f in (ep.identity_file, ep.known_hosts) if f)
            raise AuthenticationRefused(
                f"cannot read the key files for {ep.where} ({files}): {exc}"
            ) from None
        except asyncssh.PermissionDenied:
            raise AuthenticationRefused(
                f"{ep.where} refused our key (identity_file: "
                f"{ep.identity_file or 'agent/default keys'})"
            ) from None
        except TimeoutError:
            raise TargetError(
                f"no answer from {ep.where} within {ep.connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise TargetError(f"cannot reach {ep.where}: {exc.strerror or exc}") from None
        except asyncssh.Error as exc:
            raise TargetError(f"SSH to {ep.where} failed: {exc.reason}") from None
        return cls(ep, conn)

    @property
    def is_closed(self) -> bool:
        return self._conn.is_closed() if hasattr(self._conn, "is_closed") else False

    async def responds(self, timeout: float) -> bool:
        """Whether the session still carries a trivial command within timeout."""
        try:
            await self.run("true", timeout=timeout)
        except TargetError:
            return False
        return True

    def privileged(self, command: str) -> str:
        """The command as root: through `sudo -n` (never a password prompt) when the bench says
        so."""
        return f"sudo -n {command}" if self.endpoint.sudo else command

    async def run(
        self, command: str, check: bool = True, timeout: float = 30.0, privileged: bool = False
    ) -> asyncssh.SSHCompletedProcess:
        if privileged:
            command = self.privileged(command)
        try:
            async with asyncio.timeout(timeout):  # not wait_for: it can swallow Ctrl-C on 3.11
                # errors="replace": a stray non-UTF-8 byte (a Latin-1 environment, a corrupt pid
                # file) must not make asyncssh drop the whole connection mid-cleanup
                result = await self._session(lambda: self._conn.run(command, check=False,
                                                                    errors="replace"),
                                             exec_refusal_retried=True)
        except TimeoutError:
            raise TargetError(f"{self.endpoint.where}: `{command}` did not finish within "
                              f"{timeout:g} s") from None
        except asyncssh.ChannelOpenError as exc:
            raise TargetError(self._refusal(f"running `{command}`", exc,
                                            exec_refusal_retried=True)) from None
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"{self.endpoint.where}: lost the SSH session running `{command}`: "
                              f"{getattr(exc, 'reason', None) or exc}") from None
        if privileged and self.endpoint.sudo and result.exit_status != 0:
            self.explain_sudo_refusal(command, result.stderr or "")
        if check and result.exit_status != 0:
            stderr = (result.stderr or "").strip() or f"exit status {result.exit_status}"
            raise TargetError(f"{self.endpoint.where}: `{command}` failed: {stderr}")
        return result

    def explain_sudo_refusal(self, command: str, stderr: str | bytes) -> None:
        text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        if any(words in text for words in SUDO_PASSWORD_WORDS):
            raise AuthenticationRefused(
                f"{self.endpoint.where}: `{command}` needs root, and sudo asks "
                f"{self.endpoint.user or 'this user'} for a password; the station never types one. "
                "Allow the station's commands without a password (a sudoers rule USER "
                "ALL=(root) NOPASSWD: ALL: it runs insmod, rmmod, kill, cat, dmesg and its "
                "readers and loads through setsid and sh) or log in as root"
            )

    async def upload(self, data: bytes, remote_path: str, privileged: bool = False) -> None:
        """Write a file on the target through `cat >` (works on any shell, no SFTP needed);
        `privileged`: as root, through `sudo -n tee` where the bench logs in as a user."""
        q = shlex.quote(remote_path)
        command = (
            f"sudo -n tee {q} >/dev/null" if privileged and self.endpoint.sudo else f"cat > {q}"
        )
        try:
            async with asyncio.timeout(60):
                result = await self._session(lambda: self._conn.run(command, input=data,
                                                                    encoding=None))
        except asyncssh.ChannelOpenError as exc:
            raise TargetError(self._refusal(f"uploading {remote_path}", exc)) from None
        except (TimeoutError, asyncssh.Error, OSError) as exc:
            raise TargetError(
                f"{self.endpoint.where}: uploading {remote_path} failed: {exc}"
            ) from None
        if result.exit_status != 0:
            err = (result.stderr or b"").decode(errors="replace").strip()
            raise TargetError(f"{self.endpoint.where}: uploading {remote_path} failed: {err}")

    async def download(self, remote_path: str, timeout: float = 60.0) -> bytes:
        """A file's bytes, through `cat` (as upload: any shell, no SFTP)."""
        command = f"cat {shlex.quote(remote_path)}"
        try:
            async with asyncio.timeout(timeout):
                result = await self._session(lambda: self._conn.run(command, encoding=None))
        except asyncssh.ChannelOpenError as exc:
            raise TargetError(self._refusal(f"reading {remote_path}", exc)) from None
        except (TimeoutError, asyncssh.Error, OSError) as exc:
            raise TargetError(f"{self.endpoint.where}: reading {remote_path} failed: {exc}"
                              ) from None
        if result.exit_status != 0:
            err = (result.stderr or b"").decode(errors="replace").strip()
            raise TargetError(f"{self.endpoint.where}: reading {remote_path} failed: {err}")
        return result.stdout or b""

    async def start(self, command: str, binary: bool = False) -> asyncssh.SSHClientProcess:
        try:
            return await self._session(
                lambda: self._conn.create_process(command, encoding=None if binary else "utf-8")
            )
        except asyncssh.ChannelOpenError as exc:
            raise TargetError(self._refusal(f"starting `{command}`", exc)) from None
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"{self.endpoint.where}: cannot start `{command}`: {exc}") from None

    async def _session(self, open_session: Callable[[], Awaitable[T]],
                       exec_refusal_retried: bool = False) -> T:
        """A new session on this connection, asked for again while sshd refuses one (SESSION_TRIES;
        which refusals: OPEN_REFUSED's comment)."""
        delay = SESSION_RETRY_FIRST_S
        for _ in range(SESSION_TRIES - 1):
            try:
                return await open_session()
            except asyncssh.ChannelOpenError as exc:
                if not self._retried(exc, exec_refusal_retried):
                    raise
            await asyncio.sleep(delay)
            delay *= 2
        return await open_session()

    def _retried(self, exc: asyncssh.ChannelOpenError, exec_refusal_retried: bool) -> bool:
        if self.is_closed:  # the connection is gone, not one session refused
            return False
        return exc.code in OPEN_REFUSED or (
            exec_refusal_retried and exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED
        )

    def _refusal(self, what: str, exc: asyncssh.ChannelOpenError,
                 exec_refusal_retried: bool = False) -> str:
        """Why a session `what` needed did not open, in words a person can act on."""
        where = self.endpoint.where
        if self.is_closed:
            return f"{where}: lost the SSH session {what}: {exc.reason}"
        if self._retried(exc, exec_refusal_retried):
            return (f"{where}: sshd refused a session {what} {SESSION_TRIES} times ({exc.reason}): "
                    "is the target out of processes or memory, or its MaxSessions too low?")
        return (f"{where}: sshd refused a session {what} ({exc.reason}; not asked again): is the "
                "target out of processes or memory, or does the ssh configuration ask for a PTY "
                "or X11?")

    def abort(self) -> None:
        self._conn.abort()

    async def close(self) -> None:
        self._conn.close()
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(5):
                await self._conn.wait_closed()
