"""One run's lifecycle, the same for every kind of run:

    preflight cleanup → baseline → loads → start → measure → stop → loads stopped → seal

The kind (station/kinds/) fills in baseline, start, measure and stop. Teardown
(stop, loads, pid-file sweep, reconnecting cleanup, seal) runs on every exit
path — normal end, error, Ctrl-C/SIGTERM (task cancellation), a dropped SSH
session — and no later signal can cut it short. Data already streamed is on
disk before teardown begins.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from station.bench.bench import Bench
from station.common.lifetime import finish_then_cancel
from station.common.progress import ProgressSink, RunProgress
from station.config import RunSpec, measurement_hash
from station.kinds import kind_for
from station.kinds.base import Measurement, MeasurementFailure, RunContext
from station.store.run_store import RunStore, StoreError
from station.target import AuthenticationRefused, Host, TargetError, kernel_log, spoilers
from station.target import processes as proc_ctl

# what the lifecycle writes in every manifest: a kind's seal_extra() cannot replace these
RESERVED_MANIFEST_KEYS = frozenset({"run_id", "kind", "status", "error", "counts",
                                    "checksums_sha256", "spoilers",
                                    "kernel_log", "duration_s", "config_hash", "order"})

# every process a run starts on a host ends by itself this long after max_duration,
# even if the station is killed with SIGKILL
DEAD_MANS_SWITCH_S = 120


@dataclass
class RunOutcome:
    run_id: str
    status: str
    error: str | None
    fatal: str | None = None  # the bench itself failed (disk full, target gone): stop the campaign


@dataclass
class _Started:
    """What this run started on the hosts, so teardown undoes exactly that."""

    loads: list[proc_ctl.TrackedProcess] = field(default_factory=list)
    dmesg_before: list[str] = field(default_factory=list)
    prepared: bool = False  # kind.prepare() was called: kind.after_loads() undoes it


async def execute_run(bench: Bench, spec: RunSpec, store: RunStore, progress: RunProgress,
                      sink: ProgressSink) -> RunOutcome:
    """One run of the campaign on the active bench; its data goes to store."""
    campaign = bench.campaign
    ctx = RunContext(bench, campaign, spec, store, progress, sink,
                     max_seconds=int(campaign.matrix.max_duration) + DEAD_MANS_SWITCH_S)
    kind = kind_for(spec.kind)(ctx)
    store.open({
        "kind": spec.kind,  # the registry's name, which the analysis groups runs by
        # the file's order, which reports list runs in (when each was measured: its times, and
        # campaign.json's `order`)
        "order": progress.index if progress.position is None else progress.position,
        "config_hash": measurement_hash(campaign),
        "run": {"interface": spec.interface, "variant": spec.variant, "load": spec.load,
                "repetition": spec.repetition, "target": spec.target},
        "loads": [s.model_dump() for s in campaign.loads[spec.load]],
        "campaign": campaign.model_dump(mode="json"),
        "audit": bench.facts,
        **kind.manifest(),
    })
    started = _Started()
    status, error, fatal = "failed", None, None
    try:
        kind.open_files(store)
        await _set_up(ctx, kind, started)
        await kind.measure()
        status = "complete"
    except asyncio.CancelledError:
        status, error = "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
        raise
    except StoreError as exc:
        status, error = "failed", str(exc)
        fatal = f"cannot keep the data: {exc}"
    except AuthenticationRefused as exc:  # every later run would be refused the same way
        status, error = "failed", str(exc)
        fatal = str(exc)
    except (TargetError, MeasurementFailure) as exc:
        status, error = "failed", str(exc)
    except Exception as exc:  # noqa: BLE001 - a bug: the run fails, the target is still cleaned
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        finish = asyncio.ensure_future(_finish(ctx, kind, started, status, error))
        status, error = await _uncancellable(finish)
    return RunOutcome(spec.id, status, error, fatal)


async def _set_up(ctx: RunContext, kind: Measurement, started: _Started) -> None:
    bench, sink, progress = ctx.bench, ctx.sink, ctx.progress
    # preflight: whatever a crash left (a module, a load, a reader holding the device)
    # would make the start fail or the data lie
    for host in bench.hosts.values():
        cleaned = await host.cleanup(within_s=30)
        if cleaned["modules_unloaded"] or cleaned["loads_stopped"]:
            sink.message(f"before {ctx.spec.id}: stopped leftovers on {host.name}: {cleaned}")
    started.dmesg_before = await kernel_log.snapshot(await ctx.target.live_connection())
    await kind.baseline()
    started.prepared = True
    await kind.prepare()
    with contextlib.suppress(TargetError):  # facts for the report; the run does not depend on them
        ctx.spoilers = await spoilers.check(await ctx.target.live_connection(), kind.measured_cpu(),
                                            kind.device_row())

    progress.phase = "loads"
    sink.update(progress)
    for load in ctx.campaign.loads[ctx.spec.load]:
        host = bench.hosts[load.host]
        running = await finish_then_cancel(proc_ctl.start_load(
            await host.live_connection(), load.name, load.command, host.work_dir, ctx.max_seconds,
            to_log=True
        ))
        running.where = load.host
        started.loads.append(running)

    bench.begin_run(ctx.spec.id, ctx.store.dir, ctx.spec.load)
    progress.phase = "start"
    sink.update(progress)
    await kind.start()


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


async def _finish(
    ctx: RunContext, kind: Measurement, started: _Started, status: str, error: str | None
) -> tuple[str, str | None]:
    ctx.progress.phase = "teardown"
    ctx.sink.update(ctx.progress)
    errors = await _teardown(ctx, kind, started)
    if errors:
        error = "; ".join(filter(None, [error, *errors]))
        if status == "complete":
            status = "incomplete"
    kernel_said: dict[str, list[str]] = {"new_lines": [], "trouble": []}
    with contextlib.suppress(Exception):
        new = kernel_log.new_lines(started.dmesg_before,
                                   await kernel_log.snapshot(await ctx.target.live_connection()))
        kernel_said = {"new_lines": new[-200:], "trouble": kernel_log.trouble(new)}
    if kernel_said["trouble"]:
        # an oops or WARNING during the run makes its numbers suspect: say so, keep the data
        error = "; ".join(filter(None, [error, "kernel reported: " + kernel_said["trouble"][0]]))
        if status == "complete":
            status = "incomplete"
    with contextlib.suppress(Exception):  # the twin's account of the run; never the run's fate
        ctx.bench.end_run()
    kind_extra: dict = {}
    try:
        status, error = kind.verdict(status, error)
        kind_extra = {k: v for k, v in kind.seal_extra().items() if k not in RESERVED_MANIFEST_KEYS}
    except Exception as exc:  # noqa: BLE001 - the seal must happen whatever the kind does
        error = "; ".join(filter(None, [error, f"{kind.name} seal: {type(exc).__name__}: {exc}"]))
        status = "failed" if status == "complete" else status
    extra = kind_extra | {"error": error, "kernel_log": kernel_said, "spoilers": ctx.spoilers,
                          "duration_s": time.monotonic() - ctx.progress.started}
    ctx.store.seal(status, extra, kind.conversions)
    return status, error


async def _teardown(ctx: RunContext, kind: Measurement, started: _Started) -> list[str]:
    """Reverse order of set-up: what the kind started, then the loads. If a session fails on
    the way, reconnect and clean up everything recorded there (bounded in time).
    Returns the errors that left a host dirty, or the run short of what it claims (a load
    that ended on its own)."""
    hosts = ctx.bench.hosts
    failed: list[Host] = []
    errors: list[str] = []
    stop_failed = False
    try:
        await kind.stop()
    except TargetError as exc:
        stop_failed = True
        ctx.sink.message(f"teardown: {exc}; reconnecting to clean up")
        failed.append(ctx.target)
    except Exception as exc:  # noqa: BLE001 - a bug in the kind: the loads must still stop
        stop_failed = True
        errors.append(f"{kind.name} stop: {type(exc).__name__}: {exc}")
        failed.append(ctx.target)
    for load in reversed(started.loads):
        host = hosts[load.where]
        if host in failed:
            continue
        if load.process.exit_status is not None:  # a load runs until the run stops it
            errors.append(f"load {load.name!r} on {host.name} ended during the run (status "
                          f"{load.process.exit_status}): the run was not loaded throughout")
        try:
            load.conn = await host.live_connection()
            await proc_ctl.stop_load(load)
        except TargetError as exc:
            ctx.sink.message(f"teardown on {host.name}: {exc}; reconnecting to clean up")
            failed.append(host)
    if started.prepared and ctx.target not in failed:
        try:
            await kind.after_loads()
        except TargetError as exc:
            ctx.sink.message(f"teardown: {exc}; reconnecting to clean up")
            failed.append(ctx.target)
        except Exception as exc:  # noqa: BLE001 - a bug in the kind: the rest must still be cleaned
            errors.append(f"{kind.name} after the loads: {type(exc).__name__}: {exc}")
    for host in hosts.values():  # anything a pid file still names, everywhere
        if host not in failed:
            try:
                await proc_ctl.kill_recorded(await host.live_connection(), host.work_dir)
            except TargetError:
                failed.append(host)
    for host in dict.fromkeys(failed):
        host.forget_connection()
        if host is ctx.target and stop_failed:
            # the kind's own stop first, once the target answers again: it stops its probe
            # gently (a probe writes its results on TERM); cleanup's stop is abrupt
            with contextlib.suppress(Exception):
                await kind.stop()
        try:
            await host.cleanup(within_s=host.endpoint.reconnect_for)
        except TargetError as exc:
            errors.append(str(exc))
            continue
        if host is ctx.target and stop_failed:
            # cleanup knows pid files and our modules; the kind may have set up more
            try:
                await kind.stop()
            except Exception as exc:  # noqa: BLE001 - said in the manifest, the seal goes on
                errors.append(f"{kind.name} stop, after reconnecting: {type(exc).__name__}: {exc}")
    return errors
