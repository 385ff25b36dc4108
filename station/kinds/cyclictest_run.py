"""The cyclictest run (seed 004): a probe run. cyclictest runs on the target while the
run's loads run; its raw output (stdout with the histogram, stderr, the --json file)
is kept in the run directory byte for byte and parsed at the end. The probe is a
tracked process: stopped on every exit path, found by `station cleanup` after a crash,
and ended by its own dead man's switch even if the station is killed."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from pathlib import Path
from typing import Any

import asyncssh

from station.analysis import cyclictest as ct_analysis
from station.kinds.base import Measurement, MeasurementFailure, RunContext, register, settled
from station.parsers.cyclictest import CyclictestOutputError
from station.store import write_parquet
from station.target import TargetError
from station.target import cyclictest as ct_target
from station.target import processes as proc_ctl

PROBE_NAME = "cyclictest"
STOP_GRACE_S = 5.0  # after SIGTERM cyclictest prints its histogram and writes its JSON
EXIT_SLACK_S = 30.0  # -D is cyclictest's own clock: allow it this much beyond


class ProbeFailure(MeasurementFailure):
    """The probe exited with an error or printed something the station cannot read."""


@register
class CyclictestRun(Measurement):
    name = "cyclictest"
    outputs = {
        "cyclictest.out": "cyclictest's stdout: the -h histogram and summary lines (→ cyclictest_histogram.parquet)",
        "cyclictest.err": "cyclictest's stderr",
        "cyclictest.json": "cyclictest's --json file, as written on the target (rt-tests 2.0 and later)",
    }

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.settings = ctx.campaign.cyclictest
        m = ctx.campaign.matrix
        self.duration_s = m.duration
        self.loops = m.samples
        self.json_remote = f"{ctx.target.work_dir}/cyclictest/{ctx.spec.id}.json"
        self.installed: ct_target.Installed | None = None
        self.probe: proc_ctl.TrackedProcess | None = None
        self.exit_status: int | None = None
        self.summary: dict[str, Any] | None = None
        self.stopped_by_station = False
        self.readers: asyncio.Future | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        ctx.progress.probe = "cyclictest"

    def _args(self, json_path: str | None) -> list[str]:
        return ct_target.arguments(self.settings, duration_s=self.duration_s, loops=self.loops, json_path=json_path)

    def manifest(self) -> dict[str, Any]:
        return {"probe": {"tool": "cyclictest", "settings": self.settings.model_dump(mode="json"),
                          "arguments": self._args(self.json_remote)}}

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        self.out = store.appender("cyclictest.out")
        self.err = store.appender("cyclictest.err")
        self.json = store.appender("cyclictest.json")
        self.json_fetched = False

    async def baseline(self) -> None:
        conn = await self.ctx.target.live_connection()
        self.installed = await ct_target.installed(conn)
        if self.settings.smi:
            await ct_target.check_smi(conn)

    async def start(self) -> None:
        assert self.installed is not None
        target = self.ctx.target
        conn = await target.live_connection()
        json_path = self.json_remote if self.installed.has_json else None
        await conn.run(f"mkdir -p {shlex.quote(self.json_remote.rsplit('/', 1)[0])}", privileged=True)
        await conn.run(f"rm -f {shlex.quote(self.json_remote)}", privileged=True)
        command = shlex.join(["cyclictest", *self._args(json_path)])
        # privileged: SCHED_FIFO and mlockall need root (or sudo where the bench says so)
        try:
            self.probe = await settled(proc_ctl.start_load(
                conn, PROBE_NAME, command, target.work_dir, self.ctx.max_seconds, binary=True, privileged=True,
                finite=True, role="probe",
            ))
        except TargetError as exc:
            self.err.write(f"{exc}\n", flush=True)  # what cyclictest said belongs with the run's outputs
            raise
        self.started_at = time.monotonic()

    async def measure(self) -> None:
        assert self.probe is not None
        progress, m = self.ctx.progress, self.ctx.campaign.matrix
        progress.phase = "measuring"
        progress.started = time.monotonic()
        progress.duration_target = self.duration_s or (self.loops or 0) * self.settings.interval
        self.ctx.sink.update(progress)
        proc = self.probe.process
        # the readers outlive measure() when it is cut short: stop() lets cyclictest print its
        # results on SIGTERM and drains them into the run directory before closing the channel
        self.readers = asyncio.gather(_copy(proc.stdout, self.out), _copy(proc.stderr, self.err))
        self.readers.add_done_callback(lambda t: t.cancelled() or t.exception())
        ticker = asyncio.create_task(self._tick())
        try:
            async with asyncio.timeout(m.max_duration + EXIT_SLACK_S):
                await asyncio.shield(self.readers)
                await proc.wait_closed()
        except TimeoutError:
            raise ProbeFailure(f"cyclictest did not end within max_duration ({m.max_duration:g} s)") from None
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"lost the SSH session to {self.ctx.target.endpoint.where} while cyclictest ran: "
                              f"{getattr(exc, 'reason', None) or exc}") from None
        finally:
            ticker.cancel()
        self.ended_at = time.monotonic()
        self.exit_status = proc.exit_status
        await self._fetch_json()
        if self.exit_status != 0:
            raise ProbeFailure(f"cyclictest exited with status {self.exit_status}: {self._stderr_tail()}")

    def _ended_early(self) -> str | None:
        """cyclictest exits 0 on SIGTERM too: a run someone else stopped (a `station cleanup`
        elsewhere, a shutdown) must not pass for the whole measurement. Nor may a thread that
        never measured: its CPU has no figure (seen under hackbench in an emulated guest, where
        a thread, which starts as a normal task, did not get to raise its priority in 2 s)."""
        assert self.summary is not None
        idle = [t for t in self.summary["threads"] if t["cycles"] == 0]
        if idle:
            which = ", ".join(f"{t['thread']}" + ("" if t["cpu"] is None else f" (CPU {t['cpu']})") for t in idle)
            return f"cyclictest thread {which} measured nothing: no figure for that CPU"
        if self.loops is not None:
            short = [t for t in self.summary["threads"] if t["cycles"] < self.loops]
            if short and self.duration_s is None:
                return (f"cyclictest ended after {min(t['cycles'] for t in short)} of {self.loops} loops "
                        "(stopped from outside?)")
        if self.duration_s is not None and self.started_at is not None and self.ended_at is not None:
            ran = self.ended_at - self.started_at
            if ran < self.duration_s - max(1.0, 0.05 * self.duration_s) and (
                    self.loops is None or all(t["cycles"] < self.loops for t in self.summary["threads"])):
                return f"cyclictest ended after {ran:.1f} s of {self.duration_s:g} s (stopped from outside?)"
        return None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self.ctx.sink.update(self.ctx.progress)

    async def _fetch_json(self) -> None:
        if not (self.installed and self.installed.has_json) or self.json_fetched:
            return
        conn = await self.ctx.target.live_connection()
        got = await conn.run(f"cat {shlex.quote(self.json_remote)}", check=False, privileged=True)
        if got.exit_status == 0 and got.stdout:
            self.json.write(got.stdout, flush=True)
            self.json_fetched = True
        await conn.run(f"rm -f {shlex.quote(self.json_remote)}", check=False, privileged=True)

    def _stderr_tail(self) -> str:
        path = self.ctx.store.dir / "cyclictest.err"
        with contextlib.suppress(OSError):
            text = path.read_text(errors="replace").strip()
            if text:
                return text[-500:]
        return "(no message)"

    async def stop(self) -> None:
        conn = await self.ctx.target.live_connection()
        if self.probe is not None:
            self.probe.conn = conn
            if self.probe.process.exit_status is None and await proc_ctl.is_ours(conn, self.probe.pid,
                                                                                 self.probe.pidfile):
                # ended by the station (Ctrl-C, a failure): on TERM cyclictest prints its histogram
                # and writes its JSON; keep both
                self.stopped_by_station = True
                await proc_ctl.kill_group(conn, self.probe.pid, grace_s=STOP_GRACE_S)
            await self._drain(timeout=5.0)
            await proc_ctl.stop_load(self.probe)  # the pid file, the channel (and KILL if it is still ours)
            # whoever ended it (it, the station, a cleanup after a lost session), keep its JSON
            with contextlib.suppress(TargetError):
                await self._fetch_json()
        else:  # started but not yet tracked when the run was stopped
            await proc_ctl.kill_pidfile(conn, proc_ctl.pidfile_path(self.ctx.target.work_dir, PROBE_NAME))
        await conn.run(f"rm -f {shlex.quote(self.json_remote)}", check=False, privileged=True)

    async def _drain(self, timeout: float) -> None:
        readers = self.readers
        if readers is None or readers.done():
            return
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(timeout):
                await asyncio.shield(readers)
        readers.cancel()

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        try:
            self.summary = ct_analysis.summary(ct_analysis.read_outputs(self.ctx.store.dir))
        except (CyclictestOutputError, ValueError) as exc:
            if status == "complete":
                return "failed", f"cyclictest output: {exc}"
            return status, error
        if status == "complete" and self.summary["break"] is None and (short := self._ended_early()):
            status, error = "incomplete", short
        threads, worst = self.summary["threads"], self.summary["max_us"]
        self.ctx.sink.message(f"{self.ctx.spec.id}: cyclictest max {worst} µs over {len(threads)} thread(s), "
                              f"{self.summary['samples']} samples")
        # a break trace hit ends the run early by design: a result (summary.break), not a failure
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        info = self.installed
        return {"cyclictest": {
            "version": info.version if info else None,
            "json": bool(info and info.has_json),
            "exit_status": self.exit_status,
            "stopped_by_station": self.stopped_by_station,
            **(self.summary or {}),
        }}

    @property
    def conversions(self) -> list:
        def histogram(run_dir: Path) -> dict[str, int]:
            frame = ct_analysis.histogram_table(ct_analysis.read_outputs(run_dir))
            write_parquet(frame, run_dir / "cyclictest_histogram.parquet")
            return {"histogram_buckets": len(frame), "cyclictest_samples": int(frame["count"].sum())}

        return [histogram]


async def _copy(stream: asyncssh.SSHReader, appender) -> None:  # noqa: ANN001 - store Appender
    while data := await stream.read(1 << 16):
        appender.write(data, flush=True)
