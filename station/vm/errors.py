"""The one exception of the VM package."""

from __future__ import annotations


class VmError(Exception):
    """Building, booting or stopping the VM failed; the message says what to do about it."""
