"""This machine as a real target: OpenSSH's own sshd, started by the tests on a free
127.0.0.1 port with throw-away host and client keys, so the station's `kind: ssh`
path meets a real server, real shells and real processes (coreutils' timeout,
setsid, kill, /proc)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class LocalTarget:
    host: str
    port: int
    user: str
    identity_file: str
    known_hosts: str

    def target_yaml(self, **extra: str) -> str:
        fields = {"kind": "ssh", "host": self.host, "port": str(self.port), "user": self.user,
                  "identity_file": f"'{self.identity_file}'", "known_hosts": f"'{self.known_hosts}'", **extra}
        return "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"

    def connect(self) -> asyncssh.connection._ConnectionContextManager:
        return asyncssh.connect(self.host, self.port, username=self.user, client_keys=[self.identity_file],
                                known_hosts=self.known_hosts)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sshd(state: Path) -> tuple[subprocess.Popen, LocalTarget]:
    """Start sshd in the foreground (-D) on 127.0.0.1; the caller stops it."""
    if not os.access(SSHD, os.X_OK):
        raise RuntimeError(f"{SSHD} is missing: scripts/ci/sshd-deps.sh installs openssh-server")
    if os.geteuid() != 0:
        raise RuntimeError("the local sshd target logs in as root and needs root to start (CI runs as root)")
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)
    host_key, client_key = state / "host_ed25519", state / "client_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(host_key))
    client = asyncssh.generate_private_key("ssh-ed25519")
    client.write_private_key(str(client_key))
    (state / "authorized_keys").write_bytes(client.export_public_key())
    for path in (host_key, client_key, state / "authorized_keys"):
        path.chmod(0o600)
    port = _free_port()
    host_public = asyncssh.read_private_key(str(host_key)).export_public_key().decode().strip()
    (state / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public}\n")
    config = state / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {state / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {state / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "AcceptEnv none\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=open(state / "sshd.log", "wb"))  # noqa: SIM115 - the process keeps it
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(state / 'sshd.log').read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("sshd did not listen within 20 s")
        time.sleep(0.05)
    return proc, LocalTarget("127.0.0.1", port, "root", str(client_key), str(state / "known_hosts"))


def stop_sshd(proc: subprocess.Popen, state: Path) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    shutil.rmtree(state, ignore_errors=True)
