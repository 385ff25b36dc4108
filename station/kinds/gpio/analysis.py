"""Analysis of gpio runs (seed 002): the delay distribution of each case, its outliers and what
they collide with, and the seed's comparisons said in one sentence each.

Outliers are delays above the run's bulk (median + OUTLIER_MADS robust sigmas, at least a few
scope samples). A periodic interrupt on the device delays every stimulus that arrives while its
handler runs, so outliers from one acquisition lie at multiples of that interrupt's period from
each other (give or take the handler's length): the period is searched for among the spacings
of outliers within each acquisition (only there are stimulus times on one clock). Its handler's
length (the collision window) follows from the outlier fraction: fraction = window / period, so
window = fraction × period; the largest extra delay should be about that long.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from station.analysis import dependence, run_level
from station.analysis.campaign import AnalysisInput, KindReport, entry_identity, section_report
from station.analysis.distribution import robust_sigma
from station.compare.analysis import holm
from station.store.manifest import Manifest, read_manifest
from station.store.run_store import sealed_or_streamed

OUTLIER_MADS = 6.0  # robust sigmas above the median
MIN_OUTLIER_SAMPLES = 5  # ... and at least this many scope samples above it
PERIOD_SHARE = 0.35  # a period explains the outliers if this share of their spacings fit it
CHANCE = 1e-3  # ... and its periodogram peak this unlikely by chance, over every period tried
PEAK_SHARE = 0.8  # a harmonic's peak within this share of the highest one is the same period
MAX_SPACINGS = 2000
MAX_PEAKS = 200  # periodogram peaks tried, lowest frequency first
# a multiple of the period that fits this share of as many spacings is the period
MULTIPLE_SHARE = 0.85
MIN_SPACINGS = 5  # fewer spacings prove no period
HISTOGRAM_BINS = 120
FOLLOWING_GOVERNORS = ("ondemand", "schedutil", "conservative")


def analyse_runs(run_dirs: list[Path], campaign: dict[str, Any]) -> tuple[dict[str, Any], dict,
                                                                          list[str]]:
    """(report["gpio"], samples by run id, notes) for a campaign's gpio runs."""
    notes: list[str] = []
    entries: list[dict[str, Any]] = []
    delays: dict[str, np.ndarray] = {}
    for run_dir in run_dirs:
        manifest = read_manifest(run_dir)
        entry, answered = analyse_run(run_dir, manifest, notes)
        entries.append(entry)
        if answered is not None:
            delays[entry["id"]] = answered
    comparisons = compare(entries, delays)
    return {"runs": entries, "findings": findings(entries, comparisons),
            "comparisons": comparisons}, {}, notes


def read_delays(run_dir: Path) -> pd.DataFrame:
    """delays.parquet, or delays.csv when the run was cut short before its seal (up to its last
    complete line: a torn one would read as a wrong delay)."""
    frame = sealed_or_streamed(run_dir, "delays", "delays.csv")
    if frame is None:
        raise FileNotFoundError(f"{run_dir}: neither delays.parquet nor delays.csv")
    return frame


def analyse_run(run_dir: Path, manifest: Manifest, notes: list[str]) -> tuple[dict[str, Any],
                                                                              np.ndarray | None]:
    g = manifest.section("gpio")
    entry: dict[str, Any] = {
        **entry_identity(manifest), "case": g.get("case",
                                                  manifest.run.variant if manifest.run else None),
        "responder": g.get("responder"), "mode": g.get("mode"),
        "threaded": g.get("threaded"), "priority": g.get("priority"), "governor": g.get("governor"),
        "resolution_ns": (g.get("sample_interval_s") or 0) * 1e9 or None,
        "idle": not manifest.loads,  # the run's load set started nothing
        "delay_us": None, "histogram": None, "outliers": None,
    }
    if entry["status"] != "complete":
        notes.append(f"Run {entry['id']} is {entry['status']}: "
                     f"{entry['error'] or 'see its manifest'}")
    try:
        frame = read_delays(run_dir)
        acquisition = pd.to_numeric(frame["acquisition"], errors="coerce").to_numpy()
        stimulus = pd.to_numeric(frame["stimulus_s"], errors="coerce").to_numpy(dtype=np.float64)
        delay = pd.to_numeric(frame["delay_s"], errors="coerce").to_numpy(dtype=np.float64)
    except (OSError, KeyError, ValueError) as exc:
        notes.append(f"Run {entry['id']}: its delays cannot be read: {exc}")
        return entry, None
    # written at the seal: a run cut short never counted these (null, not 0)
    counts = manifest.extra("gpio_counts")
    answered_mask = np.isfinite(delay) & np.isfinite(stimulus)
    entry |= {
        "stimuli": len(delay), "answered": int(answered_mask.sum()),
        "missed": int((~np.isfinite(delay)).sum()),
        "censored": None if counts is None else counts.get("censored", 0),
        "ambiguous": None if counts is None else counts.get("ambiguous", 0),
        "unanswering": None if counts is None else counts.get("unanswering_responses", 0),
    }
    entry["miss_fraction"] = entry["missed"] / entry["stimuli"] if entry["stimuli"] else None
    if entry["missed"]:
        notes.append(f"Run {entry['id']}: {entry['missed']} of {entry['stimuli']} stimuli had no "
                     f"response within {(g.get('window_s') or 0) * 1e6:.0f} µs.")
    if not answered_mask.any():
        return entry, None
    d_us = delay[answered_mask] * 1e6
    entry["delay_us"] = describe_delays(d_us)
    entry["histogram"] = histogram(d_us)
    resolution_us = (entry["resolution_ns"] or 0.0) / 1000.0
    entry["outliers"] = outliers(d_us, stimulus[answered_mask] * 1e6, acquisition[answered_mask],
                                 resolution_us)
    return entry, d_us


#: a run's delays are cut into at least this many blocks for the mean's dependence-aware interval
DELAY_BLOCKS = 40


def describe_delays(d_us: np.ndarray) -> dict[str, Any]:
    """The delays' figures; the mean's interval is dependence-aware (issue 46: a load's phases and
    carry-over make neighbouring delays alike), from the delays in stimulus order cut into at least
    DELAY_BLOCKS blocks (dependence.mean_interval); withheld with the reason when too few."""
    n = len(d_us)
    mean, std = float(d_us.mean()), float(d_us.std(ddof=1)) if n > 1 else 0.0
    block = max(1, min(dependence.FINE_EVENTS, n // DELAY_BLOCKS))
    interval = dependence.mean_interval(dependence.blocks_of(np.asarray(d_us, np.float64),
                                                             block=block))
    p50, p99, p999 = np.percentile(d_us, [50, 99, 99.9])
    lo, hi = float(d_us.min()), float(d_us.max())
    return {"min": lo, "p50": float(p50), "mean": mean, "mean_ci": interval["ci95_ns"], "std": std,
            "mean_ci_method": interval.get("method"), "mean_ci_withheld": interval["withheld"],
            "p99": float(p99), "p999": float(p999), "max": hi, "spread": hi - lo}


def histogram(d_us: np.ndarray) -> dict[str, list]:
    lo, hi = float(d_us.min()), float(d_us.max())
    if hi <= lo:
        hi = lo + 1e-3
    counts, edges = np.histogram(d_us, bins=HISTOGRAM_BINS, range=(lo, hi))
    return {"edges_us": edges.tolist(), "counts": counts.astype(int).tolist()}


def outliers(d_us: np.ndarray, stimulus_us: np.ndarray, acquisition: np.ndarray,
             resolution_us: float) -> dict:
    median, sigma = robust_sigma(d_us)
    threshold = median + max(OUTLIER_MADS * sigma, MIN_OUTLIER_SAMPLES * resolution_us)
    out = d_us > threshold
    result: dict[str, Any] = {
        "threshold_us": threshold, "count": int(out.sum()), "fraction": float(out.mean()),
        "excess_max_us": float(d_us[out].max() - median) if out.any() else 0.0, "period_us": None,
        "period_share": None, "window_us": None, "expected_fraction": None
    }
    # an edge arriving φ into a handler of length h waits h - φ: two colliding edges' spacing
    # differs from a multiple of the period by the difference of their waits, so the spread of
    # the waits (not their largest, which another, rarer interrupt may set) is the tolerance;
    # the search uses the outliers of the main cluster of waits (one interrupt's), not the strays
    excess = d_us[out] - median
    main, tolerance = _main_cluster(excess, 2 * resolution_us)
    times, acquisitions = stimulus_us[out][main], acquisition[out][main]
    spacings = _spacings(times, acquisitions)
    found = find_period(spacings, tolerance, _independent(acquisitions))
    if not out.any():
        result["explanation"] = "no delay stands out from the bulk"
    elif len(spacings) < MIN_SPACINGS:
        result["explanation"] = (f"{result['count']} delays stand out; too few share an "
                                 f"acquisition ({len(spacings)} spacings) to test them for a "
                                 "period: longer records or a faster stimulus would")
    elif found is None:
        result["explanation"] = (f"{result['count']} delays stand out; no single period explains "
                                 "their "
                                 f"spacings ({len(spacings)} within acquisitions)")
    else:
        period, share = found
        # an edge that collides waits for the rest of the handler: its extra delay is uniform over
        # the handler's length, and those waiting less than the threshold's margin are no outliers.
        # This interrupt's collisions: the outliers up to the main group's top (plus its spread);
        # longer waits are another source's
        collided = int((excess <= float(excess[main].max()) + tolerance).sum())
        window = collided / len(d_us) * period + (threshold - median)
        result |= {"period_us": period, "period_share": share, "window_us": window,
                   "expected_fraction": window / period}
        result["explanation"] = (
            f"outliers recur at multiples of {period:.1f} µs ({1e3 / period:.3g} kHz; {share:.0%} "
            "of their spacings): collisions with a periodic interrupt whose handler holds the CPU "
            f"about {window:.2f} µs (largest extra delay {result['excess_max_us']:.2f} µs)")
    return result


def _main_cluster(excess: np.ndarray, least: float) -> tuple[np.ndarray, float]:
    """The outliers of the commonest cause, and the spread of their waits (the tolerance).

    One interrupt's collisions wait up to its handler's length: their extra delays crowd below
    it. The crowd's centre is the middle of the narrowest range holding a third of the outliers;
    the cause's outliers are those up to twice that (a wait uniform over [0, h] seen above a
    margin has its middle above h/2). Strays (a task that ran first, a longer handler) lie beyond.
    """
    if len(excess) < 3:
        return np.ones(len(excess), bool), least
    e = np.sort(excess)
    m = max(3, len(e) // 3)
    i = int(np.argmin(e[m - 1:] - e[: len(e) - m + 1]))
    centre = float(np.median(e[i:i + m]))
    main = excess <= 2 * centre
    return main, max(float(np.ptp(excess[main])), least)


def _independent(acquisition: np.ndarray) -> int:
    """How many of the spacings carry information of their own: n - 1 per acquisition with n
    outliers (the other pairwise spacings are sums of those)."""
    _, counts = np.unique(acquisition, return_counts=True)
    return int(np.sum(np.maximum(counts - 1, 0)))


def _spacings(times_us: np.ndarray, acquisition: np.ndarray) -> np.ndarray:
    """Differences between every pair of outliers of one acquisition (one clock)."""
    parts = []
    for a in np.unique(acquisition):
        t = np.sort(times_us[acquisition == a])
        if len(t) > 1:
            parts.append((t[None, :] - t[:, None])[np.triu_indices(len(t), 1)])
    return np.concatenate(parts) if parts else np.empty(0)


def find_period(spacings: np.ndarray, tolerance_us: float, independent: int) -> tuple[float,
                                                                                      float] | None:
    """The longest period the spacings are whole multiples of, with the share that fit it
    (±tolerance).

    A periodogram of the spacings: for a frequency f, the mean of cos(2π·f·spacing) is near 1 if
    the spacings are multiples of 1/f and near 0 (spread 1/sqrt(2N)) if they are not. Periods
    run from the shorter spacings' length down to 4·tolerance, finely enough that the
    longest spacing's phase moves less than a quarter turn between two. Fractions of the period
    (its harmonics) score as well as the period itself: the lowest frequency near the peak wins.
    The peak, refined by least squares, must then fit more spacings (±tolerance) than chance
    would, 2·tolerance/period each, by a margin that holds after counting every frequency tried
    (CHANCE); `independent` spacings carry the evidence (n outliers of one record give n - 1,
    not n(n-1)/2).
    """
    s = np.sort(spacings[spacings > 0])[:MAX_SPACINGS]  # the shortest carry the most: fewest turns
    if len(s) < MIN_SPACINGS or independent < MIN_SPACINGS or tolerance_us <= 0:
        return None
    f_max = 1.0 / (4.0 * tolerance_us)
    # a period longer than most spacings has them at "0 periods": nothing to show for it (and
    # every spacing scores near 1 there); spacings of one source are whole multiples of its period
    f_min = 1.0 / (float(np.quantile(s, 0.2)) + tolerance_us)
    step = 1.0 / (8.0 * s[-1])
    freqs = np.arange(f_min, f_max, step)
    if not len(freqs):
        return None
    score = np.concatenate(
        [
            np.cos(2 * np.pi * np.outer(chunk, s)).mean(axis=1)
            for chunk in np.array_split(freqs, max(1, len(freqs) * len(s) // 2_000_000))
        ]
    )
    best = float(score.max())
    if best < PERIOD_SHARE:  # most spacings cannot be near multiples of any period
        return None
    # the peaks near the top, lowest frequency first: the first that passes is the period
    peak = (score >= PEAK_SHARE * best) & (score >= np.roll(score, 1)) & (score >= np.roll(score,
                                                                                           -1))
    for i in np.flatnonzero(peak)[:MAX_PEAKS]:
        found = _fit_period(s, freqs[i], step, tolerance_us, independent, tried=len(freqs))
        if found is not None:
            return _longest_multiple(s, found, step, tolerance_us, independent, len(freqs))
    return None


def _longest_multiple(s: np.ndarray, found: tuple[float, float], step: float, tolerance_us: float,
                      independent: int, tried: int) -> tuple[float, float]:
    """The period itself rather than a fraction of it: a multiple of the period found that fits
    nearly as many spacings (strays fit a short period's many multiples more easily) wins."""
    period, share = found
    best = found
    for k in range(2, 9):
        longer = _fit_period(s, 1.0 / (k * period), step / k, tolerance_us, independent, tried)
        if (
            longer is not None
            and longer[1] >= MULTIPLE_SHARE * share
            and abs(longer[0] - k * period) < period / 4
        ):
            best = longer
    return best


def _fit_period(s: np.ndarray, f0: float, step: float, tolerance_us: float, independent: int,
                tried: int) -> tuple[float, float] | None:
    fine = np.linspace(f0 - step, f0 + step, 201)
    fine = fine[fine > 0]
    period = 1.0 / float(fine[np.argmax(np.cos(2 * np.pi * np.outer(fine, s)).mean(axis=1))])
    # the peak is flat at the top: least squares on the spacings near a multiple pins it down
    for _ in range(3):
        k = np.maximum(np.rint(s / period), 1)
        near = np.abs(s - k * period) <= max(tolerance_us, period / 8)
        if not near.any():  # no spacing near a multiple: there is no period to pin down
            return None
        period = float(np.sum(s[near] * k[near]) / np.sum(k[near] ** 2))
    k = np.maximum(np.rint(s / period), 1)
    share = float((np.abs(s - k * period) <= tolerance_us).mean())
    by_chance = float(stats.binom.sf(round(share * independent) - 1, independent,
                                     min(1.0, 2 * tolerance_us / period))) * tried
    return (period, share) if share >= PERIOD_SHARE and by_chance < CHANCE else None


Condition = tuple[Any, Any, Any]  # (target, case, load)


def _conditions(entries: list[dict[str, Any]]) -> dict[Condition, list[dict[str, Any]]]:
    """The measured runs by condition (target, case, load): a condition's repetitions together."""
    out: dict[Condition, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("delay_us"):  # no target and "" (a single-target campaign) are one
            out.setdefault((e.get("target") or None, e.get("case"), e.get("load")), []).append(e)
    return out


def _label(key: Condition) -> str:
    target, case, load = key
    return f"{case} under {load}" + (f" on {target}" if target else "")


def _condition_entry(key: Condition, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A condition as the findings speak of it: its first run's description, the mean of its runs'
    mean delays, and the largest standard error of a run's mean (a floor under the run-to-run
    spread)."""
    means = [float(r["delay_us"]["mean"]) for r in runs]
    ses = [_mean_se(r["delay_us"]) for r in runs]
    # a run whose mean has no interval (its delays too dependent for their number) leaves its noise
    # unknown
    floor = None if not ses or any(se is None for se in ses) else max(ses)
    return {**runs[0], "id": _label(key), "runs": [r["id"] for r in runs],
            "delay_us": {"mean": float(np.mean(means))}, "run_means_us": means,
            "within_se_us": floor}


def _mean_se(d: dict[str, Any]) -> float | None:
    """A run mean's standard error from its interval; None where the interval was withheld."""
    lo, hi = d.get("mean_ci") or (None, None)
    return (
        (hi - lo) / (2 * 1.96)
        if lo is not None and hi is not None and np.isfinite(hi - lo)
        else None
    )


def compare(entries: list[dict[str, Any]], delays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Pairs of conditions that differ in one thing: the case (same load), or the load (same case),
    on one target. Runs are the units (issue 46): each run's mean delay is one observation of its
    condition, since two runs never meet the same machine state, and Welch's test on the runs' means
    (run_level.welch) decides, Holm-adjusted over the pairs tested. With one run on a side the
    run-to-run variation is not estimated: no test, and `note` says how many runs would tell a
    difference of this size. `events_p_value` keeps the Mann–Whitney test of the pooled delays
    (every delay taken as independent: the runs' own difference, not the conditions')."""
    groups = _conditions([e for e in entries if e["id"] in delays])
    out: list[dict[str, Any]] = []
    for ka, kb in combinations(groups, 2):
        same_case, same_load = ka[1] == kb[1], ka[2] == kb[2]
        if ka[0] != kb[0] or same_case == same_load:
            continue
        out.append(_compare_conditions(ka, groups[ka], kb, groups[kb], delays,
                                       "load" if same_case else "case"))
    tested = [c for c in out if c["p_value"] is not None]
    for c, adjusted in zip(tested, holm([c["p_value"] for c in tested]), strict=True):
        c["p_holm"] = adjusted
        c["significant"] = adjusted < run_level.ALPHA
    return out


def _compare_conditions(ka: Condition, ra: list[dict[str, Any]], kb: Condition, rb: list[dict[str,
                                                                                              Any]],
                        delays: dict[str, np.ndarray], differs: str) -> dict[str, Any]:
    a, b = _condition_entry(ka, ra), _condition_entry(kb, rb)
    da = np.concatenate([delays[r["id"]] for r in ra])
    db = np.concatenate([delays[r["id"]] for r in rb])
    events_p = (
        float(stats.mannwhitneyu(da, db, alternative="two-sided").pvalue)
        if min(len(da), len(db)) > 1
        else 1.0
    )
    ma, mb = a["delay_us"]["mean"], b["delay_us"]["mean"]
    runs = run_level.welch(a["run_means_us"], b["run_means_us"])
    note = run_level.untested_reason(runs, b["id"], baseline=a["id"])
    needed = None
    if runs["p_value"] is None and not runs.get("no_spread"):
        floor = max(a["within_se_us"] or 0.0, b["within_se_us"] or 0.0)
        needed = run_level.runs_needed(mb - ma, floor) if floor > 0 else None
        note = (f"{note}; no fewer than {needed} runs of each could tell a difference of this size "
                "(a floor from the runs' own noise: the spread between runs adds to "
                "it)" if needed else note)
    return {"a": a["id"], "b": b["id"], "differs": differs, "runs_a": a["runs"],
            "runs_b": b["runs"],
            "mean_a_us": ma, "mean_b_us": mb, "ratio": ma / mb if mb > 0 else None,
            "p_value": runs["p_value"], "p_holm": None, "significant": None, "runs_needed": needed,
            "events_p_value": events_p, "note": note}


def _ranking(ranked: list[dict[str, Any]], tested: dict[frozenset, dict[str, Any]]) -> str:
    """Conditions by mean response, fastest first: '<' only where the two neighbours differ with the
    runs as units, '≈' where the runs cannot tell them apart (p given), ', ' where one of them has a
    single run (no test: run-to-run variation is not estimated)."""
    text = (
        f"mean response, fastest first: {ranked[0]['case']} {ranked[0]['delay_us']['mean']:.3g} µs"
    )
    same, untested, needed, flat = [], [], [], []
    for prev, e in zip(ranked, ranked[1:], strict=False):
        c = tested.get(frozenset((prev["id"], e["id"])))
        if c is not None and c["significant"]:
            sign = " < "
        elif c is not None and _no_spread(c):
            sign = ", "
            flat.append(f"{prev['case']} and {e['case']}")
        elif c is not None and c["significant"] is None:
            sign = ", "
            untested.append(f"{prev['case']} and {e['case']}")
            needed.append(c.get("runs_needed"))
        else:
            sign = " ≈ "
            same.append(
                f"{prev['case']} and {e['case']}"
                + (
                    f" (p = {c['p_holm']:.2g})"
                    if c is not None
                    else " (not tested against each other)"
                )
            )
        text += f"{sign}{e['case']} {e['delay_us']['mean']:.3g} µs"
    if same:
        text += "; indistinguishable from run to run: " + ", ".join(same)
    if flat:
        text += ("; not ordered (every run on each side gave the same mean: no spread between runs "
                 "to judge a difference against): " + ", ".join(flat))
    if untested:
        most = max((n for n in needed if n), default=None)
        text += ("; not ordered (one run of a case: run-to-run variation is not estimated, so no "
                 "difference can be told from it): " + ", ".join(untested)
                 + (f"; no fewer than {most} runs of each could tell these apart" if most else
                    "; repetitions: 2 or more per case"))
    return text


def findings(entries: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> list[dict[str,
                                                                                            Any]]:
    """The report's answer first: one sentence per comparison that says something."""
    groups = _conditions(entries)
    conditions = {_label(k): _condition_entry(k, runs) for k, runs in groups.items()}
    out: list[dict[str, Any]] = []
    loads = list(dict.fromkeys(k[2] for k in groups))
    tested = {frozenset((c["a"], c["b"])): c for c in comparisons}
    for load in loads:
        targets = list(dict.fromkeys(k[0] for k in groups if k[2] == load))
        for target in targets:
            ranked = sorted(
                (conditions[_label(k)] for k in groups if k[2] == load and k[0] == target),
                key=lambda e: e["delay_us"]["mean"],
            )
            if len(ranked) > 1:
                where = f"{load}" + (f" on {target}" if target and len(targets) > 1 else "")
                out.append({"kind": "ranking", "load": load,
                            "text": f"{where}: {_ranking(ranked, tested)}."})
    for c in comparisons:
        a, b = conditions[c["a"]], conditions[c["b"]]
        if c["significant"] is False or c["ratio"] is None:
            continue
        if c["significant"] is None and not _beyond_own_noise(a, b):
            continue  # untested, and within the runs' own noise: nothing to say
        caveat = "" if c["significant"] else f" ({_one_run(c)})"
        # cases that differ in their responder alone (the seed's sysfs vs mmap); the ranking says
        # the rest
        if a.get("load") == b.get("load") and a.get("governor") == b.get("governor") and \
                a.get("responder") != b.get("responder"):
            slow, fast = (a, b) if c["ratio"] > 1 else (b, a)
            ratio = max(c["ratio"], 1 / c["ratio"])
            if ratio >= 1.5:
                out.append({"kind": "ratio", "load": a.get("load"), "text": (
                    f"{a.get('load')}: {slow['case']} ({_how(slow)}) is {ratio:.2g}× slower on "
                    f"average than {fast['case']} ({_how(fast)}): {slow['delay_us']['mean']:.3g} "
                    f"vs {fast['delay_us']['mean']:.3g} µs{caveat}.")})
        elif a.get("case") == b.get("case") and a.get("load") != b.get("load"):
            out.append({"kind": "load", "load": None, "text": _load_sentence(a, b, caveat)})
    for e in entries:
        o = e.get("outliers") or {}
        if o.get("period_us"):
            out.append({"kind": "outliers", "load": e.get("load"),
                        "text": f"{e['id']}: {o['explanation']}."})
    return out


def _one_run(c: dict[str, Any]) -> str:
    if _no_spread(c):
        return (
            "every run on each side gave the same mean: no spread between runs to judge it against"
        )
    n = c.get("runs_needed")
    return ("one run on a side: run-to-run variation is not estimated"
            + (f"; no fewer than {n} runs of each could tell a difference of this size" if n else
               "; repetitions: 2 or more each"))


def _no_spread(c: dict[str, Any]) -> bool:
    """Untested though both sides have two runs or more: every run on each side gave the same mean
    (run_level.welch makes no test only then, or with a single run on a side)."""
    return c["p_value"] is None and min(len(c["runs_a"]), len(c["runs_b"])) >= 2


def _beyond_own_noise(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two conditions' means differ by more than their runs' own standard errors allow
    (two-sided 5 %): the least an untested difference must show before a finding speaks of it."""
    if a["within_se_us"] is None or b["within_se_us"] is None:
        # a run's own noise unknown (its interval withheld): no difference is shown to exceed it
        return False
    se = float(np.hypot(a["within_se_us"], b["within_se_us"]))
    return abs(a["delay_us"]["mean"] - b["delay_us"]["mean"]) > 1.96 * se


def _how(e: dict[str, Any]) -> str:
    parts = [f"{e.get('responder')}"]
    if e.get("governor") and e.get("governor") != "keep":
        parts.append(f"{e['governor']} governor")
    return ", ".join(parts)


def _load_sentence(a: dict[str, Any], b: dict[str, Any], caveat: str = "") -> str:
    idle, loaded = (b, a) if b.get("idle") and not a.get("idle") else (a, b)
    mi, ml = idle["delay_us"]["mean"], loaded["delay_us"]["mean"]
    faster = ml < mi
    text = (f"{idle['case']}: {'faster' if faster else 'slower'} under load {loaded['load']!r} "
            f"({ml:.3g} µs) than under {idle['load']!r} ({mi:.3g} µs)")
    governor = idle.get("governor")
    if not (idle.get("idle") and not loaded.get("idle")):
        return text + caveat + "."  # two loads, or two idle runs: no mechanism of idleness to name
    if faster and governor in FOLLOWING_GOVERNORS:
        text += (f" — the {governor} governor lowers an idle CPU's clock, and the load raises it "
                 "again, more than the load's competition costs")
    elif not faster and governor == "performance":
        text += " — at a fixed clock (performance governor) the load only competes for the CPU"
    return text + caveat + "."


def analyse(given: AnalysisInput) -> KindReport:
    campaign = given.campaign
    return section_report("gpio", *analyse_runs(given.run_dirs, campaign))
