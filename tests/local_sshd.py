"""This machine as a real target for the tests: the station's own throw-away sshd
(station/target/local_sshd.py), started by the tests on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from station.target.local_sshd import LocalEndpoint, LocalSshd

LocalTarget = LocalEndpoint  # the name the tests know


def start_sshd(state: Path) -> tuple[LocalSshd, LocalEndpoint]:
    """Start sshd on 127.0.0.1; the caller stops it with stop_sshd."""
    if os.geteuid() != 0:
        raise RuntimeError("the local sshd target logs in as root and needs root to start (CI runs as root)")
    server = LocalSshd(state)
    return server, server.start()


def stop_sshd(server: LocalSshd | subprocess.Popen, state: Path) -> None:
    server.stop()
