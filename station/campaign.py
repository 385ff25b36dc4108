"""The campaign loop: set up the bench, run the matrix (resuming after the
last complete run), tear the bench down, analyse and report."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from station.config import Campaign, expand_runs, measurement_hash
from station.run import ProgressSink, RunOutcome, execute_run
from station.store import RunStore, now_utc, station_version
from station.target import Host, SSHEndpoint, Target, TargetError, endpoint_from_settings, load_host, modules
from station.target.audit import audit


class CampaignError(Exception):
    """The bench could not be set up; nothing was measured."""


@dataclass
class CampaignResult:
    out_dir: Path
    outcomes: list[RunOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    report_paths: dict[str, Path] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(o.status == "complete" for o in self.outcomes)


def completed_runs(out_dir: Path, config_hash: str) -> set[str]:
    """Runs already complete under this same configuration. Runs measured under another
    one make resuming an error: mixing them would make the report lie."""
    done, foreign = set(), []
    for manifest in (out_dir / "runs").glob("*/manifest.json"):
        data = json.loads(manifest.read_text())
        if ".attempt-" in manifest.parent.name:
            continue
        if data.get("config_hash") != config_hash:
            foreign.append(data["run_id"])
        elif data.get("status") == "complete":
            done.add(data["run_id"])
    if foreign:
        raise CampaignError(
            f"{out_dir} holds runs measured with different settings ({', '.join(sorted(foreign)[:3])}"
            f"{' …' if len(foreign) > 3 else ''}): use --fresh to measure again there (earlier data is kept "
            "as .attempt-N) or choose another --out"
        )
    return done


async def run_campaign(
    campaign: Campaign,
    out_dir: Path,
    progress: ProgressSink,
    config_path: Path | None = None,
    resume: bool = True,
) -> CampaignResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    config_hash = measurement_hash(campaign)
    done = completed_runs(out_dir, config_hash) if resume else set()
    copy = out_dir / "campaign.yaml"
    if config_path is not None and not (copy.exists() and copy.samefile(config_path)):
        shutil.copyfile(config_path, copy)
    result = CampaignResult(out_dir)
    bench = campaign.bench
    twin = None
    scope_session = None
    target: Target | None = None
    load_hosts: dict[str, Host] = {}
    loop = asyncio.get_running_loop()
    try:
        target_settings = bench.target
        scope_resource = bench.scope.resource
        if bench.target.kind == "twin" or bench.scope.kind == "twin":
            from station.twin.runner import Twin

            twin = Twin(preset=bench.twin.preset, seed=bench.twin.seed, overrides=bench.twin.overrides,
                        with_scope=bench.scope.kind == "twin", scope_options={"dialect": bench.scope.dialect})
            endpoints = await loop.run_in_executor(None, twin.start_in_thread)
            progress.message(
                f"twin up: ssh {endpoints.ssh_host}:{endpoints.ssh_port}, scope {endpoints.scope_resource}"
            )
            if bench.target.kind == "twin":
                target_settings = bench.target.model_copy(
                    update={"kind": "ssh", "host": endpoints.ssh_host, "port": endpoints.ssh_port,
                            "user": endpoints.user, "identity_file": endpoints.identity_file,
                            "known_hosts": endpoints.known_hosts}
                )
            if bench.scope.kind == "twin":
                scope_resource = endpoints.scope_resource
        target = Target(endpoint_from_settings(target_settings), target_settings)
        try:
            await target.connect()
        except TargetError as exc:
            raise CampaignError(f"target: {exc}") from None
        try:
            facts = await audit(await target.live_connection())
        except TargetError as exc:
            raise CampaignError(f"target: {exc}") from None
        used = {spec.host for name in campaign.matrix.loads for spec in campaign.loads[name]} - {"target"}
        for name in sorted(used):
            load_hosts[name] = load_host(name, bench.load_hosts[name])
            try:
                await load_hosts[name].connect()
            except TargetError as exc:
                raise CampaignError(f"load host {name!r}: {exc}") from None
        if target_settings.upload_modules:
            stems = {modules.module_stem(target_settings.family, i) for i in campaign.matrix.interfaces}
            try:
                done = await modules.upload_modules(
                    await target.live_connection(), Path(target_settings.upload_modules).expanduser(), stems,
                    target_settings.module_dir,
                )
            except TargetError as exc:
                raise CampaignError(f"target: {exc}") from None
            progress.message(f"uploaded {', '.join(done)} to {target_settings.module_dir}")
        if bench.scope.kind != "none":
            from instruments.scope import ScopeError
            from station.capture import ScopeSession

            try:
                scope_session = await loop.run_in_executor(None, ScopeSession.open, bench.scope, scope_resource)
            except ScopeError as exc:
                raise CampaignError(f"scope: {exc}") from None
            progress.message(f"scope: {scope_session.idn}")
        _write_campaign_json(out_dir, campaign, target.endpoint, facts, scope_session, twin)

        runs = expand_runs(campaign)
        for order, spec in enumerate(runs):
            if spec.id in done:
                result.skipped.append(spec.id)
                continue
            store = RunStore(out_dir, spec.id)
            hook = None
            if twin is not None and bench.twin.ground_truth:
                hook = lambda run_dir: twin.set_truth_path(run_dir / "twin-truth.parquet")  # noqa: E731
            outcome = await execute_run(
                campaign, spec, order, len(runs), target, scope_session, store, progress, facts, hook, config_hash,
                load_hosts,
            )
            result.outcomes.append(outcome)
            progress.message(f"{spec.id}: {outcome.status}" + (f" — {outcome.error}" if outcome.error else ""))
    finally:
        if scope_session is not None:
            with contextlib.suppress(Exception):
                scope_session.close()
        for host in [*load_hosts.values(), *([target] if target is not None else [])]:
            await host.close()
        if twin is not None:
            await loop.run_in_executor(None, twin.stop_thread)
    return result


def _write_campaign_json(out_dir: Path, campaign: Campaign, endpoint: SSHEndpoint, facts, scope_session, twin) -> None:
    data = {
        "name": campaign.name,
        "description": campaign.description,
        "created_utc": now_utc(),
        "station_version": station_version(),
        "target": {"kind": campaign.bench.target.kind, "host": endpoint.where, "audit": facts},
        "scope": None if scope_session is None else {"idn": scope_session.idn, "resource": scope_session.resource},
        "twin": None if twin is None else twin.ground_truth_summary(),
        "config": campaign.model_dump(mode="json"),
    }
    (out_dir / "campaign.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
