"""report.json as typed models (docs/report-schema.md is generated from them).

The envelope (schema version, campaign, notes, findings) is the core's; each registered kind adds
its part (`Kind.report_model`): a section under its name, or (the module kind) top-level fields.
`report_model()` joins them, rebuilt when a kind registers, as station.config.campaign_model does
for the campaign file. `validate_report()` checks a report dict in its JSON form: write_reports
calls it before writing anything, so a report that breaks its schema fails where it is produced.

Numbers the analysis may leave undefined are `float | None`: to_jsonable writes NaN as null.
Objects forbid unknown keys unless their description says they are open-ended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from station import kind_registry
from station.analysis.campaign import SCHEMA_VERSION
from station.report.export import to_jsonable

Float = float | None  # a number the analysis may leave undefined (NaN is written as null)
Interval = list[float | None] | None  # [lo, hi]; null where there is none
# a run's status as its manifest says: sealed complete, incomplete (short of its targets), failed,
# interrupted (Ctrl-C / SIGTERM), or still running (the station was killed before it sealed the run)
RunStatus = Annotated[Literal["complete", "incomplete", "failed", "interrupted", "running"], Field(
    description="whether the run finished (running: the station was killed before it sealed the "
                "run)")]


class Closed(BaseModel):
    """An object whose keys are all listed: any other key is an error."""

    model_config = ConfigDict(extra="forbid")


class RunIdentity(Closed):
    """What every kind's run entry starts with: which run it is and how it ended (a kind narrows a
    field where its runs always have it)."""

    id: str = Field(description="unique run id (its directory's name in runs/), e.g. `lpt-inb-r0`")
    target: str | None = Field(None, description="the target's name (null with a single target)")
    load: str | None = Field(None, description="the load set")
    repetition: int | None = Field(None, description="repetition index, from 0")
    status: RunStatus
    error: str | None = Field(None, description="why the run is incomplete or failed")


class Open(BaseModel):
    """An object with the keys listed and, by design, others (its description says which)."""

    model_config = ConfigDict(extra="allow")


class Stats(Closed):
    """STATS: statistics of a sample, in ns."""

    count: int = Field(description="number of samples")
    min_ns: Float = Field(None, description="smallest sample")
    max_ns: Float = Field(None, description="largest sample")
    mean_ns: Float = Field(None, description="arithmetic mean")
    std_ns: Float = Field(None, description="standard deviation (jitter)")
    percentiles_ns: dict[str, Float] = Field(
        default_factory=dict, description="`p50`, `p99`, `p99.99`, `p99.999` (other `pNN` keys are "
        "rendered too); a percentile from fewer than 10 expected samples above it is shown with †")


class Finding(Open):
    """FINDING: one sentence of the campaign's answer. Open-ended: each finding kind adds the
    numbers it is made of (`load`, `interface`, `values`, `max_us`, …; see its kind's section)."""

    kind: str = Field(description="what the finding is about (`faster`, `t_rw`, `cyclictest_max`, "
                                  "`ranking`, …)")
    text: str = Field(description="one sentence or a few, shown as written")
    headline: str | None = Field(None, description="one short sentence for the first page (absent: "
                                 "`text` is shown as its headline)")
    figure: str | None = Field(None,
                               description="the number that backs the headline, bold on the page")
    see: str | None = Field(None,
                            description="the id on the HTML page of the table or figures behind it")


class CampaignFacts(Closed):
    """`campaign`: what was measured, where, with what."""

    name: str = Field(description="campaign name from the config")
    description: str = Field(description="free text from the config")
    config_path: str | None = Field(None, description="the campaign YAML the runs came from")
    created_utc: str | None = Field(None, description="ISO 8601 time the campaign started, UTC")
    station_version: str | None = Field(None, description="irq-station version that ran it")
    target: dict[str, Any] = Field(
        default_factory=dict, description="the target: `kind` (`twin`, `ssh`, `vm`, `local`), "
        "`host`, `audit` (free-form facts read on it: `uname`, `cmdline`, `interrupts_excerpt`, …)")
    targets: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="target name → its description, when the campaign measures several")
    scope: dict[str, Any] | None = Field(None, description="`idn` (`*IDN?` answer), `resource` "
                                         "(VISA resource); null without an oscilloscope")
    generator: dict[str, Any] | None = Field(None,
                                             description="the signal generator as for `scope`; "
                                                         "null without one")
    twin: dict[str, Any] | None = Field(
        None, description="`preset` (the event model as played), `overrides` (what "
        "`bench.twin.overrides` changed), `ground_truth` (what the twin injected); null on a real "
        "bench")


class StoppingGroup(Closed):
    """One question of the stop rule: a condition (interval_width, deadline, exceedance) or a pair
    (compare), or a load of a search (worst)."""

    name: str = Field(description="the condition, or the pair as `first − second, …`")
    state: str = Field(description="`open`, or what settled it (`lpt above pcie (median paired "
                       "difference > 0)`, `within ±1us`, `known to 180ns`, `the worst`, `not the "
                       "worst (dropped after round 7)`), or `contradicted: …`")
    units: int = Field(description="rounds fed: one value (a run's percentile, or a pair's "
                       "difference) each")
    interval_ns: Interval = Field(description="its confidence sequence's interval after the last "
                                  "round (null: unbounded)")
    path: list[list[float | None]] = Field(
        description="[round, lower, upper] after every round fed (null: unbounded)")


class StoppingTarget(Closed):
    """One target's part of a stop rule over several targets: its runs judged on their own (a
    target is another machine), the rule's error shared by every target's groups."""

    verdict: Literal["answered", "open", "contradicted"] = Field(
        description="as `stopping.verdict`, for this target's groups: answered stops its runs")
    rounds: int = Field(description="this target's complete rounds fed to the rule")
    rounds_left_out: list[int] = Field(description="this target's rounds left out whole")


class StoppingTimeBudget(Closed):
    """Where the stop rule's time budget (matrix.until.time_budget) stopped a target's rounds
    before an answer, in the session that spent it."""

    budget_s: float = Field(description="the budget, s")
    spent_s: float = Field(description="the seconds that session's rounds on this target took")
    runs: int = Field(description="the runs that session measured on this target")
    rounds: int = Field(description="the rounds those runs were in (a resumed session's first "
                        "may be part of one)")
    stopped_before_round: int = Field(description="the round not started (1-based)")


class Stopping(Closed):
    """STOPPING: the campaign's stop rule (matrix.until, docs/stopping.md) as last judged."""

    rule: dict[str, Any] = Field(description="matrix.until as given (`at` as a fraction), but its "
                                 "time_budget (how long to ask, not what)")
    verdict: Literal["answered", "open", "contradicted"] = Field(
        description="answered: every group settled and the campaign stopped there; open: not "
        "settled by the last round measured (the cap, the time budget, or a campaign still "
        "running); contradicted: "
        "a group's intervals stopped overlapping (the rounds are not alike)")
    rounds: int = Field(description="complete rounds fed to the rule")
    rounds_left_out: list[int] = Field(description="rounds left out whole: a run not complete")
    groups: list[StoppingGroup]
    targets: dict[str, StoppingTarget] | None = Field(
        None, description="a campaign over several targets: each target's own judgement (its "
        "groups are named `…, on <target>`); absent for one target")
    time_budget: dict[str, StoppingTimeBudget] | None = Field(
        None, description="per target (\"\" for a campaign of one), where the rule's time budget "
        "stopped its rounds; absent when no time budget did")


class ReportCore(Closed):
    """report.json's top level: the envelope; each registered kind adds its part beside it."""

    schema_version: int = Field(description=f"{SCHEMA_VERSION} for this document; bumped on any "
                                "incompatible change (readers still take 1)")
    campaign: CampaignFacts = Field(description="what was measured, where, with what")
    runs: list[Any] = Field(default_factory=list,
                            description="the module kind's runs (empty without them)")
    notes: list[str] = Field(description="warnings worth reading first (losses, incomplete runs, "
                                         "few samples)")
    stopping: Stopping | None = Field(None, description="the stop rule's last judgement "
                                      "(matrix.until); absent without one")
    findings: list[Finding] = Field(description="the campaign's answer, one short sentence each: "
                                    "the module runs', then each section's that carries headlines; "
                                    "`[]` without any")


_MODELS: dict[int, type[ReportCore]] = {}


def _part(kind: kind_registry.Kind) -> type[BaseModel] | None:
    model = kind.load("report_model")
    if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"kind {kind.name}: report_model is not a pydantic model: {model!r}")
    return model


def build_report_model(kinds: list[kind_registry.Kind]) -> type[ReportCore]:
    """ReportCore plus each kind's part (Kind.report_model): its section under its name (absent or
    null without its runs), or, for a kind with top-level runs, its fields at the top level. A kind
    without a model has an untyped section."""
    fields: dict[str, Any] = {}
    for kind in kinds:
        model = _part(kind)
        if kind.top_level_runs and model is not None:
            fields |= {name: (info.annotation, info) for name, info in model.model_fields.items()}
        elif not kind.top_level_runs:
            section = model if model is not None else dict[str, Any]
            doc = " ".join((model.__doc__ or "").split()) if model is not None else (
                f"the {kind.name} kind's section (the kind declares no model: untyped)")
            fields[kind.name] = (section | None, Field(None, description=doc))
    return create_model("Report", __base__=ReportCore, __module__=__name__, **fields)


def report_model() -> type[ReportCore]:
    """report.json's model with every registered kind's part; rebuilt when a kind registers."""
    generation = kind_registry.generation()
    if generation not in _MODELS:
        _MODELS.clear()
        _MODELS[generation] = build_report_model(list(kind_registry.kinds().values()))
    return _MODELS[generation]


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of report.json (`station schema --report`)."""
    return report_model().model_json_schema()


class ReportSchemaError(ValueError):
    """A report that does not fit report_model(): the analysis and the schema disagree."""


def validate_report(report: Mapping[str, Any]) -> BaseModel:
    """The report as report_model() reads it, in its JSON form (what report.json will hold);
    raises ReportSchemaError naming every field that does not fit."""
    text = json.dumps(to_jsonable(report), allow_nan=False)
    try:
        # strict: JSON gives no string for a number, no float for a count
        return report_model().model_validate_json(text, strict=True)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
                             for e in exc.errors()[:20])
        raise ReportSchemaError("the report does not fit report.json's schema "
                                f"({exc.error_count()} problem(s)): {problems}") from None
