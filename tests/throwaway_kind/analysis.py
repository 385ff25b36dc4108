"""The throw-away kind's analysis: per run, its samples and how many read busy."""

from __future__ import annotations

import json

import pandas as pd

from station.analysis.campaign import AnalysisInput, KindReport, section_report


def analyse(given: AnalysisInput) -> KindReport:
    busy_above = ((given.campaign.get("config") or {}).get("loadavg") or {}).get("busy_above", 1.0)
    runs = []
    for run_dir in given.run_dirs:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        frame = pd.read_parquet(run_dir / "probe.parquet")
        runs.append({"id": manifest["run_id"], "load": manifest["run"]["load"], "samples": len(frame),
                     "busy": int((frame["load1"] >= busy_above).sum()),
                     "max_load1": float(frame["load1"].max()) if len(frame) else None})
    busy, samples = sum(r["busy"] for r in runs), sum(r["samples"] for r in runs)
    finding = {"kind": "loadavg", "headline": "Samples that read busy", "figure": f"{busy} of {samples}",
               "see": "table-loadavg-runs", "text": f"{busy} of {samples} load-average samples read at least "
               f"{busy_above:g}."}
    return section_report("loadavg", {"runs": runs, "busy_above": busy_above, "findings": [finding]}, {}, [])
