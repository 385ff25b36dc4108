"""The public Python API: what the CLI, the notebooks and the tests call."""

from __future__ import annotations

from pathlib import Path

from station.analysis import analyse_campaign
from station.campaign import CampaignError, CampaignResult, run_campaign
from station.config import Campaign, load_campaign
from station.progress import ProgressSink, QuietProgress
from station.store import RunData, list_runs, load_run
from station.target import Host, Target, TargetError, endpoint_from_settings, load_host
from station.target.local_sshd import LocalSshdError, new_local_sshd, serve_locally

__all__ = [
    "Campaign", "CampaignError", "CampaignResult", "RunData", "TargetError",
    "analyse_campaign", "cleanup_bench", "list_runs", "load_campaign", "load_run",
    "run_campaign_async", "write_campaign_report", "QuietProgress",
]


async def run_campaign_async(
    campaign: Campaign, out_dir: Path, progress: ProgressSink | None = None,
    config_path: Path | None = None, resume: bool = True,
) -> CampaignResult:
    """Run every (remaining) run of the campaign, then write the reports."""
    out_dir = Path(out_dir)
    result = await run_campaign(campaign, out_dir, progress or QuietProgress(), config_path, resume)
    if list_runs(out_dir):
        try:
            result.report_paths = write_campaign_report(out_dir)
        except OSError as exc:  # a full disk: the runs' data is safe, the report can be made later
            result.report_error = f"the report was not written ({exc.strerror or exc}): run `station report {out_dir}`"
    return result


def write_campaign_report(out_dir: Path) -> dict[str, Path]:
    from station.report import write_reports

    report, samples = analyse_campaign(Path(out_dir))
    return write_reports(report, samples, Path(out_dir))


async def cleanup_bench(campaign: Campaign) -> dict[str, dict[str, list[str]]]:
    """Stop every recorded process and unload every station module on each ssh or local
    target, and stop every recorded load on the load hosts: what a crashed station left
    behind. (A twin or VM target starts clean every time.)"""
    hosts: dict[str, Host] = {}
    local_sshds = []
    for name, settings in campaign.bench.named_targets().items():
        if settings.kind == "local":
            try:
                local_sshds.append(new_local_sshd())
                settings = serve_locally(settings, local_sshds[-1])
            except LocalSshdError as exc:
                for sshd in local_sshds:
                    sshd.stop()
                raise TargetError(f"local target: {exc}") from None
        if settings.kind == "ssh":
            hosts[name or "target"] = Target(endpoint_from_settings(settings), settings)
    hosts |= {name: load_host(name, lh) for name, lh in campaign.bench.load_hosts.items()}
    done, errors = {}, []
    try:
        for name, host in hosts.items():  # every host, even when one cannot be reached
            await host.activate(connect=False)  # cleanup connects, and retries a dropped link
            try:
                done[name] = await host.cleanup(within_s=20)
            except TargetError as exc:
                errors.append(str(exc))
    finally:
        for host in hosts.values():
            await host.deactivate()
        for sshd in local_sshds:
            sshd.stop()
    if errors:
        cleaned = f" (cleaned: {', '.join(done)})" if done else ""
        raise TargetError("; ".join(errors) + cleaned)
    return done
