"""Patterns in a run's gaps: a fixed period among their starts (a timer outside the OS), the gaps
by cause and source, and families of about one length among the unexplained ones."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from station.kinds.interruptions.attribution import CAUSES, Attributed

CLUSTER_SPREAD = 1.1  # neighbours in a family of gaps differ by less than this factor
MAX_CLUSTERS = 5
PERIODIC_SHARE = 2 / 3  # this share of inter-arrivals within PERIOD_TOLERANCE of the median
PERIODIC_MIN = 5  # inter-arrivals: fewer cannot show a period
PERIOD_TOLERANCE = 0.1
MAX_MISSED = 2  # occurrences in a row a periodic source may go unseen and still count as periodic


def periodicity(starts_ns: list[int]) -> dict[str, Any]:
    """The period of the arrivals and whether they keep to it (a fixed period points at a timer:
    firmware's, the kernel's, a device's). An occurrence the detector did not see on its own (in
    its blind bookkeeping, or merged into a longer gap of another cause) leaves an inter-arrival
    of two or three periods: each inter-arrival counts as the whole number of periods nearest to
    it (at most MAX_MISSED + 1), so misses do not stretch the period, and a timer seen only most
    of the time is still periodic."""
    if len(starts_ns) < 3:
        return {"period_ms": None, "periodic": False, "inter_arrival_ms": []}
    dt = np.diff(np.sort(np.asarray(starts_ns, dtype=np.int64))) / 1e6
    period = float(np.median(dt))
    for _ in range(2):  # from the plain median, refined once with the multiples it implies
        if period <= 0:
            break
        k = np.rint(dt / period)
        whole = (k >= 1) & (k <= MAX_MISSED + 1)
        period = float(np.median(dt[whole] / k[whole])) if whole.any() else period
    k = np.clip(np.rint(dt / period), 1, MAX_MISSED + 1) if period > 0 else np.ones_like(dt)
    regular = (
        float(np.mean(np.abs(dt - k * period) <= PERIOD_TOLERANCE * period)) if period > 0 else 0.0
    )
    return {"period_ms": round(period, 6),
            "periodic": regular >= PERIODIC_SHARE and len(dt) >= PERIODIC_MIN,
            "regular_share": round(regular, 4), "inter_arrival_ms": [round(float(x),
                                                                           6) for x in dt]}


def groups(gaps: list[Attributed]) -> list[dict[str, Any]]:
    """One row per (cause, source): how many, how long, how often."""
    by: dict[tuple[str, str], list[Attributed]] = {}
    for g in gaps:
        by.setdefault((g.cause, g.source), []).append(g)
    rows = []
    for (cause, source), members in by.items():
        d = np.asarray([g.duration_ns for g in members], dtype=np.float64) / 1e3
        p = periodicity([g.start_ns for g in members])
        if cause == "preempted":  # which tasks took the CPU, most frequent first
            names = Counter(n for g in members for n in g.tasks.split(", ") if n)
            source = ", ".join(n for n, _ in names.most_common(4)) or source
        rows.append({
            "cause": cause, "source": source, "count": len(members),
            "median_us": round(float(np.median(d)), 3), "p99_us": round(float(np.percentile(d, 99)),
                                                                        3),
            "max_us": round(float(d.max()), 3), "total_ms": round(float(d.sum()) / 1e3, 3),
            "period_ms": p["period_ms"], "periodic": p["periodic"],
            # a line shared by a timer and other work (LOC: the tick and a periodic hold) keeps
            # the timer's period in a family of gaps of one length, not in the group's median
            "families": clusters(members),
        })
    rows.sort(key=lambda r: (CAUSES.index(r["cause"]), -r["total_ms"]))
    return rows


def clusters(gaps: list[Attributed]) -> list[dict[str, Any]]:
    """Families of gaps of about the same length (neighbours within CLUSTER_SPREAD when sorted
    by length), three or more each, with their periodicity; most gaps first. Firmware that
    steals the CPU on a timer shows as one family with a fixed period, however much irregular
    noise surrounds it."""
    ordered = sorted(gaps, key=lambda g: g.duration_ns)
    families: list[list[Attributed]] = []
    for g in ordered:
        if families and g.duration_ns <= families[-1][-1].duration_ns * CLUSTER_SPREAD:
            families[-1].append(g)
        else:
            families.append([g])
    rows = []
    for fam in families:
        if len(fam) < 3:
            continue
        d = [g.duration_ns / 1e3 for g in fam]
        p = periodicity([g.start_ns for g in fam])
        rows.append({"count": len(fam), "median_us": round(float(np.median(d)), 3),
                     "min_us": round(min(d), 3),
                     "max_us": round(max(d), 3), "period_ms": p["period_ms"],
                     "periodic": p["periodic"]})
    return sorted(rows, key=lambda r: (not r["periodic"], -r["count"]))[:MAX_CLUSTERS]


