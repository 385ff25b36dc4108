"""One gpio case's responder on the target, as a run and `station bench check` start it:
gpio_responder.ko loaded with the case's parameters, or the user-space responder (the character
device or sysfs; the seed's mmap programs on the twin) started as a tracked process whose output
goes to a log; nothing for an external responder. Stopped on every path, including one where the
start's reply was lost."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from typing import Protocol

from station.common.lifetime import finish_then_cancel
from station.kinds.gpio import on_target as gpio_target
from station.kinds.gpio.settings import TWIN_ONLY_RESPONDERS, GpioCase, GpioSettings
from station.target import modules
from station.target import processes as proc_ctl
from station.target.hosts import Target
from station.target.ssh import TargetConnection

RESPONDER_NAME = "gpio-responder"  # its pid file and log; a reserved load name


class Log(Protocol):
    def write(self, text: str, flush: bool = False) -> None: ...


class Responder:
    def __init__(self, target: Target, gpio: GpioSettings, case: GpioCase, max_seconds: float,
                 log: Log) -> None:
        self.target, self.gpio, self.case = target, gpio, case
        self.max_seconds, self.log = max_seconds, log
        self.process: proc_ctl.TrackedProcess | None = None
        self.started = False  # a program asked to start (tracked or not)
        self.module_maybe_loaded = False
        self._reader: asyncio.Future | None = None

    @property
    def exit_status(self) -> int | None:
        """The program's exit status once it has ended (None: running, or no program)."""
        return None if self.process is None else self.process.process.exit_status

    async def start(self, conn: TargetConnection) -> None:
        target, responder = self.target, self.case.responder
        if responder == "kernel":
            # before the await: insmod can succeed and its reply be lost
            self.module_maybe_loaded = True
            path = f"{target.settings.module_dir.rstrip('/')}/{gpio_target.RESPONDER_MODULE}.ko"
            await finish_then_cancel(
                modules.insmod(conn, path, gpio_target.module_params(self.gpio, self.case)))
            return
        if responder == "external":
            return
        if responder in TWIN_ONLY_RESPONDERS:
            program = responder
        else:
            program = await gpio_target.RESPONDER_PROGRAM.ensure(conn, target.work_dir)
        command = shlex.join([program, *gpio_target.program_arguments(self.gpio, self.case)])
        self.started = True
        self.process = await finish_then_cancel(proc_ctl.start_load(
            conn, RESPONDER_NAME, command, target.work_dir, self.max_seconds, privileged=True,
            role="probe"))
        out = self.process.process
        self._reader = asyncio.gather(_copy(out.stdout, self.log), _copy(out.stderr, self.log))
        self._reader.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def stop(self, conn: TargetConnection) -> None:
        """The program stopped (its output read to the end), the module unloaded."""
        if self.process is not None:
            self.process.conn = conn
            await proc_ctl.stop_load(self.process)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await self._reader
        elif self.started:  # started but not yet tracked when the run was stopped
            await proc_ctl.kill_pidfile(conn, proc_ctl.pidfile_path(self.target.work_dir,
                                                                    RESPONDER_NAME))
        if (self.module_maybe_loaded
                and gpio_target.RESPONDER_MODULE in await modules.loaded_modules(conn)):
            await modules.rmmod(conn, gpio_target.RESPONDER_MODULE)
        self.module_maybe_loaded = False


async def _copy(stream, out: Log) -> None:  # noqa: ANN001 - an asyncssh reader
    while data := await stream.read(4096):
        out.write(data if isinstance(data, str) else data.decode(errors="replace"), flush=True)
