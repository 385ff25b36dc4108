"""The SSH keys of an image: the station's client key and the guest's pre-generated host key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncssh

from station.vm.errors import VmError


def ensure_client_key(path: Path) -> str:
    """An ed25519 private key at path (0600), created once; returns its OpenSSH public key line."""
    if not path.is_file():
        key = asyncssh.generate_private_key("ssh-ed25519", comment="irq-station-vm")
        tmp = path.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        key.write_private_key(str(tmp))
        tmp.replace(path)
        key.write_public_key(str(path) + ".pub")
    key = asyncssh.read_private_key(str(path))
    return key.export_public_key("openssh").decode().strip()


def ensure_host_key(path: Path) -> str:
    """A dropbear ed25519 host key at path, created once (no entropy wait at boot); returns its
    public line."""
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        res = subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(tmp)], capture_output=True,
                             text=True)
        if res.returncode != 0:
            raise VmError(f"dropbearkey failed: {res.stderr.strip()}")
        tmp.replace(path)
    res = subprocess.run(["dropbearkey", "-y", "-f", str(path)], capture_output=True, text=True,
                         check=False)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("ssh-")), None)
    if line is None:
        raise VmError(f"dropbearkey -y -f {path} printed no public key: {res.stderr.strip()}")
    kind, blob = line.split()[:2]
    return f"{kind} {blob}"
