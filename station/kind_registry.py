"""The run kinds a campaign can name, and what each declares about itself.

A kind is one package under station/kinds/ (or anywhere: a plug-in registers through the
`irq_station.kinds` entry point, a test through `register`). Its package's `KIND` says
what the core needs to know without running it — its campaign settings, its matrix cells
and run ids, its campaign checks, what it needs from the bench — and names, as dotted paths
loaded on first use, its measurement, its analysis and its report section. The core
(config, campaign, bench, report) loops over this registry and never names a kind.

This module imports nothing of the station: config imports it, and the kinds import config.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from station.common.lazy_import import import_named

# the kinds shipped with the station: one line each (a plug-in's go into its own entry point). The
# order is the report page's: the first kind with something to show leads it (its answer above
# the warnings), so cyclictest's maxima table opens a page even beside module runs
BUILTIN = ("station.kinds.cyclictest", "station.kinds.module", "station.kinds.interruptions",
           "station.kinds.gpio", "station.kinds.avrsim")
ENTRY_POINT_GROUP = "irq_station.kinds"


@dataclass(frozen=True)
class BenchNeeds:
    """What a run kind needs from the bench, declared the way a labgrid driver declares its
    bindings: the bench activates exactly these parts and names no kind. The callables take the
    campaign (station.config.Campaign) and, for `modules`, the target's settings."""

    scope: bool = False  # bench.scope, unless its kind is none
    # what the generator plays (GeneratorSession.open's stimulus settings); None: no generator
    stimulus: Callable[..., Any] | None = None
    # the module stems bench.target.upload_modules sends for this campaign; None: none
    modules: Callable[..., set[str]] | None = None
    # campaign -> station.target.module_build.BuildPlan: whether (and where) the bench builds the
    # mainline modules for the target's kernel first
    module_build: Callable[..., Any] | None = None
    # the twin as a board answering edges (its channels); None: the twin plays the latency modules
    board: Callable[..., dict[str, int]] | None = None
    # the scope's channels beside bench.scope.channel, and the trigger slope
    scope_inputs: Callable[..., tuple[tuple[int, ...], str]] | None = None
    # its modules are bench.target.family's builds (RTAI or mainline), so the kernel must be too
    family: bool = False
    # the twin can stand in for the target (it plays the latency modules or, with `board`, the GPIO
    # lines); False: the kind measures a real kernel (local, vm or ssh)
    twin_target: bool = True


@dataclass(frozen=True)
class Kind:
    """One run kind, as the core sees it. Callables receive station.config objects."""

    name: str
    summary: str  # one line for the campaign schema's matrix.kind description
    # its campaign section, under the kind's own name (None: it has no options of its own)
    settings: type | None = None
    settings_required: bool = False  # a campaign of this kind must give the section
    # a pydantic model of the matrix keys only this kind reads: they join the campaign's matrix
    # (station.config.campaign_model), and a campaign of another kind that sets one is refused
    matrix_fields: Any = None
    # campaign -> [(interface, variant)]: the cells one target and one load repeat (a kind without
    # interfaces puts "" there; gpio puts its case in the variant's place)
    cells: Callable[[Any], list[tuple[str, str]]] = lambda campaign: [("", "")]
    # campaign -> its cells' count in words ("2 interfaces × 2 variants"), for the run cap's message
    describe_cells: Callable[[Any], str] | None = None
    # RunSpec -> its id without the target's prefix
    run_id: Callable[[Any], str] = lambda spec: f"{spec.load}-r{spec.repetition}"
    # campaign -> None; raises station.config.LocatedError (its location from the file's root)
    check: Callable[[Any], None] | None = None
    needs: BenchNeeds = BenchNeeds()
    # the Parquet tables its runs write into the result store (docs/result-store.md:
    # <table>.parquet)
    store_tables: tuple[str, ...] = ()
    # where report.json keeps its runs: its section's "runs" under its name, or (True: the module
    # kind, report schema 1) the report's own top-level "runs"
    top_level_runs: bool = False
    # a run's entry in report.json -> its latency maximum in ns, the point `station monitor` plots
    # per window (None: the kind is not monitored)
    window_maximum: Callable[[dict], float | None] | None = None
    # the heavy parts, as "module:attribute" imported on first use (or the object itself):
    measurement: Any = None  # a station.kinds.base.Measurement subclass
    analysis: Any = None  # (run directories, campaign.json) -> (report section, samples, notes)
    report: Any = None  # a station.report.page.KindPage: its page sections, figures, CSV files
    # a station.compare.part.ComparePart: its part of `station compare` (None: not compared)
    compare: Any = None
    # a pydantic model of its part of report.json: the fields of its section under its name, or
    # (top_level_runs) its top-level fields; None: its section is untyped (station.report.model)
    report_model: Any = None
    # a pydantic model of the top-level keys its runs add to manifest.json (station.store.manifest);
    # None: its keys are untyped
    manifest_model: Any = None
    # `station bench check`'s look at its measurement on the active bench: an async (bench,
    # checklist) -> None (station.bench.check.KindCheck); None: the check stops at the hosts
    bench_check: Any = None
    # its runs carry a `unit` (station/analysis/run_unit.py) in their manifest: a stop rule
    # (matrix.until, docs/stopping.md) can judge them
    units: bool = False
    # run directory -> what its analysis keeps of one run (picklable), the function its `analysis`
    # hands to analysis/run_pool.analysed: the live analysis (campaign/live_analysis.py) runs it as
    # each run is sealed and keeps the result for the report; None: analysed in the report only
    run_analysis: Any = None
    # (report, Budget, its complete runs' entries) -> [station.analysis.budgets.Estimate]: the
    # figures a budget is judged on, from this kind's part of report.json (docs/ci.md); None: its
    # runs have none
    budget_figures: Any = None
    # the keys of its runs a budget may select them by, besides target and load: (report key,
    # the RunSpec attribute that holds it); module runs carry interface and variant, gpio runs
    # their case (in the variant's place)
    budget_selectors: tuple[tuple[str, str], ...] = ()

    def matrix_keys(self) -> tuple[str, ...]:
        """The matrix keys only this kind reads."""
        fields = self.load("matrix_fields")
        return tuple(fields.model_fields) if fields is not None else ()

    def load(self, which: str) -> Any:
        """A heavy part (`measurement`, `analysis`, `report`, `compare`, `report_model`,
        `manifest_model`, `bench_check`, `run_analysis`, `budget_figures`), imported now;
        None if it has none."""
        part = getattr(self, which)
        return import_named(part) if isinstance(part, str) else part


_KINDS: dict[str, Kind] = {}
_BUILTIN_NAMES: frozenset[str] = frozenset()
_loaded = False
_generation = 0  # bumped on every registration: config rebuilds its campaign model then
# what a kind may not be called: its section would take a campaign key (config.Campaign's fields)
# or a key of report.json's envelope (tests/test_throwaway_kind.py checks both lists stay whole)
RESERVED = frozenset({"name", "description", "bench", "matrix", "report", "loads",
                      "schema_version", "campaign", "runs", "notes", "findings", "comparisons",
                      "stopping", "budgets"})
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")  # a campaign key and a Python name


def _add(kind: Kind) -> None:
    global _generation
    if kind.name in RESERVED or not NAME.fullmatch(kind.name):
        raise ValueError(f"a run kind cannot be called {kind.name!r}: it must be a lower-case name "
                         f"({NAME.pattern}) and none of {', '.join(sorted(RESERVED))}")
    _KINDS[kind.name] = kind
    _generation += 1


def register(kind: Kind) -> Kind:
    """Make a kind available to campaigns under `kind.name`, after the built-in ones (a later one
    of the same name replaces it)."""
    _load_builtin()
    _add(kind)
    return kind


def unregister(name: str) -> None:
    global _generation
    _KINDS.pop(name, None)
    _generation += 1


def _load_builtin() -> None:
    global _loaded, _BUILTIN_NAMES
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN:
        _add(importlib.import_module(module).KIND)
    _BUILTIN_NAMES = frozenset(_KINDS)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            kind = point.load()
            if kind.name in _KINDS:
                raise ValueError(f"{kind.name!r} is a built-in kind's name")
            _add(kind)
        except Exception as exc:  # noqa: BLE001 - one broken plug-in must not stop every campaign
            warnings.warn(f"run kind plug-in {point.value!r} ({ENTRY_POINT_GROUP}) not loaded: "
                          f"{exc}", stacklevel=2)


def builtin_names() -> frozenset[str]:
    """The kinds shipped with the station (not a plug-in's or a test's)."""
    _load_builtin()
    return _BUILTIN_NAMES


def kinds() -> dict[str, Kind]:
    """Every registered kind by name, the built-in ones first."""
    _load_builtin()
    return dict(_KINDS)


def kind(name: str) -> Kind:
    known = kinds()
    if name not in known:
        raise KeyError(f"unknown run kind {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def report_runs(kind: Kind, report: dict[str, Any]) -> list[Any]:
    """The kind's run entries in a report (none: an empty list)."""
    if kind.top_level_runs:
        return list(report.get("runs") or [])
    return list((report.get(kind.name) or {}).get("runs") or [])


def store_tables() -> tuple[str, ...]:
    """Every registered kind's result-store tables, in the registry's order."""
    return tuple(t for k in kinds().values() for t in k.store_tables)


def generation() -> int:
    _load_builtin()
    return _generation
