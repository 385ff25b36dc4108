"""Everything the station does on a target or a load host over SSH, and nowhere
else: the session (ssh), the machines and their cleanup (hosts), tracked
processes such as loads and the record-stream reader (processes), the latency
modules (modules), the audit (audit) and the kernel log (kernel_log)."""

from station.target.hosts import Host, Target, endpoint_from_settings, load_host
from station.target.ssh import AuthenticationRefused, SSHEndpoint, TargetConnection, TargetError

__all__ = [
    "AuthenticationRefused", "Host", "SSHEndpoint", "Target", "TargetConnection", "TargetError",
    "endpoint_from_settings", "load_host",
]
