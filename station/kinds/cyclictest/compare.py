"""The cyclictest kind's part of `station compare`: the seed's maximum-latency table (seed 004)
with rows = loads and columns = campaigns (× targets), and a test of difference per column."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from station.analysis.distribution import Distribution
from station.analysis.run_level import untested_reason, welch
from station.compare.analysis import ALPHA, holm, mann_whitney
from station.compare.part import CampaignInfo, ComparePart
from station.kinds.cyclictest.analysis import read_outputs
from station.kinds.cyclictest.compare_tables import (
    cyclictest_rows,
    cyclictest_table,
    cyclictest_tests_table,
)
from station.parsers.cyclictest import CyclictestOutputError
from station.store.result_store import ResultStore

CT_NOTE = ("A maximum is one draw from the tail: two runs of one kernel give different maxima by "
           "chance, so the table's maxima alone cannot say which is better. The test compares "
           "whole distributions (cyclictest's histograms, overflows counted as the largest values; "
           "where the histogram ranges differ, every value at or above the smaller range counts as "
           "one tie there, as an overflow of the shorter range may lie below an in-range value of "
           "the longer). The verdict takes the runs as units (issue 46: every run meets its own "
           "machine state, and a run's events are not independent): each complete run's median "
           "(within its 1 µs bucket, overflows above every bucket) is one observation, Welch's t "
           "of each column's runs against the baseline's (the first campaign's column of the same "
           "target, else the first column), Holm-adjusted; with one run on a side, or no spread "
           "between runs, no test is made. The pooled histograms' Mann–Whitney U is kept beside it "
           "as a description (events as units).")


def binned_mann_whitney(a: dict[float, int], b: dict[float, int]) -> tuple[float, float]:
    """(two-sided p, P(B > A) + P(B = A)/2) of two samples given as value -> count (cyclictest's
    1 µs buckets: heavy ties, handled by mid-ranks and the tie-corrected variance; no continuity
    correction)."""
    da, db = (Distribution.weighted(np.asarray(list(c), np.float64), np.asarray(list(c.values()),
                                                                                np.int64))
              for c in (a, b))
    if da.count < 1 or db.count < 1:
        return 1.0, math.nan
    u_b, p = mann_whitney(db, da, continuity=False)
    return p, u_b / (da.count * db.count)


@dataclass(frozen=True)
class CtHistogram:
    """A campaign's pooled cyclictest histogram of one target and case: value µs -> count, the
    overflows at +inf (cyclictest's range is all a run knows of them), and the smallest histogram
    range (-h) of its runs, None where no run's output says."""

    counts: dict[float, int]
    range_us: float | None

    def censored_at(self, edge: float | None) -> dict[float, int]:
        """The counts with every value at or above `edge` (in range or not) in one group at `edge`:
        two campaigns with different ranges are comparable only below the smaller one, since an
        overflow of one may be smaller than an in-range value of the other."""
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


def _complete_runs(info: CampaignInfo, target: str, case: str) -> list[Mapping[str, Any]]:
    section = info.report.get("cyclictest") or {}
    return [
        r
        for r in section.get("runs") or []
        if r.get("status") == "complete"
        and str(r.get("load")) == case
        and (
            r.get("target") in (None, "")
            and len((section.get("table") or {}).get("targets") or []) == 1
            or str(r.get("target")) == target
        )
    ]


def _run_counts(info: CampaignInfo, run: Mapping[str, Any]) -> dict[float, int]:
    """One run's histogram over its threads: value µs -> count, overflows at +inf."""
    counts: dict[float, int] = {}
    path = info.dir / "runs" / str(run["id"]) / "cyclictest_histogram.parquet"
    if path.exists():
        frame = pd.read_parquet(path, columns=["latency_us", "count"])
        for v, c in frame.groupby("latency_us")["count"].sum().items():
            counts[float(v)] = counts.get(float(v), 0) + int(c)
    overflows = sum(int(t.get("overflows") or 0) for t in run.get("threads") or [])
    if overflows:
        counts[math.inf] = counts.get(math.inf, 0) + overflows
    return counts


def bucket_median(counts: Mapping[float, int]) -> float | None:
    """The median of a 1 µs-bucket histogram, placed within its bucket by linear interpolation (the
    bucket v holds [v, v + 1) µs), so that runs differing by less than a bucket still differ; None
    when there is nothing, or the median lies among the overflows."""
    total = sum(counts.values())
    if not total:
        return None
    half, below = total / 2, 0
    for v in sorted(counts):
        c = counts[v]
        if below + c >= half and c:
            return None if math.isinf(v) else v + (half - below) / c
        below += c
    return None


def _ct_histogram(info: CampaignInfo, target: str, case: str) -> tuple[CtHistogram, list[float],
                                                                       list[str]]:
    """The pooled histogram of a campaign's complete runs of one target and case, each run's median
    (bucket_median), and the runs that have none (their median among the overflows, or no histogram:
    the slowest runs, which a test over the others would leave out)."""
    pooled: dict[float, int] = {}
    ranges: list[float] = []
    medians: list[float] = []
    without: list[str] = []
    for r in _complete_runs(info, target, case):
        counts = _run_counts(info, r)
        for v, c in counts.items():
            pooled[v] = pooled.get(v, 0) + c
        if (median := bucket_median(counts)) is not None:
            medians.append(median)
        else:
            without.append(str(r["id"]))
        if (range_us := _ct_range(info.dir / "runs" / str(r["id"]))) is not None:
            ranges.append(range_us)
    return CtHistogram(pooled, min(ranges) if ranges else None), medians, without


def _ct_tests(infos: Sequence[CampaignInfo], columns: list[dict[str, Any]],
              cases: list[str]) -> list[dict[str, Any]]:
    by_label = {i.label: i for i in infos}
    base_label = infos[0].label
    tests = []
    for col in columns:
        base = next(
            (
                c
                for c in columns
                if c["campaign"] == base_label and c["target"] == col["target"] and c is not col
            ),
            None,
        )
        # the baseline campaign's own other targets
        if base is None and col["campaign"] == base_label:
            base = columns[0]
        if base is None or base is col:
            continue
        for case in cases:
            (hist_a, runs_a, none_a), (hist_b, runs_b, none_b) = (
                _ct_histogram(by_label[base["campaign"]], base["target"], case),
                _ct_histogram(by_label[col["campaign"]], col["target"], case))
            a, b = comparable(hist_a, hist_b)
            if not a or not b:
                continue
            p, greater = binned_mann_whitney(a, b)
            if none_a or none_b:  # a test over the other runs would leave the slowest out: none
                runs = welch([], [])
                note = (f"run(s) {', '.join(none_a + none_b)} have no median (beyond the "
                        "histogram's range, or no histogram): a test of the others would leave "
                        "the slowest out; none is made")
            else:
                runs = welch(runs_a, runs_b)
                note = untested_reason(runs, "this column")
            tests.append({"case": case, "column": col["label"], "baseline": base["label"],
                          "p_value": runs["p_value"], "p_holm": None, "significant": None,
                          "note": note,
                          "runs": len(runs_b), "runs_baseline": len(runs_a),
                          "run_medians_us": runs_b,
                          "run_medians_baseline_us": runs_a, "run_median_diff_us": runs["diff_ns"],
                          "run_median_diff_ci95_us": runs["ci95_ns"], "events_p_value": p,
                          "prob_greater": greater, "count": int(sum(b.values())),
                          "baseline_count": int(sum(a.values()))})
    tested = [t for t in tests if t["p_value"] is not None]
    for t, adjusted in zip(tested, holm([t["p_value"] for t in tested]), strict=True):
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
            columns.append(
                {
                    "label": info.label if len(targets) == 1 else f"{info.label} · {target}",
                    "campaign": info.label, "target": target,
                    "kernel_release": facts.get("kernel_release"),
                    "preempt_rt": facts.get("preempt_rt"), "emulated": facts.get("emulated")
                }
            )
            cells.append(((table.get("max_latency_us") or {}).get(target) or {},
                          (table.get("problems") or {}).get(target) or {}))
    if not columns:
        return None
    return {"cases": cases, "columns": columns,
            "max_latency_us": [[values.get(case) for values, _ in cells] for case in cases],
            "problems": [[problems.get(case) for _, problems in cells] for case in cases],
            "tests": _ct_tests(infos, columns, cases), "note": CT_NOTE}


def analyse(infos: Sequence[CampaignInfo], stores: Sequence[ResultStore]) -> tuple[dict[str,
                                                                                        Any] | None,
                                                                               dict[tuple,
                                                                                    np.ndarray],
                                                                                    list[str]]:
    return _cyclictest(infos), {}, []


def _tables(result: Mapping[str, Any]) -> list:
    return [t for t in (cyclictest_table(result), cyclictest_tests_table(result)) if t]


def _several_targets(report: Mapping[str, Any]) -> bool:
    return len(((report.get("cyclictest") or {}).get("table") or {}).get("targets") or []) > 1


COMPARE = ComparePart(analyse, _tables, csv=(("compare-cyclictest.csv", cyclictest_rows),),
                      alone=_several_targets,
                      alone_text="one cyclictest campaign of several targets")
