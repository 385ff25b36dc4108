"""rtla beside a probe: the kernel's own tracer (osnoise, timerlat) run on the same CPUs for as
long, after the probe has ended and while the run's loads still run, so the report can set the
two side by side. A companion that cannot run or fails is said (its note), never fatal: the
probe's run stands. rtla removes its tracefs instance and stops the tracer on SIGINT only, so
that is how the station stops it (and `station cleanup` removes what a killed one left)."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal

import asyncssh

from station.common.lifetime import finish_then_cancel
from station.kinds.base import RunContext
from station.kinds.probe_run import EXIT_SLACK_S, copy_stream, process_words
from station.target import TargetError, rtla
from station.target import processes as proc_ctl

INT_GRACE_S = 20.0  # after SIGINT rtla prints its histogram and removes its instance


def _signal_of(status: int) -> str:
    """A shell reports a child killed by signal N as 128 + N."""
    with contextlib.suppress(ValueError):
        if status > 128:
            return f" (killed by {signal.Signals(status - 128).name})"
    return ""


class RtlaCompanion:
    """One rtla run of a run kind: its output appended to the run's `<name>.out` / `.err` (its
    tracked process is called `name` too)."""

    def __init__(self, ctx: RunContext, name: str, what: str) -> None:
        self.ctx, self.name, self.what = ctx, name, what
        self.out = self.err = None
        self.process: proc_ctl.TrackedProcess | None = None
        self.note: str | None = None  # why it did not run, or how it failed
        self.exit_status: int | None = None

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        self.out = store.appender(f"{self.name}.out")
        self.err = store.appender(f"{self.name}.err")

    def skip(self, why: str) -> None:
        self.note = f"{self.what} not run: {why}"
        self.ctx.sink.message(f"{self.ctx.spec.id}: {self.note}")

    async def run(self, args: list[str], duration_s: float,
                  collector_priority: int | None = None) -> None:
        """rtla with these arguments, until it ends by itself (its -d) or duration_s + slack; then
        SIGINT, on which rtla prints what it has (kept, and said: the run was cut). With
        collector_priority, rtla's own process (it reads the tracer's buffers and prints) runs at
        that SCHED_FIFO priority through chrt: above the loads, which would otherwise starve it
        on a saturated machine, below the measuring threads."""
        conn = await self.ctx.target.live_connection()
        command = [rtla.PROGRAM, *args]
        if collector_priority is not None:
            command = ["chrt", "-f", str(collector_priority), *command]
        try:
            self.process = await finish_then_cancel(proc_ctl.start_load(
                conn, self.name, shlex.join(command), self.ctx.target.work_dir,
                self.ctx.max_seconds, binary=True, privileged=True, finite=True, role="probe"))
        except proc_ctl.ExitedAtOnce as exc:  # tracer busy, option refused: rtla's, not the run's
            self.exit_status = exc.exit_status
            self.note = f"{self.what} exited at once with status {exc.exit_status}: {exc.said}"
            return
        proc = self.process.process
        readers = asyncio.gather(copy_stream(proc.stdout, self.out), copy_stream(proc.stderr,
                                                                                 self.err))
        readers.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            try:
                async with asyncio.timeout(duration_s + EXIT_SLACK_S):
                    await asyncio.shield(readers)
                    await proc.wait_closed()
            except TimeoutError:
                self.note = (f"{self.what} did not end within {duration_s + EXIT_SLACK_S:g} s (a "
                             "starved collector?): stopped with SIGINT")
                await proc_ctl.kill_group(self.process.conn, self.process.pid, grace_s=INT_GRACE_S,
                                          first="INT")
                with contextlib.suppress(BaseException):
                    async with asyncio.timeout(INT_GRACE_S):
                        await asyncio.shield(readers)  # what it printed on SIGINT
                return
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"lost the SSH session to {self.ctx.target.endpoint.where} while "
                              f"rtla ran: {getattr(exc, 'reason', None) or exc}") from None
        finally:
            readers.cancel()
        self.exit_status = proc.exit_status
        if proc.exit_status != 0:
            self.note = (f"{self.what} exited with status {proc.exit_status}"
                         f"{_signal_of(proc.exit_status)}: {self.stderr_tail()}")

    def stderr_tail(self) -> str:
        """rtla's last words (a failed allocation under a memory load, seen in CI as an abort)."""
        with contextlib.suppress(OSError):
            self.err.write(b"", flush=True)
        return process_words(self.err.path, 300, "(nothing on its stderr)")

    async def stop(self) -> None:
        """SIGINT if it still runs (rtla then removes its instance), then forget it."""
        if self.process is None:
            return
        self.process.conn = await self.ctx.target.live_connection()
        if self.process.process.exit_status is None and await proc_ctl.is_ours(
                self.process.conn, self.process.pid, self.process.pidfile):
            await proc_ctl.kill_group(self.process.conn, self.process.pid, grace_s=INT_GRACE_S,
                                      first="INT")
        await proc_ctl.stop_load(self.process)
        self.process = None
