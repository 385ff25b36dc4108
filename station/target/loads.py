"""Load generators — and the record stream's reader — on the target or a load host.

Each such process runs as `setsid sh -c 'echo $$ > PIDFILE; exec timeout -s KILL N CMD'`:
its own process group (so one kill stops the whole pipeline), a pid file (so a
later `station cleanup` finds it after a crash) and a hard time limit (so even
a station killed with SIGKILL cannot leave it running for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from dataclasses import dataclass

import asyncssh

from station.target.ssh import TargetConnection, TargetError

STREAM_NAME = "record-stream"


@dataclass
class RunningLoad:
    name: str
    pid: int
    pidfile: str
    conn: TargetConnection
    process: asyncssh.SSHClientProcess
    where: str = "target"  # the load host's name, or "target"


def wrap(command: str, pidfile: str, max_seconds: int) -> str:
    """The pid goes to the pid file (for cleanup after a crash) and to stdout (for this run)."""
    body = command if _is_simple(command) else f"sh -c {shlex.quote(command)}"
    script = f"echo $$ > {shlex.quote(pidfile)}; echo $$; exec timeout -s KILL {max_seconds} {body}"
    return f"setsid sh -c {shlex.quote(script)}"


def _is_simple(command: str) -> bool:
    """A plain program with arguments needs no extra shell."""
    return not any(ch in command for ch in ";|&<>$`(){}") and "\n" not in command


async def start_load(
    conn: TargetConnection, name: str, command: str, work_dir: str, max_seconds: int, binary: bool = False
) -> RunningLoad:
    """Start a tracked process; with binary=True its stdout (after the pid line) is raw bytes."""
    pid_dir = f"{work_dir}/loads"
    await conn.run(f"mkdir -p {shlex.quote(pid_dir)}")
    pidfile = f"{pid_dir}/{name}.pid"
    # a pid file left by a crash names a process nobody else will stop: stop it first
    old = await conn.run(f"cat {shlex.quote(pidfile)}", check=False)
    with contextlib.suppress(ValueError):
        await kill_group(conn, int((old.stdout or "").strip()))
    process = await conn.start(wrap(command, pidfile, max_seconds), binary=binary)
    try:
        async with asyncio.timeout(10):
            line = await process.stdout.readline()
        pid = int(line.strip())
    except (ValueError, TimeoutError):
        err = ""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                err = _text(await process.stderr.read()).strip()
        process.close()
        raise TargetError(
            f"{conn.endpoint.where}: load {name!r} did not start: {err or 'no pid reported'} (command: {command})"
        ) from None
    # a load that dies at once (missing program, bad arguments) is an error, not a quiet run
    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        async with asyncio.timeout(0.5):
            await process.wait_closed()
    if process.exit_status is not None:
        err = _text(await process.stderr.read()).strip()
        raise TargetError(
            f"{conn.endpoint.where}: load {name!r} exited at once with status {process.exit_status}: "
            f"{err or '(no message)'}"
        )
    return RunningLoad(name, pid, pidfile, conn, process)


def _text(data: str | bytes) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data


async def stop_load(load: RunningLoad) -> None:
    await kill_group(load.conn, load.pid)
    await load.conn.run(f"rm -f {shlex.quote(load.pidfile)}", check=False)
    load.process.close()


async def kill_group(conn: TargetConnection, pid: int) -> None:
    # `kill -SIG -PGID`, not `kill -SIG -- -PGID`: busybox's kill rejects the `--`
    await conn.run(f"kill -TERM -{pid}", check=False)
    await asyncio.sleep(0.2)
    await conn.run(f"kill -KILL -{pid}", check=False)


async def kill_recorded_loads(conn: TargetConnection, work_dir: str) -> list[str]:
    """Stop every process a pid file names (after a crash); returns their names."""
    listing = await conn.run(f"ls {shlex.quote(work_dir + '/loads')}", check=False)
    if listing.exit_status != 0:
        return []
    names = [entry.removesuffix(".pid") for entry in (listing.stdout or "").split() if entry.endswith(".pid")]
    for name in names:
        await kill_pidfile(conn, work_dir, name)
    return names


async def kill_pidfile(conn: TargetConnection, work_dir: str, name: str) -> None:
    path = f"{work_dir}/loads/{name}.pid"
    content = await conn.run(f"cat {shlex.quote(path)}", check=False)
    with contextlib.suppress(ValueError):
        await kill_group(conn, int((content.stdout or "").strip()))
    await conn.run(f"rm -f {shlex.quote(path)}", check=False)
