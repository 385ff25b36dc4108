"""OSADL-style cyclictest latency plots: one figure per target × case, one step curve per thread.

The curves are cyclictest's own histograms (``RunSamples.histograms``, 1 µs
buckets), not re-binned samples: x is the latency in µs with one bin per µs,
y the sample count on a log axis, and a dashed line marks each thread's max (a marker at the
range's edge, with its value, when the max lies beyond the histogram's range).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import numpy as np

from station.analysis.samples import RunSamples, ThreadHistogram
from station.common.formatting import count_text, ordered, slug
from station.report.figures import RenderedFigure, _new_axes, _steps, _to_svg, legend_outside

KIND = "cyclictest"
# the figure that answers the campaign's question, beside the findings
MAXIMA_KIND = "cyclictest-maxima"
# Ten distinct colours: threads are unordered categories, one per CPU.
THREAD_COLORS = tuple(mpl.colors.to_hex(c) for c in mpl.colormaps["tab10"].colors)
# Zero-count bins are drawn at this height, below the axis: the line drops out of
# view between populated bins instead of breaking the log scale (as figures.py does).
FLOOR = 0.5

@dataclass(frozen=True)
class Curve:
    """One thread's pooled histogram: non-empty buckets (µs, ascending) and their counts, and
    cyclictest's own maximum and overflows over the pooled runs."""

    buckets: np.ndarray
    counts: np.ndarray
    max_us: float | None
    overflows: int


def pool_by_label(histograms: Iterable[ThreadHistogram]) -> dict[str, Curve]:
    """Sum the histograms that share a label (repetitions of one thread), in first-seen order."""
    parts: dict[str, list[ThreadHistogram]] = {}
    for h in histograms:
        parts.setdefault(h.label, []).append(h)
    pooled = {}
    for label, hs in parts.items():
        buckets = np.concatenate([h.bucket_us for h in hs])
        counts = np.concatenate([h.counts for h in hs])
        keep = counts > 0
        values, inverse = np.unique(buckets[keep], return_inverse=True)
        totals = np.zeros(values.size, dtype=np.int64)
        np.add.at(totals, inverse, counts[keep])
        maxima = [h.max_us for h in hs if h.max_us is not None]
        pooled[label] = Curve(values, totals, max(maxima) if maxima else None,
                              sum(h.overflows for h in hs))
    return pooled


def latency_plot_svg(curves: Mapping[str, Curve], title: str, name: str) -> str:
    """Counts per 1 µs bin on a log axis, one step curve per thread, dashed at each max.

    Bin b (cyclictest's "b µs") is drawn centred on b, so the max line sits on it. A thread
    whose maximum lies beyond the histogram's range (overflows) gets no max line inside it: a
    marker at the range's right edge carries the true maximum and the overflow count, so no
    plot shows the largest in-range bucket as the run's maximum. The legend gives cyclictest's
    own maximum, as the tables do.
    Each curve is an SVG group with id ``<name>-curve-<i>`` (its max line ``<name>-max-<i>``,
    its overflow marker ``<name>-overflow-<i>``): unique in a page holding many figures,
    findable by tests.
    """
    # a thread whose every cycle overflowed has no bucket to draw, but its legend entry and its
    # marker
    curves = {label: c for label, c in curves.items() if c.buckets.size or c.overflows}
    fig, ax = _new_axes(title)
    if not curves:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    drawn = [c for c in curves.values() if c.buckets.size]
    lo = min((int(c.buckets[0]) for c in drawn), default=0)
    hi = max((int(c.buckets[-1]) for c in drawn), default=1)
    edges = np.arange(lo, hi + 2, dtype=np.float64) - 0.5
    top = 1.0
    pad = 0.02 * (hi + 1)
    overflowed = False
    for i, (label, c) in enumerate(curves.items()):
        color = THREAD_COLORS[i % len(THREAD_COLORS)]
        if c.buckets.size:
            dense = np.full(edges.size - 1, FLOOR)
            dense[c.buckets - lo] = c.counts
            xs, ys = _steps(edges, dense)
            xs, ys = np.r_[xs[0], xs, xs[-1]], np.r_[FLOOR, ys, FLOOR]
            top = max(top, float(c.counts.max()))
        else:  # nothing in range: the legend entry and the marker say what there is
            xs, ys = np.empty(0), np.empty(0)
        in_range = int(c.buckets[-1]) if c.buckets.size else -math.inf
        # overflows without cyclictest's own maximum: it lies beyond the range, value unknown
        worst = c.max_us if c.max_us is not None else (None if c.overflows else in_range)
        beyond = c.overflows > 0 and (worst is None or worst > in_range)
        shown = "beyond the range" if worst is None else f"{_us(worst)} µs"
        ax.plot(xs, ys, color=color, linewidth=1.0,
                gid=f"{name}-curve-{i}",
                label=f"{label}  (n={count_text(int(c.counts.sum()) + c.overflows)}, max {shown}"
                      + (f", {count_text(c.overflows)} beyond the range)" if beyond else ")"))
        if beyond:  # the maximum is off the plot: say where, at the edge
            overflowed = True
            ax.annotate(f"▶ max {shown}", xy=(hi + 0.5 + pad, 1.0), xycoords=("data", "data"),
                        xytext=(0, 4 + 11 * i), textcoords="offset points", ha="right", va="bottom",
                        color=color, fontsize=8, gid=f"{name}-overflow-{i}")
        else:
            ax.axvline(worst, color=color, linestyle=(0, (4, 3)), linewidth=0.8, alpha=0.9,
                       gid=f"{name}-max-{i}")
    ax.set_yscale("log")
    ax.set_ylim(0.7, top * 2.5)
    # From 0 µs, as OSADL's plots: where the body sits is part of the picture.
    ax.set_xlim(min(lo, 0) - 0.5, hi + 0.5 + pad)
    ax.set_xlabel(
        "latency (µs)" + ("; ▶ a maximum beyond the histogram's range" if overflowed else "")
    )
    ax.set_ylabel("samples per 1 µs bin")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def _us(value: float) -> str:
    return f"{value:g}"


def _caption(section: Mapping[str, Any], target: str, runs: list[Mapping[str, Any]],
             complete: bool) -> str:
    reps = len(runs)
    text = (f"cyclictest latency per thread ({reps} run{'s' if reps != 1 else ''} pooled per "
            "thread), 1 µs bins, log count axis; dashed: each thread's max.")
    if not complete:
        text += " No complete run: drawn from runs that did not complete."
    overflows = sum(int(t.get("overflows") or 0) for r in runs for t in r.get("threads") or [])
    if overflows:
        text += (f" {count_text(overflows)} sample{'s' if overflows != 1 else ''} beyond the "
                 "histogram's range not drawn; ▶ at the range's edge gives such a thread's true "
                 "max, as the tables do.")
    if ((section.get("targets") or {}).get(target) or {}).get("emulated"):
        text += " Emulated target (QEMU/TCG): not hardware numbers."
    return text


def maxima_svg(section: Mapping[str, Any], name: str) -> str:
    """The maximum-latency table as a picture: one marker per target × case (log axis), a line
    per target through its cases, so how a kernel's worst case moves with the load shows at once."""
    table = section.get("table") or {}
    cases = [str(c) for c in table.get("cases") or []]
    fig, ax = _new_axes("Maximum latency per case")
    x = np.arange(len(cases))
    for i, target in enumerate(table.get("targets") or []):
        row = (table.get("max_latency_us") or {}).get(target) or {}
        ys = np.array([row.get(c) if row.get(c) is not None else np.nan for c in cases],
                      dtype=float)
        if np.isnan(ys).all():
            continue
        facts = (section.get("targets") or {}).get(target) or {}
        badge = {True: " (PREEMPT_RT)", False: " (regular kernel)"}.get(facts.get("preempt_rt"), "")
        color = THREAD_COLORS[i % len(THREAD_COLORS)]
        ax.plot(x, ys, marker="o", linewidth=1.0, color=color, label=f"{target}{badge}",
                gid=f"{name}-target-{i}")
        # a log axis has few labels: each maximum says its value
        for xi, y in zip(x, ys, strict=True):
            if not np.isnan(y):
                ax.annotate(f"{y:g}", (xi, y), xytext=(0, 6), textcoords="offset points",
                            ha="center",
                            fontsize=8, color=color)
    ax.set_yscale("log")
    shown = [v for row in (table.get("max_latency_us") or {}).values() for v in row.values() if v]
    if shown:  # room above the top marker for its value, and below the lowest
        ax.set_ylim(min(shown) / 1.8, max(shown) * 2.0)
    ax.set_xticks(x, cases, rotation=20, ha="right")
    ax.set_xlabel("case (load)")
    ax.set_ylabel("maximum latency (µs)")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def build_cyclictest_figures(report: Mapping[str, Any],
                             samples: Mapping[str, RunSamples]) -> list[RenderedFigure]:
    """One latency plot per target × case that has histograms, in the max-latency table's order.

    The complete runs are pooled, as the table's maximum counts only them; a
    cell without a complete run is drawn from whatever runs left histograms.
    """
    section = report.get("cyclictest") or {}
    runs = [r for r in section.get("runs") or []
            if r.get("id") in samples and samples[r["id"]].histograms]
    if not runs:
        return []
    table = section.get("table") or {}
    targets = ordered([str(r.get("target")) for r in runs],
                      [str(t) for t in table.get("targets") or ()])
    cases = ordered([str(r.get("load")) for r in runs], [str(c) for c in table.get("cases") or ()])
    figures = []
    # the figure that backs the findings, shown under them: drawn only where there are findings (a
    # report from before them opens with the table alone, as it did)
    if section.get("findings") and any(
        v is not None for row in (table.get("max_latency_us") or {}).values() for v in row.values()
    ):
        name = MAXIMA_KIND
        figures.append(RenderedFigure(
            name, MAXIMA_KIND, "Maximum latency per case",
            "The largest latency of any thread in each target × case's complete runs (the "
            "maximum-latency table), log axis. A maximum is one draw: it ranks nothing by "
            "itself.", maxima_svg(section, name),
            glance=True))
    for target in targets:
        for case in cases:
            group = [r for r in runs if (str(r.get("target")), str(r.get("load"))) == (target,
                                                                                       case)]
            if not group:
                continue
            complete = [r for r in group if r.get("status") == "complete"]
            used = complete or group
            curves = pool_by_label(h for r in used for h in samples[r["id"]].histograms)
            name = f"{KIND}-{slug(target)}-{slug(case)}"
            title = f"{target}: {case}"
            figures.append(RenderedFigure(name, KIND, title,
                                          _caption(section, target, used, bool(complete)),
                                          latency_plot_svg(curves, title, name)))
    return figures
