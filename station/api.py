"""The public Python API: what the CLI, the notebooks and the tests call.

Its names are loaded on first use (PEP 562 ``__getattr__``): ``from station.api import X`` and
``api.X`` work as ever, and `station report` does not pay for the bench, SSH and VISA layers a
campaign run needs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from station.common.lazy_import import lazy_exports

if TYPE_CHECKING:
    from station.analysis import analyse_campaign
    from station.analysis.budgets import CheckResult
    from station.campaign.loop import CampaignError, CampaignResult
    from station.capture.scope_capture import (
        CaptureFailed,
        CaptureOptionError,
        CaptureSummary,
        capture_settings,
        capture_to_file,
        check_capture_output,
        read_capture_sidecar,
    )
    from station.common.progress import ProgressSink, QuietProgress
    from station.config import Campaign, load_campaign
    from station.importers import ImportInputError, ImportOptions, ImportResult
    from station.kinds.module.data import RunData, load_run
    from station.kinds.module.pairing import Pairing
    from station.report.manifest_schema import manifest_json_schema
    from station.report.model import (
        ReportSchemaError,
        report_json_schema,
        report_model,
        validate_report,
    )
    from station.store.manifest import Manifest, read_manifest
    from station.store.result_store import ResultStore, ResultStoreError
    from station.store.run_store import list_runs
    from station.target import Host, TargetError

__all__ = [
    "Campaign", "CampaignError", "CampaignResult", "ImportInputError", "ImportOptions",
    "ImportResult", "RunData",
    "TargetError", "analyse_campaign", "cleanup_bench", "import_results", "list_runs",
    "load_campaign", "load_run",
    "run_campaign_async", "write_campaign_report", "QuietProgress",
    "ResultStore", "ResultStoreError", "compare_campaigns", "open_results", "write_compare_report",
    "CaptureFailed", "CaptureOptionError", "CaptureSummary", "capture_settings", "capture_to_file",
    "check_capture_output", "read_capture_sidecar",
    "ReportSchemaError", "report_json_schema", "report_model", "validate_report",
    "Manifest", "manifest_json_schema", "read_manifest",
    "BudgetError", "CheckResult", "check_budgets",
]

#: Every name this module re-exports, by the module that defines it: imported when first asked for.
_LAZY = {
    "analyse_campaign": "station.analysis",
    "quantile_with_ci": "station.kinds.module.findings",
    "Pairing": "station.kinds.module.pairing", "pair_run": "station.kinds.module.pairing",
    "CampaignError": "station.campaign.loop", "CampaignResult": "station.campaign.loop",
    "run_campaign": "station.campaign.loop",
    "Campaign": "station.config", "load_campaign": "station.config",
    "ImportInputError": "station.importers", "ImportOptions": "station.importers",
    "ImportResult": "station.importers", "import_files": "station.importers",
    "ProgressSink": "station.common.progress", "QuietProgress": "station.common.progress",
    "ResultStore": "station.store.result_store", "ResultStoreError": "station.store.result_store",
    "RunData": "station.kinds.module.data", "load_run": "station.kinds.module.data",
    "list_runs": "station.store.run_store",
    "Host": "station.target", "Target": "station.target", "TargetError": "station.target",
    "endpoint_from_settings": "station.target", "load_host": "station.target",
    "LocalSshdError": "station.target.local_sshd", "new_local_sshd": "station.target.local_sshd",
    "serve_locally": "station.target.local_sshd",
    "CaptureFailed": "station.capture.scope_capture",
    "CaptureOptionError": "station.capture.scope_capture",
    "CaptureSummary": "station.capture.scope_capture",
    "capture_settings": "station.capture.scope_capture",
    "capture_to_file": "station.capture.scope_capture",
    "check_capture_output": "station.capture.scope_capture",
    "read_capture_sidecar": "station.capture.scope_capture",
    # report.json's schema (docs/report-schema.md; `station schema --report`)
    "ReportSchemaError": "station.report.model", "report_json_schema": "station.report.model",
    "report_model": "station.report.model", "validate_report": "station.report.model",
    # a run's manifest.json (docs/manifest-schema.md; `station schema --manifest`)
    "Manifest": "station.store.manifest", "read_manifest": "station.store.manifest",
    "manifest_json_schema": "station.report.manifest_schema",
    # budgets judged on a campaign's report (`station check`, docs/ci.md)
    "CheckResult": "station.analysis.budgets",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


async def run_campaign_async(
    campaign: Campaign, out_dir: Path, progress: ProgressSink | None = None,
    config_path: Path | None = None, resume: bool = True,
) -> CampaignResult:
    """Run every (remaining) run of the campaign, then write the reports."""
    from station.campaign.live_analysis import LiveAnalysis
    from station.campaign.live_analysis import wanted as live_wanted
    from station.campaign.loop import run_campaign
    from station.common.progress import QuietProgress
    from station.store.run_store import list_runs

    out_dir = Path(out_dir)
    progress = progress or QuietProgress()
    with LiveAnalysis(progress) as live:
        result = await run_campaign(campaign, out_dir, progress, config_path, resume,
                                    live=live if live_wanted(campaign) else None)
        measured = time.monotonic()
        if list_runs(out_dir):
            await _write_after_runs(result, out_dir, live)
            result.report_after_runs_s = time.monotonic() - measured
    return result


async def _write_after_runs(result: CampaignResult, out_dir: Path, live: Any) -> None:
    """The report, once the live analysis has kept the last runs (the others it kept as they
    were sealed); a report that cannot be written leaves the runs as they are."""
    from station.report.model import ReportSchemaError

    if result.live is not None:
        import station.report  # noqa: F401 - the writer's imports while the last run is analysed

        await live.finish()
    live.close()  # its memory back before the report's own workers start
    try:
        result.report_paths = write_campaign_report(out_dir)
    except OSError as exc:  # a full disk: the runs' data is safe, the report can be made later
        result.report_error = (
            f"the report was not written ({exc.strerror or exc}): run `station report "
            f"{out_dir}`"
        )
    # a report that breaks its own schema: the runs are safe all the same
    except ReportSchemaError as exc:
        result.report_error = (
            f"the report was not written ({exc}); the runs are kept: `station report {out_dir}`"
        )
    else:
        result.unmatched = unmatched_runs(out_dir)


async def check_bench(campaign: Campaign, progress: ProgressSink | None = None,
                      target_name: str | None = None, propose: bool = False) -> Any:
    """Walk the campaign's bench and say whether a campaign would run on it, or the first thing
    that would block it and its fix (a station.bench.check.BenchCheck; docs/bench-bring-up.md).
    Nothing is measured; whatever the walk loads or starts on the target is undone. `propose`:
    also the bench.scope block for the pulses a first look sees, with its capture ratio."""
    from station.bench.check import check_bench as walk
    from station.common.progress import QuietProgress

    return await walk(campaign, progress or QuietProgress(), target_name, propose)


async def build_modules(campaign: Campaign, progress: ProgressSink | None = None,
                        target_name: str | None = None) -> Any:
    """Build the campaign's mainline modules for the target's running kernel, on this station
    (module.kdir and cross_compile, else the station's own tree for that release) or on the
    target (module.build_on; station/target/module_build.py), check every file's vermagic
    against it, and upload them to bench.target.module_dir: a
    station.target.module_build.ModuleBuild. Raises station.bench.bench.BenchError (no tree,
    a failed build, modules for another kernel: nothing uploaded then)."""
    import dataclasses

    from station import kind_registry
    from station.bench.bench import Bench
    from station.common.progress import QuietProgress

    needs = kind_registry.kind(campaign.matrix.kind).needs
    if needs.modules is None or needs.module_build is None:
        raise ValueError(f"a {campaign.matrix.kind} campaign loads no module of the station's")
    bench = Bench(campaign, progress or QuietProgress(), target_name, instruments=False)
    try:
        await bench.activate()
        assert bench.wiring is not None
        settings = bench.wiring.target
        if settings.family != "mainline":
            raise ValueError(f"the target's family is {settings.family}: the station builds the "
                             "mainline modules; RTAI's are built with RTAI's tree "
                             "(target_modules/README.md)")
        stems = needs.modules(campaign, settings)
        plan = dataclasses.replace(needs.module_build(campaign), when="always")
        built = await bench.build_modules(settings, stems, plan)
        await bench._upload_modules(built, stems)
        return bench.module_build
    finally:
        await bench.deactivate()


__all__ += ["build_modules", "check_bench"]


def unmatched_runs(out_dir: Path) -> dict[str, str]:
    """Runs of a reported campaign whose scope pulses match none of the target's events: run id ->
    why."""
    import json

    path = Path(out_dir) / "report.json"
    if not path.exists():
        return {}
    report = json.loads(path.read_text())
    return {r["id"]: r["pairing"]["note"] for r in report.get("runs") or []
            if (r.get("pairing") or {}).get("unmatched")}


def write_campaign_report(out_dir: Path, deadline_ns: float | None = None) -> dict[str, Path]:
    """Analyse a campaign directory and write its report files into it (`deadline_ns`: see
    analyse_campaign)."""
    from station.analysis import analyse_campaign
    from station.analysis.collector import rare_collections

    def import_the_writer() -> None:  # while worker processes analyse the runs, if they do
        import station.report  # matplotlib, jinja2, the report's models: ~0.4 s

        station.report.prepare_writing()  # its model, pages and template: ~0.2 s more

    with rare_collections():  # millions of short-lived containers: see collector.py
        report, samples = analyse_campaign(Path(out_dir), deadline_ns=deadline_ns,
                                           meanwhile=import_the_writer)
        from station.report import write_reports

        return write_reports(report, samples, Path(out_dir))


def import_results(files: list[Path], out_dir: Path, options: ImportOptions | None = None,
                   report: bool = True) -> tuple[ImportResult, dict[str, Path]]:
    """Import raw dumps, cyclictest output and scope CSVs as runs of out_dir (docs/import.md),
    then write its report unless told not to; raises ImportInputError on input it cannot take."""
    from station.importers import ImportOptions, import_files

    result = import_files(files, Path(out_dir), options or ImportOptions())
    return result, write_campaign_report(out_dir) if report else {}


def open_results(campaign_dirs: Sequence[Path | str]) -> ResultStore:
    """One or many campaign directories as one dataset: ``open_results(dirs).relation("sw")`` is a
    DuckDB relation of every run's software latencies with the run's identity columns."""
    from station.store.result_store import ResultStore

    return ResultStore(campaign_dirs)


def compare_campaigns(campaign_dirs: Sequence[Path | str]) -> dict[str, Any]:
    """The comparison dictionary of `station compare` (docs/compare.md), the first directory
    being the baseline; raises ResultStoreError naming a directory or file it cannot read."""
    from station.compare.analysis import compare_campaigns as compare

    return compare(campaign_dirs)[0]


def write_compare_report(campaign_dirs: Sequence[Path | str], out_dir: Path) -> dict[str, Path]:
    """compare.html/.md/.json, compare.csv and the overlaid CCDFs into out_dir."""
    from station.analysis.collector import rare_collections
    from station.compare.analysis import compare_campaigns as compare
    from station.compare.outputs import write_compare_reports

    with rare_collections():
        result, samples = compare(campaign_dirs)
        return write_compare_reports(result, samples, Path(out_dir))


async def cleanup_bench(campaign: Campaign) -> dict[str, dict[str, Any]]:
    """Stop every recorded process and unload every station module on each ssh or local
    target, and stop every recorded load on the load hosts: what a crashed station left
    behind. (A twin or VM target starts clean every time.)"""
    from station.target import Target, TargetError, endpoint_from_settings, load_host
    from station.target.local_sshd import LocalSshdError, new_local_sshd, serve_locally

    hosts: dict[str, Host] = {}
    local_sshds = []
    places: dict[str, Any] = {}  # target name -> its labgrid PlaceCleanup, once reached
    done, errors = {}, []
    try:  # whatever fails on the way, what was started or acquired here is given back (finally)
        for name, settings in campaign.bench.named_targets().items():
            if settings.kind == "labgrid":
                from station.target.labgrid_place import PlaceCleanup

                cleanup = PlaceCleanup(settings.coordinator, settings.place, settings.ssh_resource)
                try:
                    settings = await cleanup.reach(settings)
                except TargetError as exc:  # the other targets are still cleaned
                    errors.append(str(exc))
                    continue
                places[name or "target"] = cleanup
            if settings.kind == "local":
                try:
                    local_sshds.append(new_local_sshd())
                    settings = serve_locally(settings, local_sshds[-1])
                except LocalSshdError as exc:
                    raise TargetError(f"local target: {exc}") from None
            if settings.kind == "ssh":
                hosts[name or "target"] = Target(endpoint_from_settings(settings), settings)
        hosts |= {name: load_host(name, lh) for name, lh in campaign.bench.load_hosts.items()}
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
        # after its target is clean: a released place is someone else's
        for name, place in places.items():
            try:
                state = await place.finish(clean=name in done)
            except TargetError as exc:
                errors.append(str(exc))
                continue
            if name in done:
                done[name]["labgrid_place"] = state
            else:
                errors.append(f"{name}: labgrid place {place.place} {state}")
    if errors:
        cleaned = f" (cleaned: {', '.join(done)})" if done else ""
        raise TargetError("; ".join(errors) + cleaned)
    return done


# --- one run, for notebooks (issue 12)
# -------------------------------------------------------------


def pair_events(run: RunData) -> Pairing | None:
    """Each scope pulse of a run matched to its software record (station/kinds/module/pairing.py):
    ``.pairs`` has acquisition, seq, hw_ns, sw_ns and diff_ns (HW − SW) per paired event. None when
    the run cannot be paired (a legacy stream without sequence numbers, no scope, no arrival
    times)."""
    from station.kinds.module.pairing import pair_run

    return pair_run(run.sw, run.hw, run.arrivals, int(run.period_ns or 0) or 1)


def warm_kernels() -> dict[str, str]:
    """Compile the station's numba kernels into numba's cache now, through the same entry points
    and with the same argument types as a report or a capture calls them (a signature that
    differed would be compiled again there): the set-up does it (scripts/bootstrap.sh), as pip
    compiles byte-code, so that a new user's first report does not spend seconds compiling in
    every worker. {kernel: "ready" or why its numpy path runs}."""
    import numpy as np

    from instruments import schmitt_kernel
    from station.kinds.module import clock_ratio, pairing, pairing_scores

    said: dict[str, str] = {}
    why = pairing_scores._compiled.available()
    if why is None:  # a block big enough for the compiled choice (MIN_COMPILED residuals)
        acqs, pulses, cands = 8, 16, -(-pairing_scores.MIN_COMPILED // (8 * 16)) + 1
        pairing_scores.block_choice(
            np.zeros((acqs, pulses)), np.tile(np.arange(pulses), (acqs, 1)),
            np.tile(np.arange(cands), (acqs, 1)), np.ones((acqs, cands), bool),
            np.zeros(cands + pulses), 0, pairing.MISSING, pairing.MAX_SPREAD_NS, cands // 2)
    said["pairing choice"] = why or "ready"
    why = pairing_scores._spreads_compiled.available()
    if why is None:  # a wide search big enough for the compiled spreads
        cands, pulses = -(-pairing_scores.MIN_COMPILED // 16) + 1, 16
        pairing_scores.spreads(np.zeros(pulses), np.arange(pulses), np.arange(cands),
                               np.zeros(cands + pulses), 0, pairing.MISSING, pairing.MAX_SPREAD_NS)
    said["pairing spreads"] = why or "ready"
    why = pairing_scores._agreement_compiled.available()
    if why is None:  # acquisitions enough for the compiled significance count
        acqs, pulses = -(-pairing_scores.MIN_COMPILED // 16), 16
        begin = np.arange(acqs, dtype=np.int64) * pulses
        pairing_scores.agreement(np.zeros(acqs * pulses), np.tile(np.arange(pulses), acqs),
                                 begin, begin + pulses, np.zeros(acqs, np.int64),
                                 np.zeros(pulses), 0, pairing.MISSING, pairing.AGREE_NS)
    said["pairing agreement"] = why or "ready"
    why = clock_ratio._compiled.available()
    if why is None:
        n = clock_ratio.MIN_COMPILED
        times = np.arange(n, dtype=np.float64) * 1e5
        clock_ratio.clock_ratios(times, times, np.arange(n) // 50)
    said["clock ratio"] = why or "ready"
    why = schmitt_kernel.available()
    if why is None:  # every code type a scope's waveform arrives in
        for kind in (np.int8, np.uint8, np.int16, np.uint16):
            codes = np.tile(np.array([0, 0, 100, 100], kind), 64)
            schmitt_kernel.transitions(codes, kind(60), kind(40), kind(50), kind(50))
    said["pulse extraction"] = why or "ready"
    return said


def measuring_time(campaign: Campaign) -> tuple[float, float]:
    """(expected, longest) seconds one run of the campaign measures: its samples at its period
    or its duration, whichever ends it later; at most max_duration. Set-up, teardown and
    transfer are not in it."""
    m = campaign.matrix
    expected = max((m.samples or 0) * m.period, m.duration or 0.0)
    return min(expected or m.max_duration, m.max_duration), m.max_duration


__all__ += ["measuring_time"]


def percentile_intervals(
    values_ns: Any, *, independent: bool = False
) -> dict[str, tuple[float, float | None, float | None]]:
    """p50, p99, p99.99 and p99.999 of a sample in ns as (estimate, lo, hi): the order statistic and
    its 95 % interval (None: no bound). The values in time order: the interval holds on dependent
    events (batch means and effective sample sizes, docs/statistics.md), and is None where the
    sample is too short for its own dependence; `independent=True` gives the distribution-free
    interval for independent events."""
    from station.kinds.module.findings import quantile_with_ci

    return quantile_with_ci(values_ns, independent=independent)


__all__ += ["pair_events", "percentile_intervals"]


class BudgetError(ValueError):
    """`station check` cannot judge: no report, or a budget that does not parse (said where)."""


def check_budgets(results: str | Path, budgets: Sequence[str] | None = None) -> CheckResult:
    """The budgets of a campaign's results judged on its report.json (docs/ci.md): `budgets`
    (lines as `station check --budget` takes them) instead of the campaign file's, when given.
    Raises BudgetError when there is no report or no budget, or one does not parse."""
    import json

    from station.analysis.budgets import check
    from station.config import ConfigError, load_campaign
    from station.config.budgets import parse_budget

    results = Path(results)
    try:
        report = json.loads((results / "report.json").read_text())
    except FileNotFoundError:
        raise BudgetError(f"{results}: no report.json (run `station report {results}` "
                          "first)") from None
    except (OSError, ValueError) as exc:
        raise BudgetError(f"{results / 'report.json'}: cannot be read: {exc}") from None
    name = str((report.get("campaign") or {}).get("name") or results.name)
    parsed = []
    if budgets:
        for text in budgets:
            try:
                parsed.append(parse_budget(text))
            except ValueError as exc:
                raise BudgetError(f"--budget {text!r}: {exc}") from None
    campaign = None
    if (results / "campaign.yaml").exists():
        try:  # its files (keys, modules) are the bench's, not needed to judge: a CI job's copy
            campaign = load_campaign(results / "campaign.yaml", check_files=False)
        except ConfigError as exc:
            if not budgets:
                raise BudgetError(str(exc)) from None
    if not budgets:
        if campaign is None:
            raise BudgetError(f"{results}: no campaign.yaml to read budgets from (give "
                              "--budget 'p99.99 <= 50us')")
        parsed = [spec.parsed() for spec in campaign.budgets]
        name = campaign.name
    if not parsed:
        raise BudgetError(f"{results / 'campaign.yaml'}: budgets: the campaign states none "
                          "(give --budget 'p99.99 <= 50us')")
    return check(report, parsed, name, planned_runs(campaign) if campaign else None)


def planned_runs(campaign: Campaign) -> list[dict[str, Any]]:
    """The runs a campaign's matrix names, as budgets select them (check_budgets); with a stop
    rule (matrix.until: fewer rounds than its repetitions may answer it), one per condition."""
    from station import kind_registry
    from station.config import expand_runs

    kind = kind_registry.kind(campaign.matrix.kind)
    out = []
    for spec in expand_runs(campaign, as_written=True):
        if campaign.matrix.until is not None and spec.repetition:
            continue
        plan: dict[str, Any] = {"id": None if campaign.matrix.until is not None else spec.id,
                                "target": spec.target, "load": spec.load}
        plan |= {key: getattr(spec, attr) for key, attr in kind.budget_selectors}
        out.append(plan)
    return out
