"""Analysis of a campaign directory into the report dictionary
(schema: docs/report-schema.md) and the per-run samples the figures need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from station import records
from station.analysis import correlation, cyclictest, findings, gpio, interruptions, outliers, worst_case
from station.analysis.distribution import Distribution
from station.analysis.pairing import Pairing, pair_run
from station.report.samples import RunSamples
from station.store import RunData, list_runs, load_run, station_version

SCHEMA_VERSION = 1
# what the analysis reads of a run's records (a result-store file holds more: identity, timestamps)
ANALYSED_COLUMNS = {"sw": ("seq", "latency_ns", "flags", "hw_width_ns"),
                    "hw": ("acquisition", "start_s", "width_s", "armed_host_s"),
                    "truth": ("seq", "t_rw_ns", "hw_ns", "sw_ns", "d_sw_ns")}
# a probe kind's analysis: (its run directories, campaign.json) -> (report section, samples, notes);
# the section goes into the report under the kind's name
PROBE_ANALYSES = {"cyclictest": cyclictest.analyse_runs, "interruptions": interruptions.analyse_runs,
                  "gpio": gpio.analyse_runs}


def analyse_campaign(out_dir: Path, deadline_ns: float | None = None) -> tuple[dict[str, Any], dict[str, RunSamples]]:
    """The report dictionary and the figures' samples. `deadline_ns` (else the campaign file's
    report.deadline) adds the probability of exceeding it to the worst case."""
    out_dir = Path(out_dir)
    campaign = json.loads((out_dir / "campaign.json").read_text()) if (out_dir / "campaign.json").exists() else {}
    settings = (campaign.get("config") or {}).get("report") or {}
    if deadline_ns is None and settings.get("deadline") is not None:
        deadline_ns = float(round(float(settings["deadline"]) * 1e9))  # 30us is 29999.999999999996 ns
    elif deadline_ns is not None:  # given here (station report --deadline): it wins for every kind
        config = dict(campaign.get("config") or {})
        config["report"] = {**settings, "deadline": deadline_ns / 1e9}
        config["cyclictest"] = {**(config.get("cyclictest") or {}), "deadline": deadline_ns / 1e9}
        campaign = {**campaign, "config": config}
    exceedance = float(settings.get("exceedance") or worst_case.EXCEEDANCE)
    notes: list[str] = []
    module_dirs: list[Path] = []
    probe_runs: dict[str, list[Path]] = {}
    spoiled: dict[str, list[str]] = {}  # spoiler flag -> the runs it was raised in
    for run_dir in list_runs(out_dir):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        kind = manifest.get("kind", "module")
        for flag in (manifest.get("spoilers") or {}).get("flags") or []:
            spoiled.setdefault(flag, []).append(manifest.get("run_id", run_dir.name))
        if kind == "module":
            module_dirs.append(run_dir)
        elif kind in PROBE_ANALYSES:
            probe_runs.setdefault(kind, []).append(run_dir)
        else:
            notes.append(f"Run {run_dir.name} is a {kind!r} run, which this station version cannot analyse.")
    for flag, ids in spoiled.items():  # once per flag, not once per run
        where = "every run" if len(ids) == len(list_runs(out_dir)) else "runs " + ", ".join(ids[:5]) + (
            f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        notes.append(f"Spoiler ({where}): {flag}")
    samples: dict[str, RunSamples] = {}
    probe_sections = {}
    for kind, dirs in probe_runs.items():
        probe_sections[kind], kind_samples, kind_notes = PROBE_ANALYSES[kind](dirs, campaign)
        samples |= kind_samples
        notes += kind_notes
    run_entries = []
    pairings: dict[str, Pairing] = {}
    runs = []
    for run_dir in module_dirs:  # one run's records in memory at a time, then what the comparisons use
        run = load_run(run_dir, ANALYSED_COLUMNS)
        pairing = pair_run(run.sw, run.hw, run.arrivals, int(run.manifest.get("period_ns") or 0) or 1)
        if pairing is not None:
            pairings[run.run_id] = pairing
        entry, sample = _analyse_run(run, pairing)
        runs.append(_slim(run))
        run_entries.append(entry)
        samples[entry["id"]] = sample
        if entry["status"] != "complete":
            notes.append(f"Run {entry['id']} is {entry['status']}: {entry['error'] or 'see its manifest'}")
        if entry["losses"]["sw_lost"]:
            notes.append(f"Run {entry['id']} lost {entry['losses']['sw_lost']} software samples (sequence gaps).")
    report = {
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
            "twin": campaign.get("twin") and {"overrides": (((campaign.get("config") or {}).get("bench") or {})
                                                            .get("twin") or {}).get("overrides") or {},
                                              **campaign["twin"]},
            "targets": campaign.get("targets") or {},
        },
        "runs": run_entries,
        "comparisons": {
            "t_rw": _t_rw(run_entries, pairings),
            "cross_interface_outliers": _cross_interface(run_entries, runs, pairings),
            "worst_case": _worst_case(run_entries, runs, exceedance, deadline_ns),
        },
        "notes": notes,
        **probe_sections,
    }
    report["findings"] = findings.campaign_findings(report, samples)  # the answer, read first
    return report, samples


def _analyse_run(run: RunData, pairing: Pairing | None) -> tuple[dict[str, Any], RunSamples]:
    m = run.manifest
    # the run's samples as distributions: every statistic below is exact and none re-sorts them
    sw = Distribution.of(run.sw["latency_ns"].to_numpy(np.int64) if len(run.sw) else np.empty(0, np.int64))
    hw_widths = run.hw["width_s"].to_numpy(np.float64) * 1e9 if len(run.hw) else None
    hw = None if hw_widths is None else Distribution.of(hw_widths)
    losses = m.get("losses", {})
    entry = {
        "id": m["run_id"],
        **m["run"],
        "period_ns": m.get("period_ns"),
        "status": m.get("status"),
        "error": m.get("error"),
        "duration_s": m.get("duration_s"),
        "sw": _describe(run.sw["latency_ns"].to_numpy(), sw),
        "hw": _describe(hw_widths, hw) if hw is not None else None,
        "board": _board(run),
        "losses": {
            "sw_lost": int(losses.get("sw_lost", 0)),
            "sw_dropped_by_target": int(losses.get("sw_dropped_by_target", 0)),
            "gaps": int(losses.get("gaps", 0)),
            "format": m.get("format", "v1"),
        },
        "interrupts": m.get("interrupts"),
        "shift": correlation.shift(sw, hw_widths, run.hw["acquisition"].to_numpy()) if hw is not None else None,
        "outliers": outliers.run_outliers(sw, hw) if sw.count else None,
        "truth": _truth(run),
        "pairing": pairing.summary() if pairing is not None else None,
    }
    # which side delayed the run's outliers, from the events both sides saw (issue 12)
    entry["outlier_verdict"] = (
        outliers.outlier_verdict(sw, hw, pairing.pairs if pairing is not None else None,
                                 pairing.in_bulk if pairing is not None and len(pairing.pairs) > 1 else None)
        if sw.count else None
    )
    return entry, RunSamples(sw_ns=sw, hw_ns=hw)


def _describe(values: np.ndarray, dist: Distribution) -> dict | None:
    """stats.describe() of a sample, bit for bit: the order statistics from its distribution
    (no sort), the mean and standard deviation by numpy's own summation of the sample."""
    described = dist.describe()
    if described is not None:
        described["mean_ns"] = float(np.mean(values, dtype=np.float64))
        described["std_ns"] = float(np.std(values, dtype=np.float64, ddof=1)) if len(values) > 1 else 0.0
    return described


def _slim(run: RunData) -> RunData:
    """The columns the cross-run comparisons read (_cross_interface, _worst_case), the rest let go."""
    def columns(frame: pd.DataFrame, names: tuple[str, ...]) -> pd.DataFrame:
        # copy=False: the kept columns themselves, not a copy of millions of rows
        return pd.DataFrame({c: frame[c] for c in names if c in frame}, copy=False)

    return RunData(run.dir, run.manifest, columns(run.sw, ("latency_ns", "flags", "hw_width_ns")),
                   columns(run.hw, ("width_s",)), None, None)


def _board(run: RunData) -> dict | None:
    """Statistics of the board-measured widths (PCIe echoer timestamps), if present."""
    if "flags" not in run.sw or not len(run.sw):
        return None
    has = (run.sw["flags"].to_numpy() & int(records.Flag.HW_WIDTH)) != 0
    if not has.any():
        return None
    widths = run.sw["hw_width_ns"].to_numpy()[has]
    return _describe(widths, Distribution.of(widths))


def _truth(run: RunData) -> dict | None:
    """What the twin injected, for the events this run recorded."""
    if run.truth is None or not len(run.sw) or "seq" not in run.sw:
        return None
    t = run.truth.set_index("seq").reindex(run.sw["seq"].to_numpy())
    t = t.dropna()
    return {
        "t_rw_mean_ns": float(t["t_rw_ns"].mean()),
        "hw_minus_sw_mean_ns": float((t["hw_ns"] - t["sw_ns"]).mean()),
        "sw_outliers_injected": int((t["d_sw_ns"] > 0).sum()),
    }


def _t_rw(entries: list[dict], pairings: dict[str, Pairing]) -> list[dict]:
    """One estimate per (interface, load, repetition): the inb run against the no-inb run
    measured under the same load, never against another load's."""
    result = []
    cells: dict[tuple, dict[str, dict]] = {}
    for e in entries:
        if e["shift"] is not None:
            cells.setdefault((e["interface"], e["load"], e["repetition"]), {})[e["variant"]] = e
    for (iface, load, _rep), cell in sorted(cells.items()):
        if "inb" not in cell or "no-inb" not in cell:
            continue
        a, b = cell["inb"], cell["no-inb"]
        est = correlation.t_rw(a["shift"], b["shift"])
        truths = [e["truth"]["t_rw_mean_ns"] for e in (a, b) if e.get("truth")]
        paired = {}
        pa, pb = pairings.get(a["id"]), pairings.get(b["id"])
        if pa is not None and pb is not None and len(pa.pairs) > 1 and len(pb.pairs) > 1:
            paired = correlation.paired_t_rw(pa.pairs["diff_ns"].to_numpy(), pb.pairs["diff_ns"].to_numpy(),
                                             pa.in_bulk, pb.in_bulk)
        result.append(
            {
                "interface": iface,
                "load": load,
                **est,
                **paired,
                "inb_run": a["id"],
                "no_inb_run": b["id"],
                "truth_ns": float(np.mean(truths)) if truths else None,
            }
        )
    return result


def _cross_interface(entries: list[dict], runs: list[RunData], pairings: dict[str, Pairing]) -> list[dict]:
    """The seed's criterion, per load: PCIe software samples above the LPT software maximum
    measured under the same load, and whether the scope and the board saw them. Scope widths
    are compared after removing their run's HW−SW shift (the inb check's extra t_rw)."""
    by_id = {r.run_id: r for r in runs}
    result = []
    for load in sorted({e["load"] for e in entries}):
        lpt = [e for e in entries if e["load"] == load and e["interface"] == "lpt" and e["sw"]]
        pcie_entries = [e for e in entries if e["load"] == load and e["interface"] == "pcie" and e["sw"]]
        if not lpt or not pcie_entries:
            continue
        ref_max = max(e["sw"]["max_ns"] for e in lpt)
        pcie = [by_id[e["id"]] for e in pcie_entries]
        sw = np.concatenate([r.sw["latency_ns"].to_numpy() for r in pcie])
        hw = np.concatenate([
            r.hw["width_s"].to_numpy() * 1e9 - (e["shift"]["hw_minus_sw_median_ns"] if e["shift"] else 0.0)
            for r, e in zip(pcie, pcie_entries, strict=True)
        ])
        board = board_out = None
        if all("hw_width_ns" in r.sw for r in pcie):
            flags = np.concatenate([r.sw["flags"].to_numpy() for r in pcie])
            has = (flags & int(records.Flag.HW_WIDTH)) != 0
            if has.any():
                widths = np.concatenate([r.sw["hw_width_ns"].to_numpy() for r in pcie])
                board = widths[has]
                board_out = widths[has & (sw > ref_max)]
        caught = []
        for r in pcie:
            if r.run_id in pairings:
                pairs = pairings[r.run_id].pairs
                caught.append(pairs[pairs["sw_ns"] > ref_max].assign(run=r.run_id))
        caught_df = pd.concat(caught) if caught else None
        entry = outliers.cross_interface("pcie", "lpt", ref_max, sw, hw, board, board_out, caught_df)
        entry["outlier_verdict"] = outliers.pooled_verdict([e.get("outlier_verdict") for e in pcie_entries])
        result.append({"load": load, **entry})
    return result


def _worst_case(entries: list[dict], runs: list[RunData], exceedance: float,
                deadline_ns: float | None) -> list[dict]:
    """Per interface and load: the largest software latency seen, the p99.999 of all that
    interface's samples under that load pooled, and the tail fit (station/analysis/worst_case.py):
    the latency exceeded with probability `exceedance` per event, with its interval and checks,
    and the probability of exceeding the deadline when there is one."""
    by_id = {r.run_id: r for r in runs}
    result = []
    for iface, load in sorted({(e["interface"], e["load"]) for e in entries if e["sw"]}):
        mine = [e for e in entries if e["interface"] == iface and e["load"] == load and e["sw"]]
        worst = max(mine, key=lambda e: e["sw"]["max_ns"])
        # in run order: the independence check looks at which events follow which
        pooled = np.concatenate([by_id[e["id"]].sw["latency_ns"].to_numpy() for e in mine])
        fit = worst_case.worst_case(pooled, exceedance=exceedance, deadline_ns=deadline_ns)
        quantile = fit.get("quantile_ns") or {}
        result.append(
            {
                "interface": iface,
                "load": load,
                "observed_max_ns": worst["sw"]["max_ns"],
                "p99_999_ns": float(np.percentile(pooled, 99.999)),
                "run": worst["id"],
                "samples": int(len(pooled)),
                # what `station compare` tabulates: only a reliable fit's, at the default probability
                "worst_case_1e9_ns": (quantile.get("estimate")
                                      if exceedance == worst_case.EXCEEDANCE and fit.get("reliable") else None),
                **{k: fit.get(k) for k in ("quantile_ns", "reliable", "reasons", "deadline")},
                "tail_fit": fit,  # all of it: threshold diagnostics, fit, goodness of fit, independence
            }
        )
    return result
