"""The campaign itself: the run matrix, the report's settings, the Campaign model every kind's
section joins (campaign_model), and the runs it expands to, in the order they are measured."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    create_model,
    model_validator,
)

from station import kind_registry
from station.config.bench import BenchSettings, LoadSpec
from station.config.budgets import BudgetEntry
from station.config.twin import GPIO_MISWIRES
from station.config.types import (
    DURATION_RANGE,
    MAX_DURATION_RANGE,
    MAX_REPETITIONS,
    MAX_RUNS,
    MAX_SAMPLES,
    Float,
    Int,
    LoadSetName,
    LocatedError,
    Seconds,
    Strict,
    _text,
)
from station.config.until import StopRule, check_until
from station.config.yaml_lines import ConfigError


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class Matrix(Strict):
    """The run matrix's keys every kind reads; a kind's own keys join them in campaign_model()
    (Kind.matrix_fields: the module kind's interfaces, variants, period, …)."""

    kind: str = Field(
        "module",
        description="what each run measures: a run kind (station/kinds/; `station schema` lists "
        "them with what each measures); its options go under the campaign key of its name",
    )
    loads: list[Annotated[str, Field(max_length=64)]] = Field(
        default_factory=lambda: ["none"], min_length=1, max_length=1000,
        description="names of load sets (loads:)"
    )
    repetitions: Int = Field(1, ge=1, le=MAX_REPETITIONS)
    samples: Int | None = Field(
        None, gt=0, le=MAX_SAMPLES, description="stop a run after this many software samples"
    )
    duration: Seconds(DURATION_RANGE) | None = Field(None, description="stop a run after this long")
    max_duration: Seconds(MAX_DURATION_RANGE) = Field(
        3600.0, description="hard limit per run, whatever else is unmet"
    )
    until: StopRule | None = Field(
        None, description="the campaign's question: its rounds (repetitions) go on until it is "
        "answered at the stated confidence, at most `repetitions` rounds (docs/stopping.md; the "
        "module and cyclictest kinds)")
    order: Literal["interleaved", "as-written"] = Field(
        "interleaved",
        description="the runs' order on each target: `interleaved` measures every condition once "
        "per repetition, in a seeded random order each round (so a machine's slow drift is not "
        "lined up with one condition); `as-written` the file's order, repetition after repetition"
    )
    order_seed: Int | None = Field(
        None, ge=0, le=2**63 - 1, description="the interleaved order's seed (default: from the "
        "campaign's name); campaign.json records the order used"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Matrix:
        if self.samples is None and self.duration is None:
            raise ValueError("give samples or duration (or both) to say when a run ends")
        if len(set(self.loads)) != len(self.loads):
            raise LocatedError(("loads",), f"loads lists a value twice: {self.loads}")
        return self


DEADLINE_RANGE = (100e-9, 10.0, "100 ns", "10 s")


class ReportSettings(Strict):
    """What the report estimates beyond the measured figures."""

    deadline: Seconds(DEADLINE_RANGE) | None = Field(
        None, description="a latency the system must meet (seed 004: 125us): the report gives the "
        "probability per event of exceeding it, from the tail fit where it lies in the tail"
    )
    exceedance: Float = Field(
        1e-9, gt=0.0, lt=0.01,
        description="the worst case is the latency exceeded with this probability per event"
    )



def _check_budget_runs(campaign: Campaign, n: int, runs: tuple[tuple[str, str], ...]) -> None:
    """A budget's runs named as the campaign names them: a typo would apply it to no run."""
    kind = kind_registry.kind(campaign.matrix.kind)
    cells = kind.cells(campaign)
    at = {"interface": 0, "variant": 1}
    known = {"load": list(campaign.matrix.loads),
             "target": [t for t in campaign.bench.named_targets() if t]}
    for key, attr in kind.budget_selectors:
        known[key] = sorted({cell[at[attr]] for cell in cells if cell[at[attr]]})
    for key, value in runs:
        if key not in known:
            raise LocatedError(("budgets", n, key),
                               f"{article(kind.name)} {kind.name} run has no {key}: the runs a "
                               f"budget applies to are chosen by "
                               f"{', '.join(sorted(known))}")
        if value not in known[key]:
            raise LocatedError(("budgets", n, key),
                               f"{value!r} is not one of this campaign's {key}s "
                               f"({', '.join(known[key]) or 'it names none'})")


class Campaign(Strict):
    """A campaign's settings common to every kind. The model that reads a file is
    `campaign_model()`: this one with each registered kind's own section beside
    (station/kind_registry.py)."""

    name: Annotated[str, Field(min_length=1), _text(200)]
    description: Annotated[str, _text(100_000, allowed="\n\t")] = ""
    bench: BenchSettings = BenchSettings()
    matrix: Matrix
    report: ReportSettings = ReportSettings()
    loads: dict[LoadSetName, list[LoadSpec]] = Field(default_factory=lambda: {"none": []})
    budgets: list[BudgetEntry] = Field(
        default_factory=list, max_length=200,
        description="latency budgets `station check` and `station run --check` judge, each with "
                    "its interval: met, missed or undecided (docs/ci.md)")

    @model_validator(mode="after")
    def _kind_fits(self) -> Campaign:
        """What every kind's declaration says of a campaign (kind_registry.Kind), then the kind's
        own checks."""
        m, known = self.matrix, kind_registry.kinds()
        if m.kind not in known:  # the base model (campaign_model() lists the kinds in its schema)
            raise LocatedError(("matrix", "kind"),
                               f"unknown run kind {m.kind!r} (known: {', '.join(sorted(known))})")
        kind = known[m.kind]
        for other in known.values():  # another kind's keys are a mistake, not something to ignore
            if other.name == kind.name:
                continue
            for key in other.matrix_keys():
                if key in m.model_fields_set and key not in kind.matrix_keys():
                    raise LocatedError(("matrix", key),
                                       f"is {article(other.name)} {other.name}-run key; "
                                       f"{article(kind.name)} {kind.name} campaign does not use it")
            if other.settings is not None and other.name in self.model_fields_set:
                raise LocatedError((other.name,),
                                   f"{other.name} options are for matrix.kind: {other.name}")
        if kind.settings_required and getattr(self, kind.name, None) is None:
            raise LocatedError((kind.name,), f"{article(kind.name)} {kind.name} campaign needs "
                               f"{article(kind.name)} {kind.name}: section")
        players = [k.name for k in known.values() if k.needs.stimulus is not None]
        if kind.needs.stimulus is None and "generator" in self.bench.model_fields_set:
            which = " or ".join(players) or "no"
            raise LocatedError(("bench", "generator"),
                               f"drives the stimulus of {article(which)} {which} campaign "
                               f"(matrix.kind: {which})")
        if (
            not kind.needs.scope
            and "scope" in self.bench.model_fields_set
            and self.bench.scope.kind != "none"
        ):
            raise LocatedError(("bench", "scope", "kind"),
                               f"{article(kind.name)} {kind.name} campaign uses no "
                               "scope: set none or leave bench.scope out")
        if m.until is not None:
            check_until(self, kind)
        for n, spec in enumerate(self.budgets):
            _check_budget_runs(self, n, spec.parsed().runs)
        for n, fault in enumerate(self.bench.twin.miswire):
            if fault in GPIO_MISWIRES and kind.needs.board is None:
                raise LocatedError(("bench", "twin", "miswire", n),
                                   f"{fault} is a gpio bench's fault (two probes, a generator on "
                                   f"the board's input); {article(kind.name)} {kind.name} "
                                   "campaign's twin has no board")
        runs = run_count(self)
        if runs > MAX_RUNS:
            raise LocatedError(("matrix", "repetitions"),
                               f"{run_count_text(self)} = {runs} runs; at most {MAX_RUNS}")
        if kind.check is not None:  # first: a kind's own word on its targets is the more precise
            kind.check(self)
        if not kind.needs.twin_target:
            for name, t in self.bench.named_targets().items():
                if t.kind == "twin":
                    where = ("bench", "targets", name, "kind") if name else ("bench", "target",
                                                                             "kind")
                    raise LocatedError(where, f"{article(kind.name)} {kind.name} run measures a "
                                       "real kernel: use kind local, vm or ssh (the twin only "
                                       "plays the latency modules and GPIO lines)")
        return self

    @model_validator(mode="after")
    def _references_resolve(self) -> Campaign:
        for i, name in enumerate(self.matrix.loads):
            if name not in self.loads:
                known = ", ".join(sorted(self.loads)) or "none defined"
                close = difflib.get_close_matches(name, list(self.loads), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise LocatedError(
                    ("matrix", "loads", i),
                    f"names {name!r}, which is not under loads: ({known}){hint}"
                )
        for name in self.bench.twin.load_effects:
            if name not in self.loads:
                raise LocatedError(("bench", "twin", "load_effects", name),
                                   f"names {name!r}, which is not under loads: "
                                   f"({', '.join(sorted(self.loads))})")
        hosts = self.bench.load_hosts
        for set_name, specs in self.loads.items():
            seen: set[str] = set()
            for j, spec in enumerate(specs):
                if spec.name in seen:
                    raise LocatedError(
                        ("loads", set_name, j, "name"),
                        f"load set {set_name!r} uses a load name twice: {[s.name for s in specs]}",
                    )
                seen.add(spec.name)
                if spec.host != "target" and spec.host not in hosts:
                    have = ", ".join(sorted(hosts)) or "none defined"
                    raise LocatedError(
                        ("loads", set_name, j, "host"),
                        f"load {set_name}/{spec.name} runs on {spec.host!r}, not a "
                        f"bench.load_hosts entry ({have})",
                    )
        return self


_MODELS: dict[int, type[Campaign]] = {}


def campaign_model() -> type[Campaign]:
    """The campaign schema: Campaign with each registered kind's section (under its name) and
    matrix.kind one of their names. Rebuilt when a kind registers (a plug-in's, a test's)."""
    generation = kind_registry.generation()
    if generation not in _MODELS:
        known = kind_registry.kinds()
        summary = "; ".join(f"{k.name}: {k.summary}" for k in known.values())
        own: dict[str, Any] = {}
        for k in known.values():
            for name, info in (k.load("matrix_fields") or Strict).model_fields.items():
                # a kind may not retype another's key
                if name in Matrix.model_fields or name in own:
                    raise ValueError(
                        f"run kind {k.name!r} declares matrix key {name!r}, which "
                        f"{'every campaign' if name in Matrix.model_fields else 'another kind'} "
                        "has"
                    )
                own[name] = (info.annotation, info)
        matrix = create_model("Matrix", __base__=Matrix, __module__=__name__, **own, kind=(
            Literal[tuple(known)], Field("module",
                                         description=f"what each run measures ({summary})")))
        sections: dict[str, Any] = {}
        for k in known.values():
            if k.settings is not None:
                sections[k.name] = (k.settings | None,
                                    None) if k.settings_required else (k.settings, k.settings())
        _MODELS.clear()
        _MODELS[generation] = create_model("Campaign", __base__=Campaign, __module__=__name__,
                                           matrix=(matrix, ...), **sections)
    return _MODELS[generation]


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix: what a single run measures. A kind's cells (Kind.cells) fill
    `interface` and `variant`: the module kind's interface and handler variant; a kind whose cells
    are cases (gpio, avrsim) its case in `variant` and "" in `interface`; the others "" in both.
    (The names are the result store's identity columns, which many campaigns share.)"""

    interface: str
    variant: str
    load: str
    repetition: int
    kind: str = "module"  # the run kind (station/kinds/) that measures it
    target: str | None = None  # the name under bench.targets; None for a single bench.target

    @property
    def id(self) -> str:
        where = f"{self.target}-" if self.target else ""
        return where + kind_registry.kind(self.kind).run_id(self)


def measurement_hash(campaign: Campaign) -> str:
    """What a run's numbers depend on. Name, description and the number of repetitions
    are left out: changing those does not invalidate runs already measured."""
    data = campaign.model_dump(mode="json")
    for key in ("name", "description"):
        data.pop(key)
    # a plug-in's (or a test's) kind adds its default section to every campaign: it is not the
    # campaign's settings, and installing one must not make measured runs look changed
    for name in (
        set(data)
        - set(Campaign.model_fields)
        - kind_registry.builtin_names()
        - {campaign.matrix.kind}
    ):
        data.pop(name)
    # and its matrix keys' defaults, in every campaign's matrix
    for kind in kind_registry.kinds().values():
        if kind.name not in kind_registry.builtin_names() and kind.name != campaign.matrix.kind:
            for key in kind.matrix_keys():
                data["matrix"].pop(key, None)
    # when a run is measured, or when the campaign stops, is not what a run measures
    for key in ("repetitions", "order", "order_seed"):
        data["matrix"].pop(key)
    data["matrix"].pop("until", None)
    data.pop("budgets", None)  # what the runs are judged against, not what they measure
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def run_count(campaign: Campaign) -> int:
    """Runs of the matrix: targets × the kind's cells × loads × repetitions."""
    m = campaign.matrix
    cells = kind_registry.kind(m.kind).cells(campaign)
    return len(campaign.bench.named_targets()) * len(cells) * len(m.loads) * m.repetitions


def run_count_text(campaign: Campaign) -> str:
    """The product run_count computes, factor by factor (the kind words its own cells)."""
    m, kind = campaign.matrix, kind_registry.kind(campaign.matrix.kind)
    targets = len(campaign.bench.named_targets())
    factors = [f"{targets} targets"] if targets > 1 else []
    if kind.describe_cells is not None:
        factors.append(kind.describe_cells(campaign))
    return " × ".join([*factors, f"{len(m.loads)} loads", f"{m.repetitions} repetitions"])


def design_notes(campaign: Campaign) -> list[str]:
    """What the campaign's design cannot answer (issue 46): its comparisons between conditions are
    judged against the spread between runs of each, which one run per condition does not give; and
    runs measured in the file's order line a machine's slow drift up with the conditions."""
    m = campaign.matrix
    conditions = run_count(campaign) // m.repetitions
    notes = []
    if conditions > 1 and m.repetitions < 2:
        notes.append(f"one run per condition: a difference between two of the {conditions} "
                     "conditions cannot be told from run-to-run variation (every run meets its "
                     "own machine state) unless the report can pool runs that measure the same "
                     "quantity (a module's two variants' t_SW); repetitions: 2 or more (3 or more "
                     "to find a difference of a few per cent)")
    if conditions > 1 and m.repetitions > 1 and m.order == "as-written":
        notes.append("order: as-written measures each condition at the same place of every round: "
                     "a machine that drifts over the campaign drifts with the matrix order; order: "
                     "interleaved (the default) randomises each round")
    return notes


def expand_runs(campaign: Campaign, as_written: bool = False) -> list[RunSpec]:
    """Every run of the matrix in the order it is measured: target after target (each target's
    bench, a VM boot say, is set up once), repetition after repetition, and inside a repetition
    the conditions in the file's order or, `interleaved`, in a random order of their own
    (order_of); `as_written` the file's order whatever `order` says (a report lists its runs so).
    Validation caps the count at MAX_RUNS; a Campaign changed with model_copy()
    bypasses validation, so the cap is checked again."""
    m = campaign.matrix
    if run_count(campaign) > MAX_RUNS:
        raise ConfigError(f"matrix: {run_count(campaign)} runs; at most {MAX_RUNS}")
    cells = kind_registry.kind(m.kind).cells(campaign)
    runs = []
    for t in campaign.bench.named_targets():
        for r in range(m.repetitions):
            written = [RunSpec(i, v, load, r, kind=m.kind, target=t)
                       for load, (i, v) in itertools.product(m.loads, cells)]
            runs += (
                written
                if as_written or m.order == "as-written"
                else order_of(written, order_seed(campaign))
            )
    return runs


def order_seed(campaign: Campaign) -> int:
    """The interleaved order's seed: the file's, else one from the campaign's name (stable, so a
    resumed campaign continues in the same order)."""
    if campaign.matrix.order_seed is not None:
        return campaign.matrix.order_seed
    return int.from_bytes(hashlib.sha256(f"order/{campaign.name}".encode()).digest()[:8],
                          "little") >> 1


def order_of(runs: list[RunSpec], seed: int) -> list[RunSpec]:
    """A seeded random order of one round's runs: each run sorted by a keyed hash of its id (a
    uniform permutation that no library version changes)."""
    return sorted(runs, key=lambda s: hashlib.sha256(f"{seed}/{s.target}/{s.id}".encode()).digest())
