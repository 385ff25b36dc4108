"""Real benches log in the way their users do: the OpenSSH client configuration
(Host aliases, HostName, Port, User, IdentityFile) applies, and an ordinary user
with passwordless `sudo -n` can run the campaign; a sudo that wants a password
is one clear error, never a prompt."""

from __future__ import annotations

import asyncio
import json

from station import api
from station.config import parse_campaign
from tests.conftest import run_station


def test_openssh_config_alias_is_honoured(twin, tmp_path, monkeypatch):
    """The campaign names only a Host alias; port, user and key come from ~/.ssh/config."""
    e = twin.endpoints
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        "Host bench-alias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {e.ssh_port}\n"
        "  User root\n"
        f"  IdentityFile {e.identity_file}\n"
    )
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "name: alias\n"
        f"bench: {{target: {{kind: ssh, host: bench-alias, known_hosts: '{e.known_hosts}'}}, scope: {{kind: none}}}}\n"
        "matrix: {samples: 100}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    res = run_station("cleanup", str(cfg), timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["target"] == {"modules_unloaded": [], "loads_stopped": []}


def _sudo_campaign(twin):
    e = twin.endpoints
    return parse_campaign(
        "name: sudo\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {e.ssh_port}, user: root, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}', sudo: true}}\n"
        "  scope: {kind: none}\n"
        "matrix: {interfaces: [lpt], variants: [inb, no-inb], samples: 2000}\n"
    )


def test_privileged_commands_go_through_sudo_n(twin, tmp_path):
    result = asyncio.run(api.run_campaign_async(_sudo_campaign(twin), tmp_path / "out"))
    assert [o.status for o in result.outcomes] == ["complete", "complete"]
    ran = twin.call(lambda: list(twin.target.sudo_commands))
    programs = {cmd.split()[0] for cmd in ran}
    assert {"insmod", "rmmod", "dmesg", "setsid", "kill"} <= programs, programs
    assert any("cat /dev/rtf0" in cmd for cmd in ran)  # the stream reader reads the device as root


def test_sudo_that_wants_a_password_is_one_clear_error(twin, tmp_path):
    twin.call(setattr, twin.target, "sudo_needs_password", True)
    result = asyncio.run(api.run_campaign_async(_sudo_campaign(twin), tmp_path / "out"))
    assert len(result.outcomes) == 1  # the campaign stopped: every run would be refused alike
    assert "sudo asks" in result.stopped and "password" in result.stopped
    assert result.outcomes[0].status == "failed"
    loaded = twin.call(lambda: sorted(twin.target.modules))
    assert loaded == []
