"""The bench: everything a campaign measures with, owned in one place.

Parts are activated in order — the twin or the VM (if used), the target, the load hosts,
the modules' upload, the scope — and deactivated in reverse order on every exit
path, a cancellation included (labgrid's target/driver model). A run borrows the
active parts; it never sets any of them up itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from station import kind_registry
from station.bench.scope_session import twin_bus
from station.common.lifetime import finish_then_cancel
from station.config import Campaign, TargetSettings
from station.kind_registry import BenchNeeds
from station.target import Host, Target, TargetError, endpoint_from_settings, load_host, modules
from station.target.audit import audit


class BenchError(Exception):
    """The bench could not be set up, or stopped answering; the message says which part."""


class Messages(Protocol):
    def message(self, text: str) -> None: ...


class Wiring(NamedTuple):
    """How the bench reaches its parts: the target's settings (an SSH endpoint once its provider
    has run) and the scope's and generator's VISA resources."""

    target: TargetSettings
    scope: str | None
    generator: str | None


@dataclass
class Bench:
    campaign: Campaign
    log: Messages
    target_name: str | None = None  # which of bench.targets (None: the single bench.target)
    # the parts the runs use; None: what the campaign's kind declares (kind_registry.kind(…).needs)
    needs: BenchNeeds | None = None
    twin: Any = None  # station.twin.runner.Twin when the campaign uses the twin
    vm: Any = None  # station.vm.VirtualMachine when the target is kind: vm
    # station.target.labgrid_place.PlaceResources when the target is kind: labgrid
    place: Any = None
    target: Target | None = None
    load_hosts: dict[str, Host] = field(default_factory=dict)
    scope: Any = None  # station.bench.scope_session.ScopeSession, or None without a scope
    # station.bench.generator_session.GeneratorSession (a kind that plays a stimulus), or None
    generator: Any = None
    facts: dict[str, str] = field(default_factory=dict)
    # False: activate the hosts only (twin, target, load hosts), leaving the modules' upload and
    # the instruments to the caller (`station bench check` opens them step by step)
    instruments: bool = True
    wiring: Wiring | None = None  # where the parts are, once activation has resolved them
    # station.target.module_build.ModuleBuild: the modules built for the target this campaign
    module_build: Any = None
    # what deactivation undoes, last activated first (each undo logged if it fails; the others run)
    _undo: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def __post_init__(self) -> None:
        if self.needs is None:
            self.needs = kind_registry.kind(self.campaign.matrix.kind).needs

    # ---- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> Bench:
        try:
            await self.activate()
        except BaseException:
            await self.deactivate()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.deactivate()

    @property
    def target_settings(self) -> TargetSettings:
        return self.campaign.bench.named_targets()[self.target_name]

    @property
    def uses_scope(self) -> bool:
        return self.needs.scope and self.campaign.bench.scope.kind != "none"

    @property
    def uses_generator(self) -> bool:
        return self.needs.stimulus is not None and self.campaign.bench.generator.kind != "none"

    def _on_deactivate(self, what: str, undo: Callable[[], Awaitable[Any]]) -> None:
        """Undo `what` at deactivation, in reverse order of activation."""
        async def logged() -> None:
            try:
                await undo()
            except Exception as exc:  # noqa: BLE001 - the next part must still be deactivated
                self.log.message(f"bench: deactivating {what}: {exc}")

        self._undo.push_async_callback(logged)

    async def activate(self) -> None:
        settings = self.campaign.bench
        wiring = Wiring(self.target_settings, settings.scope.resource, settings.generator.resource)
        if wiring.target.kind == "twin" or (self.uses_scope and settings.scope.kind == "twin"):
            wiring = await self._start_twin(wiring)
        provider = TARGET_PROVIDERS.get(wiring.target.kind)
        if provider is not None:
            wiring = await provider(self, wiring)
        self.wiring = wiring
        target_settings, scope_resource, generator_resource = wiring
        self.target = Target(endpoint_from_settings(target_settings), target_settings)
        await self._activate_host(self.target, "target")
        try:
            self.facts = await audit(await self.target.live_connection())
        except TargetError as exc:
            raise BenchError(f"target: {exc}") from None
        for name in sorted(self.used_load_hosts()):
            self.load_hosts[name] = load_host(name, settings.load_hosts[name])
            await self._activate_host(self.load_hosts[name], f"load host {name!r}")
        if not self.instruments:
            return
        if self.needs.modules is not None:
            stems = self.needs.modules(self.campaign, target_settings)
            build = self.needs.module_build(self.campaign) if self.needs.module_build else None
            if build is not None and build.when != "never":
                target_settings = await self.build_modules(target_settings, stems, build)
            if target_settings.upload_modules:
                await self._upload_modules(target_settings, stems)
        if self.uses_scope:
            await self.open_scope(scope_resource)
        if self.uses_generator:
            await self.open_generator(generator_resource)

    async def deactivate(self) -> None:
        """Reverse order of activation; every part is tried, whatever the others do (a
        cancellation included: the stack runs every undo, then passes it on)."""
        await self._undo.aclose()

    async def _start_twin(self, wiring: Wiring) -> Wiring:
        """The twin's target, scope and generator, as the campaign asks for them."""
        from station.twin.clock import Slew
        from station.twin.miswire import Miswiring
        from station.twin.runner import Twin

        settings = self.campaign.bench
        board = self.needs.board(self.campaign) if self.needs.board is not None else None
        clocks = settings.twin.clocks
        twin = Twin(preset=settings.twin.preset, seed=settings.twin.seed,
                    overrides=settings.twin.overrides,
                    independent=settings.twin.independent,
                    miswiring=Miswiring(tuple(settings.twin.miswire), settings.scope.channel,
                                        settings.scope.trigger_level,
                                        board["response_channel"] if board else None),
                    with_scope=self.uses_scope and settings.scope.kind == "twin",
                    scope_options={"dialect": settings.scope.dialect,
                                   "bus": twin_bus(settings.scope),
                                   "trigger_error_ns": clocks.scope_trigger_error_ns,
                                   **({"replies": settings.twin.scope_replies.model_dump()}
                                      # only its own
                                      if settings.scope.dialect == "tektronix_mso" else {})},
                    board=board,
                    target_drift_ppm=clocks.target_drift_ppm,
                    scope_timebase_ppm=clocks.scope_timebase_ppm,
                    target_slews=tuple(Slew(s.at, s.ppm, s.duration) for s in clocks.target_slews))
        loop = asyncio.get_running_loop()
        endpoints = await loop.run_in_executor(None, twin.start_in_thread)
        self.twin = twin
        self._on_deactivate("the twin", lambda: loop.run_in_executor(None, twin.stop_thread))
        self.log.message(f"twin up: ssh {endpoints.ssh_host}:{endpoints.ssh_port}, scope "
                         f"{endpoints.scope_resource}")
        target_settings, scope_resource = wiring.target, wiring.scope
        if target_settings.kind == "twin":
            target_settings = target_settings.model_copy(
                update={"kind": "ssh", "host": endpoints.ssh_host, "port": endpoints.ssh_port,
                        "user": endpoints.user, "identity_file": endpoints.identity_file,
                        "known_hosts": endpoints.known_hosts}
            )
        if self.uses_scope and settings.scope.kind == "twin":
            scope_resource = endpoints.scope_resource
        generator_resource = (
            endpoints.generator_resource if self.uses_generator else wiring.generator
        )
        return Wiring(target_settings, scope_resource, generator_resource)

    async def _claim_place(self, wiring: Wiring) -> Wiring:
        """Acquire the labgrid place (or take it as its user acquired it): its NetworkService is the
        target, its PyVISADevice resources the instruments named labgrid:NAME. Released at
        deactivation only if the station acquired it."""
        from station.config import PLACE_RESOURCE
        from station.target.labgrid_place import PlaceError, PlaceSession

        target = wiring.target
        try:
            async with PlaceSession(target.coordinator, target.place,
                                    target.ssh_resource) as session:
                place = await session.claim(self.campaign.name)
                self.place = place
                if place.acquired_by_station:  # at once: whatever happens next, it is released
                    self._on_deactivate(f"labgrid place {place.place}", self._release_place)
        except PlaceError as exc:
            raise BenchError(f"labgrid: {exc}") from None
        how = (
            "acquired"
            if place.acquired_by_station
            else f"already acquired by you ({place.holder}): left so"
        )
        self.log.message(f"labgrid place {place.place} {how}: ssh "
                         f"{place.ssh.username}@{place.ssh.address}:"
                         f"{place.ssh.port}" + "".join(f", {n} {r}"
                                                       for n, r in sorted(place.visa.items())))
        try:
            scope, generator = (place.visa_resource(r) if r and r.startswith(PLACE_RESOURCE) else r
                                for r in (wiring.scope, wiring.generator))
        except PlaceError as exc:
            raise BenchError(f"labgrid: {exc}") from None
        settings = target.model_copy(update={"kind": "ssh", "host": place.ssh.address,
                                             "port": place.ssh.port,
                                             "user": place.ssh.username})
        return Wiring(settings, scope, generator)

    async def _release_place(self) -> None:
        from station.target.labgrid_place import PlaceSession

        place = self.place
        async with PlaceSession(place.coordinator, place.place) as session:
            if session.holder() == place.holder:
                await session.release()
        self.log.message(f"labgrid place {place.place} released")

    async def _start_vm(self, wiring: Wiring) -> Wiring:
        """Build (or reuse) the VM image and boot it on a free port; powered off at deactivation."""
        from station.target.local_sshd import free_port
        from station.vm import VirtualMachine, VmError, build_image

        loop = asyncio.get_running_loop()
        target = wiring.target
        try:
            image = await loop.run_in_executor(None, lambda: build_image(log=self.log.message,
                                                                         kernel=target.kernel,
                                                                         arch=target.arch))
            state_dir = Path(tempfile.mkdtemp(prefix="irq-vm-"))
            vm = VirtualMachine(image, ssh_port=free_port(), state_dir=state_dir,
                                die_with_caller=True)

            came_up: list[bool] = []

            def stop() -> None:
                vm.stop()
                # its console log, known_hosts and state: kept only where it never came up (the
                # boot's error names its console log), else one directory per campaign in /tmp
                # (this VM's own flag: a bench with several VM targets holds the last in self.vm)
                if came_up:
                    shutil.rmtree(state_dir, ignore_errors=True)

            self._on_deactivate("the VM", lambda: loop.run_in_executor(None, stop))
            await vm.start_async()
            came_up.append(True)
        except VmError as exc:
            raise BenchError(f"vm: {exc}") from None
        self.vm = vm
        self.log.message(f"VM up on 127.0.0.1:{vm.ssh_port} (kernel {image.kernel_release}, "
                         f"{image.arch}, emulated)")
        return wiring._replace(target=target.model_copy(update={
            "kind": "ssh", "host": "127.0.0.1", "port": vm.ssh_port, "user": "root",
            "identity_file": str(image.identity_file), "known_hosts": str(vm.known_hosts_file),
            "upload_modules": target.upload_modules or str(image.modules_dir),
        }))

    async def _start_local_sshd(self, wiring: Wiring) -> Wiring:
        """This machine through a throw-away sshd on 127.0.0.1 (stopped at deactivation)."""
        from station.target.local_sshd import LocalSshdError, new_local_sshd, serve_locally

        loop = asyncio.get_running_loop()
        sshd = new_local_sshd()
        self._on_deactivate("the local sshd", lambda: loop.run_in_executor(None, sshd.stop))
        try:
            settings = await finish_then_cancel(loop.run_in_executor(None, serve_locally,
                                                                     wiring.target, sshd))
        except LocalSshdError as exc:
            raise BenchError(f"local target: {exc}") from None
        self.log.message(f"this machine as the target: sshd on 127.0.0.1:{settings.port}, user "
                         f"{settings.user}")
        return wiring._replace(target=settings)

    async def _activate_host(self, host: Host, what: str) -> None:
        self._on_deactivate(what, host.deactivate)
        try:
            await host.activate()
        except TargetError as exc:
            raise BenchError(f"{what}: {exc}") from None

    async def build_modules(self, target_settings: TargetSettings, stems: set[str],
                            plan: Any) -> TargetSettings:
        """The mainline modules built for the target's running kernel, on this station or on the
        target (`plan`: station.target.module_build.BuildPlan; its `when`: "always", or "auto":
        only if the files it would load are missing or for another kernel); the settings
        returned upload them from the build."""
        from station.target.module_build import (
            ModuleBuildError,
            build_for,
            build_on_target,
            kdir_for,
            target_cannot_build,
            target_tree,
        )

        assert self.target is not None
        conn = await self.target.live_connection()
        release = (await conn.run("uname -r")).stdout.strip()
        if plan.when == "auto" and await self._modules_match(conn, target_settings, stems,
                                                              release):
            self.log.message(f"modules: {', '.join(sorted(stems))} already built for {release}")
            return target_settings
        loop = asyncio.get_running_loop()
        try:
            on, lacking = plan.on, None
            if on != "station" and not (plan.kdir or plan.cross_compile):
                tree = target_tree(release, plan.target_kdir)
                lacking = await target_cannot_build(conn, tree)
                if lacking is None:
                    on = "target"
                elif on == "target":
                    raise ModuleBuildError(f"{self.target.endpoint.where} cannot build them: "
                                           f"it lacks {lacking}")
            if on == "target":
                self.log.message(f"modules: building for {release} on the target against {tree}")
                record = await build_on_target(conn, release, tree)
            else:
                try:
                    station_tree = kdir_for(release, plan.kdir)
                except ModuleBuildError as exc:
                    if lacking is None:
                        raise
                    raise ModuleBuildError(f"{exc}; nor can the target build them (it lacks "
                                           f"{lacking})") from None
                self.log.message(f"modules: building for {release} against {station_tree}")
                record = await loop.run_in_executor(None, build_for, release, station_tree,
                                                    plan.cross_compile)
        except TargetError as exc:  # a ModuleBuildError, or the target's words mid-build
            raise BenchError(f"modules: {exc}") from None
        self.module_build = record
        self.log.message(f"modules: {'found' if record.reused else 'built'} in {record.out_dir}")
        return target_settings.model_copy(update={"upload_modules": record.out_dir})

    async def _modules_match(self, conn: Any, target_settings: TargetSettings, stems: set[str],
                             release: str) -> bool:
        """Whether each module file a run would load is there and built for `release`."""
        for stem in stems:
            if target_settings.upload_modules:
                path = Path(target_settings.upload_modules).expanduser() / f"{stem}.ko"
                magic = modules.vermagic(path.read_bytes()) if path.is_file() else None
            else:
                _, magic = await modules.file_vermagic(
                    conn, f"{target_settings.module_dir.rstrip('/')}/{stem}.ko")
            if not magic or magic.split()[0] != release:
                return False
        return True

    async def _upload_modules(self, target_settings: TargetSettings, stems: set[str]) -> None:
        assert self.target is not None
        try:
            uploaded = await modules.upload_modules(
                await self.target.live_connection(),
                Path(target_settings.upload_modules).expanduser(), stems,
                target_settings.module_dir,
            )
        except TargetError as exc:
            raise BenchError(f"target: {exc}") from None
        self.log.message(f"uploaded {', '.join(uploaded)} to {target_settings.module_dir}")

    async def open_scope(self, resource: str | None) -> None:
        from instruments.scope import ScopeError
        from station.bench.scope_session import ScopeSession

        loop = asyncio.get_running_loop()
        extra, slope = (
            self.needs.scope_inputs(self.campaign)
            if self.needs.scope_inputs is not None
            else ((), "rise")
        )
        try:
            self.scope = await loop.run_in_executor(None, ScopeSession.open,
                                                    self.campaign.bench.scope, resource,
                                                    extra, slope)
        except ScopeError as exc:
            raise BenchError(f"scope: {exc}") from None
        scope = self.scope

        async def close() -> None:
            with contextlib.suppress(Exception):
                scope.close()

        self._on_deactivate("the scope", close)
        self.log.message(f"scope: {scope.idn}")

    async def open_generator(self, resource: str | None) -> None:
        from instruments.funcgen import GeneratorError
        from station.bench.generator_session import GeneratorSession

        loop = asyncio.get_running_loop()
        assert self.needs.stimulus is not None and resource
        stimulus = self.needs.stimulus(self.campaign)
        try:
            self.generator = await loop.run_in_executor(None, GeneratorSession.open,
                                                        self.campaign.bench.generator,
                                                        resource, stimulus)
        except GeneratorError as exc:
            raise BenchError(f"generator: {exc}") from None
        generator = self.generator

        async def close() -> None:
            with contextlib.suppress(Exception):
                await loop.run_in_executor(None, generator.close)

        self._on_deactivate("the generator", close)
        self.log.message(f"generator: {generator.idn}")
        if generator.applied.carrier != "pulse":
            self.log.message("generator: FM refused on a pulse carrier; the stimulus is a "
                             f"{generator.applied.carrier} carrier of the same duty cycle, so each "
                             f"pulse's width follows its period (±{generator.applied.jitter:g} of "
                             f"{generator.applied.width_s * 1e6:g} µs)")

    # ---- what runs use -------------------------------------------------------------------
    def used_load_hosts(self) -> set[str]:
        c = self.campaign
        return {spec.host for name in c.matrix.loads for spec in c.loads[name]} - {"target"}

    @property
    def hosts(self) -> dict[str, Host]:
        """Every SSH host of the bench by the name loads use ('target' or a load host's name)."""
        assert self.target is not None
        return {"target": self.target, **self.load_hosts}

    def begin_run(self, run_id: str, run_dir: Path, load: str | None = None) -> None:
        """Tell the twin (if any) which run the next module load belongs to, and what its load
        set does (bench.twin.load_effects)."""
        if self.twin is not None:
            settings = self.campaign.bench.twin
            effect = settings.load_effects.get(load) if load is not None else None
            self.twin.begin_run(f"{settings.seed}/{run_id}",
                                run_dir / "twin-truth.parquet" if settings.ground_truth else None,
                                effect.model_dump() if effect is not None else None)

    def end_run(self) -> None:
        """Tell the twin (if any) the run has ended: a gpio run's board truth is written then."""
        if self.twin is not None:
            self.twin.end_run()

    async def not_answering(self) -> str | None:
        """After a failed run: None if the bench answers again within each host's reconnect_for,
        else which part stopped answering and why (then every later run would fail the same way,
        slowly). Every part says so the same way: `not_answering()`, None or why not."""
        assert self.target is not None
        for host in self.hosts.values():
            problem = await host.not_answering()
            if problem is not None:
                return f"{host.name}: {problem}"
        loop = asyncio.get_running_loop()
        for name, part in (("scope", self.scope), ("generator", self.generator)):
            if (
                part is not None
                and (problem := await loop.run_in_executor(None, part.not_answering)) is not None
            ):
                return f"{name}: {problem}"
        return None

    def describe(self) -> dict[str, Any]:
        """What campaign.json records of the bench."""
        assert self.target is not None
        return {
            "target": {
                "name": self.target_name,
                "kind": self.target_settings.kind,
                "kernel": self.target_settings.kernel
                if self.target_settings.kind == "vm"
                else None,
                "arch": self.target_settings.arch if self.target_settings.kind == "vm" else None,
                "host": self.target.endpoint.where,
                "audit": self.facts,
                "place": None if self.place is None else self.place.describe(),
            },
            "scope": None
            if self.scope is None
            else {"idn": self.scope.idn, "resource": self.scope.resource},
            "generator": None
            if self.generator is None
            else {
                "idn": self.generator.idn, "resource": self.generator.resource,
                "carrier": self.generator.applied.carrier
            },
            "twin": None if self.twin is None else {
                **self.twin.ground_truth_summary(),
                **({"load_effects": {name: e.model_dump() for name, e in effects.items()}}
                   if (effects := self.campaign.bench.twin.load_effects) else {})},
            "modules_build": None if self.module_build is None else self.module_build.as_dict(),
        }


# How a target of each kind becomes an SSH endpoint (and, for a labgrid place, where the instruments
# are): a provider starts or claims what it needs, registers its undo, and returns the wiring. A
# twin target is the twin's (started first, as a twin scope needs it too); `ssh` is as written.
TARGET_PROVIDERS: dict[str, Callable[[Bench, Wiring], Awaitable[Wiring]]] = {
    "labgrid": Bench._claim_place,
    "vm": Bench._start_vm,
    "local": Bench._start_local_sshd,
}
