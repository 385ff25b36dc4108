"""The twin target's process table: loads started the way the station starts them (`setsid sh -c
'echo $$ > PIDFILE; exec timeout -s KILL N CMD'`), which run on after their SSH channel closes, as
real processes started without a pty do, until a kill or their timeout ends them; `kill`, `ps`, and
the commands' results."""

from __future__ import annotations

import asyncio
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from station.twin.board_target import BoardError

if TYPE_CHECKING:
    from station.twin.board_target import BoardTarget

KNOWN_LOAD_PROGRAMS = {"hping3", "stress-ng", "stress", "hackbench", "stressapptest", "sh", "dd",
                       "cyclictest"}


@dataclass
class CommandResult:
    stdout: bytes = b""
    stderr: bytes = b""
    status: int = 0


def command_error(text: str, status: int = 1) -> CommandResult:
    return CommandResult(stderr=(text + "\n").encode(), status=status)


@dataclass
class LoadProcess:
    pid: int
    program: str
    cmdline: str
    pidfile: str | None
    deadline: float
    echo_pid: bool = False
    responder: bool = False  # the board's GPIO responder, not a load
    reader: bool = False  # a reader of a module's record stream (`cat DEVICE`), not a load
    argv: list[str] = field(default_factory=list)  # as /proc/PID/cmdline shows it (after exec)
    environ: list[str] = field(default_factory=list)  # as /proc/PID/environ shows it
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    status: int | None = None

    @property
    def loads_the_target(self) -> bool:
        """Running, and a load: the responder and the station's own stream reader are neither."""
        return self.status is None and not self.responder and not self.reader


class ProcessTable:
    """The loads and probes running on the twin target, by pid (a mixin of EmulatedTarget, whose
    files, modules and board the commands below read and write)."""

    loads: dict[int, LoadProcess]
    files: dict[str, bytes]
    modules: dict[str, Any]  # name -> target.LoadedModule (its `device` is what a reader cats)
    board: BoardTarget | None
    _next_pid: int

    def _cmd_kill(self, args: list[str]) -> CommandResult:
        # `kill [-SIG] [--] PID|-PGID...`: the first `-X` is the signal; after it (or
        # after `--`) a negative number is a process group, as in procps, bash and busybox
        sig, rest = 15, list(args)
        if rest and rest[0].startswith("-") and rest[0] != "--":
            name = rest.pop(0)[1:].upper().removeprefix("SIG")
            sig = {"KILL": 9, "9": 9, "TERM": 15, "15": 15, "INT": 2, "2": 2}.get(name, 0)
            if not sig:
                return command_error(f"sh: kill: -{name}: invalid signal specification")
        if rest[:1] == ["--"]:
            rest.pop(0)
        targets = []
        for a in rest:
            try:
                targets.append(abs(int(a)))  # -PGID: the twin's loads lead their own group
            except ValueError:
                return command_error(f"sh: kill: {a}: arguments must be process or job IDs")
        status = 0
        err = b""
        for pid in targets:
            proc = self.loads.get(pid)
            if proc is None or proc.status is not None:
                status = 1
                err += f"sh: kill: ({pid}) - No such process\n".encode()
                continue
            self._end(proc, 128 + sig)
        return CommandResult(b"", err, status)

    def _cmd_setsid(self, args: list[str]) -> CommandResult | tuple[str, object]:
        if args[:1] == ["-w"]:
            args = args[1:]
        environ: list[str] = []
        if args[:1] == ["env"]:
            args = args[1:]
            while args and "=" in args[0] and not args[0].startswith("-"):
                environ.append(args.pop(0))
        if len(args) != 3 or args[:2] != ["sh", "-c"]:
            return command_error("setsid: the twin runs only: setsid sh -c 'echo $$ > PIDFILE; "
                                 "exec timeout ...'")
        script = args[2]
        head, sep, rest = script.partition("; exec ")
        pidfile, echo_pid = None, False
        if not sep:
            head, rest = "", script.removeprefix("exec ")
        for statement in filter(None, (s.strip() for s in head.split(";"))):
            words = shlex.split(statement)
            if words == ["echo", "$$"]:
                echo_pid = True  # like a real shell: the pid reaches stdout only if echoed
            elif len(words) == 4 and words[:3] == ["echo", "$$", ">"]:
                pidfile = words[3]
            else:
                return command_error(f"sh: twin cannot run: {statement}", 2)
        argv = shlex.split(rest)
        # output to a log file on the host
        if len(argv) >= 3 and argv[-3] == ">" and argv[-1] == "2>&1":
            self.files[argv[-2]] = b""
            argv = argv[:-3]
        exec_argv = list(argv)
        deadline = float("inf")
        if argv[:1] == ["timeout"]:
            argv = argv[1:]
            while argv and argv[0].startswith("-"):
                argv = argv[2:] if argv[0] in ("-s", "--signal", "-k") else argv[1:]
            deadline = time.monotonic() + float(argv[0].rstrip("s"))
            argv = argv[1:]
        if not argv:
            return command_error("timeout: missing operand", 125)
        stream_of = None
        if argv[0] == "cat":
            stream_of = next((m for m in self.modules.values() if argv[1:] == [m.device]), None)
            if stream_of is None:
                return command_error(f"cat: {' '.join(argv[1:])}: No such file or directory", 1)
        elif self.board is not None and self.board.is_responder(argv):
            if argv[0] not in self.files and "/" in argv[0]:  # the seed's programs go by name
                return command_error(f"timeout: failed to run command '{argv[0]}': No such file or "
                                     "directory", 127)
        elif argv[0] not in KNOWN_LOAD_PROGRAMS:
            return command_error(f"timeout: failed to run command '{argv[0]}': No such file or "
                                 "directory", 127)
        if argv[0] == "hping3" and len([a for a in argv[1:] if not a.startswith("-")]) == 0:
            return command_error("hping3: missing target host", 1)
        pid = self._next_pid
        self._next_pid += 7
        responder = self.board is not None and self.board.is_responder(argv)
        proc = LoadProcess(pid, argv[0], " ".join(argv), pidfile, deadline, echo_pid, responder,
                           stream_of is not None,
                           exec_argv, environ)
        if responder:
            assert self.board is not None
            try:
                self.board.start_process(pid, argv)
            except BoardError as exc:
                return command_error(str(exc), 1)
        self.loads[pid] = proc
        if self.board is not None:
            self.board.changed(loaded=self.loads_running())
        if pidfile:
            self.files[pidfile] = f"{pid}\n".encode()
        if stream_of is not None:
            return ("stream", (stream_of, proc))
        return ("load", proc)

    def _cmd_ps(self, args: list[str]) -> CommandResult:
        self._reap()
        rows = ["  PID CMD"] + [
            f"{p.pid:>5} {p.cmdline}" for p in self.loads.values() if p.status is None
        ]
        return CommandResult(("\n".join(rows) + "\n").encode())

    def _end(self, proc: LoadProcess, status: int) -> None:
        proc.status = status
        proc.ended.set()
        if self.board is not None:
            self.board.end_process(proc.pid)
            self.board.changed(loaded=any(p.loads_the_target for p in self.loads.values()))

    def _reap(self) -> None:
        now = time.monotonic()
        for proc in self.loads.values():
            if proc.status is None and now >= proc.deadline:
                self._end(proc, 137)  # timeout -s KILL: the dead man's switch fired

    def loads_running(self) -> bool:
        self._reap()
        return any(p.loads_the_target for p in self.loads.values())
