"""One run's lifecycle: preflight → loads → module → stream + capture → teardown.

Teardown (stop capture, rmmod, stop loads, seal) runs on every exit path:
normal end, error, Ctrl-C/SIGTERM (task cancellation) and a dropped SSH session
(it reconnects to clean up). Data already streamed is on disk before teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from station import records
from station.config import Campaign, RunSpec
from station.store import RunStore
from station.target import Target, TargetError, kernel_log, modules
from station.target import loads as load_ctl
from station.target.audit import irq_total

log = logging.getLogger(__name__)


@dataclass
class RunningStats:
    count: int = 0
    min: float = math.inf
    max: float = -math.inf
    total: float = 0.0

    def add(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        self.count += int(values.size)
        self.min = min(self.min, float(values.min()))
        self.max = max(self.max, float(values.max()))
        self.total += float(values.sum(dtype=np.float64))

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan


@dataclass
class RunProgress:
    run_id: str
    index: int
    total_runs: int
    sw: RunningStats = field(default_factory=RunningStats)
    hw: RunningStats = field(default_factory=RunningStats)
    acquisitions: int = 0
    started: float = field(default_factory=time.monotonic)
    sw_target: int | None = None
    hw_target: int = 0
    duration_target: float | None = None
    phase: str = "starting"

    def fraction_done(self) -> float:
        """Every target must be met, so the run is as far along as its slowest one."""
        parts = []
        if self.sw_target:
            parts.append(self.sw.count / self.sw_target)
        if self.duration_target:
            parts.append((time.monotonic() - self.started) / self.duration_target)
        if self.hw_target:
            parts.append(self.hw.count / self.hw_target)
        return min(min(parts), 1.0) if parts else 0.0


class ProgressSink(Protocol):
    def update(self, progress: RunProgress) -> None: ...
    def message(self, text: str) -> None: ...


class ScopeCapture(Protocol):
    """What a run needs from the scope side: one blocking acquisition → pulses."""

    def acquire_pulses(self) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class RunOutcome:
    run_id: str
    status: str
    error: str | None


async def execute_run(
    campaign: Campaign,
    spec: RunSpec,
    order: int,
    total_runs: int,
    target: Target,
    scope: ScopeCapture | None,
    store: RunStore,
    progress_sink: ProgressSink,
    audit: dict[str, str],
    before_module_load: Any = None,
) -> RunOutcome:
    m = campaign.matrix
    settings = target.settings
    period_ns = round(m.period * 1e9)
    stem = modules.module_stem(settings.family, spec.interface)
    params = modules.module_params(
        settings.family, spec.interface, period_ns=period_ns, check=spec.check, cpu=m.cpu,
        fmt=m.format, fifo=settings.fifo, lpt_base=m.lpt_base, lpt_irq=m.lpt_irq,
        extra=m.module_params.get(spec.interface),
    )
    progress = RunProgress(
        spec.id, order, total_runs, sw_target=m.samples, hw_target=m.pulses if scope else 0,
        duration_target=m.duration,
    )
    store.open(
        {
            "order": order,
            "run": {"interface": spec.interface, "variant": spec.variant, "load": spec.load,
                    "repetition": spec.repetition},
            "period_ns": period_ns,
            "format": m.format,
            "module": {"path": target.module_path(spec.interface), "params": params},
            "device": target.device(spec.interface),
            "loads": [s.model_dump() for s in campaign.loads[spec.load]],
            "campaign": campaign.model_dump(mode="json"),
            "audit": audit,
            "scope": scope is not None,
        }
    )
    decoder = records.decoder_for(m.format)
    running_loads: list[load_ctl.RunningLoad] = []
    module_loaded = False
    stream_proc = None
    stream: load_ctl.RunningLoad | None = None
    capture_task: asyncio.Task | None = None
    status, error = "failed", None
    irq_before: int | None = None
    irq_after: int | None = None
    interrupts_row = modules.interrupts_row(settings.family, spec.interface, m.lpt_irq)
    dmesg_before: list[str] = []
    kernel_said: dict[str, list[str]] = {"new_lines": [], "trouble": []}
    try:
        conn = await target.live_connection()
        # preflight: a module left by a crash would make insmod fail and the data lie
        leftover = await modules.loaded_modules(conn) & modules.ALL_STEMS
        if leftover:
            progress_sink.message(f"unloading leftover module(s) {', '.join(sorted(leftover))} before {spec.id}")
            await modules.unload_ours(conn)
        # a mainline module's row appears with its request_irq: absent now means zero
        irq_before = irq_total((await conn.run("cat /proc/interrupts")).stdout, interrupts_row) or 0
        dmesg_before = await kernel_log.snapshot(conn)

        progress.phase = "loads"
        progress_sink.update(progress)
        max_seconds = int(m.max_duration) + 120
        for load in campaign.loads[spec.load]:
            if load.on != "target":
                raise TargetError(f"load {load.name}: load hosts are configured but not reachable from this run")
            running_loads.append(await load_ctl.start_load(conn, load.name, load.command, settings.work_dir,
                                                           max_seconds))

        if before_module_load is not None:
            before_module_load(store.dir)
        progress.phase = "module"
        await modules.insmod(conn, target.module_path(spec.interface), params)
        module_loaded = True

        # the reader is tracked like a load: a reader blocked in read() never sees its SSH
        # channel close, and an open device would make rmmod fail
        stream = await load_ctl.start_load(conn, load_ctl.STREAM_NAME, f"cat {target.device(spec.interface)}",
                                           settings.work_dir, max_seconds, binary=True)
        stream_proc = stream.process
        progress.phase = "measuring"
        progress.started = time.monotonic()
        stop = asyncio.Event()
        if scope is not None:
            capture_task = asyncio.create_task(_capture(scope, store, progress, stop))
        await _stream(stream_proc, decoder, store, progress, progress_sink, m, capture_task, stop)
        stop.set()
        if capture_task is not None:
            await _finish_capture(capture_task, timeout=30)
            capture_task = None
        status = "complete"
    except asyncio.CancelledError:
        status, error = "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
        raise
    except (TargetError, ScopeFailure) as exc:
        status, error = "failed", str(exc)
    except records.RecordFormatError as exc:
        status, error = "failed", f"record stream from {target.device(spec.interface)}: {exc}"
    finally:
        progress.phase = "teardown"
        progress_sink.update(progress)
        irq_seen: dict[str, int | None] = {}
        teardown_errors = await _teardown(target, stem, module_loaded, running_loads, stream, capture_task,
                                          interrupts_row, irq_seen)
        irq_after = irq_seen.get("before_rmmod")
        if teardown_errors:
            error = "; ".join(filter(None, [error, *teardown_errors]))
            if status == "complete":
                status = "incomplete"
        with contextlib.suppress(Exception):
            conn = await target.live_connection()
            new = kernel_log.new_lines(dmesg_before, await kernel_log.snapshot(conn))
            kernel_said = {"new_lines": new[-200:], "trouble": kernel_log.trouble(new)}
        if kernel_said["trouble"]:
            # an oops or WARNING during the run makes its numbers suspect: say so, keep the data
            error = "; ".join(filter(None, [error, "kernel reported: " + kernel_said["trouble"][0]]))
            if status == "complete":
                status = "incomplete"
        if status == "complete" and m.samples and progress.sw.count < m.samples:
            status = "incomplete"
        store.seal(
            status,
            m.format,
            {
                "error": error,
                "losses": {
                    "sw_lost": decoder.losses.lost,
                    "gaps": len(decoder.losses.gaps),
                    "first_gaps": decoder.losses.gaps[:20],
                    "sw_dropped_by_target": decoder.dropped_by_target,
                    "torn_bytes": decoder.pending_bytes,
                },
                "interrupts": {"row": interrupts_row, "before": irq_before, "after": irq_after},
                "kernel_log": kernel_said,
                "acquisitions": progress.acquisitions,
                "duration_s": time.monotonic() - progress.started,
            },
        )
    return RunOutcome(spec.id, status, error)


class ScopeFailure(Exception):
    """The scope stopped answering or reported an error during a run."""


async def _stream(proc, decoder, store: RunStore, progress: RunProgress, sink: ProgressSink, m,
                  capture_task: asyncio.Task | None, stop: asyncio.Event) -> None:
    last_update = 0.0
    deadline = time.monotonic() + m.max_duration
    while True:
        now = time.monotonic()
        sw_done = (m.samples is None or progress.sw.count >= m.samples) and (
            m.duration is None or now - progress.started >= m.duration
        )
        hw_done = capture_task is None or progress.hw.count >= progress.hw_target
        if capture_task is not None and capture_task.done():
            exc = capture_task.exception()
            if exc is not None:
                raise ScopeFailure(str(exc))
            hw_done = True
        if (sw_done and hw_done) or now >= deadline:
            return
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a Ctrl-C that
            # lands while a read completes, which on a busy stream is almost always
            async with asyncio.timeout(5.0):
                data = await proc.stdout.read(1 << 16)
        except TimeoutError:
            raise TargetError("the record stream stalled: no data for 5 s (is the module's task running?)") from None
        if not data:
            err = ""
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    err = (await proc.stderr.read()).decode(errors="replace").strip()
            raise TargetError(f"the record stream ended early{': ' + err if err else ''}")
        store.append_sw(data)  # raw first: whatever the decoder thinks, the bytes are kept
        recs = decoder.feed(data)
        lat = recs["latency_ns"] if recs.dtype.names else recs
        if recs.dtype.names and len(recs):
            store.append_arrival(time.time(), int(recs["seq"][-1]))
        progress.sw.add(np.asarray(lat))
        if now - last_update > 0.25:
            sink.update(progress)
            last_update = now


async def _capture(scope: ScopeCapture, store: RunStore, progress: RunProgress, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        armed = time.time()  # wall clock: pairing maps it onto the records' arrival times
        start_s, width_s = await loop.run_in_executor(None, scope.acquire_pulses)
        store.append_pulses(progress.acquisitions, start_s, width_s, armed)
        progress.acquisitions += 1
        progress.hw.add(np.asarray(width_s) * 1e9)


async def _finish_capture(task: asyncio.Task, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(task)
    except TimeoutError:
        task.cancel()
    except Exception as exc:  # noqa: BLE001 - a scope error after enough pulses is still reported
        raise ScopeFailure(str(exc)) from None


async def _teardown(target: Target, stem: str, module_loaded: bool, running_loads,
                    stream: load_ctl.RunningLoad | None, capture_task, interrupts_row: int | str,
                    irq_seen: dict[str, int | None]) -> list[str]:
    """Reverse order of set-up. Every step is attempted; failures are collected."""
    errors: list[str] = []
    if capture_task is not None and not capture_task.done():
        capture_task.cancel()
    try:
        conn = await target.live_connection()
    except TargetError as exc:
        return [f"teardown could not reach the target: {exc}; run `station cleanup`"]
    if stream is not None:
        stream.conn = conn  # the session may have been re-opened
        try:
            await load_ctl.stop_load(stream)
        except TargetError as exc:
            errors.append(f"stopping the record stream: {exc}")
    if module_loaded:
        # the IRQ count while the module still holds its line (its row goes with rmmod)
        with contextlib.suppress(TargetError):
            text = (await conn.run("cat /proc/interrupts")).stdout
            irq_seen["before_rmmod"] = irq_total(text, interrupts_row)
        try:
            await modules.rmmod(conn, stem)
        except TargetError as exc:
            errors.append(f"rmmod {stem}: {exc}")
    for load in reversed(running_loads):
        load.conn = conn
        try:
            await load_ctl.stop_load(load)
        except TargetError as exc:
            errors.append(f"stopping load {load.name}: {exc}")
    # belt and braces: anything a pid file still names is stopped too
    with contextlib.suppress(TargetError):
        await load_ctl.kill_recorded_loads(conn, target.settings.work_dir)
    return errors
