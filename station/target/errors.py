"""The target's error, apart from the SSH stack: modules that only name it (the config's governor
names beside their reading and writing) do not import asyncssh."""


class TargetError(Exception):
    """Something on or about the target went wrong; the message says what and where."""
