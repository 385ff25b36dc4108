"""This machine as a target: OpenSSH's own sshd, started on a free 127.0.0.1 port with
throw-away host and client keys in a private directory, so that a `kind: local`
target is reached exactly like a remote one (`kind: ssh`: real shells, real
processes, the same tracked-process and cleanup code). The system's sshd service
is neither needed nor touched."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from station.common.lifetime import die_with_parent
from station.config import TargetSettings

SSHD = "/usr/sbin/sshd"
START_TIMEOUT_S = 20.0


class LocalSshdError(Exception):
    """The throw-away sshd could not be started; the message says what to do."""


@dataclass(frozen=True)
class LocalEndpoint:
    host: str
    port: int
    user: str
    identity_file: str
    known_hosts: str

    def target_yaml(self, **extra: str) -> str:
        """The same endpoint as a `kind: ssh` campaign entry (flow style)."""
        fields = {"kind": "ssh", "host": self.host, "port": str(self.port), "user": self.user,
                  "identity_file": f"'{self.identity_file}'",
                  "known_hosts": f"'{self.known_hosts}'", **extra}
        return "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 free now (the helper that binds it next may still lose it to a
    race)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_keys(state: Path, port: int) -> Path:
    host_key, client_key = state / "host_ed25519", state / "client_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(host_key))
    client = asyncssh.generate_private_key("ssh-ed25519")
    client.write_private_key(str(client_key))
    (state / "authorized_keys").write_bytes(client.export_public_key())
    for path in (host_key, client_key, state / "authorized_keys"):
        path.chmod(0o600)
    host_public = asyncssh.read_private_key(str(host_key)).export_public_key().decode().strip()
    (state / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public}\n")
    return host_key


class LocalSshd:
    """One sshd process in the foreground (-D); `stop()` ends it and removes its keys."""

    def __init__(self, state: Path, extra_config: str = "") -> None:
        """extra_config: more sshd_config lines (a test's limits, e.g. MaxSessions)."""
        self.state = state
        self.extra_config = extra_config
        self.proc: subprocess.Popen | None = None

    def start(self) -> LocalEndpoint:
        if not os.access(SSHD, os.X_OK):
            raise LocalSshdError(f"{SSHD} is missing: a local target needs OpenSSH's server "
                                 "(apt-get install openssh-server; its system service need not "
                                 "run)")
        self.state.mkdir(parents=True, exist_ok=True)
        self.state.chmod(0o700)
        port = free_port()
        host_key = _write_keys(self.state, port)
        root = os.geteuid() == 0
        config = self.state / "sshd_config"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile "
            f"{self.state / 'sshd.pid'}\nAuthorizedKeysFile "
            f"{self.state / 'authorized_keys'}\nPermitRootLogin "
            "prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication "
            "no\nUsePAM no\nStrictModes no\nAcceptEnv none\nSubsystem sftp "
            "internal-sftp\nLogLevel ERROR\n" + self.extra_config
        )
        if root:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        log = self.state / "sshd.log"
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)],
                                         stdout=subprocess.DEVNULL,
                                         stderr=err, start_new_session=True,
                                         preexec_fn=die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise LocalSshdError("sshd exited at once: "
                                     f"{log.read_text(errors='replace')[-2000:].strip()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                self.stop()
                raise LocalSshdError(f"sshd did not listen on 127.0.0.1:{port} within "
                                     f"{START_TIMEOUT_S:g} s")
            time.sleep(0.05)
        user = "root" if root else getpass.getuser()
        return LocalEndpoint("127.0.0.1", port, user, str(self.state / "client_ed25519"),
                             str(self.state / "known_hosts"))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None
        shutil.rmtree(self.state, ignore_errors=True)


def serve_locally(settings: TargetSettings, sshd: LocalSshd) -> TargetSettings:
    """A `kind: local` target as the `kind: ssh` target it is reached as, through a
    throw-away sshd started now (the caller stops it, on failure too)."""
    ep = sshd.start()
    return settings.model_copy(update={"kind": "ssh", "host": ep.host, "port": ep.port,
                                       "user": ep.user,
                                       "identity_file": ep.identity_file,
                                       "known_hosts": ep.known_hosts})


def new_local_sshd() -> LocalSshd:
    return LocalSshd(Path(tempfile.mkdtemp(prefix="irq-local-sshd-")))
