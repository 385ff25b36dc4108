"""A campaign's stop rule (`matrix.until`, station/config/until.py), judged after every complete
round from its runs' units (each run's t_SW percentile `at`, in its manifest:
station/analysis/run_unit.py).

The rounds are fed in their order (repetition 0, 1, …) to one anytime-valid confidence sequence
per group (station/analysis/anytime/quantile_cs.py), each at (1 − confidence)/groups so that all
hold together, at every round (a worst-load search's at twice that: the error it spends is one
side of each, elimination.py): looking after each round and stopping when they answer is what
they are made for.

- interval_width: a group per condition (interface, variant, load); its values are the runs'
  percentiles, its target the median run's. Settled when its interval is no wider than asked.
- deadline (with miss_below): a group per condition, its values the runs' (1 − miss_below)
  percentile. Settled when the interval lies at or under the deadline (the median run misses it
  at most that often) or over it (more often).
- exceedance: a group per condition, its values the runs' (1 − exceedance) percentile. Settled
  once the interval has an upper end (no wider than interval_width, when given).
- compare interfaces (or variants): a group per pair of conditions measured in the same round
  that differ only in what is compared; its values are the differences (first − second), its
  target their median. Settled when the interval lies above or below 0 (the order is known),
  or within ±margin when a margin is given.

The campaign stops when every group is settled. A round in which a run did not complete is left
out whole (its pairs would be broken; a rule that skipped only the failed run would compare
unlike rounds) and counted. What the guarantee assumes: the rounds' units independent and alike
(runs restart their module and loads; the interleaved order spreads a drift over every
condition), and a fixed run length (samples or duration, never data-driven).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from station import kind_registry
from station.analysis.anytime.elimination import WorstArmSearch
from station.analysis.anytime.quantile_cs import QuantileSequence
from station.analysis.run_unit import level_key
from station.common.units import format_duration
from station.config import Campaign, RunSpec, expand_runs
from station.config.until import StopRule
from station.store.manifest import TornManifest, read_manifest_json

CONTRADICTED = "contradicted: its intervals no longer overlap (the rounds are not alike)"


@dataclass
class Group:
    """One question of the rule: its confidence sequence and its path, round after round."""

    name: str
    sequence: QuantileSequence
    path: list[tuple[int, float, float]] = field(default_factory=list)  # (round, lower, upper)
    state: str = "open"

    def as_dict(self) -> dict[str, Any]:
        lower, upper = self.sequence.interval
        return {"interval_ns": [_finite(lower), _finite(upper)], "units": self.sequence.t,
                "state": self.state,
                "path": [[r, _finite(lo), _finite(hi)] for r, lo, hi in self.path]}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no infinity: null is "unbounded"


@dataclass
class Judgement:
    """The rule's answer after the rounds measured so far."""

    rule: dict[str, Any]
    groups: list[Group]
    rounds: int = 0  # rounds fed
    skipped: list[int] = field(default_factory=list)  # rounds left out (a run not complete)
    # worst: each (interface, variant)'s search over the loads
    searches: dict[tuple[str, str], WorstArmSearch] = field(default_factory=dict)

    def not_needed(self, spec: RunSpec) -> str | None:
        """Why the run need not be measured (its load known not to be the worst, or its cell's
        search done); None: it is needed."""
        search = self.searches.get((spec.interface, spec.variant))
        if search is None:
            return None
        if spec.load in search.eliminated:
            return f"load {spec.load} is known not to be the worst"
        if search.done:
            return f"the worst load of {spec.interface} {spec.variant} is known"
        return None

    @property
    def verdict(self) -> str:
        """answered (every group settled), contradicted (a group's intervals stopped
        overlapping: the rounds are not alike, and no answer can be given), or open."""
        if any(g.state == CONTRADICTED for g in self.groups):
            return "contradicted"
        return "answered" if self.groups and all(g.state != "open" for g in self.groups) \
            else "open"

    @property
    def stops(self) -> bool:
        return self.verdict != "open"

    def stops_target(self, target: str | None) -> bool:  # TargetsJudgement's, for one target
        return self.stops

    def text(self) -> str:
        said = "; ".join(f"{g.name}: {g.state}" for g in self.groups)
        skipped = (f" ({len(self.skipped)} round(s) left out: a run not complete)"
                   if self.skipped else "")
        verdict = {"answered": "answered", "contradicted": "contradicted",
                   "open": "not answered yet"}[self.verdict]
        return f"stop rule {verdict} after {self.rounds} round(s){skipped}: {said}"

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "verdict": self.verdict, "rounds": self.rounds,
                "rounds_left_out": self.skipped,
                "groups": {g.name: g.as_dict() for g in self.groups}}


Cell = tuple[str, str, str]  # (interface, variant, load)
Pair = tuple[str, Cell, Cell]  # a group's name, its first cell and its second (itself: one cell)


def pairs_of(campaign: Campaign, rule: StopRule) -> list[Pair]:
    """The rule's groups: (name, the first cell, the second cell), cells as (interface, variant,
    load); for interval_width the second is the first (one cell per group)."""
    m = campaign.matrix
    if rule.compare is None:
        return [(_name(i, v, load), (i, v, load), (i, v, load))
                for load in m.loads for i, v in _cells(campaign)]
    if rule.compare == "interfaces":
        a, b = m.interfaces
        return [(f"{a} − {b}, {v}, {load}", (a, v, load), (b, v, load))
                for load in m.loads for v in m.variants]
    a, b = m.variants
    return [(f"{a} − {b}, {i}, {load}", (i, a, load), (i, b, load))
            for load in m.loads for i in m.interfaces]


def _cells(campaign: Campaign) -> list[tuple[str, str]]:
    """The kind's cells (interface, variant): the module kind's, or one ("", "")."""
    return kind_registry.kind(campaign.matrix.kind).cells(campaign)


def _name(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _unit(out_dir: Path, spec: RunSpec, key: str, complete: set[str],
          attempted: set[str]) -> float | None | bool:
    """The run's value; None: measured but not usable (not complete, no unit); False: not
    measured yet (or to be measured again: a run an earlier session left incomplete)."""
    if spec.id not in attempted:
        return False
    if spec.id not in complete:
        return None
    try:
        manifest = read_manifest_json(out_dir / "runs" / spec.id)
    except (OSError, TornManifest):
        return None
    unit = (manifest.get("unit") or {}).get("latency_ns") or {}
    value = (unit.get("percentiles") or {}).get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def start(rule: StopRule, pairs: list[Pair], families: int = 1) -> Judgement:
    """The rule's judgement before any round: a confidence sequence per group (at the rule's
    error shared by every group of every one of `families` judgements: a campaign's targets)."""
    alpha = (1 - rule.confidence) / (len(pairs) * families)
    groups = [Group(name, QuantileSequence(0.5, alpha, rule.t_opt)) for name, _, _ in pairs]
    return Judgement(rule.question(), groups)


def feed(judgement: Judgement, rule: StopRule, pairs: list[Pair], r: int,
         values: dict[Cell, float]) -> None:
    """One complete round: every cell's value (its run's percentile `at`)."""
    judgement.rounds += 1
    for group, (_, first, second) in zip(judgement.groups, pairs, strict=True):
        value = values[first] - (values[second] if first != second else 0.0)
        lower, upper = group.sequence.add(value)
        group.path.append((r, lower, upper))
        group.state = _state(rule, group.name, lower, upper)


def start_search(rule: StopRule, cells: list[tuple[str, str]],
                 loads: list[str], families: int = 1) -> Judgement:
    """The worst-load search before any round: per (interface, variant) an elimination over the
    loads at (1 − confidence)/cells (and /families: start's), and a group per load for the
    report."""
    alpha = (1 - rule.confidence) / (len(cells) * families)
    judgement = Judgement(rule.question(), [])
    for interface, variant in cells:
        search = WorstArmSearch(tuple(loads), 0.5, alpha, rule.t_opt)
        judgement.searches[(interface, variant)] = search
        judgement.groups += [Group(_arm(load, (interface, variant)), search.sequences[load])
                             for load in loads]
    return judgement


def feed_search(judgement: Judgement, cell: tuple[str, str], r: int,
                values: dict[str, float]) -> None:
    """One complete round of a cell's surviving loads."""
    search = judgement.searches[cell]
    dropped = search.add_round(values)
    groups = {g.name: g for g in judgement.groups}
    for load in values:
        group = groups[_arm(load, cell)]
        lower, upper = group.sequence.interval
        group.path.append((r, lower, upper))
        group.state = (CONTRADICTED if load in search.contradicted
                       else f"not the worst (dropped after round {r + 1})" if load in dropped
                       else "the worst" if search.done else "open")


def _arm(load: str, cell: tuple[str, str]) -> str:
    """A search group's name: the load, and its cell where the kind has cells."""
    where = _name(*cell)
    return f"{load} ({where})" if where else load


class Judge:
    """The rule judged as rounds are measured: each run's unit read from its manifest once, each
    round fed once, in order (a condition's search: its own rounds in order), so a judgement
    after round R costs that round, not R rounds again. `update` takes what counts so far:
    `complete`, the ids of the runs complete under this campaign's measurement hash;
    `attempted`, the runs whose outcome counts (the others are not measured yet; a round waits
    for them, and the rounds after it too)."""

    def __init__(self, campaign: Campaign, out_dir: Path, target: str | None = None,
                 families: int = 1) -> None:
        """The rule over `target`'s runs (a campaign of one target: all of them), its error
        shared with `families` - 1 other targets' judges."""
        rule = campaign.matrix.until
        assert rule is not None
        self.campaign, self.out_dir, self.rule = campaign, out_dir, rule
        self.key = level_key(rule.level)
        self._units: dict[str, float | None] = {}  # run id -> value (None: not usable)
        self._rounds: dict[int, dict[Cell, RunSpec]] = {}
        for spec in expand_runs(campaign):
            if target is None or spec.target == target:
                self._rounds.setdefault(spec.repetition, {})[
                    (spec.interface, spec.variant, spec.load)] = spec
        self._order = sorted(self._rounds)
        if rule.worst is not None:
            self._cells = _cells(campaign)
            self.judgement = start_search(rule, self._cells, list(campaign.matrix.loads),
                                          families)
            self._next = {cell: 0 for cell in self._cells}  # each search's next round (index)
            self._fed: set[int] = set()
        else:
            self._pairs = pairs_of(campaign, rule)
            self.judgement = start(rule, self._pairs, families)
            self._next_round = 0
        if target is not None:  # one of several targets: its groups say which
            for group in self.judgement.groups:
                group.name = f"{group.name}, on {target}"

    def _unit(self, spec: RunSpec, complete: set[str], attempted: set[str]) -> float | None | bool:
        if spec.id in self._units:
            return self._units[spec.id]
        value = _unit(self.out_dir, spec, self.key, complete, attempted)
        if value is not False:  # measured: its value is final
            self._units[spec.id] = value
        return value

    def update(self, complete: set[str], attempted: set[str] | None = None) -> Judgement:
        attempted = complete if attempted is None else attempted
        if self.rule.worst is not None:
            self._update_search(complete, attempted)
            return self.judgement
        while self._next_round < len(self._order):
            r = self._order[self._next_round]
            values = {cell: self._unit(spec, complete, attempted)
                      for cell, spec in self._rounds[r].items()}
            if any(v is False for v in values.values()):
                break  # the first round not measured yet ends the sequence (for now)
            self._next_round += 1
            if any(v is None for v in values.values()):
                self.judgement.skipped.append(r)
                continue
            feed(self.judgement, self.rule, self._pairs, r, values)  # type: ignore[arg-type]
        return self.judgement

    def _update_search(self, complete: set[str], attempted: set[str]) -> None:
        for cell in self._cells:
            search = self.judgement.searches[cell]
            while not search.done and self._next[cell] < len(self._order):
                r = self._order[self._next[cell]]
                values = {load: self._unit(self._rounds[r][(*cell, load)], complete, attempted)
                          for load in search.survivors}
                if any(v is False for v in values.values()):
                    break  # not measured yet: this round (and the next) wait
                self._next[cell] += 1
                if any(v is None for v in values.values()):
                    if r not in self.judgement.skipped:
                        self.judgement.skipped.append(r)
                    continue
                feed_search(self.judgement, cell, r, values)  # type: ignore[arg-type]
                self._fed.add(r)
        self.judgement.skipped.sort()
        self.judgement.rounds = len(self._fed)


@dataclass
class TargetsJudgement:
    """The rule's answer over several targets: each target's own judgement (its groups, its
    rounds), all at one shared error. A target's runs stop when its own groups are settled; the
    campaign's question is answered when every target's is."""

    parts: dict[str, Judgement]

    @property
    def groups(self) -> list[Group]:
        return [g for part in self.parts.values() for g in part.groups]

    @property
    def rounds(self) -> int:
        return max((part.rounds for part in self.parts.values()), default=0)

    @property
    def verdict(self) -> str:
        verdicts = {part.verdict for part in self.parts.values()}
        if "contradicted" in verdicts:
            return "contradicted"
        return "answered" if verdicts == {"answered"} else "open"

    @property
    def stops(self) -> bool:
        return self.verdict != "open"

    def stops_target(self, target: str | None) -> bool:
        part = self.parts.get(target) if target is not None else None
        return part.stops if part is not None else self.stops

    def not_needed(self, spec: RunSpec) -> str | None:
        part = self.parts.get(spec.target) if spec.target is not None else None
        if part is None:
            return None
        if part.verdict == "answered":
            return f"the question is answered on target {spec.target}"
        return part.not_needed(spec)

    def text(self) -> str:
        return "; ".join(f"on {target}: {part.text()}" for target, part in self.parts.items()
                         if part.rounds)

    def as_dict(self) -> dict[str, Any]:
        first = next(iter(self.parts.values()))
        return {"rule": first.rule, "verdict": self.verdict, "rounds": self.rounds,
                "rounds_left_out": sorted({r for p in self.parts.values() for r in p.skipped}),
                "groups": {g.name: g.as_dict() for g in self.groups},
                "targets": {target: {"verdict": part.verdict, "rounds": part.rounds,
                                     "rounds_left_out": part.skipped}
                            for target, part in self.parts.items()}}


class TargetsJudge:
    """Judge's counterpart for a campaign over several targets: a Judge per target, each over
    its own runs (a target is another machine: its rounds are compared within it), the rule's
    error shared by all their groups (Bonferroni over the targets)."""

    def __init__(self, campaign: Campaign, out_dir: Path, targets: list[str]) -> None:
        self._judges = {t: Judge(campaign, out_dir, target=t, families=len(targets))
                        for t in targets}
        self.judgement = TargetsJudgement({t: j.judgement for t, j in self._judges.items()})

    def update(self, complete: set[str], attempted: set[str] | None = None) -> TargetsJudgement:
        for judge_ in self._judges.values():
            judge_.update(complete, attempted)
        return self.judgement


def make_judge(campaign: Campaign, out_dir: Path) -> Judge | TargetsJudge:
    """The campaign's judge: one Judge, or a TargetsJudge over several targets."""
    targets = list(campaign.bench.named_targets())
    return TargetsJudge(campaign, out_dir, targets) if len(targets) > 1 else Judge(campaign,
                                                                                   out_dir)


def judge(campaign: Campaign, out_dir: Path, complete: set[str],
          attempted: set[str] | None = None) -> Judgement | TargetsJudgement:
    """The rule's answer from the runs in `out_dir`, judged afresh (Judge.update's arguments)."""
    return make_judge(campaign, out_dir).update(complete, attempted)


def _state(rule: StopRule, name: str, lower: float, upper: float) -> str:
    if lower > upper:
        return CONTRADICTED
    if rule.deadline is not None:
        return _deadline_state(rule, lower, upper)
    if rule.exceedance is not None:
        return _exceedance_state(rule, lower, upper)
    if rule.interval_width is not None:
        width_ns = rule.interval_width * 1e9
        return (f"known to {format_duration((upper - lower) * 1e-9)}"
                if upper - lower <= width_ns else "open")
    # the median of the paired differences, not the difference of the medians (which can have
    # the other sign): the state says which
    first, second = name.split(",")[0].split(" − ")
    if lower > 0:
        return f"{first} above {second} (median paired difference > 0)"
    if upper < 0:
        return f"{first} below {second} (median paired difference < 0)"
    margin_ns = rule.margin * 1e9
    if margin_ns and -margin_ns <= lower and upper <= margin_ns:
        return f"within ±{format_duration(rule.margin)}"
    return "open"


def _deadline_state(rule: StopRule, lower: float, upper: float) -> str:
    """The median run's (1 − miss_below) percentile at or under the deadline: it misses the
    deadline at most that often; over it: more often."""
    deadline, rate = format_duration(rule.deadline), f"{rule.miss_below:g}"
    if upper <= rule.deadline * 1e9:
        return f"meets {deadline} (the median run misses it at most {rate} of its events)"
    if lower > rule.deadline * 1e9:
        return f"misses {deadline} (the median run misses it more than {rate} of its events)"
    return "open"


def _exceedance_state(rule: StopRule, lower: float, upper: float) -> str:
    """Settled once the median run's (1 − exceedance) percentile has an upper bound (within
    interval_width of its lower one, when given)."""
    if not math.isfinite(upper):
        return "open"
    if rule.interval_width is not None and upper - lower > rule.interval_width * 1e9:
        return "open"
    return (f"exceeded with probability {rule.exceedance:g} at most above "
            f"{format_duration(upper * 1e-9)} (the median run)")
