"""The module run (seed 000): the LPT or PCIe latency module's record stream
(t_SW), with the scope capturing every pulse width (t_HW) at the same time."""

from __future__ import annotations

import asyncio
import contextlib
import math
import shlex
import time
from pathlib import Path
from typing import Any, Protocol

import asyncssh
import numpy as np

from station.analysis.run_unit import RunUnit
from station.bench.scope_session import bus_text
from station.capture.accounting import AcquisitionLog, MeasurementTally, capture_summary
from station.capture.pulses import STREAM_ORDER, csv_header
from station.common.lifetime import finish_then_cancel
from station.common.module_names import module_stem
from station.kinds.base import Measurement, MeasurementFailure, RunContext
from station.parsers import records
from station.store.run_store import StoreError, read_csv_lines, write_parquet
from station.target import TargetError, irqtrace, modules
from station.target import processes as proc_ctl
from station.target.audit import interrupt_count

STALL_S = 5.0  # no record for this long: the stream has stalled
TOGGLER = "trace-toggle"  # module.trace_overhead's process on the target (a reserved load name)


class ScopeFailure(MeasurementFailure):
    """The scope stopped answering or reported an error during a run."""


class ScopeCapture(Protocol):
    """What a run needs from the scope side: one blocking acquisition → its record, and the
    record → pulses (a station.bench.scope_session.Capture)."""

    def acquire_record(self) -> Any: ...

    def pulses_of(self, record: Any) -> Any: ...

    def measure(self, cross_check: bool = False) -> tuple[Any, Any]: ...

    @property
    def record_span_s(self) -> float: ...


class ModuleRun(Measurement):
    name = "module"
    outputs = {
        "sw.raw": "the module's record stream, byte for byte as received (→ sw.parquet)",
        "sw_arrivals.csv": "host time at which each batch of records arrived (event pairing)",
        "hw_pulses.csv": "scope pulses, appended per acquisition, with the host time it was armed "
                         "and the frame "
        "of a segmented acquisition (→ hw.parquet)",
        "scope_acquisitions.csv": "each acquisition: host times armed and its record in, frames, "
                                  "pulses, live time (the manifest's capture ratio and dead time "
                                  "come from it), and the frames that held no whole pulse",
        "trace.txt": "module.trace: the measured CPU's tracepoints as tracefs printed them (clock "
                     "mono)",
        "trace_raw.txt": "the same events in tracefs's raw form (nanosecond timestamps)",
        "trace_ids.txt": "the traced events' type ids (what ties the two forms together)",
        "trace.stats": "the trace buffer's statistics (overruns)",
        "decomposition.parquet": "module.trace: every own event's t_SW split into stages, each "
                                 "credited to what ran "
        "(docs/decomposition.md)",
    }

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        m, spec, target = ctx.campaign.matrix, ctx.spec, ctx.target
        self.period_ns = round(m.period * 1e9)
        self.family = target.settings.family
        self.stem = module_stem(self.family, spec.interface)
        self.device = target.device(spec.interface)
        self.params = modules.module_params(
            self.family, spec.interface, period_ns=self.period_ns, check=spec.variant == "inb",
            cpu=m.cpu,
            fmt=m.format, fifo=target.settings.fifo, lpt_base=m.lpt_base, lpt_irq=m.lpt_irq,
            extra=m.module_params.get(spec.interface),
        )
        self.decoder = records.decoder_for(m.format)
        # the run as one unit of the campaign's stop rule: its t_SW percentiles at the seal
        self.unit = RunUnit([m.until.level] if m.until is not None else [])
        self.scope: ScopeCapture | None = ctx.bench.scope
        self.interrupts_row = modules.interrupts_row(self.family, spec.interface, m.lpt_irq)
        self.irq_before: int | None = None
        self.irq_after: int | None = None
        self.module_maybe_loaded = False
        self.stream: proc_ctl.TrackedProcess | None = None
        self.capture: asyncio.Task | None = None
        self.acquisition_log: list[AcquisitionLog] = []
        self.strategy = ctx.campaign.bench.scope.capture if self.scope is not None else "none"
        self.tally = MeasurementTally()
        self.reconnects_before = getattr(self.scope, "reconnects", 0)
        self.arrival_host_s: list[float] = []  # the arrivals log, kept for the capture accounting
        # the module's own events by then (strays' seqs taken off)
        self.arrival_event: list[int] = []
        settings = getattr(ctx.campaign, "module", None)
        self.traced = bool(settings is not None and settings.trace)
        self.trace_buffer_kb = settings.trace_buffer_kb if settings is not None else 0
        self.trace_block_s = (
            settings.trace_block if settings is not None and settings.trace_overhead else None
        )
        self.toggler: proc_ctl.TrackedProcess | None = None
        self.tracing: irqtrace.TraceSession | None = None
        self.trace_events: list[str] = []
        self.trace_read = False

    def manifest(self) -> dict[str, Any]:
        return {
            "period_ns": self.period_ns,
            "format": self.ctx.campaign.matrix.format,
            "module": {"path": self.ctx.target.module_path(self.ctx.spec.interface),
                       "params": self.params},
            "device": self.device,
            "scope": self.scope is not None,
        }

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        self.sw_raw = store.appender("sw.raw")
        self.hw_csv = store.appender("hw_pulses.csv", header=csv_header(STREAM_ORDER))
        self.acq_csv = store.appender("scope_acquisitions.csv", header=(
            "acquisition,armed_host_s,done_host_s,frames,pulses,live_s,frames_without_pulse\n"))
        if self.strategy == "measurement":
            self.meas_csv = store.appender(
                "scope_measurements.csv",
                header=("acquisition,armed_host_s,count,mean_s,min_s,max_s,"
                        "host_count,host_mean_s,host_min_s,host_max_s\n"),
            )
        self.arrivals = store.appender("sw_arrivals.csv", header="host_s,last_seq\n")
        if self.traced:
            self.trace_out = {name: store.appender(name) for name in
                              ("trace.txt", "trace_raw.txt", "trace_ids.txt", "trace.stats")}

    def measured_cpu(self) -> int | None:
        cpu = self.ctx.campaign.matrix.cpu
        return cpu if cpu >= 0 else None

    def device_row(self) -> int | str | None:
        return self.interrupts_row

    async def baseline(self) -> None:
        # a mainline module's row appears with its request_irq: absent now means zero
        conn = await self.ctx.target.live_connection()
        self.irq_before = await interrupt_count(conn, self.interrupts_row) or 0

    async def prepare(self) -> None:
        # the tracepoints are switched on before the loads start and off after they end: switching
        # them patches kernel text on every CPU, which under a load of IRQ-off holds froze the
        # emulated PREEMPT_RT guest (docs/decomposition.md)
        if self.traced:
            await self._open_trace(await self.ctx.target.live_connection())

    async def after_loads(self) -> None:
        if self.tracing is not None:
            await self.tracing.remove(await self.ctx.target.live_connection())

    async def start(self) -> None:
        target = self.ctx.target
        conn = await target.live_connection()
        if self.tracing is not None:  # before the module: its first event is traced too
            await self._start_recording(conn)
        # before the await: insmod can succeed and its reply be lost
        self.module_maybe_loaded = True
        await finish_then_cancel(modules.insmod(conn, target.module_path(self.ctx.spec.interface),
                                                self.params))
        # the reader is tracked like a load: a reader blocked in read() never sees its SSH
        # channel close, and an open device would make rmmod fail
        self.stream = await finish_then_cancel(proc_ctl.start_load(
            conn, proc_ctl.STREAM_NAME, f"cat {self.device}", target.work_dir, self.ctx.max_seconds,
            binary=True, privileged=True,
        ))

    async def measure(self) -> None:
        progress = self.ctx.progress
        progress.sw_target = self.ctx.campaign.matrix.samples
        progress.hw_target = self.ctx.campaign.matrix.pulses if self.scope else 0
        progress.duration_target = self.ctx.campaign.matrix.duration
        progress.phase = "measuring"
        progress.started = time.monotonic()
        stop = asyncio.Event()
        if self.scope is not None:
            self.capture = asyncio.create_task(self._capture(stop))
            # whatever happens to the run, the task's exception is collected (never "never
            # retrieved")
            self.capture.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            await self._stream()
        # the run fails on it (the core knows no record format)
        except records.RecordFormatError as exc:
            raise MeasurementFailure(f"record stream: {exc}") from None
        finally:
            stop.set()
        if self.capture is not None:
            await _finish_capture(self.capture, timeout=30)
            self.capture = None

    async def stop(self) -> None:
        if self.capture is not None and not self.capture.done():
            self.capture.cancel()
        target = self.ctx.target
        conn = await target.live_connection()
        if self.stream is not None:
            self.stream.conn = conn
            await proc_ctl.stop_load(self.stream)
        else:  # started but not yet tracked when the run was stopped
            await proc_ctl.kill_pidfile(conn, proc_ctl.pidfile_path(target.work_dir,
                                                                    proc_ctl.STREAM_NAME))
        try:
            if self.toggler is not None:
                self.toggler.conn = conn
                await proc_ctl.stop_load(self.toggler)
            elif self.trace_block_s is not None:  # started but not yet tracked
                await proc_ctl.kill_pidfile(conn, proc_ctl.pidfile_path(self.ctx.target.work_dir,
                                                                        TOGGLER))
            # before rmmod: the trace names the module's functions while it is loaded
            if self.tracing is not None:
                await self._read_trace(conn)
        finally:
            if self.module_maybe_loaded and self.stem in await modules.loaded_modules(conn):
                # the IRQ count while the module still holds its line (its row goes with rmmod)
                self.irq_after = await interrupt_count(conn, self.interrupts_row)
                await modules.rmmod(conn, self.stem)

    async def _open_trace(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        target, cpu = self.ctx.target, self.ctx.campaign.matrix.cpu
        # an instance a crash left behind would hold the buffer and the events
        await irqtrace.remove_instance(conn, irqtrace.instance_name(target.work_dir))
        root = await irqtrace.tracefs_root(conn)
        if root is None:
            raise TargetError(f"module.trace is on but {target.endpoint.where} has no tracefs (or "
                              "it cannot be mounted): a kernel built with CONFIG_FTRACE is needed")
        session = irqtrace.TraceSession(root, cpu, target.work_dir, irqtrace.MODULE_EVENTS,
                                        self.trace_buffer_kb)
        self.tracing = session
        self.trace_events = await session.open(conn, record=False)

    async def _start_recording(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        target, cpu, session = self.ctx.target, self.ctx.campaign.matrix.cpu, self.tracing
        assert session is not None
        await session.record(conn)
        # on the traced CPU: the tracing_cpumask keeps its marks only
        if self.trace_block_s is not None:
            loop = session.toggle_command(self.trace_block_s)
            command = f"taskset -c {cpu} sh -c {shlex.quote(loop)}"
            self.toggler = await finish_then_cancel(proc_ctl.start_load(conn, TOGGLER, command,
                                                                        target.work_dir,
                                                             self.ctx.max_seconds, privileged=True,
                                                             to_log=True))

    async def _read_trace(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        assert self.tracing is not None
        dump = await self.tracing.read_exact(conn)
        for name, text in (("trace.txt", dump.text), ("trace_raw.txt", dump.raw), ("trace_ids.txt",
                                                                                   dump.ids),
                           ("trace.stats", dump.stats)):
            self.trace_out[name].write(text, flush=True)
        self.trace_read = True

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        m, p = self.ctx.campaign.matrix, self.ctx.progress
        if status == "complete" and m.samples and p.sw.count < m.samples:
            return "incomplete", f"max_duration reached with {p.sw.count} of {m.samples} samples"
        if status == "complete" and p.hw_target and p.hw.count < p.hw_target:
            return "incomplete", f"max_duration reached with {p.hw.count} of {p.hw_target} pulses"
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        d = self.decoder
        return {
            "losses": {
                "sw_lost": d.losses.lost, "gaps": len(d.losses.gaps),
                "first_gaps": d.losses.gaps[:20], "sw_dropped_by_target": d.dropped_by_target,
                "torn_bytes": d.pending_bytes, "restarts": d.losses.summary()
            },
            "strays": d.strays,  # NOT_OURS records (None: the format cannot flag them); not samples
            "unit": self.unit.summary(),
            "interrupts": {
                "row": self.interrupts_row, "before": self.irq_before, "after": self.irq_after
            },
            "acquisitions": self.ctx.progress.acquisitions,
            "capture": capture_summary(
                self.strategy, self.acquisition_log, np.asarray(self.arrival_host_s),
                np.asarray(self.arrival_event), self.period_ns
            )
            | {"bus": bus_text(self.ctx.campaign.bench.scope), **self._frame_window()},
            **(
                {"scope_measurement": self.tally.summary()}
                if self.strategy == "measurement"
                else {}
            ),
            "scope_reconnects": getattr(self.scope, "reconnects", 0) - self.reconnects_before,
            **(
                {
                    "trace": {
                        "clock": "mono", "cpu": self.ctx.campaign.matrix.cpu,
                        "events": self.trace_events, "buffer_kb": self.trace_buffer_kb,
                        "read": self.trace_read, "overhead_block_s": self.trace_block_s,
                        "handler": self.stem
                    }
                }
                if self.traced
                else {}
            ),
        }

    def _frame_window(self) -> dict[str, float]:
        """Segmented: how long a frame looks after its trigger (a pulse longer is cut and lost)."""
        if self.strategy != "segmented" or self.scope is None:
            return {}
        after = 1 - self.ctx.campaign.bench.scope.trigger_position_pct / 100
        # the span the scope applied
        return {"frame_after_trigger_s": self.scope.record_span_s * after}

    @property
    def conversions(self) -> list:
        fmt = self.ctx.campaign.matrix.format

        traced, handler, block_s = self.traced, self.stem, self.trace_block_s

        def sw(run_dir: Path) -> dict[str, int]:
            frame = records.decode_file(run_dir / "sw.raw", fmt)
            write_parquet(frame, run_dir / "sw.parquet")
            if traced and (run_dir / "trace.txt").exists():
                from station.kinds.module.decomposition import decompose_run

                decompose_run(run_dir, frame, handler, block_s)
            return {"sw_records": len(frame)}

        def hw(run_dir: Path) -> dict[str, int]:
            frame = read_csv_lines(run_dir / "hw_pulses.csv")
            write_parquet(frame, run_dir / "hw.parquet")
            return {"hw_pulses": len(frame)}

        return [sw, hw]

    # ---- the two concurrent halves -------------------------------------------------------
    async def _stream(self) -> None:
        assert self.stream is not None
        ctx, m, progress = self.ctx, self.ctx.campaign.matrix, self.ctx.progress
        proc = self.stream.process
        last_update = 0.0
        deadline = time.monotonic() + m.max_duration
        while True:
            now = time.monotonic()
            sw_done = (m.samples is None or progress.sw.count >= m.samples) and (
                m.duration is None or now - progress.started >= m.duration
            )
            hw_done = self.capture is None or progress.hw.count >= progress.hw_target
            if self.capture is not None and self.capture.done():
                exc = self.capture.exception()
                if isinstance(exc, StoreError):
                    raise exc
                if exc is not None:
                    raise ScopeFailure(str(exc))
                hw_done = True
            if (sw_done and hw_done) or now >= deadline:
                return
            data = await self._read(proc)
            self.sw_raw.write(data)  # raw first: whatever the decoder thinks, the bytes are kept
            recs = self.decoder.feed(data)
            last_seq = self.decoder.last_seq(recs)
            if last_seq is not None:
                now_host = time.time()
                self.arrivals.write(f"{now_host:.6f},{last_seq}\n")
                self.arrival_host_s.append(now_host)
                self.arrival_event.append(last_seq - (self.decoder.strays or 0))
            latencies = np.asarray(self.decoder.latencies(recs))
            progress.sw.add(latencies)
            self.unit.add(latencies)
            if now - last_update > 0.25:
                ctx.sink.update(progress)
                last_update = now

    async def _read(self, proc: asyncssh.SSHClientProcess) -> bytes:
        where = self.ctx.target.endpoint.where
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a Ctrl-C that
            # lands while a read completes, which on a busy stream is almost always
            async with asyncio.timeout(STALL_S):
                data = await proc.stdout.read(1 << 16)
        except TimeoutError:
            raise TargetError(await self._why_silent()) from None
        except (asyncssh.Error, OSError) as exc:
            raise TargetError(f"lost the SSH session to {where} while streaming records: "
                              f"{getattr(exc, 'reason', None) or exc}") from None
        if not data:
            conn = self.ctx.target.conn
            if conn is None or conn.is_closed:
                raise TargetError(f"lost the SSH session to {where} while streaming records "
                                  "(connection closed)")
            err = ""
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    err = (await proc.stderr.read()).decode(errors="replace").strip()
            raise TargetError(f"the record stream ended early{': ' + err if err else ''}")
        return data

    async def _why_silent(self) -> str:
        """No record for STALL_S: is it the module, or the link to the target?"""
        where = self.ctx.target.endpoint.where
        conn = self.ctx.target.conn
        if conn is None or not await conn.responds(timeout=STALL_S):
            return (f"the SSH link to {where} went silent: no record and no answer to a trivial "
                    f"command for {2 * STALL_S:g} s (network, cable or a frozen target?)")
        return (
            f"the record stream stalled: no data for {STALL_S:g} s while {where} still answers "
            "(is the module's task running?)"
        )

    async def _measure(self, loop: asyncio.AbstractEventLoop, armed: float) -> None:
        """One acquisition measured by the scope itself (no waveform transfer, unless this one
        is cross-checked on the host)."""
        assert self.scope is not None
        progress, every = self.ctx.progress, self.ctx.campaign.bench.scope.cross_check_every
        n = progress.acquisitions
        check = every > 0 and n % every == 0
        m, host = await loop.run_in_executor(None, lambda: self.scope.measure(cross_check=check))
        done = time.time()
        same = self.tally.add(m.count, m.mean_s, m.min_s, m.max_s, m.scope, host)
        h = same or (None, None, None, None)
        self.meas_csv.write(",".join(
            ["" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(v) for v in (
                n, armed, m.count, m.mean_s, m.min_s, m.max_s, *h)]) + "\n", flush=True)
        live = self.scope.record_span_s
        log = AcquisitionLog(armed, done, 1, m.count, live)
        self.acq_csv.write(f"{n},{armed:.6f},{done:.6f},1,{m.count},{live:.9e},0\n", flush=True)
        self.acquisition_log.append(log)
        progress.acquisitions += 1
        progress.hw.add_summary(m.count, m.mean_s * 1e9, m.min_s * 1e9, m.max_s * 1e9)

    async def _capture(self, stop: asyncio.Event) -> None:
        assert self.scope is not None
        loop = asyncio.get_running_loop()
        if self.strategy == "measurement":
            while not stop.is_set():
                await self._measure(loop, time.time())
            return
        # the scope is re-armed as soon as a record is in, and that record's pulses are extracted
        # while the next acquisition runs: the host's own work is not dead time for the scope
        scope = self.scope
        armed = time.time()  # wall clock: pairing maps it onto the records' arrival times
        acquiring: asyncio.Future | None = loop.run_in_executor(None, scope.acquire_record)
        try:
            while acquiring is not None:
                record = await acquiring
                done, record_armed, acquiring = time.time(), armed, None
                if not stop.is_set():
                    armed = time.time()
                    acquiring = loop.run_in_executor(None, scope.acquire_record)
                got = await loop.run_in_executor(None, scope.pulses_of, record)
                self._log_acquisition(got, record_armed, done)
        finally:
            if acquiring is not None:  # left behind by an error: its outcome is not wanted
                acquiring.add_done_callback(lambda f: f.cancelled() or f.exception())

    def _log_acquisition(self, got: Any, armed: float, done: float) -> None:
        """One acquisition's pulses and its line in scope_acquisitions.csv, written and flushed."""
        progress = self.ctx.progress
        n = progress.acquisitions
        self.hw_csv.write("".join(
            f"{n},{s:.12e},{w:.12e},{armed:.6f},{f}\n"
            for s, w, f in zip(got.start_s, got.width_s, got.frame.tolist(), strict=True)
        ), flush=True)
        log = AcquisitionLog(armed, done, got.frames, len(got.width_s), got.live_s,
                             got.frames_without_pulse)
        self.acq_csv.write(f"{n},{armed:.6f},{done:.6f},{log.frames},{log.pulses},{log.live_s:.9e},"
                           f"{log.frames_without_pulse}\n", flush=True)
        self.acquisition_log.append(log)
        progress.acquisitions += 1
        progress.hw.add(np.asarray(got.width_s) * 1e9)


async def _finish_capture(task: asyncio.Task, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(task)
    except TimeoutError:
        task.cancel()
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - a scope error after enough pulses is still reported
        raise ScopeFailure(str(exc)) from None
