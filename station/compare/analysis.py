"""Campaigns side by side (`station compare DIR...`): kernels, RT vs regular, LPT vs PCIe, benches.

Module campaigns: per (campaign, interface, variant, load) and source (t_SW, t_HW) the
distribution's count/min/mean/std/max from DuckDB over the result store, the exact p99.99
with its order-statistic interval, t_rw and the worst-case estimate from each campaign's
report.json, and a Mann–Whitney U test of every campaign against the first (the baseline),
Holm-corrected over all the tests made. Cyclictest campaigns: the seed's maximum-latency
table (seed 004) with rows = loads and columns = campaigns (× targets).
The result's JSON shape is documented in docs/compare.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from station import kind_registry
from station.analysis.campaign import analyse_campaign
from station.kinds.cyclictest.analysis import read_outputs
from station.parsers.cyclictest import CyclictestOutputError
from station.result_store import OWN_RECORDS, ResultStore, ResultStoreError, campaign_dirs

COMPARE_SCHEMA_VERSION = 1
ALPHA = 0.05
QUANTILE_KEY, QUANTILE = "p99.99", 0.9999
TEST_NAME = "Mann–Whitney U, two-sided, each campaign against the baseline (the first directory)"
CORRECTION = "Holm–Bonferroni over every test in this comparison"
TEST_NOTE = ("Samples within a run are treated as independent; serial correlation (load phases, "
             "periodic disturbances) makes the p-values optimistic. With large samples a tiny "
             "shift is significant: read the effect size (P(B > A)) and the p99.99 intervals too.")
# the columns of one module row, in order (also the CSV's)
SOURCES = {"sw": ("sw", "latency_ns", 1.0), "hw": ("hw", "width_s", 1e9)}  # table, column, to ns


@dataclass(frozen=True)
class CampaignInfo:
    label: str
    dir: Path
    report: dict[str, Any]
    report_file: bool  # report.json was there (else the campaign was analysed now)


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
    return [CampaignInfo(lbl, i.dir, i.report, i.report_file) for lbl, i in zip(labels, infos, strict=True)]


# ---- statistics ------------------------------------------------------------------------------------
def mean_interval(mean: float, std: float, n: int, confidence: float = 0.95) -> list[float] | None:
    """Student's t interval of the mean."""
    if n < 2 or not math.isfinite(std):
        return None
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
    return [mean - half, mean + half]


def quantile_interval(sorted_values: np.ndarray, q: float,
                      confidence: float = 0.95) -> list[float | None]:
    """Distribution-free interval of the q-quantile from order statistics: [X_(l), X_(u)] with
    l, u from Binomial(n, q); a bound the sample cannot give (u > n) is None."""
    n = sorted_values.size
    tail = (1 - confidence) / 2
    lo_rank = int(stats.binom.ppf(tail, n, q))
    hi_rank = int(stats.binom.ppf(1 - tail, n, q)) + 1
    lo = float(sorted_values[lo_rank - 1]) if lo_rank >= 1 else None
    hi = float(sorted_values[hi_rank - 1]) if hi_rank <= n else None
    return [lo, hi]


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


# ---- module campaigns ------------------------------------------------------------------------------
GROUP = ("interface", "variant", "load")


def _module_rows(store: ResultStore, table: str) -> Any:
    """A table's rows of module runs; of the records, the module's own (a stray IRQ's record,
    NOT_OURS, holds no latency of the module's)."""
    rel = store.relation(table)
    if rel is None:
        return None
    rel = rel.filter("kind = 'module'")
    if table == "sw" and "flags" in rel.columns:
        rel = rel.filter(OWN_RECORDS)
    return rel


def _sql_stats(store: ResultStore, table: str, column: str, scale: float) -> dict[tuple, dict[str, Any]]:
    """count/min/mean/std/max per (interface, variant, load), computed by DuckDB."""
    rel = _module_rows(store, table)
    if rel is None:
        return {}
    x = f"CAST({column} AS DOUBLE) * CAST({scale!r} AS DOUBLE)"  # DOUBLE, not DECIMAL, whatever the column
    rows = rel.aggregate(
        f"interface, variant, load, count({column}) AS n, min({x}), avg({x}), stddev_samp({x}), max({x})",
        "interface, variant, load").fetchall()
    return {tuple(r[:3]): {"count": int(r[3]), "min_ns": r[4], "mean_ns": r[5], "std_ns": r[6] or 0.0,
                           "max_ns": r[7]} for r in rows if r[3]}


def _values(store: ResultStore, table: str, column: str, scale: float, key: tuple) -> np.ndarray:
    """One group's samples, sorted (exact quantiles and the rank test need them all)."""
    rel = _module_rows(store, table)
    assert rel is not None
    rel = rel.filter(" AND ".join(
        f"{column_name} = {_quote(value)}" for column_name, value in zip(GROUP, key, strict=True)))
    values = rel.project(column).fetchnumpy()[column].astype(np.float64) * scale
    values.sort()
    return values


def _quote(value: Any) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _by_key(entries: Sequence[dict[str, Any]], interface: str, load: str) -> dict[str, Any] | None:
    return next((e for e in entries if e.get("interface") == interface and e.get("load") == load), None)


def worst_case_1e9_ns(entry: dict[str, Any] | None) -> float | None:
    """The software latency exceeded once in 1e9 events, from report.json's comparisons.worst_case
    entry (the tail fit of station/analysis/worst_case.py; None where the fit was unreliable).
    Nothing is estimated here: each campaign's report is the one source of its numbers."""
    value = (entry or {}).get("worst_case_1e9_ns")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _worst_case_interval(entry: dict[str, Any] | None) -> list[float] | None:
    q = (entry or {}).get("quantile_ns") or {}
    return [q["ci_low"], q["ci_high"]] if worst_case_1e9_ns(entry) is not None and q.get("ci_high") else None


def _module(infos: Sequence[CampaignInfo], stores: Sequence[ResultStore]) -> tuple[dict[str, Any],
                                                                                   dict[tuple, np.ndarray]]:
    rows: list[dict[str, Any]] = []
    samples: dict[tuple, np.ndarray] = {}  # (campaign label, source, interface, variant, load) -> sorted ns
    for info, store in zip(infos, stores, strict=True):
        comparisons = info.report.get("comparisons") or {}
        for source, (table, column, scale) in SOURCES.items():
            for key, agg in sorted(_sql_stats(store, table, column, scale).items()):
                values = _values(store, table, column, scale, key)
                samples[(info.label, source, *key)] = values
                t_rw = _by_key(comparisons.get("t_rw") or [], key[0], key[2])
                worst = _by_key(comparisons.get("worst_case") or [], key[0], key[2])
                rows.append({
                    "campaign": info.label, **dict(zip(GROUP, key, strict=True)), "source": source, **agg,
                    "mean_ci95_ns": mean_interval(agg["mean_ns"], agg["std_ns"], agg["count"]),
                    "p99_99_ns": float(np.percentile(values, QUANTILE * 100)),
                    "p99_99_ci95_ns": quantile_interval(values, QUANTILE),
                    "p99_99_reliable": agg["count"] * (1 - QUANTILE) >= 10,
                    "t_rw_ns": (t_rw or {}).get("estimate_ns"), "t_rw_ci95_ns": (t_rw or {}).get("ci95_ns"),
                    # the tail fit is of the software latencies
                    "worst_case_1e9_ns": worst_case_1e9_ns(worst) if source == "sw" else None,
                    "worst_case_1e9_ci95_ns": _worst_case_interval(worst) if source == "sw" else None,
                })
    tests = _tests(infos, samples)
    section = {"rows": rows, "tests": tests,
               "test": {"name": TEST_NAME, "alpha": ALPHA, "correction": CORRECTION, "count": len(tests),
                        "note": TEST_NOTE},
               "baseline": infos[0].label}
    return section, samples


def _tests(infos: Sequence[CampaignInfo], samples: dict[tuple, np.ndarray]) -> list[dict[str, Any]]:
    base = infos[0].label
    tests = []
    for (label, source, *key), b in samples.items():
        a = samples.get((base, source, *key))
        if label == base or a is None or a.size < 2 or b.size < 2:
            continue
        u, p = stats.mannwhitneyu(b, a, alternative="two-sided", method="asymptotic")
        ci_a, ci_b = quantile_interval(a, QUANTILE), quantile_interval(b, QUANTILE)
        disjoint = None
        if None not in ci_a and None not in ci_b:
            disjoint = bool(ci_b[0] > ci_a[1] or ci_a[0] > ci_b[1])
        tests.append({
            "source": source, **dict(zip(GROUP, key, strict=True)), "baseline": base, "campaign": label,
            "u": float(u), "p_value": float(p),
            "prob_greater": float(u) / (a.size * b.size),  # P(B > A) + P(B = A)/2: the effect size
            "median_diff_ns": float(np.median(b) - np.median(a)),
            "p99_99_diff_ns": float(np.percentile(b, QUANTILE * 100) - np.percentile(a, QUANTILE * 100)),
            "p99_99_intervals_disjoint": disjoint,
        })
    for t, adjusted in zip(tests, holm([t["p_value"] for t in tests]), strict=True):
        t["p_holm"] = adjusted
        t["significant"] = adjusted < ALPHA
    return tests


# ---- cyclictest campaigns --------------------------------------------------------------------------
CT_NOTE = ("A maximum is one draw from the tail: two runs of one kernel give different maxima by chance, so the "
           "table's maxima alone cannot say which is better. The test compares whole distributions (cyclictest's "
           "histograms, overflows counted as the largest values; where the histogram ranges differ, every value "
           "at or above the smaller range counts as one tie there, as an overflow of the shorter range may lie "
           "below an in-range value of the longer): Mann–Whitney U of each column against the baseline's (the "
           "first campaign's column of the same target, else the first column), Holm-adjusted.")


def binned_mann_whitney(a: dict[float, int], b: dict[float, int]) -> tuple[float, float]:
    """(two-sided p, P(B > A) + P(B = A)/2) of two samples given as value -> count (cyclictest's
    1 µs buckets: heavy ties, handled by mid-ranks and the tie-corrected variance)."""
    values = sorted(set(a) | set(b))
    ca = np.asarray([a.get(v, 0) for v in values], np.float64)
    cb = np.asarray([b.get(v, 0) for v in values], np.float64)
    na, nb = ca.sum(), cb.sum()
    if na < 1 or nb < 1:
        return 1.0, math.nan
    t = ca + cb
    below = np.cumsum(t) - t
    mid = below + (t + 1) / 2  # each tied group's mid-rank
    u_b = float((cb * mid).sum() - nb * (nb + 1) / 2)
    n = na + nb
    var = na * nb / 12 * ((n + 1) - float((t ** 3 - t).sum()) / (n * (n - 1))) if n > 1 else 0.0
    p = 1.0 if var <= 0 else float(2 * stats.norm.sf(abs(u_b - na * nb / 2) / math.sqrt(var)))
    return min(p, 1.0), u_b / (na * nb)


@dataclass(frozen=True)
class CtHistogram:
    """A campaign's pooled cyclictest histogram of one target and case: value µs -> count, the
    overflows at +inf (cyclictest's range is all a run knows of them), and the smallest histogram
    range (-h) of its runs, None where no run's output says."""

    counts: dict[float, int]
    range_us: float | None

    def censored_at(self, edge: float | None) -> dict[float, int]:
        """The counts with every value at or above `edge` (in range or not) in one group at `edge`: two
        campaigns with different ranges are comparable only below the smaller one, since an overflow of
        one may be smaller than an in-range value of the other."""
        if edge is None:
            return dict(self.counts)
        out: dict[float, int] = {}
        for v, c in self.counts.items():
            key = v if v < edge else edge
            out[key] = out.get(key, 0) + c
        return out


def comparable(a: CtHistogram, b: CtHistogram) -> tuple[dict[float, int], dict[float, int]]:
    """Both histograms censored at the smaller range when the ranges differ and either has overflows
    (with one range, an overflow is above every in-range value of either: +inf ranks it right)."""
    ranges = {r for r in (a.range_us, b.range_us) if r is not None}
    overflows = math.inf in a.counts or math.inf in b.counts
    edge = min(ranges) if len(ranges) > 1 and overflows else None
    return a.censored_at(edge), b.censored_at(edge)


def _ct_range(run_dir: Path) -> float | None:
    try:
        out = read_outputs(run_dir)
    except CyclictestOutputError:
        return None
    return float(out.histogram_range) if out.histogram_range else None


def _ct_histogram(info: CampaignInfo, target: str, case: str) -> CtHistogram:
    """The pooled histogram of a campaign's complete runs of one target and case."""
    section = info.report.get("cyclictest") or {}
    runs = [r for r in section.get("runs") or [] if r.get("status") == "complete" and str(r.get("load")) == case
            and (r.get("target") in (None, "") and len((section.get("table") or {}).get("targets") or []) == 1
                 or str(r.get("target")) == target)]
    pooled: dict[float, int] = {}
    ranges: list[float] = []
    for r in runs:
        run_dir = info.dir / "runs" / str(r["id"])
        path = run_dir / "cyclictest_histogram.parquet"
        if path.exists():
            frame = pd.read_parquet(path, columns=["latency_us", "count"])
            for v, c in frame.groupby("latency_us")["count"].sum().items():
                pooled[float(v)] = pooled.get(float(v), 0) + int(c)
        overflows = sum(int(t.get("overflows") or 0) for t in r.get("threads") or [])
        if overflows:
            pooled[math.inf] = pooled.get(math.inf, 0) + overflows
        if (range_us := _ct_range(run_dir)) is not None:
            ranges.append(range_us)
    return CtHistogram(pooled, min(ranges) if ranges else None)


def _ct_tests(infos: Sequence[CampaignInfo], columns: list[dict[str, Any]], cases: list[str]) -> list[dict[str, Any]]:
    by_label = {i.label: i for i in infos}
    base_label = infos[0].label
    tests = []
    for col in columns:
        base = next((c for c in columns if c["campaign"] == base_label and c["target"] == col["target"]
                     and c is not col), None)
        if base is None and col["campaign"] == base_label:  # the baseline campaign's own other targets
            base = columns[0]
        if base is None or base is col:
            continue
        for case in cases:
            a, b = comparable(_ct_histogram(by_label[base["campaign"]], base["target"], case),
                              _ct_histogram(by_label[col["campaign"]], col["target"], case))
            if not a or not b:
                continue
            p, greater = binned_mann_whitney(a, b)
            tests.append({"case": case, "column": col["label"], "baseline": base["label"], "p_value": p,
                          "prob_greater": greater, "count": int(sum(b.values())),
                          "baseline_count": int(sum(a.values()))})
    for t, adjusted in zip(tests, holm([t["p_value"] for t in tests]), strict=True):
        t["p_holm"] = adjusted
        t["significant"] = adjusted < ALPHA
    return tests


def _cyclictest(infos: Sequence[CampaignInfo]) -> dict[str, Any] | None:
    """Seed 004's table across campaigns: rows = loads (cases), columns = campaign × target."""
    columns, cells, cases = [], [], []
    for info in infos:
        section = info.report.get("cyclictest")
        if not section:
            continue
        table = section.get("table") or {}
        cases += [c for c in table.get("cases") or [] if c not in cases]
        targets = table.get("targets") or []
        for target in targets:
            facts = (section.get("targets") or {}).get(target) or {}
            columns.append({"label": info.label if len(targets) == 1 else f"{info.label} · {target}",
                            "campaign": info.label, "target": target,
                            "kernel_release": facts.get("kernel_release"), "preempt_rt": facts.get("preempt_rt"),
                            "emulated": facts.get("emulated")})
            cells.append(((table.get("max_latency_us") or {}).get(target) or {},
                          (table.get("problems") or {}).get(target) or {}))
    if not columns:
        return None
    return {"cases": cases, "columns": columns,
            "max_latency_us": [[values.get(case) for values, _ in cells] for case in cases],
            "problems": [[problems.get(case) for _, problems in cells] for case in cases],
            "tests": _ct_tests(infos, columns, cases), "note": CT_NOTE}


# ---- the whole comparison --------------------------------------------------------------------------
COMPARABLE = ("module", "cyclictest")  # the kinds compare has tests of difference for


def campaign_kinds(report: dict[str, Any]) -> set[str]:
    """The kinds of run a campaign's report holds."""
    return {k.name for k in kind_registry.kinds().values() if kind_registry.report_runs(k, report)}


def _check_comparable(infos: list[CampaignInfo]) -> None:
    """Refuse what cannot be compared: one campaign alone, a campaign without runs, campaigns of
    different kinds, kinds compare has no test of difference for."""
    kinds = [campaign_kinds(i.report) for i in infos]
    targets = ((infos[0].report.get("cyclictest") or {}).get("table") or {}).get("targets") or []
    if len(infos) < 2 and not (kinds[0] == {"cyclictest"} and len(targets) > 1):
        raise ResultStoreError(f"{infos[0].dir}: compare needs two or more campaign directories, the first the "
                               "baseline, or one cyclictest campaign of several targets (one campaign's own "
                               "report is `station report DIR`)")
    for info, kind in zip(infos, kinds, strict=True):
        if not kind:
            raise ResultStoreError(f"{info.dir}: the campaign has no runs to compare")
        if not kind <= set(COMPARABLE):
            raise ResultStoreError(f"{info.dir}: a campaign of {'/'.join(sorted(kind))} runs; station compare compares "
                                   f"{' or '.join(COMPARABLE)} campaigns")
    if any(k != kinds[0] for k in kinds[1:]):
        said = ", ".join(f"{i.dir} ({'/'.join(sorted(k))})" for i, k in zip(infos, kinds, strict=True))
        raise ResultStoreError(f"campaigns of different kinds cannot be compared: {said}")


def worst_case_moves(rows: list[dict[str, Any]], baseline: str) -> list[str]:
    """A note for every campaign whose worst case (once in 1e9 events) lies outside the baseline's
    interval or the baseline's outside its own: four orders of magnitude past the samples, such a
    jump is as likely the fit's uncertainty as a change, and a reader must not miss it."""
    base = {(r["interface"], r["load"]): r for r in rows
            if r["campaign"] == baseline and r["source"] == "sw" and r.get("worst_case_1e9_ns") is not None}
    out, seen = [], set()
    for r in rows:
        key = (r["interface"], r["load"])
        b = base.get(key)
        if (r["campaign"] == baseline or r["source"] != "sw" or b is None or (r["campaign"], *key) in seen
                or r.get("worst_case_1e9_ns") is None or not r.get("worst_case_1e9_ci95_ns")
                or not b.get("worst_case_1e9_ci95_ns")):
            continue
        seen.add((r["campaign"], *key))
        (blo, bhi), (lo, hi) = b["worst_case_1e9_ci95_ns"], r["worst_case_1e9_ci95_ns"]
        est, best = r["worst_case_1e9_ns"], b["worst_case_1e9_ns"]
        if blo <= est <= bhi and lo <= best <= hi:
            continue
        out.append(f"{r['campaign']} vs {baseline}, {key[0]} under {key[1]}: the worst case (once in 1e9 events) "
                   f"moved from {best / 1e3:.4g} µs [{blo / 1e3:.4g}, {bhi / 1e3:.4g}] to {est / 1e3:.4g} µs "
                   f"[{lo / 1e3:.4g}, {hi / 1e3:.4g}], outside "
                   + ("each other's intervals" if not (blo <= est <= bhi or lo <= best <= hi) else "one interval")
                   + ": an extrapolation this far from the samples moves that much by chance too; more samples "
                     "(or a lower extrapolation) tell a change from the fit's uncertainty.")
    return out


def compare_campaigns(dirs: Sequence[Path | str]) -> tuple[dict[str, Any], dict[tuple, np.ndarray]]:
    """(the comparison dict, sorted samples by (campaign, source, interface, variant, load) for
    the figures). Raises ResultStoreError naming a directory or file that cannot be compared, or
    campaigns that cannot be compared with each other."""
    paths = campaign_dirs(dirs)
    infos = _load(paths)
    _check_comparable(infos)
    stores = [ResultStore([p]) for p in paths]
    module, samples = _module(infos, stores)
    notes = [f"{i.label}: no report.json; analysed now" for i in infos if not i.report_file]
    notes += worst_case_moves(module["rows"], infos[0].label)
    ct = _cyclictest(infos)
    if not module["rows"] and ct is None:
        notes.append("No module or cyclictest runs in these campaigns: nothing to compare.")
    result = {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "campaigns": [{"label": i.label, "dir": str(i.dir),
                       "name": (i.report.get("campaign") or {}).get("name"),
                       "description": (i.report.get("campaign") or {}).get("description"),
                       "station_version": (i.report.get("campaign") or {}).get("station_version"),
                       "runs": len(i.report.get("runs") or []) + len((i.report.get("cyclictest") or {}).get("runs")
                                                                     or [])} for i in infos],
        "module": module if module["rows"] else None,
        "cyclictest": ct,
        "notes": notes,
    }
    return result, samples
