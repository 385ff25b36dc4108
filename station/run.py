"""One run's lifecycle: preflight → loads → module → stream + capture → teardown.

Teardown (stop capture, rmmod, stop loads, seal) runs on every exit path:
normal end, error, Ctrl-C/SIGTERM (task cancellation) and a dropped SSH session
(it reconnects to clean up). Data already streamed is on disk before teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from station import records
from station.config import Campaign, RunSpec
from station.store import RunStore
from station.target import Host, Target, TargetError, kernel_log, modules
from station.target import loads as load_ctl
from station.target.audit import irq_total


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
    config_hash: str = "",
    load_hosts: dict[str, Host] | None = None,
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
            "config_hash": config_hash,
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
    hosts: dict[str, Host] = {"target": target, **(load_hosts or {})}
    state = _SetUp(interrupts_row=modules.interrupts_row(settings.family, spec.interface, m.lpt_irq))
    status, error = "failed", None
    try:
        # preflight: whatever a crash left (a module, a load, a reader holding the device)
        # would make insmod fail or the data lie
        for host in hosts.values():
            cleaned = await host.cleanup(within_s=30)
            if cleaned["modules_unloaded"] or cleaned["loads_stopped"]:
                progress_sink.message(f"before {spec.id}: stopped leftovers on {host.name}: {cleaned}")
        conn = await target.live_connection()
        # a mainline module's row appears with its request_irq: absent now means zero
        state.irq_before = irq_total((await conn.run("cat /proc/interrupts")).stdout, state.interrupts_row) or 0
        state.dmesg_before = await kernel_log.snapshot(conn)

        progress.phase = "loads"
        progress_sink.update(progress)
        max_seconds = int(m.max_duration) + 120  # the dead man's switch on every process we start
        for load in campaign.loads[spec.load]:
            host = target if load.host == "target" else hosts[load.host]
            started = await load_ctl.start_load(
                await host.live_connection(), load.name, load.command, host.work_dir, max_seconds
            )
            started.where = load.host
            state.loads.append(started)

        if before_module_load is not None:
            before_module_load(store.dir)
        progress.phase = "module"
        state.module_maybe_loaded = True  # before the await: insmod can succeed and its reply be lost
        await modules.insmod(conn, target.module_path(spec.interface), params)

        # the reader is tracked like a load: a reader blocked in read() never sees its SSH
        # channel close, and an open device would make rmmod fail
        state.stream = await load_ctl.start_load(
            conn, load_ctl.STREAM_NAME, f"cat {target.device(spec.interface)}", settings.work_dir, max_seconds,
            binary=True,
        )
        progress.phase = "measuring"
        progress.started = time.monotonic()
        stop = asyncio.Event()
        if scope is not None:
            state.capture = asyncio.create_task(_capture(scope, store, progress, stop))
        await _stream(state.stream.process, decoder, store, progress, progress_sink, m, state.capture, stop)
        stop.set()
        if state.capture is not None:
            await _finish_capture(state.capture, timeout=30)
            state.capture = None
        status = "complete"
    except asyncio.CancelledError:
        status, error = "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
        raise
    except (TargetError, ScopeFailure) as exc:
        status, error = "failed", str(exc)
    except records.RecordFormatError as exc:
        status, error = "failed", f"record stream from {target.device(spec.interface)}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a bug or a full disk: the run fails, the target is still cleaned
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        finish = asyncio.ensure_future(
            _finish_run(target, hosts, stem, state, store, decoder, progress, progress_sink, m, status, error)
        )
        status, error = await _uncancellable(finish)
    return RunOutcome(spec.id, status, error)


@dataclass
class _SetUp:
    """What a run has set up on the target so far: teardown undoes exactly this."""

    interrupts_row: int | str
    loads: list[load_ctl.RunningLoad] = field(default_factory=list)
    module_maybe_loaded: bool = False
    stream: load_ctl.RunningLoad | None = None
    capture: asyncio.Task | None = None
    irq_before: int | None = None
    dmesg_before: list[str] = field(default_factory=list)


async def _uncancellable(task: asyncio.Future):
    """Await the teardown to its end whatever signals arrive meanwhile (a second Ctrl-C
    must not leave a module loaded), then pass the cancellation on."""
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


async def _finish_run(
    target: Target, hosts: dict[str, Host], stem: str, state: _SetUp, store: RunStore, decoder,
    progress: RunProgress, sink: ProgressSink, m, status: str, error: str | None,
) -> tuple[str, str | None]:
    progress.phase = "teardown"
    sink.update(progress)
    errors, irq_after = await _teardown(target, hosts, stem, state, sink)
    if errors:
        error = "; ".join(filter(None, [error, *errors]))
        if status == "complete":
            status = "incomplete"
    kernel_said: dict[str, list[str]] = {"new_lines": [], "trouble": []}
    with contextlib.suppress(Exception):
        conn = await target.live_connection()
        new = kernel_log.new_lines(state.dmesg_before, await kernel_log.snapshot(conn))
        kernel_said = {"new_lines": new[-200:], "trouble": kernel_log.trouble(new)}
    if kernel_said["trouble"]:
        # an oops or WARNING during the run makes its numbers suspect: say so, keep the data
        error = "; ".join(filter(None, [error, "kernel reported: " + kernel_said["trouble"][0]]))
        if status == "complete":
            status = "incomplete"
    if status == "complete" and m.samples and progress.sw.count < m.samples:
        status, error = "incomplete", f"max_duration reached with {progress.sw.count} of {m.samples} samples"
    if status == "complete" and progress.hw_target and progress.hw.count < progress.hw_target:
        status, error = "incomplete", f"max_duration reached with {progress.hw.count} of {progress.hw_target} pulses"
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
            "interrupts": {"row": state.interrupts_row, "before": state.irq_before, "after": irq_after},
            "kernel_log": kernel_said,
            "acquisitions": progress.acquisitions,
            "duration_s": time.monotonic() - progress.started,
        },
    )
    return status, error


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


async def _teardown(target: Target, hosts: dict[str, Host], stem: str, state: _SetUp,
                    sink: ProgressSink) -> tuple[list[str], int | None]:
    """Reverse order of set-up: the reader, the module, the loads. If a session fails on
    the way, reconnect and clean up everything recorded there (bounded in time).
    Returns (errors that left a host dirty, the IRQ count before rmmod)."""
    if state.capture is not None and not state.capture.done():
        state.capture.cancel()
    irq_before_rmmod = None
    failed: list[Host] = []
    try:
        conn = await target.live_connection()
        if state.stream is not None:
            state.stream.conn = conn
            await load_ctl.stop_load(state.stream)
        else:  # started but not yet tracked when the run was stopped
            await load_ctl.kill_pidfile(conn, target.work_dir, load_ctl.STREAM_NAME)
        if state.module_maybe_loaded and stem in await modules.loaded_modules(conn):
            # the IRQ count while the module still holds its line (its row goes with rmmod)
            text = (await conn.run("cat /proc/interrupts")).stdout
            irq_before_rmmod = irq_total(text, state.interrupts_row)
            await modules.rmmod(conn, stem)
    except TargetError as exc:
        sink.message(f"teardown: {exc}; reconnecting to clean up")
        failed.append(target)
    for load in reversed(state.loads):
        host = hosts[load.where]
        if host in failed:
            continue
        try:
            load.conn = await host.live_connection()
            await load_ctl.stop_load(load)
        except TargetError as exc:
            sink.message(f"teardown on {host.name}: {exc}; reconnecting to clean up")
            failed.append(host)
    for host in hosts.values():  # anything a pid file still names, everywhere
        if host not in failed:
            try:
                await load_ctl.kill_recorded_loads(await host.live_connection(), host.work_dir)
            except TargetError:
                failed.append(host)
    errors = []
    for host in dict.fromkeys(failed):
        host.forget_connection()
        try:
            await host.cleanup(within_s=60)
        except TargetError as exc:
            errors.append(str(exc))
    return errors, irq_before_rmmod
