"""`station`: a thin command-line shell over the Python API.

Each command imports what it uses when it runs (station.api loads its names on first use too):
`station report` does not load the bench, SSH and VISA layers, nor the campaign schema."""

from __future__ import annotations

import enum
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import typer
from typer.core import TyperGroup

from instruments.dialects import DIALECTS
from station import api
from station.common import units
from station.common.cli_help import FLAG, flag_help
from station.config.types import Interface as InterfaceName
from station.config.types import Variant as VariantName

if TYPE_CHECKING:
    import asyncio

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="irq-station: interrupt latency, measured twice.",
)


def _print_version(value: bool) -> None:
    if value:
        from station.store.run_store import station_version

        typer.echo(f"irq-station {station_version()}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print the station's version and exit",
                                       metavar=FLAG)) -> None:
    """irq-station: interrupt latency, measured twice."""

ScopeDialect = enum.Enum("ScopeDialect", {name: name for name in sorted(DIALECTS)}, type=str)
# choices the help lists (typer shows an Enum's values), each the value the API takes
ImportFormat = enum.Enum("ImportFormat", {n: n for n in ("auto", "legacy", "v1", "cyclictest",
                                                         "scope")}, type=str)
# the module kind's interfaces and variants, as the campaign schema names them
Interface = enum.Enum("Interface", {n: n for n in get_args(InterfaceName)}, type=str)
Variant = enum.Enum("Variant", {v.replace("-", "_"): v for v in get_args(VariantName)}, type=str)
Kernel = enum.Enum("Kernel", {n: n for n in ("regular", "rt")}, type=str)
Arch = enum.Enum("Arch", {n: n for n in ("amd64", "arm64")}, type=str)
# the twin scope's buses (instruments/sim/bus.py BUSES, kept in step by tests/test_cli_help.py)
TwinBus = enum.Enum("TwinBus", {n: n for n in ("loopback", "model", "gpib", "usb", "lan",
                                               "gigabit")}, type=str)


EXIT_SCOPE_ERROR = 1
EXIT_USER_ERROR = 2
EXIT_FAILED_RUNS = 3
EXIT_UNMATCHED = 4  # every run completed, but a scope's pulses match none of its target's events
EXIT_NOT_READY = 5  # `station bench check`: a campaign would not run on this bench
EXIT_INTERRUPTED = 130
EXIT_BUDGET_MISSED = 1  # `station check`, `station run --check` (docs/ci.md; 3: undecided)


def _fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _install_signal_handlers(loop: asyncio.AbstractEventLoop, task: asyncio.Task) -> None:
    """The first Ctrl-C or SIGTERM cancels the campaign, which tears the run down; later
    ones only say so. (asyncio's default would abort on the second Ctrl-C, mid-teardown,
    leaving a module loaded.)"""
    seen = 0

    def on_signal() -> None:
        nonlocal seen
        seen += 1
        if seen == 1:
            task.cancel()
        else:
            typer.secho("still cleaning up the target — please wait", fg=typer.colors.YELLOW,
                        err=True)

    # SIGHUP too: a closed terminal or a dropped SSH session to the station must not skip teardown
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal)


@app.command()
def run(
    config: Path = typer.Argument(..., help="campaign YAML file"),
    out: Path = typer.Option(..., "--out", "-o", help="campaign output directory"),
    fresh: bool = typer.Option(False, "--fresh",
                               help="re-run every run, not only the incomplete ones", metavar=FLAG),
    check: bool = typer.Option(False, "--check", metavar=FLAG,
                               help="end with the campaign's budgets judged (`station check`): "
                               "check.json and check-junit.xml in --out, exit 1 when one is "
                               "missed, 3 when one is undecided"),
) -> None:
    """Run a campaign: every run of its matrix, then the report."""
    import asyncio

    from station.config import ConfigError, load_campaign

    try:
        campaign = load_campaign(config)
    except ConfigError as exc:
        _fail(str(exc))
    if check and not campaign.budgets:
        _fail(f"--check: {config} states no budgets (budgets: 'p99.99 <= 50us', docs/ci.md)")
    from station.campaign.terminal import TerminalProgress

    async def main() -> api.CampaignResult:
        _install_signal_handlers(asyncio.get_running_loop(), asyncio.current_task())
        with TerminalProgress() as progress:
            return await api.run_campaign_async(campaign, out, progress, config_path=config,
                                                resume=not fresh)

    try:
        result = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.secho(
            "interrupted: the run was torn down (any problem doing so is printed above); data "
            f"streamed so far is in {out}/runs (run the same command again to resume)",
            fg=typer.colors.YELLOW,
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except api.CampaignError as exc:
        _fail(str(exc))
    for path in ("report.html", "report.md", "report.json"):
        if path in result.report_paths:
            typer.echo(f"wrote {result.report_paths[path]}")
    also = f"; {result.report_error}" if result.report_error else ""
    verdict = None
    if check and "report.json" in result.report_paths and not result.report_error:
        verdict = _check_and_say(out, None, out / "check-junit.xml", out / "check.json")
    elif check:  # a report left from an earlier session is not this campaign's: not judged
        typer.secho("budgets: not judged: this session wrote no report", fg=typer.colors.YELLOW,
                    bold=True)
    problem: tuple[str, int] | None = None
    failed = [f"{o.run_id} ({o.status})" for o in result.outcomes if o.status != "complete"]
    failed += [f"target {name} unavailable ({why})" for name, why in result.unavailable.items()]
    if result.stopped is not None:
        problem = (f"campaign stopped: {result.stopped} (data so far is in {out}; run the same "
                   f"command again to resume){also}", EXIT_FAILED_RUNS)
    elif result.report_error:
        problem = (result.report_error, EXIT_FAILED_RUNS)
    elif failed:
        problem = ("some runs did not complete: " + ", ".join(failed), EXIT_FAILED_RUNS)
    elif result.unmatched:
        problem = ("the hardware side could not be matched to the software side: "
                   + "; ".join(f"{run}: {why}" for run, why in result.unmatched.items()),
                   EXIT_UNMATCHED)
    if problem is not None and verdict == EXIT_BUDGET_MISSED:
        # a budget missed is said by its own status whatever else went wrong (docs/ci.md)
        typer.secho(f"error: {problem[0]}", fg=typer.colors.RED, err=True)
        raise typer.Exit(EXIT_BUDGET_MISSED)
    if problem is not None:
        _fail(*problem)
    if verdict:
        raise typer.Exit(verdict)


def _check_and_say(results: Path, budgets: list[str] | None, junit: Path | None,
                   as_json: Path | None) -> int:
    """The budgets judged, each said on a line, the files written; the exit status (docs/ci.md)."""
    import json

    from station.report.junit import write_junit

    try:
        result = api.check_budgets(results, budgets)
    except api.BudgetError as exc:
        _fail(str(exc))
    colours = {"met": typer.colors.GREEN, "missed": typer.colors.RED,
               "undecided": typer.colors.YELLOW}
    for v in result.verdicts:
        typer.secho(f"{v.verdict.upper():9} {v.budget}", fg=colours[v.verdict])
        for j in v.judged:
            typer.echo(f"          {j.label}: {j.text}: {j.verdict}")
        if not v.judged:
            typer.echo("          no run of the campaign is one it applies to")
    if junit is not None:
        write_junit(result, junit)
        typer.echo(f"wrote {junit}")
    if as_json is not None:
        as_json.parent.mkdir(parents=True, exist_ok=True)
        as_json.write_text(json.dumps(result.as_json(), indent=1, default=float) + "\n")
        typer.echo(f"wrote {as_json}")
    typer.secho(f"budgets: {result.verdict}", fg=colours[result.verdict], bold=True)
    return result.exit_status


@app.command("check")
def check_command(
    results: Path = typer.Argument(..., help="a campaign's results directory (its report.json)"),
    budget: list[str] = typer.Option(
        None, "--budget", "-b", metavar="<budget>",
        help="a budget, e.g. 'p99.99 <= 50us' or 'max <= 120us for load=hackbench' (repeat it); "
        "instead of the campaign file's budgets"),
    junit: Path = typer.Option(None, "--junit", help="write the verdicts as JUnit XML here"),
    as_json: Path = typer.Option(None, "--json", help="write the verdicts as JSON here"),
) -> None:
    """Judge latency budgets on a campaign's report, each with its interval: exit 0 when every
    budget is met, 1 when one is missed, 3 when one is undecided (docs/ci.md)."""
    raise typer.Exit(_check_and_say(results, budget or None, junit, as_json))


@app.command()
def monitor(
    schedule: Path = typer.Argument(..., help="monitoring schedule YAML file (docs/lab.md)"),
    cycles: int = typer.Option(None, "--cycles", min=1,
                               help="stop after this many cycles in all (default: the "
                               "schedule's cycles, else run until stopped)"),
) -> None:
    """Run campaigns on a schedule into one lab store, with an overview page per target."""
    import asyncio

    from station.campaign.terminal import TerminalProgress
    from station.config import ConfigError
    from station.monitor.runner import Monitor

    async def main():  # noqa: ANN202 - a MonitorResult
        _install_signal_handlers(asyncio.get_running_loop(), asyncio.current_task())
        with TerminalProgress() as progress:
            return await Monitor(schedule, progress).run(cycles)

    try:
        result = asyncio.run(main())
    except ConfigError as exc:
        _fail(str(exc))
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.secho("interrupted: the running window was torn down; start the monitor again to "
                    "resume its schedule",
                    fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    for page in result.pages or []:
        typer.echo(f"wrote {page}")
    if result.stopped is not None:
        _fail(f"monitor stopped: {result.stopped}", EXIT_FAILED_RUNS)


@app.command()
def validate(config: Path = typer.Argument(..., help="campaign YAML file")) -> None:
    """Check a campaign file and list the runs it would make."""
    from station.config import ConfigError, design_notes, expand_runs, load_campaign, order_seed

    try:
        campaign = load_campaign(config)
    except ConfigError as exc:
        _fail(str(exc))

    runs = expand_runs(campaign)
    typer.echo(f"{config}: valid — {len(runs)} runs: " + ", ".join(r.id for r in runs))
    order = campaign.matrix.order
    typer.echo(
        f"order: {order}" + (f" (seed {order_seed(campaign)})" if order == "interleaved" else "")
    )
    for note in design_notes(campaign):
        typer.echo(f"design: {note}")
    about, most = api.measuring_time(campaign)
    typer.echo(f"measuring time: about {_human(about * len(runs))} ({_human(about)} a run), at "
               f"most {_human(most * len(runs))} (max_duration), plus each run's set-up and "
               "teardown")


@app.command("warm-up")
def warm_up() -> None:
    """Compile the station's numba kernels into numba's cache now (the README's set-up does; an
    installed wheel's first report would otherwise compile them in every worker)."""
    for kernel, state in api.warm_kernels().items():
        typer.echo(f"{kernel}: {state}")


def _human(seconds: float) -> str:
    """A duration as a person reads it: 2 h 10 min, 3 min 20 s, 45 s."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{seconds:.3g} s"


@app.command()
def schema(
    report: bool = typer.Option(False, "--report", metavar=FLAG,
                                help="report.json's schema instead (docs/report-schema.md), with "
                                "every registered kind's part"),
    markdown: bool = typer.Option(False, "--markdown", metavar=FLAG,
                                  help="with --report: its field tables in Markdown, as "
                                  "docs/report-schema.md shows them"),
    manifest: bool = typer.Option(False, "--manifest", metavar=FLAG,
                                  help="a run's manifest.json's schema instead "
                                       "(docs/manifest-schema.md)"),
) -> None:
    """Print the campaign file's JSON Schema (or, with --report, report.json's; with --manifest, a
    run's manifest.json's)."""
    import json

    if markdown and not report:
        raise typer.BadParameter("--markdown goes with --report", param_hint="--markdown")
    if manifest and report:
        raise typer.BadParameter("--manifest or --report, not both", param_hint="--manifest")
    if manifest:
        typer.echo(json.dumps(api.manifest_json_schema(), indent=2))
        return
    if markdown:
        from station.report.schema_doc import markdown as tables

        typer.echo(tables(), nl=False)
        return
    if report:
        typer.echo(json.dumps(api.report_json_schema(), indent=2))
        return
    from station.config import json_schema

    typer.echo(json_schema())


@app.command()
def report(
    out: Path = typer.Argument(..., help="campaign output directory"),
    deadline: str = typer.Option(None, metavar="<duration>",
                                 help="a latency to meet, e.g. 125us: the report gives the "
                                 "probability per event of exceeding it (default: the campaign "
                                 "file's report.deadline)"),
) -> None:
    """(Re)generate report.html/.md/.json and stats.csv from a campaign directory."""
    if not (out / "runs").is_dir():
        from station.store.result_store import not_a_campaign

        _fail(not_a_campaign(out))
    deadline_ns = None
    if deadline is not None:
        try:
            deadline_ns = float(round(units.parse_duration(deadline, require_unit=True) * 1e9))
        except ValueError as exc:
            _fail(f"--deadline: {exc}")
        if not deadline_ns > 0:
            _fail(f"--deadline: must be above 0, got {deadline}")
    try:
        written = api.write_campaign_report(out, deadline_ns=deadline_ns)
    except api.ReportSchemaError as exc:  # the station's own fault: name the field, keep the runs
        _fail(f"{out}: the report was not written: {exc}")
    for name, path in written.items():
        if not name.startswith("figures/"):
            typer.echo(f"wrote {path}")


@app.command("import")
def import_(
    files: list[Path] = typer.Argument(..., help="FIFO dumps (legacy/v1), cyclictest output, scope "
                                       "captures (CSV or Parquet): one run each"),
    out: Path = typer.Option(..., "--out",
                             help="results directory: new, empty, or an earlier import's"),
    fmt: ImportFormat = typer.Option("auto", "--format",
                                     help="how to read every FILE (auto: by its content)"),
    interface: Interface = typer.Option(None, help="default: a v1 stream's flags, else unknown"),
    variant: Variant = typer.Option(None, help="default: a v1 stream's flags, else unknown"),
    load: str = typer.Option("unknown", help="the load the data was measured under",
                             metavar="<name>"),
    period: str = typer.Option(None, help="the RT task's period, e.g. 100us", metavar="<duration>"),
    repetition: int = typer.Option(0, help="repetition index"),
    target: str = typer.Option(None, help="target name (a cyclictest table's row)",
                               metavar="<name>"),
    name: str = typer.Option(None, help="campaign name (default: kept, or the directory's name)",
                             metavar="<name>"),
    run_id: list[str] = typer.Option(None, "--run-id", metavar="<id>",
                                     help="one per FILE, in order (default: the file names); "
                                          "repeat the option"),
    scope: Path = typer.Option(None,
                               help="scope capture (CSV or Parquet) of the same run as the one "
                                    "dump given"),
    no_report: bool = typer.Option(False, "--no-report", help="do not write the report",
                                   metavar=FLAG),
) -> None:
    """Turn raw data measured without the station into a results directory (docs/import.md)."""
    from station.common.units import parse_duration
    from station.store.run_store import StoreError

    try:
        period_ns = None if period is None else round(parse_duration(period,
                                                                     require_unit=True) * 1e9)
    except ValueError as exc:
        _fail(f"--period: {exc}")
    options = api.ImportOptions(format=fmt.value, interface=interface and interface.value,
                                variant=variant and variant.value, load=load, period_ns=period_ns,
                                repetition=repetition, target=target, name=name,
                                run_ids=tuple(run_id or ()),
                                scope=scope)
    try:
        result, paths = api.import_results(files, out, options, report=not no_report)
    except api.ImportInputError as exc:
        _fail(str(exc))
    # a full disk, say: the run being written is sealed "failed"
    except (StoreError, OSError) as exc:
        _fail(f"cannot write {out}: {exc}")
    for run in result.runs:
        typer.echo(f"{out}/runs/{run.run_id}: {run.what}")
        for warning in run.warnings:
            typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    for rel, path in paths.items():
        if not rel.startswith("figures/"):
            typer.echo(f"wrote {path}")


@app.command()
def compare(
    dirs: list[Path] = typer.Argument(
        ..., help="campaign output directories; the first is the baseline"
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="where compare.html/.md/.json and compare.csv go"
    ),
) -> None:
    """Compare campaigns: statistics, significant differences and tails side by side."""
    try:
        paths = api.write_compare_report(dirs, out)
    except api.ResultStoreError as exc:
        _fail(str(exc))
    for name, path in paths.items():
        if not name.startswith("figures/"):
            typer.echo(f"wrote {path}")


@app.command()
def cleanup(config: Path = typer.Argument(...,
                                          help="campaign YAML file naming the target")) -> None:
    """Unload every station module and stop every recorded process on the target and load hosts."""
    import asyncio
    import json

    from station.config import ConfigError, load_campaign

    try:
        campaign = load_campaign(config)
    except ConfigError as exc:
        _fail(str(exc))
    kinds = {t.kind for t in campaign.bench.named_targets().values()}
    if kinds <= {"twin", "vm"} and not campaign.bench.load_hosts:
        _fail(f"a campaign's {' and '.join(sorted(kinds))} starts clean every time; cleanup is for "
              "ssh and local targets and load hosts")
    try:
        done = asyncio.run(api.cleanup_bench(campaign))
    except api.TargetError as exc:
        _fail(str(exc))
    typer.echo(json.dumps(done))


@app.command()
def twin(
    state_dir: Path = typer.Option(Path("twin-state"),
                                   help="where twin.json, keys and known_hosts go"),
    preset: str = typer.Option("seed-2015", help="event model preset", metavar="<preset>"),
    seed: int = typer.Option(2015, help="random seed of the event model"),
    truth_dir: Path = typer.Option(None, help="write each module load's injected events here"),
    dialect: ScopeDialect = typer.Option("tektronix_tds", help="the scope model the twin plays"),
    bus: TwinBus = typer.Option("loopback",
                                help="how the scope's replies reach the host: loopback (no delay), "
                                "model (the model's own interface: GPIB, LAN, gigabit), or a named "
                                "bus"),
) -> None:
    """Run the twin standalone (SSH target + SCPI scope) until Ctrl-C."""
    import asyncio

    from station.twin.runner import Twin, serve_forever

    tw = Twin(state_dir=state_dir, preset=preset, seed=seed, truth_dir=truth_dir,
              scope_options={"dialect": dialect.value, "bus": bus.value})

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        task = asyncio.create_task(serve_forever(tw, stop))
        while tw.endpoints is None and not task.done():
            await asyncio.sleep(0.05)
        if tw.endpoints is not None:
            e = tw.endpoints
            print(
                f"twin ready: ssh -p {e.ssh_port} -i {e.identity_file} -o "
                f"UserKnownHostsFile={e.known_hosts} root@127.0.0.1\n  scope: {e.scope_resource} "
                f"({dialect}, bus {bus})\n  endpoints: {state_dir / 'twin.json'}",
                flush=True,
            )
        await task

    asyncio.run(main())


class _ScopeGroup(TyperGroup):
    """`station scope RESOURCE …` (what `station scope` was before it had subcommands) is
    `station scope check RESOURCE …`: a first argument that names no subcommand goes to check."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["check", *args]
        return super().parse_args(ctx, args)


bench_app = typer.Typer(no_args_is_help=True,
                        help="A campaign's bench before its campaign: walk it (check).")
app.add_typer(bench_app, name="bench")


@bench_app.command("check")
def bench_check(
    config: Path = typer.Argument(..., help="campaign YAML file"),
    target: str = typer.Option(None, help="which of bench.targets (default: the first)",
                               metavar="NAME"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON", metavar=FLAG),
    propose: bool = typer.Option(False, "--propose", metavar=FLAG,
                                 help="also propose bench.scope for the pulses a first look sees, "
                                 "with the capture ratio to expect (timed on the scope)"),
    apply: Path = typer.Option(None, "--apply", metavar="COPY.yaml",
                               help="write the campaign with the proposed bench.scope to this "
                               "new file (implies --propose)"),
) -> None:
    """Walk the bench as an engineer would (the target, sudo, the kernel, the module files, one
    second of the measurement, the scope's pulses) and stop at the first thing that would block
    a campaign, naming it and its fix. Exit 0: a campaign would run; 5: not ready."""
    import asyncio
    import json

    from station.campaign.terminal import TerminalProgress
    from station.config import ConfigError, load_campaign

    try:
        campaign = load_campaign(config)
    except ConfigError as exc:
        _fail(str(exc))
    names = campaign.bench.named_targets()
    if target is not None and target not in names:
        _fail(f"no target {target!r} in bench.targets: {', '.join(str(n) for n in names)}")
    if apply is not None and apply.exists():
        _fail(f"{apply} exists: --apply writes a new file, never over one")
    result = asyncio.run(api.check_bench(campaign, None if as_json else TerminalProgress(),
                                         target, propose or apply is not None))
    typer.echo(json.dumps(result.as_dict(), indent=2) if as_json else result.text())
    if apply is not None and result.proposal is not None:
        from station.config.edit import replace_block

        ratio = f"{100 * result.proposal['capture_ratio']:.2g} %"
        try:
            apply.write_text(replace_block(config.read_text(), ("bench", "scope"),
                                           result.proposal["scope"],
                                           "proposed by station bench check: capture ratio ≈ "
                                           f"{ratio}", str(config)))
        except ConfigError as exc:
            _fail(f"{apply} not written: {exc}")
        try:  # what is written must be a campaign the station runs
            load_campaign(apply)
        except ConfigError as exc:
            apply.unlink()
            _fail(f"{apply} not written: the proposed block does not validate: {exc}")
        typer.echo(f"wrote {apply}", err=as_json)
    if not result.ready:
        raise typer.Exit(EXIT_NOT_READY)


modules_app = typer.Typer(no_args_is_help=True,
                          help="The target's kernel modules: build them for its kernel (build).")
app.add_typer(modules_app, name="modules")


@modules_app.command("build")
def modules_build(
    config: Path = typer.Argument(..., help="campaign YAML file"),
    target: str = typer.Option(None, help="which of bench.targets (default: the first)",
                               metavar="NAME"),
) -> None:
    """Build the mainline modules on this station for the target's running kernel (module.kdir,
    else this station's headers for its release), check each file's vermagic against `uname -r`
    and upload them to bench.target.module_dir; print what was built, from which sources."""
    import asyncio
    import json

    from station.bench.bench import BenchError
    from station.campaign.terminal import TerminalProgress
    from station.config import ConfigError, load_campaign

    try:
        campaign = load_campaign(config)
    except ConfigError as exc:
        _fail(str(exc))
    try:
        record = asyncio.run(api.build_modules(campaign, TerminalProgress(), target))
    except (BenchError, ValueError) as exc:
        _fail(str(exc))
    typer.echo(json.dumps(record.as_dict(), indent=2))


scope_app = typer.Typer(cls=_ScopeGroup, no_args_is_help=True,
                        help="A scope on its own: identify it (check), capture pulses to a file "
                             "(capture).")
app.add_typer(scope_app, name="scope")

DIALECT_HELP = ("command set: tektronix_tds (TDS 400/500/600), tektronix_mso (MSO 4/5/6, port "
                "4000), keysight_infiniivision (2000/3000/4000 X, port 5025)")


@scope_app.command("check")
def scope_check(
    resource: str = typer.Argument(..., help="VISA resource, e.g. TCPIP::10.0.0.5::4000::SOCKET",
                                   metavar="RESOURCE"),
    dialect: ScopeDialect = typer.Option("tektronix_tds", help=DIALECT_HELP),
    timeout: float = typer.Option(5.0, help="seconds"),
) -> None:
    """Identify a scope and report its error queue: a quick bench check (also
    `station scope RESOURCE`)."""
    from instruments.scope import ScopeError, open_scope

    try:
        with open_scope(resource, dialect=dialect.value, timeout_s=timeout) as s:
            typer.echo(s.identify())
            s.check_errors()
    except ScopeError as exc:  # the instrument's error class, as `scope capture` and `run` use it
        _fail(str(exc), EXIT_SCOPE_ERROR)


CaptureMode = enum.Enum("CaptureMode", {name: name for name in ("waveform", "segmented",
                                                                "measurement")}, type=str)


@scope_app.command("capture")
def scope_capture(
    resource: str = typer.Option(..., "--resource",
                                 help="VISA resource, e.g. TCPIP::10.0.0.5::4000::SOCKET",
                                 metavar="<resource>"),
    dialect: ScopeDialect = typer.Option("tektronix_tds", help=DIALECT_HELP),
    channel: int = typer.Option(None, help="the channel probed, which triggers (1-4; default 1)"),
    mode: CaptureMode = typer.Option("waveform",
                                     help="waveform: single long records, every pulse in each; "
                                     "segmented: FastFrame / segmented memory, one pulse a frame "
                                     "(tektronix_mso, keysight_infiniivision); measurement: the "
                                     "scope's own pulse-width measurement, one row per "
                                     "acquisition, no waveform transfer"),
    acquisitions: int = typer.Option(..., "--acquisitions", "-n", min=1,
                                     help="how many acquisitions"),
    out: Path = typer.Option(..., "--out", "-o",
                             help="FILE.csv or FILE.parquet, one row per pulse; the sidecar "
                             "FILE.json goes beside it"),
    volts_per_div: str = typer.Option(None, help="vertical scale, e.g. 1V (default 1V)",
                                      metavar="<voltage>"),
    position_div: float = typer.Option(None,
                                       help="trace position in divisions, -5..5 (default -3)"),
    time_per_div: str = typer.Option(None, metavar="<duration>",
                                     help="horizontal scale, e.g. 250us; a record spans 10 "
                                     "divisions (default 500us)"),
    record_length: int = typer.Option(None, help="points per record, per frame when segmented "
                                      "(default 120000; 30000 on a TDS, what one without Option 1M "
                                      "takes)"),
    trigger_level: str = typer.Option(None, help="e.g. 1.5V (default 1.5V)", metavar="<voltage>"),
    trigger_position_pct: float = typer.Option(None, help="share of the record before the trigger, "
                                               "0..100 (default 10)"),
    threshold: str = typer.Option(None, metavar="<voltage|auto>",
                                  help="pulse threshold, e.g. 1.65V, or auto: midway between the "
                                  "record's levels (default auto)"),
    segments: int = typer.Option(None,
                                 help="frames per acquisition, --mode segmented (default 1000)"),
    cross_check_every: int = typer.Option(None, help="--mode measurement: transfer every Nth "
                                          "acquisition's record too (from the first) and write the "
                                          "host's widths of the same pulses beside the scope's "
                                          "(default 0: never)"),
    timeout: str = typer.Option(None, metavar="<duration>",
                                help="VISA timeout and how long an acquisition waits for its "
                                "triggers, e.g. 10s (default 10s)"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="replace FILE and its sidecar if they exist",
                                   metavar=FLAG),
) -> None:
    """Take acquisitions and write every pulse (width, start, 10-90 % rise time) to CSV or Parquet
    (docs/scope-capture.md); `station import FILE` makes it a results directory. --mode measurement
    writes the scope's own width measurement of each acquisition instead."""
    from instruments.scope import ScopeError
    from station.store.run_store import StoreError

    try:
        settings = api.capture_settings(
            resource, dialect.value, mode.value, require_units=True, timeout=timeout,
            channel=channel,
            volts_per_div=volts_per_div, position_div=position_div, time_per_div=time_per_div,
            record_length=record_length, trigger_level=trigger_level,
            trigger_position_pct=trigger_position_pct,
            threshold=threshold, segments=segments, cross_check_every=cross_check_every)
        api.check_capture_output(out, overwrite)
    except api.CaptureOptionError as exc:
        _fail(str(exc))

    shown = False  # a progress line (on a terminal) is on stderr

    def progress(summary: api.CaptureSummary, got: object) -> None:
        nonlocal shown
        if sys.stderr.isatty():
            typer.echo(f"\racquisition {summary.acquisitions}/{summary.acquisitions_requested}: "
                       f"{summary.pulses} pulses", err=True, nl=False)
            shown = True

    def end_progress() -> None:
        if shown:
            typer.echo("", err=True)

    try:
        summary = api.capture_to_file(settings, out, acquisitions, overwrite=overwrite,
                                      on_acquisition=progress)
    except api.CaptureFailed as exc:
        end_progress()
        s = exc.summary
        kept = (f"the measurements of {s.acquisitions} acquisitions" if s.mode == "measurement"
                else f"{s.pulses} pulses of {s.acquisitions} acquisitions")
        _fail(f"{exc} (kept {kept} in {s.path}; sidecar {s.sidecar})", EXIT_SCOPE_ERROR)
    except ScopeError as exc:  # when the scope is opened: nothing written
        _fail(str(exc), EXIT_SCOPE_ERROR)
    except api.CaptureOptionError as exc:
        _fail(str(exc))
    except StoreError as exc:  # the file cannot be written (a full disk): what is in it stays
        end_progress()
        _fail(str(exc), EXIT_SCOPE_ERROR)
    except KeyboardInterrupt:
        end_progress()
        kept = (f": the rows captured so far are in {out} (sidecar {out.with_suffix('.json')})"
                if out.with_suffix(".json").exists() else " before the capture began: nothing "
                                                          "written")
        typer.secho(f"interrupted{kept}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    end_progress()
    if summary.measurement is not None:
        m = summary.measurement
        checked = "" if not m["cross_checked"] else (
            f", {m['cross_checked']} cross-checked on the host (largest difference "
            f"{m['largest_difference_s'] * 1e9:.3g} ns)")
        typer.echo(f"wrote {summary.path}: {summary.acquisitions} acquisitions, {m['valid']} with "
                   f"a measurement of {summary.pulses} pulses{checked}")
    else:
        resolved = "" if not summary.pulses else f", rise time resolved for {summary.resolved_rise}"
        typer.echo(f"wrote {summary.path}: {summary.acquisitions} acquisitions, {summary.pulses} "
                   f"pulses{resolved}")
    typer.echo(f"wrote {summary.sidecar}")


vm_app = typer.Typer(no_args_is_help=True,
                     help="A real-kernel target: Debian's kernel in QEMU with our modules.")
app.add_typer(vm_app, name="vm")


# a Kernel
KERNEL_OPTION = typer.Option("regular", help="regular: Debian's kernel; rt: its PREEMPT_RT build")
# an Arch
ARCH_OPTION = typer.Option("amd64", help="the guest's architecture: amd64, or arm64 (QEMU's virt "
                           "board, emulated)")


def _vm_state_dir(kernel: str, arch: str) -> Path:
    from station.vm.paths import image_dir

    # where build_image puts that flavour and architecture (and `vm up` its state)
    return image_dir(None, kernel, arch)


@vm_app.command("build")
def vm_build(
    force: bool = typer.Option(False, help="rebuild even if the cached image is current",
                               metavar=FLAG),
    kernel: Kernel = KERNEL_OPTION,
    arch: Arch = ARCH_OPTION,
) -> None:
    """Build (or reuse) the VM image from Debian packages."""
    from station.vm import VmError, build_image

    try:
        image = build_image(force=force, log=lambda msg: typer.echo(msg, err=True),
                            kernel=kernel.value, arch=arch.value)
    except VmError as exc:
        _fail(str(exc))
    typer.echo(f"image: {image.dir} (kernel {image.kernel_release}, {image.arch})")


@vm_app.command("up")
def vm_up(port: int = typer.Option(10022, help="127.0.0.1 port forwarded to the VM's SSH"),
          kernel: Kernel = KERNEL_OPTION, arch: Arch = ARCH_OPTION) -> None:
    """Build the image if needed, boot the VM and wait until SSH answers."""
    from station.vm import VirtualMachine, VmError, build_image

    try:
        image = build_image(log=lambda msg: typer.echo(msg, err=True), kernel=kernel.value,
                            arch=arch.value)
        vm = VirtualMachine(image, ssh_port=port)
        vm.start()
    except VmError as exc:
        _fail(str(exc))
    t = vm.timings
    typer.echo(
        f"VM up in {t.get('to_ssh_s', float('nan')):.1f} s (kernel {image.kernel_release}, "
        f"{image.arch}): ssh -p "
        f"{port} -i {image.identity_file} -o UserKnownHostsFile={vm.known_hosts_file} "
        "root@127.0.0.1"
    )


@vm_app.command("down")
def vm_down(kernel: Kernel = KERNEL_OPTION, arch: Arch = ARCH_OPTION) -> None:
    """Shut the VM down (poweroff over SSH; killed if it does not stop)."""
    from station.vm import VirtualMachine, VmError

    try:
        vm = VirtualMachine.from_state(_vm_state_dir(kernel.value, arch.value))
    except VmError as exc:
        _fail(str(exc))
    vm.stop()
    typer.echo("VM stopped")


@vm_app.command("ssh", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def vm_ssh(ctx: typer.Context, kernel: Kernel = KERNEL_OPTION,
           arch: Arch = ARCH_OPTION) -> None:
    """Open a shell in the running VM (or run the command given after --)."""
    import os
    import shutil

    from station.vm import VirtualMachine, VmError

    try:
        vm = VirtualMachine.from_state(_vm_state_dir(kernel.value, arch.value))
    except VmError as exc:
        _fail(str(exc))
    ssh = shutil.which("ssh")
    if ssh is None:
        _fail("no OpenSSH client (ssh) on PATH: apt-get install openssh-client")
    os.execv(ssh, vm.ssh_command(*ctx.args))


flag_help(app)


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()
