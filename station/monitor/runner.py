"""The monitoring loop: every `every`, each phase's campaign for `windows` windows of `window`,
into the lab store; what happened appended to the ledger; the overview pages redrawn."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from station.common.progress import ProgressSink
from station.monitor.ledger import Entry, Ledger
from station.monitor.schedule import Phase, Schedule, load_schedule, resolve
from station.store.manifest import read_manifest

ANCHOR = "monitor.json"  # the schedule's start: cycle k is due at anchor + k × every


@dataclass
class MonitorResult:
    store: Path
    cycles: int  # cycles this invocation went through (measured or recorded as a gap)
    stopped: str | None = None  # why it stopped before its last cycle (a full disk)
    pages: list[Path] | None = None


class Monitor:
    def __init__(
        self, schedule_path: Path, progress: ProgressSink, clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    ) -> None:
        self.path = Path(schedule_path)
        self.schedule: Schedule = load_schedule(self.path)
        self.store = resolve(self.path, self.schedule.store)
        self.ledger = Ledger(self.store)
        self.progress, self.clock, self.sleep = progress, clock, sleep
        self.exporter: Any = None  # station.monitor.exporter.Exporter, while run() runs

    def _start_exporter(self) -> None:
        """The Prometheus endpoint and/or textfile the schedule asks for, serving the ledger as
        it stands from the start (a restarted monitor's history included)."""
        settings = self.schedule.prometheus
        if settings is None:
            return
        from station.monitor.exporter import Exporter

        textfile = resolve(self.path, settings.textfile) if settings.textfile else None
        self.exporter = Exporter(self.schedule, self.store, textfile, self._anchor())
        self.exporter.start()
        if settings.listen is not None:
            host, port = settings.address()
            self.progress.message(f"monitor: Prometheus metrics on http://{host}:{port}/metrics")
        self._export()

    def _export(self) -> None:
        if self.exporter is None:
            return
        from station.monitor.overview import phase_verdicts

        entries = self.ledger.entries()
        try:
            self.exporter.update(entries, phase_verdicts(
                entries, [p.name for p in self.schedule.phases], self.schedule.false_alarm),
                self._max_budgets())
        # a textfile that cannot be written, a figure that cannot be made: said, and the schedule
        # goes on (the endpoint keeps the last figures made)
        except Exception as exc:  # noqa: BLE001
            self.progress.message("monitor: the Prometheus figures were not updated: "
                                  f"{type(exc).__name__}: {exc}")

    def _max_budgets(self) -> dict[str, tuple[str, float]]:
        """Each phase's tightest `max` budget for all its runs (its campaign's budgets:, read as
        each phase is), as (op, s); of equal limits, `<` is the tighter."""
        from station.config import ConfigError, load_campaign

        out = {}
        for phase in self.schedule.phases:
            try:
                campaign = load_campaign(resolve(self.path, phase.campaign), check_files=False)
            except ConfigError:
                continue
            limits = [(b.limit, b.op != "<", b.op) for b in (spec.parsed()
                                                            for spec in campaign.budgets)
                      if b.figure.name == "max" and not b.runs]
            if limits:
                limit, _, op = min(limits)
                out[phase.name] = (op, limit)
        return out

    def _anchor(self) -> float:
        path = self.store / ANCHOR
        if path.exists():
            return float(json.loads(path.read_text())["anchor"])
        self.store.mkdir(parents=True, exist_ok=True)
        anchor = self.clock()
        path.write_text(json.dumps({"schedule": self.schedule.name, "anchor": anchor}) + "\n")
        return anchor

    async def run(self, cycles: int | None = None) -> MonitorResult:
        try:
            self._start_exporter()
            return await self._run(cycles)
        finally:
            if self.exporter is not None:
                self.exporter.stop()
                self.exporter = None

    async def _run(self, cycles: int | None = None) -> MonitorResult:
        last = cycles if cycles is not None else self.schedule.cycles
        anchor = self._anchor()
        entries = self.ledger.entries()
        done = {e.key for e in entries}
        every = self.schedule.every
        # each cycle's start: its first window's (a gap's: when it was due)
        starts: dict[int, float] = {}
        for e in entries:
            starts[e.cycle] = min(starts.get(e.cycle, e.started), e.started)
        cycle = max(starts, default=-1)
        went = 0
        result = MonitorResult(self.store, 0)
        if cycle >= 0 and not all(self._done(done, cycle, p) for p in self.schedule.phases):
            due = self.clock()  # a cycle cut by a stop (a kill, a reboot): finished now
        else:
            cycle += 1
            due = anchor if cycle == 0 else starts[cycle - 1] + every
            # cycles start `every` apart; a period that passed whole after the last monitor's last
            # window (it stopped, the machine was down) is a cycle missed: a gap
            missed_from = max(due, max((e.ended for e in entries), default=due))
            while self.clock() >= missed_from + every and (last is None or cycle < last):
                self._gap_cycle(cycle, done, missed_from,
                                "the monitor was not running when this cycle was due")
                went, cycle, missed_from = went + 1, cycle + 1, missed_from + every
            due = max(due, missed_from) if went else due
        while last is None or cycle < last:
            now = self.clock()
            if now < due:
                self.progress.message(f"monitor: cycle {cycle} due in {due - now:.0f} s")
                await self.sleep(due - now)
            began = starts.get(cycle, self.clock())
            for phase in self.schedule.phases:
                if self._done(done, cycle, phase):
                    continue
                if (why := self._disk_full()) is not None:
                    result.stopped = why
                    self.progress.message(f"monitor: stopped: {why}")
                    result.cycles, result.pages = went, self._pages()
                    return result
                await self._phase(cycle, phase, done)
            went += 1
            result.pages = self._pages()
            cycle += 1
            due = began + every  # a cycle that overran is followed at once, never by a burst
        result.cycles = went
        return result

    def _pages(self) -> list[Path]:
        """The overview pages; a failure to draw them is said, and the schedule goes on."""
        from station.monitor.overview import write_pages

        try:
            return write_pages(self.store, self.ledger, self.schedule)
        except Exception as exc:  # noqa: BLE001 - a page is not worth a stopped monitor
            self.progress.message("monitor: the overview pages were not written: "
                                  f"{type(exc).__name__}: {exc}")
            return []

    @staticmethod
    def _done(done: set[tuple[int, str, int]], cycle: int, phase: Phase) -> bool:
        return all((cycle, phase.name, w) in done for w in range(phase.windows))

    def _gap_cycle(self, cycle: int, done: set, due: float, reason: str) -> None:
        for phase in self.schedule.phases:
            for w in range(phase.windows):
                if (cycle, phase.name, w) not in done:
                    self.ledger.append(Entry(cycle, phase.name, w, "gap", due,
                                             due + self.schedule.every,
                                             reason=reason))
                    done.add((cycle, phase.name, w))
        self._export()

    def _disk_full(self) -> str | None:
        self.store.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.store).free / 2**20
        if free < self.schedule.min_free_mib:
            return (f"the store's disk has {free:.0f} MiB free, less than min_free_mib "
                    f"({self.schedule.min_free_mib}): free space in {self.store} (or lower "
                    "min_free_mib), then start the monitor again: it resumes")
        return None

    def _phase_campaign(self, phase: Phase) -> Any:
        """The phase's campaign with the schedule's window and windows (a station.config Campaign),
        or why it cannot be a phase (a str)."""
        from pydantic import ValidationError

        from station import kind_registry
        from station.config import ConfigError, campaign_model, load_campaign

        try:
            campaign = load_campaign(resolve(self.path, phase.campaign))
        except ConfigError as exc:
            return f"the phase's campaign file: {exc}"
        if kind_registry.kind(campaign.matrix.kind).window_maximum is None:
            return (f"a {campaign.matrix.kind} campaign gives no latency maximum per window: it "
                    "cannot be a monitored phase")
        if len(campaign.bench.named_targets()) > 1:
            return ("a phase measures one target: its campaign names "
                    f"{len(campaign.bench.named_targets())} (bench.targets); give each target its "
                    "own phase")
        try:  # the schedule's window and windows, checked as the campaign's own values would be
            data = campaign.model_dump(mode="json", by_alias=True, exclude_unset=True)
            data["matrix"] |= {"duration": self.schedule.window, "repetitions": phase.windows}
            return campaign_model().model_validate(data)
        except ValidationError as exc:
            return f"the phase's campaign with the schedule's window: {exc.errors()[0]['msg']}"

    async def _phase(self, cycle: int, phase: Phase, done: set) -> None:
        from station import api

        started = self.clock()
        out = self.store / "campaigns" / phase.name / f"cycle-{cycle:06d}"
        campaign = self._phase_campaign(phase)
        if isinstance(campaign, str):
            self._record(cycle, phase, done, started, None, campaign)
            return
        wait, reason, failed_at = self.schedule.retry.first, None, None
        while True:
            try:
                result = await api.run_campaign_async(campaign, out, self.progress, resume=True)
            except api.CampaignError as exc:
                reason = str(exc)
            # a bug or a fault of one phase: a gap, not a dead monitor
            except Exception as exc:  # noqa: BLE001
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = result.stopped or next(iter(result.unavailable.values()),
                                                None) or result.report_error
                if reason is None:
                    break
            # the budget counts from the failure
            failed_at = self.clock() if failed_at is None else failed_at
            if self.clock() - failed_at + wait > self.schedule.retry.for_:
                break
            self.progress.message(f"monitor: {phase.name}, cycle {cycle}: {reason}; retrying in "
                                  f"{wait:g} s")
            await self.sleep(wait)
            wait *= 2
        self._record(cycle, phase, done, started, out if out.exists() else None, reason,
                     campaign.matrix.kind)

    def _record(self, cycle: int, phase: Phase, done: set, started: float, out: Path | None,
                reason: str | None, kind: str | None = None) -> None:
        """One ledger entry per window of the phase: its run's maximum, or a gap and why."""
        runs = _window_runs(out, kind) if out is not None and kind is not None else {}
        target, kernel = _target_of(out) if out is not None else ("target", None)
        ended = self.clock()
        for w in range(phase.windows):
            if (cycle, phase.name, w) in done:
                continue
            run = runs.get(w)
            rel = str(out.relative_to(self.store)) if out is not None else None
            if run is not None and run["status"] in ("complete",
                                                     "incomplete") and run["max_ns"] is not None:
                entry = Entry(cycle, phase.name, w, run["status"], run["started"] or started,
                              run["ended"] or ended,
                              target, rel, run["id"], run["max_ns"], kernel)
            else:
                why = reason or (
                    f"run {run['id']} {run['status']}: {run.get('error')}" if run else "no run"
                )
                entry = Entry(cycle, phase.name, w, "gap", started, ended, target, rel, None, None,
                              kernel, why)
            self.ledger.append(entry)
            done.add(entry.key)
        self._export()


def _window_runs(out: Path, kind_name: str) -> dict[int, dict[str, Any]]:
    """The campaign's runs by repetition (window): status, maximum (the kind's window_maximum),
    when (from each run's manifest and the report the campaign wrote)."""
    from station import kind_registry

    path = out / "report.json"
    kind = kind_registry.kind(kind_name)
    if not path.exists() or kind.window_maximum is None:
        return {}
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):  # torn by a crash: the windows are gaps, said so
        return {}
    found: dict[int, dict[str, Any]] = {}
    entries = (
        report.get("runs") if kind.top_level_runs else (report.get(kind.name) or {}).get("runs")
    )
    runs = [(r, kind.window_maximum(r)) for r in entries or []]
    for run, max_ns in runs:  # a phase of several cells: the window's maximum is theirs
        rep = int(run.get("repetition") or 0)
        seen = found.get(rep)
        if seen is None or (
            max_ns is not None and (seen["max_ns"] is None or max_ns > seen["max_ns"])
        ):
            found[rep] = {"id": run["id"], "status": run["status"], "error": run.get("error"),
                          "max_ns": max_ns}
    for run in found.values():
        try:
            manifest = read_manifest(out / "runs" / run["id"])
            started, ended = manifest.started_utc, manifest.ended_utc
        except (OSError, ValueError):
            started = ended = None
        run["started"], run["ended"] = _unix(started), _unix(ended)
    return found


def _unix(stamp: str | None) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        return None


def _target_of(out: Path) -> tuple[str, str | None]:
    """The target's host name and kernel release, as the campaign's audit read them (uname -a)."""
    try:
        audit = json.loads((out / "campaign.json").read_text())["target"]["audit"]
    except (OSError, ValueError, KeyError, TypeError):
        return "target", None
    fields = str(audit.get("uname") or "").split()
    return (fields[1] if len(fields) > 1 else "target"), (fields[2] if len(fields) > 2 else None)
