"""Tracked processes on the target or a load host: load generators, the record
stream's reader, probes.

Each such process runs as `setsid env IRQ_STATION_TAG=PIDFILE sh -c 'echo $$ > PIDFILE;
exec timeout -s KILL N CMD' & wait $!`: its own session and process group (so one
kill stops the whole pipeline), a pid file (so a later `station cleanup` finds it
after a crash) and a hard time limit (so even
a station killed with SIGKILL cannot leave it running for ever). A pid file is
only acted on when the pid is > 1 and its process still carries our tag in its
environment: a stale file must never make the station signal a stranger's
process, let alone `kill -TERM -1`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from dataclasses import dataclass

import asyncssh

from station.target.ssh import TargetConnection, TargetError

STREAM_NAME = "record-stream"


class ExitedAtOnce(TargetError):
    """A started process that ended within its first half second, with its status and words."""

    def __init__(self, message: str, exit_status: int | None, said: str) -> None:
        super().__init__(message)
        self.exit_status, self.said = exit_status, said


@dataclass
class TrackedProcess:
    name: str
    pid: int
    pidfile: str
    conn: TargetConnection
    process: asyncssh.SSHClientProcess
    where: str = "target"  # the load host's name, or "target"


TAG_VARIABLE = "IRQ_STATION_TAG"


def wrap(command: str, pidfile: str, max_seconds: int, log: str | None = None) -> str:
    """The pid goes to the pid file (for cleanup after a crash) and to stdout (for this run);
    the environment carries a tag naming the pid file, which every program the wrapper
    execs inherits: how a later cleanup tells our process from a stranger's reused pid.
    With log, the command's output goes to that file on the host instead of the SSH
    channel: a load that writes as it runs (stressapptest) must not die of SIGPIPE when
    the session drops or the station is killed."""
    body = command if _is_simple(command) else f"sh -c {shlex.quote(command)}"
    redirect = f" > {shlex.quote(log)} 2>&1" if log else ""
    script = (
        f"echo $$ > {shlex.quote(pidfile)}; echo $$; exec timeout -s KILL {max_seconds} "
        f"{body}{redirect}"
    )
    # `setsid` forks (and its parent exits at once) when it leads a process group, as the
    # command of an SSH session does; run as a background job it is no group leader, so it
    # makes the new session in place, and `wait` keeps the channel open until the job ends
    return (
        f"setsid env {shlex.quote(f'{TAG_VARIABLE}={pidfile}')} sh -c {shlex.quote(script)} & "
        "wait $!"
    )


def _is_simple(command: str) -> bool:
    """A plain program with arguments needs no extra shell."""
    first = command.split(maxsplit=1)[0] if command.split() else ""
    return (
        not any(ch in command for ch in ";|&<>$`(){}*?[]~'\"\\")
        and "\n" not in command
        and "=" not in first
    )


async def start_load(
    conn: TargetConnection, name: str, command: str, work_dir: str, max_seconds: int,
    binary: bool = False,
    privileged: bool = False, finite: bool = False, to_log: bool = False, role: str = "load",
) -> TrackedProcess:
    """Start a tracked process; with binary=True its stdout (after the pid line) is raw bytes;
    privileged: as root (through `sudo -n` where the bench says so); finite: it ends by itself
    (a probe with a duration), so ending at once with status 0 is no error; to_log: its output
    goes to <work_dir>/logs/<name>.log on the host, not through the SSH channel (loads)."""
    dirs = [f"{work_dir}/loads", *([f"{work_dir}/logs"] if to_log else [])]
    # one round trip: each costs a shell on the target
    await conn.run(shlex.join(["mkdir", "-p", *dirs]))
    pidfile = pidfile_path(work_dir, name)
    log = f"{work_dir}/logs/{name}.log" if to_log else None
    # a pid file left by a crash names a process nobody else will stop: stop it first
    await kill_pidfile(conn, pidfile)
    wrapped = wrap(command, pidfile, max_seconds, log)
    process = await conn.start(conn.privileged(wrapped) if privileged else wrapped, binary=binary)
    try:
        async with asyncio.timeout(10):
            line = await process.stdout.readline()
        pid = int(line.strip())
        if pid <= 1:
            raise ValueError(pid)
    except (ValueError, TimeoutError):
        err = ""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                err = _text(await process.stderr.read()).strip()
        process.close()
        if privileged:
            conn.explain_sudo_refusal(wrapped, err)
        raise TargetError(
            f"{conn.endpoint.where}: {role} {name!r} did not start: {err or 'no pid reported'} "
            f"(command: {command})"
        ) from None
    # a load that dies at once (missing program, bad arguments) is an error, not a quiet run
    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        async with asyncio.timeout(0.5):
            await process.wait_closed()
    if process.exit_status is not None and not (finite and process.exit_status == 0):
        err = _text(await process.stderr.read()).strip()
        if privileged:
            conn.explain_sudo_refusal(wrapped, err)
        if not err and log:
            err = (await conn.run(f"tail -c 4000 {shlex.quote(log)}", check=False)).stdout or ""
        if not err:  # some tools (stressapptest) say why on stdout
            err = _text(await process.stdout.read())
        if err:
            out = err.strip().splitlines()
            err = " | ".join(
                line for line in out if "error" in line.lower() or "fail" in line.lower()
            )[-500:]
            err = err or " | ".join(out[-3:])[-500:]
        raise ExitedAtOnce(
            f"{conn.endpoint.where}: {role} {name!r} exited at once with status "
            f"{process.exit_status}: {err or '(no message)'}", process.exit_status,
            err or "(no message)",
        )
    return TrackedProcess(name, pid, pidfile, conn, process)


def _text(data: str | bytes) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data


async def stop_load(load: TrackedProcess, grace_s: float = 0.2) -> None:
    """Stop a tracked process's group; grace_s: how long it may take to end after TERM
    (a probe writes its results then) before KILL."""
    if await is_ours(load.conn, load.pid, load.pidfile):  # not if it ended and its pid was reused
        await kill_group(load.conn, load.pid, grace_s)
    await load.conn.run(f"rm -f {shlex.quote(load.pidfile)}", check=False, privileged=True)
    load.process.close()


KILL_WAIT_S = 10.0  # how long a killed group may take to be gone before the station moves on


async def kill_group(conn: TargetConnection, pid: int, grace_s: float = 0.2,
                     first: str = "TERM") -> None:
    """TERM (or INT, for a program that cleans up only on that, like rtla), then (after
    grace_s, or as soon as the group is gone) KILL, the process group a tracked process leads."""
    if pid <= 1:  # `kill -TERM -1` would signal every process the user may signal
        raise TargetError(f"{conn.endpoint.where}: refusing to signal process group {pid}")
    if first not in ("TERM", "INT"):
        raise ValueError(f"kill_group: {first!r} is not TERM or INT")
    # `kill -SIG -PGID`, not `kill -SIG -- -PGID`: busybox's kill rejects the `--`
    await conn.run(f"kill -{first} -{pid}", check=False, privileged=True)
    waited = 0.0
    while waited < grace_s:
        await asyncio.sleep(0.2)
        waited += 0.2
        if waited < grace_s and (await conn.run(f"kill -0 -{pid}", check=False,
                                                privileged=True)).exit_status:
            return  # the whole group has ended
    await conn.run(f"kill -KILL -{pid}", check=False, privileged=True)
    # a process inside a system call (a write to tracefs in an emulated guest takes a while) dies
    # when the call returns: wait for the group to be gone, so that "stopped" means gone
    waited = 0.0
    while waited < KILL_WAIT_S and (await conn.run(f"kill -0 -{pid}", check=False,
                                                   privileged=True)).exit_status == 0:
        await asyncio.sleep(0.1)
        waited += 0.1


async def is_ours(conn: TargetConnection, pid: int, pidfile: str) -> bool:
    """Whether pid is still the process a wrapper started for this pid file: its environment
    holds our tag (whatever `timeout` execs, busybox's or coreutils', inherits it). A pid reused
    by any other program is not ours, and is never signalled."""
    if pid <= 1:
        return False
    result = await conn.run(f"cat /proc/{pid}/environ", check=False, privileged=True)
    return result.exit_status == 0 and f"{TAG_VARIABLE}={pidfile}" in (result.stdout or "").split(
        "\0"
    )


def parse_pid(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 10 else None


async def kill_recorded(conn: TargetConnection, work_dir: str) -> list[str]:
    """Stop every process a pid file names (after a crash); returns their names."""
    listing = await conn.run(f"ls {shlex.quote(work_dir + '/loads')}", check=False)
    if listing.exit_status != 0:
        return []
    names = [
        entry.removesuffix(".pid")
        for entry in (listing.stdout or "").split()
        if entry.endswith(".pid")
    ]
    for name in names:
        await kill_pidfile(conn, pidfile_path(work_dir, name))
    return names


def pidfile_path(work_dir: str, name: str) -> str:
    return f"{work_dir}/loads/{name}.pid"


async def kill_pidfile(conn: TargetConnection, path: str) -> None:
    """Stop the group a pid file names, if it is still ours; then remove the file."""
    content = await conn.run(f"cat {shlex.quote(path)}", check=False)
    pid = parse_pid(content.stdout or "") if content.exit_status == 0 else None
    if pid is not None and await is_ours(conn, pid, path):
        await kill_group(conn, pid)
    await conn.run(f"rm -f {shlex.quote(path)}", check=False, privileged=True)
