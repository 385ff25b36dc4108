"""What every probe run shares: a program that measures on the target by itself (cyclictest,
the interruption detector) while the run's loads run. The probe is a tracked process (pid
file, tag, dead man's switch, like a load): stopped on every exit path, found by `station
cleanup` after a crash. Its stdout and stderr are appended to the run directory as they
arrive, so a run cut short keeps what the probe printed; on the station's stop the probe gets
a SIGTERM and a grace to print its results, which are drained before the channel closes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import ClassVar

import asyncssh

from station.common.lifetime import finish_then_cancel
from station.kinds.base import Measurement, MeasurementFailure, RunContext
from station.target import TargetError
from station.target import processes as proc_ctl

EXIT_SLACK_S = 30.0  # the probe's run length is its own clock: allow it this much beyond


def process_words(path: Path, limit: int, none: str) -> str:
    """The last `limit` characters a process wrote to its stderr file (`none` if nothing). The
    wrapping shell's report of a killed child ("Aborted  setsid env IRQ_STATION_TAG=…") names the
    station's wrapper, not the process's reason: it is left out."""
    text = ""
    with contextlib.suppress(OSError):
        text = path.read_text(errors="replace")
    text = "\n".join(line for line in text.splitlines() if "IRQ_STATION_TAG=" not in line).strip()
    return text[-limit:] if text else none


class ProbeFailure(MeasurementFailure):
    """The probe exited with an error or printed something the station cannot read."""


class ProbeRun(Measurement):
    """A run kind around one tracked probe process. Subclasses name the probe and its two
    output files, build its command line (`start_probe`), and may fetch more at the end
    (`after_exit`, called once the probe has ended, however it ended)."""

    probe_name: ClassVar[str]
    stdout_file: ClassVar[str]
    stderr_file: ClassVar[str]
    stop_grace_s: ClassVar[float] = 5.0  # after SIGTERM the probe prints its results

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.probe: proc_ctl.TrackedProcess | None = None
        self.exit_status: int | None = None
        self.stopped_by_station = False
        self.readers: asyncio.Future | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        ctx.progress.probe = self.probe_name

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        self.out = store.appender(self.stdout_file)
        self.err = store.appender(self.stderr_file)

    def planned_seconds(self) -> float:
        """How long the probe is meant to run (the progress bar's target)."""
        return self.ctx.campaign.matrix.duration or 0.0

    async def start_probe(self, command: str) -> None:
        """Start the probe as root (SCHED_FIFO and mlockall need it, or sudo where the bench says
        so)."""
        target = self.ctx.target
        conn = await target.live_connection()
        try:
            self.probe = await finish_then_cancel(proc_ctl.start_load(
                conn, self.probe_name, command, target.work_dir, self.ctx.max_seconds, binary=True,
                privileged=True, finite=True, role="probe",
            ))
        except TargetError as exc:
            # what the probe said belongs with the run's outputs
            self.err.write(f"{exc}\n", flush=True)
            raise
        self.started_at = time.monotonic()

    async def measure(self) -> None:
        assert self.probe is not None
        progress, m = self.ctx.progress, self.ctx.campaign.matrix
        progress.phase = "measuring"
        progress.started = time.monotonic()
        progress.duration_target = self.planned_seconds()
        self.ctx.sink.update(progress)
        proc = self.probe.process
        # the readers outlive measure() when it is cut short: stop() lets the probe print its
        # results on SIGTERM and drains them into the run directory before closing the channel
        self.readers = asyncio.gather(copy_stream(proc.stdout, self.out), copy_stream(proc.stderr,
                                                                                      self.err))
        self.readers.add_done_callback(lambda t: t.cancelled() or t.exception())
        ticker = asyncio.create_task(self._tick())
        try:
            async with asyncio.timeout(m.max_duration + EXIT_SLACK_S):
                await asyncio.shield(self.readers)
                await proc.wait_closed()
        except TimeoutError:
            raise ProbeFailure(f"{self.probe_name} did not end within max_duration "
                               f"({m.max_duration:g} s)") from None
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"lost the SSH session to {self.ctx.target.endpoint.where} while "
                              f"{self.probe_name} ran: "
                              f"{getattr(exc, 'reason', None) or exc}") from None
        finally:
            ticker.cancel()
        self.ended_at = time.monotonic()
        self.exit_status = proc.exit_status
        await self.after_exit()
        if self.exit_status != 0:
            raise ProbeFailure(f"{self.probe_name} exited with status {self.exit_status}: "
                               f"{self.stderr_tail()}")

    async def after_exit(self) -> None:  # noqa: B027 - optional
        """Fetch what the probe left on the target (a JSON file, a trace); may run twice."""

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self.ctx.sink.update(self.ctx.progress)

    def stderr_tail(self) -> str:
        return process_words(self.ctx.store.dir / self.stderr_file, 500, "(no message)")

    def ran_seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    async def stop(self) -> None:
        conn = await self.ctx.target.live_connection()
        if self.probe is not None:
            self.probe.conn = conn
            if self.probe.process.exit_status is None and await proc_ctl.is_ours(
                conn, self.probe.pid, self.probe.pidfile
            ):
                # ended by the station (Ctrl-C, a failure): on TERM the probe prints its results
                self.stopped_by_station = True
                await proc_ctl.kill_group(conn, self.probe.pid, grace_s=self.stop_grace_s)
            await self._drain(timeout=5.0)
            # the pid file, the channel (and KILL if it is still ours)
            await proc_ctl.stop_load(self.probe)
            # whoever ended it (it, the station, a cleanup after a lost session), keep what it left
            with contextlib.suppress(TargetError):
                await self.after_exit()
        else:  # started but not yet tracked when the run was stopped
            await proc_ctl.kill_pidfile(conn, proc_ctl.pidfile_path(self.ctx.target.work_dir,
                                                                    self.probe_name))

    async def _drain(self, timeout: float) -> None:
        readers = self.readers
        if readers is None or readers.done():
            return
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(timeout):
                await asyncio.shield(readers)
        readers.cancel()


# store Appender
async def copy_stream(stream: asyncssh.SSHReader, appender) -> None:  # noqa: ANN001
    """A probe's output into its run file, as it arrives."""
    while data := await stream.read(1 << 16):
        appender.write(data, flush=True)
