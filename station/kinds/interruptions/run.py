"""The interruption detector run (seed 003): a probe run. irqgap (target_modules/tools/irqgap.c)
spins on one CPU at SCHED_FIFO, records every gap above the threshold with the interrupt,
softirq, context-switch and SMI counts that moved, and prints them as it goes; a tracefs
instance of the station's own records how long each interrupt handler ran on that CPU. Both
are kept byte for byte in the run directory; the attribution
(station/kinds/interruptions/attribution.py) runs at the end."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

from station.common.lifetime import finish_then_cancel
from station.kinds.base import RunContext
from station.kinds.interruptions import analysis as ig_analysis
from station.kinds.interruptions import on_target as ig_target
from station.kinds.interruptions.settings import CALIBRATION_AUTO_S
from station.kinds.probe_run import EXIT_SLACK_S, ProbeRun, copy_stream
from station.kinds.rtla_companion import RtlaCompanion
from station.parsers.irqgap import IrqgapOutputError
from station.store.run_store import write_parquet
from station.target import TargetError, irqtrace, rtla
from station.target import processes as proc_ctl

PROBE_NAME = "irqgap"
CALIBRATION_NAME = "irqgap-calibration"


class InterruptionsRun(ProbeRun):
    name = "interruptions"
    probe_name = PROBE_NAME
    stdout_file = "irqgap.out"
    stderr_file = "irqgap.err"
    stop_grace_s = 5.0  # on SIGTERM the detector writes what it buffered and its end line
    outputs = {
        "irqgap.out": "the detector's output: header, one line per gap with the counts that moved "
                      "(→ interruptions_gaps.parquet)",
        "irqgap.err": "the detector's stderr",
        "irqtrace.txt": "the kernel's interrupt tracepoints on the measured CPU (tracefs, clock "
                        "mono), when traced",
        "irqtrace.stats": "that trace buffer's statistics (overruns)",
        "calibration_irqgap.out": "the detector's output in the calibration phase, before the "
                                  "loads "
                                  "(interruptions.calibration)",
        "calibration_irqgap.err": "its stderr",
        "calibration_irqtrace.txt": "the kernel's interrupt tracepoints in the calibration phase, "
                                    "where traced: "
                                    "each line's usual cost",
        "rtla.out": "rtla osnoise top's summary on the same CPU, after the detector "
                    "(interruptions.compare)",
        "rtla.err": "rtla's stderr",
    }

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.settings = ctx.campaign.interruptions
        self.cpu: int | None = None
        self.binary: str | None = None
        self.msr: str | None = None
        self.msr_loaded = False  # the station loaded the msr driver: it unloads it after the run
        self.tracing: irqtrace.TraceSession | None = None  # the calibration's, then the run's
        self.trace_note: str | None = None
        self.tracefs: str | None = None  # tracefs' mount point, when the target has one
        self.calibrating: proc_ctl.TrackedProcess | None = None
        self.calibration_note: str | None = None
        self.summary: dict[str, Any] | None = None
        self.gaps: list[ig_analysis.Attributed] | None = None  # attributed once, by verdict()
        self.rtla = RtlaCompanion(ctx, "rtla", "rtla osnoise")

    def manifest(self) -> dict[str, Any]:
        return {"probe": {"tool": "irqgap", "settings": self.settings.model_dump(mode="json")}}

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        super().open_files(store)
        self.trace = store.appender("irqtrace.txt")
        self.trace_stats = store.appender("irqtrace.stats")
        self.cal_out = store.appender("calibration_irqgap.out")
        self.cal_err = store.appender("calibration_irqgap.err")
        self.cal_trace = store.appender("calibration_irqtrace.txt")
        self.rtla.open_files(store)

    def planned_seconds(self) -> float:
        runs = 2 if self.settings.compare != "none" else 1  # the detector, then rtla as long
        return runs * (self.ctx.campaign.matrix.duration or 0.0)

    def _calibration_s(self) -> float | None:
        """How long the calibration phase runs, or None: auto calibrates only where the measured
        run will not be traced (a traced run's costs come from its own trace)."""
        c = self.settings.calibration
        if c == "off":
            return None
        if c == "auto":
            return (
                None
                if self.settings.trace != "off" and self.tracefs is not None
                else CALIBRATION_AUTO_S
            )
        return float(c)

    def measured_cpu(self) -> int | None:
        return self.cpu

    async def baseline(self) -> None:
        conn = await self.ctx.target.live_connection()
        online = await ig_target.online_cpus(conn)
        wanted = self.settings.cpu
        self.cpu = max(online) if wanted == "last" else wanted
        if self.cpu not in online:
            raise TargetError(f"{conn.endpoint.where}: interruptions.cpu {self.cpu} is not online "
                              f"(online: {', '.join(map(str, online))})")
        self.binary = await ig_target.ensure(conn, self.ctx.target.work_dir)
        if self.settings.smi != "off":
            self.msr, self.msr_loaded = await ig_target.msr_device(
                conn, self.cpu, required=self.settings.smi == "on"
            )
        if self.settings.compare == "osnoise" and (why := await rtla.unavailable(conn, "osnoise")):
            self.rtla.skip(why)
        # a trace instance a crash left behind would hold the buffer and the events
        await irqtrace.remove_instance(conn, irqtrace.instance_name(self.ctx.target.work_dir))
        self.tracefs = await irqtrace.tracefs_root(conn)

    async def prepare(self) -> None:
        """The calibration phase, before the loads: each interrupt line's usual cost, from evidence
        the measured run's gaps do not make (analysis.line_costs)."""
        if (seconds := self._calibration_s()) is not None:
            await self._calibrate(seconds)

    async def _calibrate(self, seconds: float) -> None:
        assert self.binary is not None and self.cpu is not None
        conn = await self.ctx.target.live_connection()
        if self.tracefs is not None:
            session = irqtrace.TraceSession(self.tracefs, self.cpu, self.ctx.target.work_dir)
            try:
                await session.open(conn)
                self.tracing = session
            except TargetError as exc:
                self.calibration_note = f"calibration not traced ({exc})"
        how = "traced" if self.tracing is not None else "untraced: costs from its quiet gaps"
        self.ctx.progress.phase = "calibrating"
        self.ctx.sink.update(self.ctx.progress)
        self.ctx.sink.message(f"{self.ctx.spec.id}: calibration, the detector alone for "
                              f"{seconds:g} s ({how})")
        args = ig_target.arguments(self.settings, cpu=self.cpu, duration_s=seconds, msr=self.msr,
                                   traced=self.tracing is not None)
        target = self.ctx.target
        try:
            self.calibrating = await finish_then_cancel(proc_ctl.start_load(
                conn, CALIBRATION_NAME, shlex.join([self.binary, *args]), target.work_dir,
                self.ctx.max_seconds,
                binary=True, privileged=True, finite=True, role="probe"))
            proc = self.calibrating.process
            async with asyncio.timeout(seconds + EXIT_SLACK_S):
                await asyncio.gather(copy_stream(proc.stdout, self.cal_out),
                                     copy_stream(proc.stderr, self.cal_err))
                await proc.wait_closed()
            # the measured run stands; its untraced gaps lose this evidence
            if proc.exit_status != 0:
                self.calibration_note = (
                    f"the calibration's detector exited with status {proc.exit_status}"
                )
            if self.tracing is not None:
                text, _ = await self.tracing.read(conn)
                self.cal_trace.write(text, flush=True)
        except TimeoutError:
            self.calibration_note = (
                f"the calibration's detector did not end within {seconds + EXIT_SLACK_S:g} s"
            )
        finally:
            await self._end_calibration(conn)
        if self.calibration_note:
            self.ctx.sink.message(f"{self.ctx.spec.id}: {self.calibration_note}")

    async def _end_calibration(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        if self.calibrating is not None:
            await proc_ctl.stop_load(self.calibrating)
            self.calibrating = None
        if self.tracing is not None:
            await self.tracing.remove(conn)
            self.tracing = None

    def _args(self) -> list[str]:
        assert self.cpu is not None
        return ig_target.arguments(self.settings, cpu=self.cpu,
                                   duration_s=self.ctx.campaign.matrix.duration or 0,
                                   msr=self.msr, traced=self.tracing is not None)

    async def start(self) -> None:
        assert self.binary is not None and self.cpu is not None
        conn = await self.ctx.target.live_connection()
        if self.settings.trace != "off":
            await self._start_trace(conn)
        await self.start_probe(shlex.join([self.binary, *self._args()]))

    async def _start_trace(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        assert self.cpu is not None
        root = self.tracefs
        why = None
        if root is None:
            why = "this kernel has no tracefs (or it cannot be mounted)"
        else:
            session = irqtrace.TraceSession(root, self.cpu, self.ctx.target.work_dir)
            try:
                await session.open(conn)
                self.tracing = session
            except TargetError as exc:
                why = str(exc)
        if why is not None:
            if self.settings.trace == "on":
                raise TargetError(f"interruptions.trace is on but {why}; set trace: auto or off")
            self.trace_note = (
                f"not traced ({why}): gaps are judged by counts and each line's usual cost"
            )
            self.ctx.sink.message(f"{self.ctx.spec.id}: {self.trace_note}")

    async def measure(self) -> None:
        await super().measure()
        if self.settings.compare == "osnoise" and self.rtla.note is None:
            await self._compare()

    async def _compare(self) -> None:
        """rtla osnoise top on the same CPU for as long, the loads still running: the kernel's own
        noise tracer beside the detector."""
        assert self.cpu is not None
        duration = int(self.ctx.campaign.matrix.duration or 1)
        await self.rtla.run(rtla.arguments(self.cpu, duration,
                                           round(self.settings.threshold * 1e6)), duration)

    async def after_exit(self) -> None:
        """The trace, once the detector has ended: read it, then remove the instance."""
        if self.tracing is None:
            return
        conn = await self.ctx.target.live_connection()
        try:
            text, stats = await self.tracing.read(conn)
            self.trace.write(text, flush=True)
            self.trace_stats.write(stats, flush=True)
        finally:
            await self.tracing.remove(conn)
            self.tracing = None

    async def stop(self) -> None:
        # stopped calibrating
        if self.calibrating is not None or self.tracing is not None and self.probe is None:
            await self._end_calibration(await self.ctx.target.live_connection())
        await super().stop()
        await self.rtla.stop()
        if self.tracing is not None:  # after_exit could not read it: at least remove it
            await self.tracing.remove(await self.ctx.target.live_connection())
            self.tracing = None
        if self.msr_loaded:  # leave the target's modules as they were
            conn = await self.ctx.target.live_connection()
            await conn.run("rmmod msr", check=False, privileged=True)
            self.msr_loaded = False

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        try:
            self.summary, self.gaps = ig_analysis.analyse_run_dir(self.ctx.store.dir)
        except (OSError, IrqgapOutputError, ValueError) as exc:
            if status == "complete":
                return "failed", f"detector output: {exc}"
            return status, error
        if (
            status == "complete"
            and self.settings.smi == "on"
            and not self.summary.get("smi_counter")
        ):
            status, error = (
                "incomplete", f"interruptions.smi is on but {self.summary.get('smi_reason')}"
            )
        end = self.summary.get("end_reason")
        if status == "complete" and end != "duration":
            why = "it was stopped from outside" if end == "signal" else "its output has no end line"
            status, error = "incomplete", f"the detector did not run its whole duration: {why}"
        s = self.summary
        worst = "" if s["max_us"] is None else f", worst {s['max_us']:.1f} µs"
        self.ctx.sink.message(f"{self.ctx.spec.id}: {s['gaps']} gaps on CPU {s['cpu']}{worst}; "
                              f"{s['unexplained']['count']} not explained by interrupts")
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        s = dict(self.summary or {})
        s.pop("suspect_inter_arrival_ms", None)
        return {"interruptions": {**s, "cpu": self.cpu, "binary": self.binary, "msr": self.msr,
                                  "trace_note": self.trace_note,
                                  "stopped_by_station": self.stopped_by_station,
                                  "calibration_note": self.calibration_note,
                                  "rtla_note": self.rtla.note, "rtla_status": self.rtla.exit_status,
                                  "exit_status": self.exit_status}}

    @property
    def conversions(self) -> list:
        def gaps(run_dir: Path) -> dict[str, int]:
            gaps = (
                self.gaps
                if self.gaps is not None
                else ig_analysis.attribute(ig_analysis.read_outputs(run_dir))
            )
            frame = ig_analysis.gap_table(gaps)
            write_parquet(frame, run_dir / "interruptions_gaps.parquet")
            return {"gaps": len(frame)}

        return [gaps]
