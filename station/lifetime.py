"""Local helper processes (QEMU, the local target's sshd) must not outlive the station,
even when it is killed with SIGKILL and cannot clean up."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A Popen preexec_fn: in the child, before exec, ask Linux for SIGKILL when the thread
    that started it dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
