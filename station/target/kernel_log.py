"""What the kernel said during a run: the dmesg lines that appeared, and any
sign of trouble (an oops, a WARNING, a BUG) that makes the run's data suspect."""

from __future__ import annotations

import re

from station.target.ssh import TargetConnection

TROUBLE = re.compile(
    r"Oops|BUG:|WARNING:|Call Trace|general protection fault|soft lockup|hard LOCKUP|"
    r"list_(add|del) corruption|scheduling while atomic|sleeping function called from invalid "
    r"context"
)


async def snapshot(conn: TargetConnection) -> list[str]:
    result = await conn.run("dmesg", check=False, timeout=10, privileged=True)
    return (result.stdout or "").splitlines() if result.exit_status == 0 else []


def new_lines(before: list[str], after: list[str]) -> list[str]:
    """Lines of `after` that follow the last line `before` ended with (the ring may have
    wrapped)."""
    if not before:
        return after
    last = before[-1]
    for i in range(len(after) - 1, -1, -1):
        if after[i] == last:
            return after[i + 1 :]
    return after


def trouble(lines: list[str]) -> list[str]:
    return [line for line in lines if TROUBLE.search(line)]
