"""Everything the station does on a target or a load host over SSH, and nowhere
else: the session (ssh), the machines and their cleanup (hosts), tracked
processes such as loads and the record-stream reader (processes), the latency
modules (modules), the audit (audit) and the kernel log (kernel_log)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from station.common.lazy_import import lazy_exports

if TYPE_CHECKING:
    from station.target.errors import TargetError
    from station.target.hosts import Host, Target, endpoint_from_settings, load_host
    from station.target.ssh import AuthenticationRefused, SSHEndpoint, TargetConnection

# imported on first use: a submodule that needs none of them (the config's governor names, read by
# every command) does not pay for the SSH stack
_WHERE = {"Host": "hosts", "Target": "hosts", "endpoint_from_settings": "hosts",
          "load_host": "hosts",
          "AuthenticationRefused": "ssh", "SSHEndpoint": "ssh", "TargetConnection": "ssh",
          "TargetError": "errors"}

__all__ = [
    "AuthenticationRefused", "Host", "SSHEndpoint", "Target", "TargetConnection", "TargetError",
    "endpoint_from_settings", "load_host",
]


__getattr__, __dir__ = lazy_exports(__name__, {name: f"station.target.{module}"
                                               for name, module in _WHERE.items()},
                                    globals())
