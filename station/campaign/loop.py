"""The campaign loop: the matrix of runs on one active bench, resuming after the
last complete run, and stopping early — resumably — when the bench itself fails."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from station.bench.bench import Bench, BenchError
from station.campaign.run import RunOutcome, execute_run
from station.common.atomic_file import write_text_atomically
from station.common.formatting import wall_time
from station.common.progress import ProgressSink, RunProgress
from station.config import Campaign, RunSpec, expand_runs, measurement_hash, order_seed
from station.store.manifest import MANIFEST, ManifestError, TornManifest, read_manifest
from station.store.run_store import RunStore, StoreError, now_utc, station_version


class CampaignError(Exception):
    """The campaign could not start, or had to stop; the message says why and what to do."""


@dataclass
class CampaignResult:
    out_dir: Path
    outcomes: list[RunOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    report_paths: dict[str, Path] = field(default_factory=dict)
    stopped: str | None = None  # why the campaign stopped before its last run
    # the stop rule's last judgement (matrix.until; station/campaign/stopping.py), if any
    judgement: Any = None
    judge: Any = None  # the stop rule's Judge, fed round after round
    # the runs analysed as they are sealed (campaign/live_analysis.py), None: in the report only
    live: Any = None
    # seconds from the last run's end to the report written (None: no report)
    report_after_runs_s: float | None = None
    report_error: str | None = None
    # target name -> why its bench did not come up
    unavailable: dict[str, str] = field(default_factory=dict)
    # run id -> why its scope pulses match none of its target's events (the report says it too)
    unmatched: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.stopped is None
            and self.report_error is None
            and not self.unavailable
            and not self.unmatched
            and all(o.status == "complete" for o in self.outcomes)
        )


def completed_runs(out_dir: Path, config_hash: str) -> set[str]:
    """Runs already complete under this same configuration. Runs measured under another
    one make resuming an error: mixing them would make the report lie."""
    done, foreign = set(), []
    for manifest in (out_dir / "runs").glob("*/manifest.json"):
        if ".attempt-" in manifest.parent.name:
            continue
        try:
            data = read_manifest(manifest.parent)
        except (OSError, TornManifest):
            continue  # a manifest torn by a crash: that run is not complete
        # measuring it again would put aside a run this station cannot read
        except ManifestError as exc:
            raise CampaignError(
                f"{exc}: use --fresh to measure again there (earlier data is kept)"
            ) from None
        if data.config_hash != config_hash:
            foreign.append(data.run_id)
        elif data.status == "complete":
            done.add(data.run_id)
    if foreign:
        raise CampaignError(
            f"{out_dir} holds runs measured with different settings "
            f"({', '.join(sorted(foreign)[:3])}{' …' if len(foreign) > 3 else ''}): use --fresh to "
            "measure again there (earlier data is kept as .attempt-N) or choose another --out"
        )
    return done


async def run_campaign(
    campaign: Campaign,
    out_dir: Path,
    progress: ProgressSink,
    config_path: Path | None = None,
    resume: bool = True,
    live: Any = None,
) -> CampaignResult:
    """Every remaining run of the campaign; `live` (campaign/live_analysis.LiveAnalysis) is handed
    each run as it is sealed."""
    result = CampaignResult(out_dir, live=live)
    config_hash = measurement_hash(campaign)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        completed = completed_runs(out_dir, config_hash) if resume else set()
        copy = out_dir / "campaign.yaml"
        if config_path is not None and not (copy.exists() and copy.samefile(config_path)):
            shutil.copyfile(config_path, copy)
    except OSError as exc:
        raise CampaignError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    runs = expand_runs(campaign)
    position = {spec.id: k for k, spec in enumerate(expand_runs(campaign, as_written=True))}
    todo = [(order, spec) for order, spec in enumerate(runs) if spec.id not in completed]
    result.skipped = [spec.id for spec in runs if spec.id in completed]
    if campaign.matrix.until is not None and resume:
        _same_rule(campaign, out_dir)
    if campaign.matrix.until is not None and _answered(campaign, out_dir, progress, result):
        return result  # a resumed campaign whose question its earlier rounds answered
    if not todo:
        progress.message(f"all {len(runs)} runs of {campaign.name!r} are complete in {out_dir} "
                         "(--fresh measures them again)")
        return result
    by_target: dict[str | None, list[tuple[int, RunSpec]]] = {}
    for order, spec in todo:
        by_target.setdefault(spec.target, []).append((order, spec))
    described = _described_targets(out_dir)
    try:
        for target_name, target_runs in by_target.items():
            if (target_name is not None and result.judgement is not None
                    and result.judgement.stops_target(target_name)):
                progress.message(f"target {target_name!r}: its question is answered by its "
                                 f"earlier rounds; its {len(target_runs)} run(s) not needed")
                continue  # a resumed campaign: its bench is not even opened
            try:
                # the kind's needs
                async with Bench(campaign, progress, target_name=target_name) as bench:
                    latest = bench.describe()
                    described[target_name or ""] = latest["target"]
                    _write_campaign_json(out_dir, campaign, latest, described)
                    await _run_on(bench, target_runs, len(runs), out_dir, progress, result,
                                  position, campaign)
            except BenchError as exc:
                if target_name is None:
                    raise CampaignError(str(exc)) from None
                result.unavailable[target_name] = str(exc)
                progress.message(f"target {target_name!r} is unavailable, its {len(target_runs)} "
                                 f"run(s) are not measured: {exc}")
            if result.stopped is not None:
                break
    except (StoreError, OSError) as exc:
        raise CampaignError(
            f"cannot write to {out_dir}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if result.unavailable:
        _record_unavailable(out_dir, result.unavailable)
        if not result.outcomes:
            raise CampaignError("no target could be set up: "
                                + "; ".join(f"{name}: {why}"
                                            for name, why in result.unavailable.items()))
    return result


def _earlier_orders(path: Path, now: dict[str, Any]) -> list[dict[str, Any]]:
    """The orders earlier sessions of this directory recorded, where they differ from `now`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    earlier = [
        o for o in [*(data.get("earlier_orders") or []), data.get("order")] if isinstance(o, dict)
    ]
    kept: list[dict[str, Any]] = []
    for o in earlier:
        if o != now and o not in kept:
            kept.append(o)
    return kept


def _record_unavailable(out_dir: Path, unavailable: dict[str, str]) -> None:
    """campaign.json says which targets this session could not measure, and why (the report shows
    it)."""
    _record(out_dir, "unavailable", dict(unavailable))


def _record(out_dir: Path, key: str, value: Any) -> None:
    """One key of campaign.json, the rest kept; written whole or not at all."""
    path = out_dir / "campaign.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[key] = value
    write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _same_rule(campaign: Campaign, out_dir: Path) -> None:
    """A resumed campaign keeps the stop rule its rounds were judged under: a rule chosen after
    seeing them would break its confidence."""
    try:
        earlier = json.loads((out_dir / "campaign.json").read_text()).get("stopping") or {}
    except (OSError, ValueError, AttributeError):
        return
    assert campaign.matrix.until is not None
    now = campaign.matrix.until.question()
    if earlier.get("rounds") and earlier.get("rule") not in (None, now):
        raise CampaignError(f"{out_dir}: its {earlier['rounds']} round(s) were judged under the "
                            f"stop rule {earlier['rule']}, and matrix.until is now {now}: a rule "
                            "chosen after seeing rounds breaks its confidence. Put the rule back, "
                            "or measure afresh (--fresh, or another --out)")


def _answered(campaign: Campaign, out_dir: Path, progress: ProgressSink,
              result: CampaignResult, target: str | None = None) -> bool:
    """Judge the stop rule on the rounds measured so far (recorded in campaign.json's
    `stopping`); whether it stops the campaign (with `target`, of several: that target's runs,
    its own question settled). What counts: the runs complete before this
    session (result.skipped: none with --fresh) and every run this session measured; a run an
    earlier session left incomplete is not measured yet (this session measures it again)."""
    from station.campaign.stopping import make_judge

    complete = {*result.skipped, *(o.run_id for o in result.outcomes if o.status == "complete")}
    attempted = complete | {o.run_id for o in result.outcomes}
    if result.judge is None:
        result.judge = make_judge(campaign, out_dir)
    judgement = result.judge.update(complete, attempted)
    result.judgement = judgement
    _record(out_dir, "stopping", judgement.as_dict())
    if judgement.rounds:
        progress.message(judgement.text())
    if judgement.verdict == "contradicted":
        result.stopped = f"the stop rule is contradicted: {judgement.text()}"
    return judgement.stops if target is None else judgement.stops_target(target)


async def _run_on(bench: Bench, todo: list[tuple[int, RunSpec]], total: int, out_dir: Path,
                  progress: ProgressSink, result: CampaignResult, position: dict[str, int],
                  campaign: Campaign | None = None) -> None:
    """The runs of one target on its active bench; stops when the bench is lost, or when the
    campaign's stop rule is answered after a round."""
    session_started = time.monotonic()
    until = campaign is not None and campaign.matrix.until is not None
    budget = campaign.matrix.until.time_budget if until else None
    rounds_done = runs_done = 0  # this session's, on this target
    for i, (order, spec) in enumerate(todo):
        round_starts = i == 0 or todo[i - 1][1].repetition != spec.repetition
        if budget is not None and round_starts and runs_done:
            # the round's runs still to measure (a resumed session may begin mid-round; a search
            # measures fewer loads as it drops them), at this session's mean per run
            block = itertools.takewhile(
                lambda item, rep=spec.repetition: item[1].repetition == rep, todo[i:])
            coming = [s for _, s in block
                      if result.judgement is None or result.judgement.not_needed(s) is None]
            if coming and _time_budget_spent(budget, time.monotonic() - session_started,
                                             runs_done, rounds_done, len(coming), out_dir,
                                             progress, bench.target_name, spec.repetition):
                return
        round_ends = i + 1 == len(todo) or todo[i + 1][1].repetition != spec.repetition
        why = result.judgement.not_needed(spec) if until and result.judgement else None
        if why is not None:
            progress.message(f"{spec.id}: not measured: {why}")
        elif await _measure(bench, spec, order, total, i, todo, out_dir, progress, result,
                            position, session_started):
            return  # the campaign stopped: the bench is lost, or the data cannot be kept
        else:
            runs_done += 1
            if until and runs_done == 1:
                # this target's rounds went on past where an earlier session's time budget stopped
                # them: that stop is history now (kept while nothing is measured: a session ended
                # before its first run leaves the reason the question is open)
                _forget_time_budget(out_dir, bench.target_name)
        rounds_done += round_ends
        if until and round_ends and _answered(campaign, out_dir, progress, result,
                                              bench.target_name):
            left = len(todo) - i - 1
            where = f"target {bench.target_name!r}" if bench.target_name else "campaign"
            verdict = "contradicted" if result.stopped else "answered"
            progress.message(f"{where} stopped after round {spec.repetition + 1}: its question "
                             f"is {verdict}" + (f"; {left} run(s) not needed" if left else ""))
            return


def _recorded_time_budgets(out_dir: Path) -> dict[str, Any]:
    """campaign.json's `time_budget`: per target, where the stop rule's time budget stopped its
    rounds (empty where none did, or the file cannot be read)."""
    try:
        recorded = json.loads((out_dir / "campaign.json").read_text()).get("time_budget")
    except (OSError, ValueError, AttributeError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _forget_time_budget(out_dir: Path, target: str | None) -> None:
    """This target's rounds go on: where an earlier session's time budget stopped them is no longer
    where they stop."""
    recorded = _recorded_time_budgets(out_dir)
    if (target or "") in recorded:
        recorded.pop(target or "")
        _record(out_dir, "time_budget", recorded or None)


def _time_budget_spent(budget: float, elapsed: float, runs: int, rounds: int, coming: int,
                       out_dir: Path, progress: ProgressSink, target: str | None,
                       next_round: int) -> bool:
    """Whether the next round's `coming` runs would end past the stop rule's time budget, at the
    mean of this session's runs on this target so far; if so, said and recorded (campaign.json's
    `time_budget`: per target, what this session spent before it stopped)."""
    per_run = elapsed / runs
    if elapsed + per_run * coming <= budget:
        return False
    where = f"target {target!r}" if target else "campaign"
    progress.message(f"{where} stopped before round {next_round + 1}: the stop rule's time budget "
                     f"({wall_time(budget)}) would be overrun by its {coming} run(s) "
                     f"({wall_time(elapsed)} spent on {runs} run(s) in {rounds} round(s), "
                     f"~{wall_time(per_run)} each); its question is left open")
    recorded = _recorded_time_budgets(out_dir)
    recorded[target or ""] = {"budget_s": budget, "spent_s": round(elapsed, 3), "runs": runs,
                              "rounds": rounds, "stopped_before_round": next_round + 1}
    _record(out_dir, "time_budget", recorded)
    return True


async def _measure(bench: Bench, spec: RunSpec, order: int, total: int, i: int,
                   todo: list[tuple[int, RunSpec]], out_dir: Path, progress: ProgressSink,
                   result: CampaignResult, position: dict[str, int],
                   session_started: float) -> bool:
    """One run; whether the campaign must stop after it (why: in result)."""
    run_progress = RunProgress(spec.id, order, total, session_started=session_started,
                               session_done=i,
                               session_left=len(todo) - i - 1, position=position.get(spec.id))
    store = RunStore(out_dir, spec.id)
    outcome = await execute_run(bench, spec, store, run_progress, progress)
    result.outcomes.append(outcome)
    if result.live is not None and (store.dir / MANIFEST).exists():
        result.live.submit(store.dir, bench.campaign.matrix.kind)  # while the next run measures
    progress.message(
        f"{spec.id}: {outcome.status}" + (f" — {outcome.error}" if outcome.error else "")
    )
    # the data cannot be kept, or the key is refused: stop everything
    if outcome.fatal is not None:
        result.stopped = outcome.fatal
        progress.message(f"campaign stopped after {spec.id}: {outcome.fatal}")
        return True
    lost = await bench.not_answering() if outcome.status == "failed" else None
    if lost is not None:
        left = len(todo) - i - 1
        if bench.target_name is None:
            result.stopped = lost
            progress.message(f"campaign stopped after {spec.id}: {lost}"
                             + (f"; {left} run(s) not started" if left else ""))
        else:  # other targets are other machines: they go on
            result.unavailable[bench.target_name] = f"lost after {spec.id}: {lost}"
            progress.message(f"target {bench.target_name!r} lost after {spec.id}: {lost}"
                             + (f"; its {left} other run(s) not started" if left else ""))
        return True
    return False


def _described_targets(out_dir: Path) -> dict[str, Any]:
    """What an earlier session recorded of each target (a resumed campaign keeps it)."""
    try:
        return dict(json.loads((out_dir / "campaign.json").read_text()).get("targets") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def _write_campaign_json(out_dir: Path, campaign: Campaign, latest: dict[str, Any],
                         targets: dict[str, Any]) -> None:
    """campaign.json: `targets` as each target's session found it; `target`, `scope` and
    `twin` as the latest session did (a single-target campaign has just that one)."""
    data = {
        "name": campaign.name,
        "description": campaign.description,
        "created_utc": now_utc(),
        "station_version": station_version(),
        **latest,
        "targets": targets,
        # the targets in the campaign file's order (the file written here sorts its keys, the
        # config's targets among them): tables list their rows in it
        "target_order": list(campaign.bench.named_targets()),
        "config": campaign.model_dump(mode="json"),
        # the order the runs are measured in (issue 46: interleaved, seeded), to be read beside
        # their times
        "order": {"rule": campaign.matrix.order,
                  "seed": order_seed(campaign) if campaign.matrix.order == "interleaved" else None,
                  "runs": [spec.id for spec in expand_runs(campaign)]},
    }
    with contextlib.suppress(OSError, ValueError, AttributeError):  # the stop rule's last word
        before = json.loads((out_dir / "campaign.json").read_text())
        if campaign.matrix.until is not None:
            # and where a time budget stopped another target's rounds (or an earlier session's)
            for key in ("stopping", "time_budget"):
                if before.get(key) is not None:
                    data[key] = before[key]
    earlier = _earlier_orders(out_dir / "campaign.json", data["order"])
    if earlier:  # a resume under another order (or name, or seed): what the first sessions followed
        data["earlier_orders"] = earlier
    write_text_atomically(out_dir / "campaign.json",
                          json.dumps(data, indent=2, sort_keys=True) + "\n")
