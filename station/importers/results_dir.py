"""`station import`'s results directory: every input checked whole first, then one run
directory per input written through station/store/run_store.py (RunStore: opened "running", sealed
"complete" only once its Parquet files exist), and a campaign.json that marks the
directory as an import target, so `station report` reads it like any campaign."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from station.importers.cyclictest import CyclictestImport, read_cyclictest
from station.importers.dump import SwDump, read_dump
from station.importers.scope_csv import ScopeTable, read_scope
from station.importers.source import FORMATS, ImportInputError, detect, read_source
from station.kinds.cyclictest import analysis as ct_analysis
from station.parsers import records
from station.store.manifest import read_manifest
from station.store.run_store import (
    RunStore,
    list_runs,
    now_utc,
    read_csv_lines,
    station_version,
    write_parquet,
)

# campaign.json's "origin": the mark of a directory `station import` may add runs to
ORIGIN = "import"
UNKNOWN = "unknown"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class ImportOptions:
    """What the files do not say themselves (docs/import.md)."""

    format: str = "auto"  # FORMATS; forces every file's format
    interface: str | None = None  # lpt | pcie; None: a v1 stream's flags, else "unknown"
    variant: str | None = None  # inb | no-inb; likewise
    load: str = UNKNOWN
    period_ns: int | None = None
    repetition: int = 0
    target: str | None = None  # a cyclictest run's row in the maximum-latency table
    name: str | None = None
    description: str = ""
    run_ids: tuple[str, ...] = ()  # one per file, in order; default: from the file names
    # a scope capture (CSV or Parquet) of the same run as the (single) dump
    scope: Path | None = None


@dataclass
class ImportedRun:
    run_id: str
    kind: str  # "module" or "cyclictest"
    what: str  # e.g. "legacy dump, 2000000 records + 900 scope pulses"
    warnings: list[str] = field(default_factory=list)


@dataclass
class ImportResult:
    out_dir: Path
    runs: list[ImportedRun]


Parsed = SwDump | ScopeTable | CyclictestImport


def import_files(files: list[Path], out_dir: Path,
                 options: ImportOptions = ImportOptions()) -> ImportResult:
    """Import each file as one run of the results directory out_dir. Every input is read and
    checked before anything is written: bad input raises ImportInputError and leaves out_dir
    as it was."""
    files, out_dir = [Path(f) for f in files], Path(out_dir)
    _check_options(files, options)
    campaign = _import_target(out_dir)
    run_ids = list(options.run_ids) or [run_id_of(f) for f in files]
    _check_run_ids(out_dir, run_ids)
    parsed = [_read(f, options.format) for f in files]
    scope = read_scope(read_source(options.scope)) if options.scope is not None else None
    if scope is not None and not isinstance(parsed[0], SwDump):
        raise ImportInputError(options.scope,
                               f"--scope goes with a software dump, and {files[0]} is none")
    order = max((read_manifest(d).order for d in list_runs(out_dir)),
                default=-1) + 1
    out_dir.mkdir(parents=True, exist_ok=True)
    campaign.setdefault("imports", [])
    campaign["imports"].append({"utc": now_utc(), "files": [str(f) for f in files], "runs": []})
    # first: the directory is an import target from now on
    _write_campaign(out_dir, campaign, options)
    result = ImportResult(out_dir, [])
    for k, (run_id, item) in enumerate(zip(run_ids, parsed, strict=True)):
        result.runs.append(_write_run(RunStore(out_dir, run_id), order + k, item, scope, options,
                                      campaign["name"]))
        campaign["imports"][-1]["runs"].append(run_id)
        _write_campaign(out_dir, campaign, options)
    return result


def run_id_of(path: Path) -> str:
    """A run id from a file name: its stem, with anything but letters, digits, '.', '_', '-' made
    '-'."""
    rid = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).stem).strip("-._")[:100] or "run"
    # list_runs takes *.attempt-N for an earlier attempt
    return rid.replace(".attempt-", "-attempt-")


def _check_options(files: list[Path], options: ImportOptions) -> None:
    if not files:
        raise ImportInputError("station import", "no file to import")
    if options.format not in FORMATS:
        raise ImportInputError("--format",
                               f"{options.format!r}: expected one of {', '.join(FORMATS)}")
    for name, value, allowed in (("--interface", options.interface, ("lpt", "pcie")),
                                 ("--variant", options.variant, ("inb", "no-inb"))):
        if value is not None and value not in allowed:
            raise ImportInputError(name, f"{value!r}: expected {' or '.join(allowed)}")
    if options.period_ns is not None and options.period_ns <= 0:
        raise ImportInputError("--period", f"{options.period_ns} ns: a period is positive")
    if options.run_ids and len(options.run_ids) != len(files):
        raise ImportInputError("--run-id",
                               f"{len(options.run_ids)} run ids for {len(files)} files: give one "
                               "per file")
    if options.scope is not None and len(files) != 1:
        raise ImportInputError("--scope",
                               "goes with exactly one software dump (import the others separately)")


def _import_target(out_dir: Path) -> dict[str, Any]:
    """campaign.json of an earlier import into out_dir, {} for a new or empty directory; any
    other non-empty directory is refused (its data is not ours to add to)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ImportInputError(out_dir, "--out exists and is not a directory")
    if not out_dir.exists() or not any(out_dir.iterdir()):
        return {}
    try:
        campaign = json.loads((out_dir / "campaign.json").read_text())
    except (OSError, ValueError):
        campaign = None
    if not isinstance(campaign, dict) or campaign.get("origin") != ORIGIN:
        raise ImportInputError(out_dir, "--out is not empty and is not a `station import` results "
                               "directory: give a new or empty directory (or one an earlier import "
                               "wrote)")
    return campaign


def _check_run_ids(out_dir: Path, run_ids: list[str]) -> None:
    for rid in run_ids:
        if not _RUN_ID.fullmatch(rid) or ".attempt-" in rid:
            raise ImportInputError("--run-id",
                                   f"{rid!r}: letters, digits, '.', '_', '-' (not '.attempt-')")
        if (out_dir / "runs" / rid).exists():
            raise ImportInputError(out_dir,
                                   f"run {rid} exists already (give another with --run-id)")
    twice = sorted({r for r in run_ids if run_ids.count(r) > 1})
    if twice:
        raise ImportInputError("--run-id",
                               f"two files would be run {twice[0]}: give each its own --run-id")


def _read(path: Path, fmt: str) -> Parsed:
    src = read_source(path)
    fmt = detect(src) if fmt == "auto" else fmt
    if fmt in records.FORMATS:
        return read_dump(src, fmt)
    if fmt == "scope":
        return read_scope(src)
    return read_cyclictest(src)


def _write_campaign(out_dir: Path, campaign: dict[str, Any], options: ImportOptions) -> None:
    campaign.update({
        "origin": ORIGIN,
        "name": options.name or campaign.get("name") or out_dir.name,
        "description": options.description or campaign.get("description", ""),
        "created_utc": campaign.get("created_utc") or now_utc(),
        "station_version": station_version(),
        "target": campaign.get("target") or {"kind": "imported"},
        "scope": None, "twin": None, "targets": campaign.get("targets") or {},
    })
    (out_dir / "campaign.json").write_text(json.dumps(campaign, indent=2, sort_keys=True) + "\n")


def _write_run(store: RunStore, order: int, item: Parsed, scope: ScopeTable | None,
               options: ImportOptions, campaign_name: str) -> ImportedRun:
    """One run directory: opened "running", files written, Parquet made, then sealed "complete";
    anything failing on the way seals it "failed" with the reason, and is raised."""
    sw = item if isinstance(item, SwDump) else None
    hw = item if isinstance(item, ScopeTable) else scope
    sources = {"sw": sw.source.describe()} if sw else {}
    if hw is not None:
        sources["hw"] = hw.source.describe()
    if isinstance(item, CyclictestImport):
        sources = {"cyclictest": item.source.describe()}
    imported = {"sources": sources, "imported_utc": now_utc(), "station_version": station_version(),
                "options": {k: str(v) if isinstance(v, Path) else v
                            for k, v in asdict(options).items()}}
    run = ImportedRun(store.run_id, "cyclictest" if isinstance(item,
                                                               CyclictestImport) else "module", "")
    if isinstance(item, CyclictestImport):
        manifest, extra, conversions = _cyclictest_run(item, run, options)
    else:
        manifest, extra, conversions = _module_run(sw, hw, run, options)
    imported |= manifest.pop("imported", {})
    store.open({"kind": run.kind, "order": order, "imported": imported,
                # the campaign's name, where store.run_identity finds it for the Parquet identity
                # columns
                "campaign": {"name": campaign_name, "origin": ORIGIN}, **manifest})
    try:
        for name, content in _files(item, scope).items():
            store.appender(name).write(content, flush=True)
        store.close_files()
        counts: dict[str, int] = {}
        # before the seal: "complete" is written only with its Parquet files
        for convert in conversions:
            counts |= convert(store.dir)
    except Exception as exc:
        store.seal("failed", {"error": f"import: {type(exc).__name__}: {exc}"})
        raise
    store.seal("complete", extra, [lambda _dir: counts])
    if "seal_error" in store.manifest:  # its checksums or manifest could not be written
        store.manifest["status"], store.manifest["error"] = "failed", store.manifest["seal_error"]
        store.write_manifest()
        raise OSError(f"{store.dir}: {store.manifest['seal_error']}")
    return run


def _files(item: Parsed, scope: ScopeTable | None) -> dict[str, bytes]:
    """The run directory's raw files: what the station itself would have written."""
    if isinstance(item, CyclictestImport):
        return item.files
    files: dict[str, bytes] = {}
    if isinstance(item, SwDump):
        files["sw.raw"] = item.source.data  # byte for byte, a torn last record included
    table = item if isinstance(item, ScopeTable) else scope
    if table is not None:
        files["hw_pulses.csv"] = table.pulses.to_csv(index=False).encode()
        files["hw_source" + (table.source.path.suffix or ".csv")] = table.source.data
    return files


def _module_run(sw: SwDump | None, hw: ScopeTable | None, run: ImportedRun,
                options: ImportOptions) -> tuple[dict[str, Any], dict[str, Any], list]:
    interface, variant = options.interface, options.variant
    parts = []
    if sw is not None:
        parts.append(f"{sw.format} dump, {sw.records} records")
        for opt, given, found in (("--interface", interface, sw.interface), ("--variant", variant,
                                                                             sw.variant)):
            if given is not None and found is not None and given != found:
                run.warnings.append(f"{sw.source.path}: {opt} {given} given, but the records' "
                                    f"flags say {found}: {given} is recorded")
        interface, variant = interface or sw.interface, variant or sw.variant
        if sw.torn_bytes:
            size = records.RECORD_SIZE if sw.format == "v1" else records.LEGACY_DTYPE.itemsize
            run.warnings.append(f"{sw.source.path}: byte {sw.source.size - sw.torn_bytes}: the "
                                f"last {sw.torn_bytes} bytes are not a whole {size}-byte record: "
                                "ignored (kept in sw.raw)")
        if sw.losses["sw_lost"]:
            run.warnings.append(f"{sw.source.path}: {sw.losses['sw_lost']} records lost in "
                                f"{sw.losses['gaps']} sequence gaps (counted as losses)")
    if hw is not None:
        parts.append(f"{len(hw.pulses)} scope pulses")
        if hw.ignored_columns:
            run.warnings.append(f"{hw.source.path}: columns not imported: "
                                f"{', '.join(hw.ignored_columns)}")
    run.what = " + ".join(parts)
    manifest: dict[str, Any] = {
        "run": {"interface": interface or UNKNOWN, "variant": variant or UNKNOWN,
                "load": options.load,
                "repetition": options.repetition, "target": options.target},
        "period_ns": options.period_ns,
        "scope": hw is not None,
        "imported": {"warnings": run.warnings},
    }
    extra: dict[str, Any] = {}
    conversions = [_sw_conversion(sw.format if sw else "legacy")]
    if sw is not None:
        manifest["format"] = sw.format  # module_data.load_run decodes sw.raw by it
        manifest["imported"]["torn_bytes"] = sw.torn_bytes
        extra["losses"] = sw.losses
    if hw is not None:
        manifest["imported"]["hw_columns"] = hw.layout
        conversions.append(_hw_conversion)
    return manifest, extra, conversions


def _cyclictest_run(item: CyclictestImport, run: ImportedRun,
                    options: ImportOptions) -> tuple[dict[str, Any], dict[str, Any], list]:
    run.what = (
        f"cyclictest {item.form}, {len(item.summary['threads'])} thread(s), max "
        f"{item.summary['max_us']} µs"
    )
    if item.form == "status":
        run.warnings.append(f"{item.source.path}: status lines only: per-thread cycles/min/avg/max "
                            "(avg truncated to whole µs), no histogram; cyclictest.json is "
                            "derived from them")
    manifest = {
        "run": {"interface": None, "variant": None, "load": options.load,
                "repetition": options.repetition,
                "target": options.target},
        "probe": {"tool": "cyclictest", "arguments": item.arguments},
        "imported": {"cyclictest_form": item.form, "warnings": run.warnings},
    }
    extra = {"cyclictest": {"version": item.version, "json": "cyclictest.json" in item.files,
                            "exit_status": None,
                            "stopped_by_station": False, **item.summary}}
    return manifest, extra, [_cyclictest_conversion]


def _sw_conversion(fmt: str):  # noqa: ANN202 - a store.Conversion
    # as ModuleRun's: absent sw.raw (scope alone) → no records
    def sw(run_dir: Path) -> dict[str, int]:
        frame = records.decode_file(run_dir / "sw.raw", fmt)
        write_parquet(frame, run_dir / "sw.parquet")
        return {"sw_records": len(frame)}

    return sw


def _hw_conversion(run_dir: Path) -> dict[str, int]:
    frame = read_csv_lines(run_dir / "hw_pulses.csv")
    write_parquet(frame, run_dir / "hw.parquet")
    return {"hw_pulses": len(frame)}


def _cyclictest_conversion(run_dir: Path) -> dict[str, int]:
    frame = ct_analysis.histogram_table(ct_analysis.read_outputs(run_dir))
    write_parquet(frame, run_dir / "cyclictest_histogram.parquet")
    return {"histogram_buckets": len(frame), "cyclictest_samples": int(frame["count"].sum())}
