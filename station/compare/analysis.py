"""Campaigns side by side (`station compare DIR...`): kernels, RT vs regular, LPT vs PCIe, benches.

Each run kind that can be compared brings its part (Kind.compare, station/compare/part.py): the
module kind's distributions, p99.99 and tests of difference from the result store, cyclictest's
maximum-latency table across campaigns (seed 004). This module loads the campaigns, refuses what
cannot be compared, and holds the statistics the parts share. The result's JSON shape is
documented in docs/compare.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from scipy import stats

from station import kind_registry
from station.analysis.campaign import analyse_campaign
from station.analysis.distribution import Distribution
from station.compare.part import CampaignInfo, ComparePart
from station.store.result_store import ResultStore, ResultStoreError, campaign_dirs

COMPARE_SCHEMA_VERSION = 1
ALPHA = 0.05


def _load(dirs: Sequence[Path]) -> list[CampaignInfo]:
    infos = []
    for d in dirs:
        path = d / "report.json"
        try:
            report = json.loads(path.read_text()) if path.exists() else analyse_campaign(d)[0]
        except (ValueError, OSError) as exc:
            raise ResultStoreError(f"{d}: its report cannot be read ({exc})") from None
        infos.append(CampaignInfo("", d, report, path.exists()))
    names = [str((i.report.get("campaign") or {}).get("name") or i.dir.name) for i in infos]
    labels = []
    for name, info in zip(names, infos, strict=True):
        # twin campaigns of one config share a name: the directory tells them apart
        label = name if names.count(name) == 1 else f"{name} ({info.dir.name})"
        labels.append(label if label not in labels else f"{label} [{len(labels)}]")
    return [CampaignInfo(lbl, i.dir, i.report, i.report_file) for lbl, i in zip(labels, infos,
                                                                                strict=True)]


# ---- statistics
# ------------------------------------------------------------------------------------
def mean_interval(mean: float, std: float, n: int, confidence: float = 0.95) -> list[float] | None:
    """Student's t interval of the mean."""
    if n < 2 or not math.isfinite(std):
        return None
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
    return [mean - half, mean + half]


def quantile_interval(sample: Distribution, q: float,
                      confidence: float = 0.95) -> list[float | None]:
    """Distribution-free interval of the q-quantile from order statistics: [X_(l), X_(u)] with
    l, u from Binomial(n, q); a bound the sample cannot give (u > n) is None."""
    n = sample.count
    tail = (1 - confidence) / 2
    lo_rank = int(stats.binom.ppf(tail, n, q))
    hi_rank = int(stats.binom.ppf(1 - tail, n, q)) + 1
    lo = float(sample.order_statistics([lo_rank])[0]) if lo_rank >= 1 else None
    hi = float(sample.order_statistics([hi_rank])[0]) if hi_rank <= n else None
    return [lo, hi]


def mann_whitney(x: Distribution, y: Distribution, continuity: bool = True) -> tuple[float, float]:
    """(U of x, two-sided p) as scipy.stats.mannwhitneyu(x, y, method="asymptotic",
    use_continuity=continuity) gives them — mid-ranks for ties, the tie-corrected variance — from
    the two samples' counts (memory: their distinct values, not their samples; heavy ties cost
    nothing). U is exact (sums of half-integers below 2**53); p is 1 where every value is the
    same."""
    values = np.union1d(x.values.astype(np.float64), y.values.astype(np.float64))
    cx, cy = np.zeros(len(values)), np.zeros(len(values))
    cx[np.searchsorted(values, x.values.astype(np.float64))] = x.counts
    cy[np.searchsorted(values, y.values.astype(np.float64))] = y.counts
    ties = cx + cy
    midrank = np.cumsum(ties) - ties + (ties + 1) / 2  # the average rank of each distinct value
    n1, n2 = x.count, y.count
    n = n1 + n2
    u1 = float(np.dot(cx, midrank)) - n1 * (n1 + 1) / 2
    var = n1 * n2 / 12 * ((n + 1) - float(np.sum(ties**3 - ties)) / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u1, 1.0
    z = (max(u1, n1 * n2 - u1) - n1 * n2 / 2 - (0.5 if continuity else 0.0)) / math.sqrt(var)
    return u1, float(min(2 * stats.norm.sf(z), 1.0))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given)."""
    m = len(p_values)
    order = np.argsort(p_values)
    adjusted = np.empty(m)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p_values[i]))
        adjusted[i] = running
    return adjusted.tolist()


# ---- the whole comparison
# --------------------------------------------------------------------------
def compare_parts() -> list[tuple[kind_registry.Kind, ComparePart]]:
    """Every registered kind's compare part, in the registry's order."""
    return [(k, k.load("compare")) for k in kind_registry.kinds().values() if k.compare is not None]


def campaign_kinds(report: dict[str, Any]) -> set[str]:
    """The kinds of run a campaign's report holds."""
    return {k.name for k in kind_registry.kinds().values() if kind_registry.report_runs(k, report)}


def _check_comparable(infos: list[CampaignInfo], parts: dict[str, ComparePart]) -> None:
    """Refuse what cannot be compared: one campaign alone (unless its kind compares a campaign with
    itself), a campaign without runs, campaigns of different kinds, kinds with no compare part."""
    kinds = [campaign_kinds(i.report) for i in infos]
    if len(infos) < 2 and not (
        len(kinds[0]) == 1
        and (part := parts.get(next(iter(kinds[0])))) is not None
        and part.alone(infos[0].report)
    ):
        alone = "".join(f", or {p.alone_text}" for p in parts.values() if p.alone_text)
        raise ResultStoreError(f"{infos[0].dir}: compare needs two or more campaign directories, "
                               f"the first the baseline{alone} (one campaign's own report is "
                               "`station report DIR`)")
    for info, kind in zip(infos, kinds, strict=True):
        if not kind:
            raise ResultStoreError(f"{info.dir}: the campaign has no runs to compare")
        if not kind <= set(parts):
            raise ResultStoreError(f"{info.dir}: a campaign of {'/'.join(sorted(kind))} runs; "
                                   f"station compare compares {' or '.join(parts)} campaigns")
    if any(k != kinds[0] for k in kinds[1:]):
        said = ", ".join(f"{i.dir} ({'/'.join(sorted(k))})" for i, k in zip(infos, kinds,
                                                                            strict=True))
        raise ResultStoreError(f"campaigns of different kinds cannot be compared: {said}")


def compare_campaigns(dirs: Sequence[Path | str]) -> tuple[dict[str, Any], dict[tuple, Any]]:
    """(the comparison dict, the figures' samples by key, e.g. (campaign, source, interface,
    variant, load) for module runs). Raises ResultStoreError naming a directory or file that cannot
    be compared, or campaigns that cannot be compared with each other."""
    paths = campaign_dirs(dirs)
    infos = _load(paths)
    parts = compare_parts()
    _check_comparable(infos, {k.name: part for k, part in parts})
    con = duckdb.connect()  # one connection for every campaign: each costs memory of its own
    stores = [ResultStore([p], con) for p in paths]
    notes = [f"{i.label}: no report.json; analysed now" for i in infos if not i.report_file]
    sections: dict[str, Any] = {}
    samples: dict[tuple, Any] = {}  # each part's figures' data (the module's: Distributions)
    for kind, part in parts:
        sections[kind.name], kind_samples, kind_notes = part.analyse(infos, stores)
        samples |= kind_samples
        notes += kind_notes
    if all(section is None for section in sections.values()):
        notes.append(f"No {' or '.join(sections)} runs in these campaigns: nothing to compare.")
    kinds = kind_registry.kinds().values()
    result = {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "campaigns": [
            {
                "label": i.label, "dir": str(i.dir),
                "name": (i.report.get("campaign") or {}).get("name"),
                "description": (i.report.get("campaign") or {}).get("description"),
                "station_version": (i.report.get("campaign") or {}).get("station_version"),
                "runs": sum(len(kind_registry.report_runs(k, i.report)) for k in kinds)
            }
            for i in infos
        ],
        **sections,
        "notes": notes,
    }
    return result, samples
