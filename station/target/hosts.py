"""The machines the station starts things on: the target, and load hosts that run
load generators against it. Each is one SSH session plus what the station has
set up there. A host is activated (connected) by the bench, refuses work when
not active, and cleans up what the station left, reconnecting when it must
(labgrid's activate/deactivate idea)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from station.common.module_names import module_stem, stream_device
from station.config import LoadHost, TargetSettings
from station.target import governors, irqtrace, modules, rtla
from station.target import processes as proc_ctl
from station.target.ssh import AuthenticationRefused, SSHEndpoint, TargetConnection, TargetError


def endpoint_from_settings(s: TargetSettings | LoadHost) -> SSHEndpoint:
    return SSHEndpoint(
        s.host, s.port, s.user, s.identity_file, s.known_hosts, s.connect_timeout,
        sudo=getattr(s, "sudo", False), reconnect_for=s.reconnect_for
    )


class Host:
    """An SSH host on which the station starts tracked processes (pid files in work_dir)."""

    def __init__(self, endpoint: SSHEndpoint, work_dir: str, name: str = "target") -> None:
        self.endpoint = endpoint
        self.work_dir = work_dir
        self.name = name
        self.conn: TargetConnection | None = None
        self.active = False
        # the last cleanup found the host unreachable for reconnect_for
        self.cleanup_gave_up = False

    async def activate(self, connect: bool = True) -> None:
        """Ready for work; connect now (so a wrong address fails at set-up), or at first use."""
        self.active = True
        if connect:
            await self.live_connection()

    async def deactivate(self) -> None:
        self.active = False
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
            self.conn = None

    async def live_connection(self) -> TargetConnection:
        """The session, re-opened if it dropped (teardown must still reach the host)."""
        if not self.active:
            raise TargetError(f"{self.name} is not active: the bench has not set it up (or has "
                              "torn it down)")
        if self.conn is None or self.conn.is_closed:
            self.conn = await TargetConnection.open(self.endpoint)
        return self.conn

    def forget_connection(self) -> None:
        """Drop a session that failed (a half-dead link looks open): the next call reconnects."""
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.abort()
        self.conn = None

    async def _clean_once(self, conn: TargetConnection) -> tuple[list[str], list[str], list[str]]:
        """One pass: (processes stopped, modules unloaded, errors)."""
        return await proc_ctl.kill_recorded(conn, self.work_dir), [], []

    async def cleanup(self, within_s: float = 60.0) -> dict[str, list[str]]:
        """Stop everything the station left here. Reconnects and retries until clean or
        `within_s` has passed; then raises TargetError. A refused key or a changed host
        key is never retried: waiting does not change the answer."""
        deadline = time.monotonic() + within_s
        stopped: list[str] = []
        unloaded: list[str] = []
        delay = 0.5
        while True:
            try:
                conn = await self.live_connection()
                done_stopped, done_unloaded, errors = await self._clean_once(conn)
                stopped += done_stopped
                unloaded += done_unloaded
                if not errors:
                    self.cleanup_gave_up = False
                    return {"modules_unloaded": sorted(set(unloaded)),
                            "loads_stopped": sorted(set(stopped))}
                problem = "; ".join(errors)
            except AuthenticationRefused:
                raise
            except TargetError as exc:
                problem = str(exc)
                self.forget_connection()
            if time.monotonic() + delay > deadline:
                self.cleanup_gave_up = True
                raise TargetError(f"{self.name} is not clean after {within_s:g} s: {problem}; "
                                  "run `station cleanup` when it is reachable")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 8.0)

    async def not_answering(self, timeout: float | None = None,
                            within_s: float | None = None) -> str | None:
        """None if the host answers a trivial command (each try bounded by `timeout`: 10 s, or the
        endpoint's connect_timeout if longer) within `within_s` (its reconnect_for); else why not
        (for 'is the bench lost?'). A host that just failed a run may still be busy with its loads
        or its tracer (seen: an emulated PREEMPT_RT guest under hackbench took more than 10 s to
        take a new SSH session), so one slow answer is not a lost host; a refused key is, at once,
        as is a host the last cleanup already gave up on after reconnect_for (no second wait)."""
        timeout = timeout if timeout is not None else max(10.0, self.endpoint.connect_timeout)
        within_s = within_s if within_s is not None else self.endpoint.reconnect_for
        started = time.monotonic()
        deadline = started + (0.0 if self.cleanup_gave_up else within_s)
        delay = 1.0
        tries = 0
        while True:
            tries += 1
            problem = await self._answers_once(timeout)
            if problem is None or problem.refused or time.monotonic() + delay > deadline:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 8.0)
        if problem is None:
            return None
        spent = time.monotonic() - started
        return problem.text if tries == 1 else f"{problem.text} ({tries} tries over {spent:.0f} s)"

    async def _answers_once(self, timeout: float) -> _NoAnswer | None:
        try:
            self.forget_connection()
            async with asyncio.timeout(timeout):
                conn = await self.live_connection()
                await conn.run("true", timeout=timeout)
        except TimeoutError:
            return _NoAnswer(f"{self.endpoint.where} did not answer within {timeout:g} s")
        except AuthenticationRefused as exc:
            return _NoAnswer(str(exc), refused=True)
        except TargetError as exc:
            return _NoAnswer(str(exc))
        return None


@dataclass(frozen=True)
class _NoAnswer:
    text: str
    refused: bool = False


class Target(Host):
    """The machine under test: also loads and unloads the latency modules."""

    def __init__(self, endpoint: SSHEndpoint, settings: TargetSettings) -> None:
        super().__init__(endpoint, settings.work_dir, "the target")
        self.settings = settings

    def module_path(self, interface: str) -> str:
        stem = module_stem(self.settings.family, interface)
        return f"{self.settings.module_dir.rstrip('/')}/{stem}.ko"

    def device(self, interface: str) -> str:
        return stream_device(self.settings.family, interface, self.settings.fifo)

    async def _clean_once(self, conn: TargetConnection) -> tuple[list[str], list[str], list[str]]:
        # processes first: the stream reader holds the device and would make rmmod fail
        stopped = await proc_ctl.kill_recorded(conn, self.work_dir)
        unloaded, errors = await modules.unload_ours(conn)
        name = irqtrace.instance_name(self.work_dir)
        # the station's trace instance (detector, traced module run)
        if await irqtrace.remove_instance(conn, name):
            stopped.append(f"tracefs instance {name}")
        # a killed rtla's tracer (osnoise, timerlat)
        stopped += [f"tracefs instance {name}" for name in await rtla.remove_leftover(conn)]
        stopped += await governors.restore_saved(conn, self.work_dir)  # a gpio run's governors
        return stopped, unloaded, errors


def load_host(name: str, settings: LoadHost) -> Host:
    return Host(endpoint_from_settings(settings), settings.work_dir, f"load host {name!r}")
