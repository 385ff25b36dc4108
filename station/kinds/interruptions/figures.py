"""The interruption detector's figures (seed 003), per run: how long the gaps were, per cause,
and how regularly the unexplained ones came.

* ``interruptions-<run>-gaps``: the analysis's histogram of gap durations (its shared
  log-spaced bins, report["interruptions"]["runs"][i]["histogram"]), one translucent step
  area per cause, log x and log count axes, a dashed line at the detector's threshold.
* ``interruptions-<run>-arrivals``: the time between consecutive unexplained gaps
  (``suspect_inter_arrival_ms``), drawn when there are at least MIN_ARRIVALS of them: a
  narrow peak is a fixed period, the mark of a timer in firmware or a hypervisor.

Both are drawn from the report dictionary alone: the section has no raw samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from station.common.formatting import count_text, is_number, plain_us
from station.kinds.interruptions.tables import CAUSE_LABEL, CAUSES, run_anchors
from station.report.figures import RenderedFigure, _new_axes, _to_svg, legend_outside

KIND = "interruptions"
CAUSE_COLOR = {"interrupt": "#1f77b4", "throttled": "#ff7f0e", "preempted": "#2ca02c",
               "smi": "#9467bd",
               "unexplained": "#d62728"}
# Empty bins sit at this height, below the count axis (as figures.py and cyclictest_figures.py).
FLOOR = 0.5
MIN_ARRIVALS = 3  # fewer inter-arrival times say nothing about a period
ARRIVAL_BINS_PER_DECADE = 20


def figure_names(anchor: str) -> tuple[str, str]:
    """(the gap histogram's, the inter-arrival histogram's) file stem for a run's anchor."""
    return f"{anchor}-gaps", f"{anchor}-arrivals"


def gaps_svg(histogram: Mapping[str, Any], threshold_us: Any, title: str, name: str) -> str:
    """Gap durations per cause on the analysis's log-spaced bins; each cause an SVG group
    ``<name>-cause-<cause>``."""
    edges = np.asarray(histogram.get("edges_us") or [], dtype=np.float64)
    counts = histogram.get("counts") or {}
    fig, ax = _new_axes(title)
    drawn = [c for c in (*CAUSES, *(k for k in counts if k not in CAUSES))
             if len(counts.get(c) or []) == edges.size - 1 and edges.size > 1 and any(counts[c])]
    if not drawn:
        ax.text(0.5, 0.5, "no gaps", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    top = 1.0
    for cause in drawn:
        values = np.asarray(counts[cause], dtype=np.float64)
        top = max(top, float(values.max()))
        color = CAUSE_COLOR.get(cause, "#666666")
        shown = np.where(values > 0, values, FLOOR)
        ax.stairs(shown, edges, baseline=FLOOR, fill=True, color=color, alpha=0.3,
                  gid=f"{name}-cause-{cause}")
        ax.stairs(shown, edges, baseline=FLOOR, color=color, linewidth=1.0,
                  label=f"{CAUSE_LABEL.get(cause, cause)} ({count_text(int(values.sum()))})")
    if is_number(threshold_us) and threshold_us > 0:
        ax.axvline(threshold_us, color="#444444", linestyle=(0, (4, 3)), linewidth=0.8,
                   label=f"threshold {plain_us(threshold_us)} µs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(0.7, top * 2.5)
    lo = float(edges[0])
    if is_number(threshold_us) and threshold_us > 0:
        lo = min(lo, float(threshold_us))
    ax.set_xlim(lo / 1.2, float(edges[-1]) * 1.2)
    ax.set_xlabel("gap duration (µs)")
    ax.set_ylabel("gaps per bin")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def arrivals_svg(intervals_ms: Sequence[float], period_ms: Any, periodic: bool, title: str,
                 name: str) -> str:
    """Histogram of the time between consecutive unexplained gaps, log-spaced bins; a dashed
    line at the median (the period when they keep to one). The bars are the SVG group
    ``<name>-bars``."""
    values = np.asarray([v for v in intervals_ms if is_number(v) and v > 0], dtype=np.float64)
    fig, ax = _new_axes(title)
    if values.size == 0:
        ax.text(0.5, 0.5, "no intervals", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    lo, hi = float(values.min()) / 1.25, float(values.max()) * 1.25
    if hi / lo < 10:  # at least a decade around them: a fixed period shows as one narrow bar
        centre = float(np.sqrt(lo * hi))
        lo, hi = centre / np.sqrt(10), centre * np.sqrt(10)
    n = max(1, int(np.ceil(np.log10(hi / lo) * ARRIVAL_BINS_PER_DECADE)))
    edges = np.logspace(np.log10(lo), np.log10(hi), n + 1)
    counts = np.histogram(values, bins=edges)[0].astype(np.float64)
    ax.stairs(counts, edges, fill=True, color=CAUSE_COLOR["unexplained"], alpha=0.35,
              gid=f"{name}-bars")
    ax.stairs(counts, edges, color=CAUSE_COLOR["unexplained"], linewidth=1.0,
              label=f"{count_text(values.size)} intervals")
    if is_number(period_ms) and period_ms > 0:
        what = "period" if periodic else "median"
        ax.axvline(period_ms, color="#444444", linestyle=(0, (4, 3)), linewidth=0.8,
                   label=f"{what} {plain_us(period_ms)} ms")
    ax.set_xscale("log")
    ax.set_ylim(0, float(counts.max()) * 1.15 + 0.5)
    ax.set_xlabel("time between unexplained gaps (ms)")
    ax.set_ylabel("intervals per bin")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def _gaps_caption(entry: Mapping[str, Any]) -> str:
    by = entry.get("by_cause") or {}
    total = entry.get("gaps") or 0
    text = (f"The run's {count_text(total)} gaps by duration, per cause: log-spaced bins, log "
            "axes; dashed: the detector's threshold. Interrupts pile up at each handler's usual "
            "cost; preemptions spread wider.")
    suspects = by.get("unexplained") or 0
    if suspects:
        text += (f" Red: {count_text(suspects)} gap{'s' if suspects != 1 else ''} no interrupt, "
                 "task or counted SMI explains — a cluster at one duration, apart from the "
                 "interrupts, is what firmware (an SMI) or a hypervisor leaves.")
    else:
        text += " No unexplained gaps: nothing points at firmware or a hypervisor."
    return text


def _arrivals_caption(entry: Mapping[str, Any], n: int) -> str:
    suspects = entry.get("unexplained") or {}
    period = suspects.get("period_ms")
    text = (f"Time between consecutive unexplained gaps ({count_text(n)} intervals), log-spaced "
            "bins; dashed: their median. One narrow peak means they come on a fixed period — a "
            "timer in firmware (periodic SMIs) or in a hypervisor; a broad spread means they come "
            "at random.")
    if suspects.get("periodic") and is_number(period):
        text += f" The analysis finds them periodic, every {plain_us(period)} ms."
    elif is_number(period):
        text += f" The analysis finds no fixed period (median {plain_us(period)} ms)."
    return text


def build_interruptions_figures(report: Mapping[str, Any],
                                samples: Mapping[str, Any] | None = None) -> list[RenderedFigure]:
    """Per analysed run with gaps: its gap histogram, then (with at least MIN_ARRIVALS
    intervals) the inter-arrival histogram of its unexplained gaps, in the section's order.
    ``samples`` is not used (the section carries its own histograms); it keeps the signature of
    the other figure builders."""
    runs = (report.get("interruptions") or {}).get("runs") or []
    figures = []
    for entry, anchor in zip(runs, run_anchors(runs), strict=True):
        gaps_name, arrivals_name = figure_names(anchor)
        histogram = entry.get("histogram") or {}
        run_id = str(entry.get("id"))
        if histogram.get("edges_us") and histogram.get("counts"):
            title = f"{run_id}: gap durations by cause"
            figures.append(RenderedFigure(gaps_name, KIND, title, _gaps_caption(entry),
                                          gaps_svg(histogram, entry.get("threshold_us"), title,
                                                   gaps_name)))
        intervals = [v for v in entry.get("suspect_inter_arrival_ms") or [] if is_number(v)]
        if len(intervals) >= MIN_ARRIVALS:
            suspects = entry.get("unexplained") or {}
            title = f"{run_id}: time between unexplained gaps"
            figures.append(RenderedFigure(
                arrivals_name, KIND, title, _arrivals_caption(entry, len(intervals)),
                arrivals_svg(intervals, suspects.get("period_ms"), bool(suspects.get("periodic")),
                             title, arrivals_name)))
    return figures


def run_figures(figures: Sequence[RenderedFigure], anchor: str) -> list[RenderedFigure]:
    """The figures of the run with this anchor, in build order."""
    names = figure_names(anchor)
    return [f for f in figures if f.kind == KIND and f.name in names]
