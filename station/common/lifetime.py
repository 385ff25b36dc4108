"""Lifetimes the station guarantees: local helper processes (QEMU, the local target's sshd)
do not outlive it, even when it is killed with SIGKILL and cannot clean up; a remote start
(insmod, a tracked process) is not cut in half by a cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
from collections.abc import Awaitable
from typing import TypeVar

PR_SET_PDEATHSIG = 1
T = TypeVar("T")


def die_with_parent() -> None:
    """A Popen preexec_fn: in the child, before exec, ask Linux for SIGKILL when the thread
    that started it dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


async def finish_then_cancel(awaitable: Awaitable[T], grace_s: float = 30.0) -> T:
    """Await a remote start (insmod, a tracked process) so that a cancellation arriving
    meanwhile lets it finish first (within grace_s): cancelling the SSH call would close
    its channel while the command goes on over there, and teardown, looking too early,
    would miss what it started. The cancellation is passed on afterwards."""
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(grace_s):
                await asyncio.shield(task)
        raise
