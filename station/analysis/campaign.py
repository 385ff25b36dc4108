"""Analysis of a campaign directory into the report dictionary
(schema: docs/report-schema.md) and the per-run samples the figures need.

The runs are grouped by their kind (manifest.json) and each group is handed to its kind's
analysis (station/kind_registry.py: `Kind.analysis`); this module names no kind."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from station import kind_registry
from station.analysis import worst_case
from station.analysis.samples import RunSamples
from station.analysis.stopping_summary import stopping_entry, stopping_finding
from station.store.manifest import Manifest, read_manifest
from station.store.run_store import list_runs, station_version

# report.json's version (docs/report-schema.md). 2 (2026-11-27): typed and validated against
# station.report.model's models as it is written; `comparisons` absent without module runs (1 had
# it with empty lists). Readers still take 1: its fields are a subset of 2's
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class AnalysisInput:
    """What a kind's analysis is given: its runs of the campaign and the campaign's settings."""

    run_dirs: list[Path]
    # campaign.json; with a deadline given to `station report`, its config says it
    campaign: dict[str, Any]
    deadline_ns: float | None  # report.deadline (or `station report --deadline`), in ns
    exceedance: float  # report.exceedance: the worst case's probability per event
    # given to `station report`: it wins over a kind's own deadline setting
    deadline_given: bool = False
    # the caller's own work (the report writer's imports), for a kind whose runs are analysed in
    # other processes to run while it waits for them (station/analysis/run_pool.py); may not be run
    meanwhile: Callable[[], object] | None = None


@dataclass
class KindReport:
    """A kind's part of the report: its entries (merged into the report's top level: a kind's
    section under its name, or the module kind's runs and comparisons), the figures' samples by
    run id, notes for the warnings, and findings for the first page (each with a headline)."""

    entries: dict[str, Any]
    samples: dict[str, RunSamples] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)


def section_report(name: str, section: dict[str, Any], samples: dict[str, RunSamples],
                   notes: list[str]) -> KindReport:
    """A kind whose part is one section under its name: its findings with a headline go first."""
    return KindReport({name: section}, samples, notes,
                      [f for f in section.get("findings") or [] if f.get("headline")])


def analyse_campaign(out_dir: Path, deadline_ns: float | None = None,
                     meanwhile: Callable[[], object] | None = None) -> tuple[dict[str, Any],
                                                                             dict[str, RunSamples]]:
    """The report dictionary and the figures' samples. `deadline_ns` (else the campaign file's
    report.deadline) adds the probability of exceeding it to the worst case. `meanwhile`: the
    caller's own work, run while worker processes analyse runs, if any do (AnalysisInput)."""
    out_dir = Path(out_dir)
    campaign = (
        json.loads((out_dir / "campaign.json").read_text())
        if (out_dir / "campaign.json").exists()
        else {}
    )
    settings = (campaign.get("config") or {}).get("report") or {}
    given = deadline_ns is not None
    if deadline_ns is None and settings.get("deadline") is not None:
        # 30us is 29999.999999999996 ns
        deadline_ns = float(round(float(settings["deadline"]) * 1e9))
    elif deadline_ns is not None:  # given here (station report --deadline): it wins for every kind
        config = dict(campaign.get("config") or {})
        config["report"] = {**settings, "deadline": deadline_ns / 1e9}
        campaign = {**campaign, "config": config}
    exceedance = float(settings.get("exceedance") or worst_case.EXCEEDANCE)
    notes: list[str] = []
    by_kind: dict[str, list[Path]] = {}
    spoiled: dict[str, list[str]] = {}  # spoiler flag -> the runs it was raised in
    known = kind_registry.kinds()
    run_dirs = list_runs(out_dir)
    for run_dir in run_dirs:
        try:
            manifest = read_manifest(run_dir)
        except ValueError as exc:  # said, and the other runs are analysed
            notes.append(f"Run {run_dir.name} is left out: {exc}")
            continue
        kind = manifest.kind
        for flag in manifest.spoilers.flags if manifest.spoilers else []:
            spoiled.setdefault(flag, []).append(manifest.run_id)
        if kind in known and known[kind].analysis is not None:
            by_kind.setdefault(kind, []).append(run_dir)
        else:
            notes.append(f"Run {run_dir.name} is a {kind!r} run, which this station version cannot "
                         "analyse.")
    for flag, ids in spoiled.items():  # once per flag, not once per run
        where = "every run" if len(ids) == len(run_dirs) else "runs " + ", ".join(ids[:5]) + (
            f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        notes.append(f"Spoiler ({where}): {flag}")
    parts: list[KindReport] = []
    # in the registry's order, whatever the runs' order: the report does not depend on it
    # one BLAS thread, whoever imported numpy first: the station's linear algebra is small, and the
    # last digits of its dot products would otherwise depend on the machine's core count
    with threadpool_limits(limits=1, user_api="blas"):
        for name in (k for k in known if k in by_kind):
            analyse = known[name].load("analysis")
            parts.append(analyse(AnalysisInput(by_kind[name], campaign, deadline_ns, exceedance,
                                               given, meanwhile)))
    # the kinds' notes in their order (the sections' before the module runs', as always)
    ordered = [p for p in parts if "runs" not in p.entries] + [
        p for p in parts if "runs" in p.entries
    ]
    samples: dict[str, RunSamples] = {}
    for part in ordered:
        samples |= part.samples
        notes += part.notes
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "campaign": {
            "name": campaign.get("name", out_dir.name),
            "description": campaign.get("description", ""),
            "config_path": str(out_dir / "campaign.yaml"),
            "created_utc": campaign.get("created_utc", ""),
            "station_version": station_version(),
            "target": campaign.get("target", {}),
            "scope": campaign.get("scope"),
            "generator": campaign.get("generator"),
            # the preset's values as played, and which of them the campaign overrode
            "twin": campaign.get("twin")
            and {
                "overrides": (
                    ((campaign.get("config") or {}).get("bench") or {}).get("twin") or {}
                ).get("overrides")
                or {},
                **campaign["twin"],
            },
            "targets": campaign.get("targets") or {},
        },
        "runs": [],  # a kind whose runs are the report's own (the module kind) fills it
        "notes": notes,
    }
    for part in parts:
        report.update(part.entries)
    # the answer, read first: each kind's findings that carry a headline, module runs' first;
    # the stop rule's before them (what the campaign asked)
    report["findings"] = [f for part in sorted(parts, key=lambda p: "runs" not in p.entries)
                          for f in part.findings]
    if (stopping := stopping_entry(campaign)) is not None:
        report["stopping"] = stopping
        report["findings"].insert(0, stopping_finding(stopping))
    return report, samples


def entry_identity(manifest: Manifest) -> dict[str, Any]:
    """The head of every kind's run entry (report.model.RunIdentity): the run's id, target, load,
    repetition, status and error, from its manifest."""
    run = manifest.run
    return {"id": manifest.run_id, "target": run and run.target, "load": run and run.load,
            "repetition": run and run.repetition, "status": manifest.status,
            "error": manifest.error}
