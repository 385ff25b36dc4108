"""The module kind's part of `station compare`: per (campaign, interface, variant, load) and
source (t_SW, t_HW) the distribution's count/min/mean/std/max from DuckDB over the result store,
the exact p99.99 with its order-statistic interval, t_rw and the worst-case estimate from each
campaign's report.json, and a test of every campaign against the first (the baseline) with the
runs as units (Welch's t on the runs' medians: two campaigns are two sets of machine states, not
one; station/analysis/run_level.py), Holm-corrected over all the tests made. Mann–Whitney U over
the events is kept beside it for reference (effect size P(B > A))."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from station.analysis import dependence
from station.analysis.distribution import Distribution
from station.analysis.run_level import untested_reason, welch
from station.analysis.streaming import WIDTH_QUANTUM_NS, DistributionBuilder
from station.compare.analysis import ALPHA, holm, mann_whitney, mean_interval, quantile_interval
from station.compare.part import CampaignInfo, ComparePart
from station.kinds.module.compare_figures import build_compare_figures
from station.kinds.module.compare_tables import COMPARE_CSV_COLUMNS, compare_rows, module_tables
from station.report.figures import BIN_NS
from station.store.result_store import OWN_RECORDS, ResultStore

QUANTILE_KEY, QUANTILE = "p99.99", 0.9999
TEST_NAME = ("Welch's t on the runs' medians (the runs as units), two-sided, each campaign against "
             "the baseline (the first directory)")
CORRECTION = "Holm–Bonferroni over every test in this comparison"
TEST_NOTE = ("Each run is one observation of its campaign: two runs never meet the same machine "
             "state, and events inside a run are not independent (load phases, carry-over), so a "
             "test with the events as units calls two runs of one condition different. With one "
             "run on either side the run-to-run variation is not estimated and no test is made "
             "(repetitions ≥ 2 each; 3 or more to find a few per cent). The events' Mann–Whitney p "
             "(events_p_value) and P(B > A) are descriptive only.")
# the columns of one module row, in order (also the CSV's)
SOURCES = {"sw": ("sw", "latency_ns", 1.0), "hw": ("hw", "width_s", 1e9)}  # table, column, to ns


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


def _sql_stats(store: ResultStore, table: str, column: str, scale: float) -> dict[tuple, dict[str,
                                                                                              Any]]:
    """count/min/mean/std/max per (interface, variant, load), computed by DuckDB."""
    rel = _module_rows(store, table)
    if rel is None:
        return {}
    # DOUBLE, not DECIMAL, whatever the column
    x = f"CAST({column} AS DOUBLE) * CAST({scale!r} AS DOUBLE)"
    rows = rel.aggregate(
        f"interface, variant, load, count({column}) AS n, min({x}), avg({x}), stddev_samp({x}), "
        f"max({x})",
        "interface, variant, load").fetchall()
    return {tuple(r[:3]): {"count": int(r[3]), "min_ns": r[4], "mean_ns": r[5],
                           "std_ns": r[6] or 0.0,
                           "max_ns": r[7]} for r in rows if r[3]}


def _values(store: ResultStore, table: str, column: str, scale: float, key: tuple) -> Distribution:
    """One group's samples as a distribution: DuckDB counts each distinct value (memory follows
    the distinct values, not the samples); t_HW at the report's resolution (WIDTH_QUANTUM_NS), so
    that its figures are each campaign's report's."""
    rel = _module_rows(store, table)
    assert rel is not None
    rel = rel.filter(" AND ".join(
        f"{column_name} = {_quote(value)}" for column_name, value in zip(GROUP, key, strict=True)))
    got = rel.aggregate(f"{column} AS v, count(*) AS n", column).fetchnumpy()
    values, counts = got["v"].astype(np.float64) * scale, got["n"].astype(np.int64)
    if table != "hw":
        return Distribution.weighted(values, counts)
    widths = DistributionBuilder(WIDTH_QUANTUM_NS)  # as run_analysis counts a run's widths
    widths.add(np.repeat(values, counts))  # one group's pulses at a time
    return widths.result()


def _quote(value: Any) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def t_rw_over_repetitions(
    entries: Sequence[dict[str, Any]], interface: str, load: str
) -> dict[str, Any] | None:
    """A campaign's t_rw for one interface and load: with one estimate, it; with one per repetition
    (or target), their mean with an interval from their spread (runs as units: Student's t at k −
    1), never the first alone; None without an estimate."""
    got = [e for e in entries if e.get("interface") == interface and e.get("load") == load
           and e.get("estimate_ns") is not None]
    if len(got) <= 1:
        return got[0] if got else None
    values = np.array([e["estimate_ns"] for e in got], np.float64)
    half = dependence.t_ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return {"estimate_ns": float(values.mean()), "ci95_ns": [float(values.mean() - half),
                                                             float(values.mean() + half)],
            "repetitions": len(values)}


def _by_key(entries: Sequence[dict[str, Any]], interface: str, load: str) -> dict[str, Any] | None:
    return next((e for e in entries if e.get("interface") == interface and e.get("load") == load),
                None)


def worst_case_1e9_ns(entry: dict[str, Any] | None) -> float | None:
    """The software latency exceeded once in 1e9 events, from report.json's comparisons.worst_case
    entry (the tail fit of station/analysis/worst_case/; None where the fit was unreliable).
    Nothing is estimated here: each campaign's report is the one source of its numbers."""
    value = (entry or {}).get("worst_case_1e9_ns")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _worst_case_interval(entry: dict[str, Any] | None) -> list[float] | None:
    q = (entry or {}).get("quantile_ns") or {}
    return [q["ci_low"],
            q["ci_high"]] if worst_case_1e9_ns(entry) is not None and q.get("ci_high") else None


WORKERS = 2  # campaigns read at once: DuckDB and numpy leave the GIL, one campaign's small
# queries keep ~1.2 of 2 cores busy; memory grows by one campaign's distributions per worker


def _module(
    infos: Sequence[CampaignInfo], stores: Sequence[ResultStore]
) -> tuple[dict[str, Any], dict[tuple, Distribution]]:
    """The baseline first, then the other campaigns WORKERS at a time: each group's rows and its
    test against the baseline come from its exact distribution, which is then kept only on the
    figures' grid (Distribution.on_grid: the same curves), so memory follows the baseline and the
    number of groups, not the samples of every campaign."""
    # the baseline's exact distributions and run medians
    base: dict[tuple, tuple[Distribution, list[float]]] = {}
    first = _campaign(infos[0], stores[0], infos[0].label, base)
    with ThreadPoolExecutor(WORKERS) as pool:  # each worker on a cursor of its own
        rest = list(pool.map(lambda pair: _campaign(pair[0], ResultStore(pair[1].dirs,
                                                                         pair[1].con.cursor()),
                                                    infos[0].label, base),
                             zip(infos[1:], stores[1:], strict=True)))
    rows = [r for got in (first, *rest) for r in got[0]]
    tests = [t for got in (first, *rest) for t in got[1]]
    samples = {k: v for got in (first, *rest) for k, v in got[2].items()}
    tested = [t for t in tests if t["p_value"] is not None]
    for t, adjusted in zip(tested, holm([t["p_value"] for t in tested]), strict=True):
        t["p_holm"] = adjusted
        t["significant"] = adjusted < ALPHA
    section = {"rows": rows, "tests": tests,
               "test": {"name": TEST_NAME, "alpha": ALPHA, "correction": CORRECTION,
                        "count": len(tested),
                        "note": TEST_NOTE},
               "baseline": infos[0].label}
    return section, samples


def _campaign(info: CampaignInfo, store: ResultStore, baseline: str,
              base: dict[tuple, tuple[Distribution, list[float]]],
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[tuple, Distribution]]:
    """One campaign's (rows, tests against the baseline, figure curves); the baseline's own call
    fills `base` instead of testing."""
    rows: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    # (campaign label, source, interface, variant, load) -> ns
    samples: dict[tuple, Distribution] = {}
    comparisons = info.report.get("comparisons") or {}
    for source, (table, column, scale) in SOURCES.items():
        medians = _run_medians(store, table, column, scale)
        for key, agg in sorted(_sql_stats(store, table, column, scale).items()):
            values = _values(store, table, column, scale, key)
            if info.label == baseline:
                base[(source, *key)] = (values, medians.get(key, []))
            elif (test := _test(baseline, info.label, source, key, base.get((source, *key)),
                                (values, medians.get(key, [])))):
                tests.append(test)
            samples[(info.label, source, *key)] = values.on_grid(BIN_NS)
            t_rw = t_rw_over_repetitions(comparisons.get("t_rw") or [], key[0], key[2])
            worst = _by_key(comparisons.get("worst_case") or [], key[0], key[2])
            rows.append({
                "campaign": info.label, **dict(zip(GROUP, key, strict=True)), "source": source,
                **agg,
                "mean_ci95_ns": mean_interval(agg["mean_ns"], agg["std_ns"], agg["count"]),
                "p99_99_ns": float(values.percentiles([QUANTILE * 100])[0]),
                "p99_99_ci95_ns": quantile_interval(values, QUANTILE),
                "p99_99_reliable": agg["count"] * (1 - QUANTILE) >= 10,
                "t_rw_ns": (t_rw or {}).get("estimate_ns"),
                "t_rw_ci95_ns": (t_rw or {}).get("ci95_ns"),
                # the tail fit is of the software latencies
                "worst_case_1e9_ns": worst_case_1e9_ns(worst) if source == "sw" else None,
                "worst_case_1e9_ci95_ns": _worst_case_interval(worst) if source == "sw" else None,
            })
    return rows, tests, samples


def _run_medians(store: ResultStore, table: str, column: str, scale: float) -> dict[tuple,
                                                                                    list[float]]:
    """Each run's median per (interface, variant, load), by DuckDB (exact: numpy's median)."""
    rel = _module_rows(store, table)
    if rel is None:
        return {}
    x = f"CAST({column} AS DOUBLE) * CAST({scale!r} AS DOUBLE)"
    rows = rel.aggregate(f"interface, variant, load, run_id, quantile_cont({x}, 0.5)",
                         "interface, variant, load, run_id").fetchall()
    out: dict[tuple, list[float]] = {}
    for *key, _run, median in sorted(rows, key=lambda r: tuple(map(str, r[:4]))):
        if median is not None:
            out.setdefault(tuple(key), []).append(float(median))
    return out


def _test(base: str, label: str, source: str, key: tuple, baseline: tuple[Distribution,
                                                                          list[float]] | None,
          other: tuple[Distribution, list[float]]) -> dict[str, Any] | None:
    """One group of a campaign against the baseline's; None when either has under two samples. The
    verdict is the runs' (Welch on their medians); with one run on a side there is none, said
    why."""
    if baseline is None:
        return None
    (a, a_runs), (b, b_runs) = baseline, other
    if a.count < 2 or b.count < 2:
        return None
    u, p = mann_whitney(b, a)
    runs = welch(a_runs, b_runs)
    note = untested_reason(runs, "this campaign")
    ci_a, ci_b = quantile_interval(a, QUANTILE), quantile_interval(b, QUANTILE)
    disjoint = None
    if None not in ci_a and None not in ci_b:
        disjoint = bool(ci_b[0] > ci_a[1] or ci_a[0] > ci_b[1])
    return {
        "source": source,
        **dict(zip(GROUP, key, strict=True)),
        "baseline": base,
        "campaign": label,
        "p_value": runs["p_value"],
        "p_holm": None,
        "significant": None,
        "note": note,
        "runs_baseline": len(a_runs),
        "runs": len(b_runs),
        "run_medians_baseline_ns": a_runs,
        "run_medians_ns": b_runs,
        "run_median_diff_ns": runs["diff_ns"],
        "run_median_diff_ci95_ns": runs["ci95_ns"],
        "u": float(u),
        "events_p_value": float(p),
        "prob_greater": float(u) / (a.count * b.count),  # P(B > A) + P(B = A)/2: the effect size
        "median_diff_ns": float(b.median() - a.median()),
        "p99_99_diff_ns": float(
            b.percentiles([QUANTILE * 100])[0] - a.percentiles([QUANTILE * 100])[0]
        ),
        "p99_99_intervals_disjoint": disjoint,
    }


def worst_case_moves(rows: list[dict[str, Any]], baseline: str) -> list[str]:
    """A note for every campaign whose worst case (once in 1e9 events) lies outside the baseline's
    interval or the baseline's outside its own: four orders of magnitude past the samples, such a
    jump is as likely the fit's uncertainty as a change, and a reader must not miss it."""
    base = {
        (r["interface"], r["load"]): r
        for r in rows
        if r["campaign"] == baseline
        and r["source"] == "sw"
        and r.get("worst_case_1e9_ns") is not None
    }
    out, seen = [], set()
    for r in rows:
        key = (r["interface"], r["load"])
        b = base.get(key)
        if (r["campaign"] == baseline or r["source"] != "sw" or b is None or (r["campaign"],
                                                                              *key) in seen
                or r.get("worst_case_1e9_ns") is None or not r.get("worst_case_1e9_ci95_ns")
                or not b.get("worst_case_1e9_ci95_ns")):
            continue
        seen.add((r["campaign"], *key))
        (blo, bhi), (lo, hi) = b["worst_case_1e9_ci95_ns"], r["worst_case_1e9_ci95_ns"]
        est, best = r["worst_case_1e9_ns"], b["worst_case_1e9_ns"]
        if blo <= est <= bhi and lo <= best <= hi:
            continue
        out.append(
            f"{r['campaign']} vs {baseline}, {key[0]} under {key[1]}: the worst case (once "
            f"in 1e9 events) moved from {best / 1e3:.4g} µs [{blo / 1e3:.4g}, "
            f"{bhi / 1e3:.4g}] to {est / 1e3:.4g} µs [{lo / 1e3:.4g}, {hi / 1e3:.4g}], "
            "outside "
            + (
                "each other's intervals"
                if not (blo <= est <= bhi or lo <= best <= hi)
                else "one interval"
            )
            + ": an extrapolation this far from the samples moves that much by chance too; more "
            "samples "
            "(or a lower extrapolation) tell a change from the fit's uncertainty."
        )
    return out


def analyse(infos: Sequence[CampaignInfo], stores: Sequence[ResultStore]) -> tuple[dict[str,
                                                                                        Any] | None,
                                                                               dict[tuple,
                                                                                    Distribution],
                                                                                    list[str]]:
    section, samples = _module(infos, stores)
    if not section["rows"]:
        return None, samples, []
    return section, samples, worst_case_moves(section["rows"], infos[0].label)


COMPARE = ComparePart(analyse, module_tables, build_compare_figures,
                      (("compare.csv", lambda result: (list(COMPARE_CSV_COLUMNS),
                                                       compare_rows(result))),))
