"""The GPIO response section's figures (seed 002), drawn from the report dictionary alone (the
section carries its own histograms; there are no raw samples):

* ``gpio-hist-<load>``: per load, the delay histogram of every run under it, one step curve per
  run (its case; repetitions dashed), on the analysis's per-run bins, log count axis. The axis is
  logarithmic in delay too when the cases lie decades apart (a kernel handler's few µs beside a
  sysfs program's hundreds).
* ``gpio-distributions``: every measured run on one row: a thin line from min to max, a thick
  bar from the median to p99, marks at the mean, p99.9 and max. Where the bulk sits and how far
  the tail reaches, for all cases at once.

Each curve or row is an SVG group ``<figure name>-curve-<i>`` / ``-row-<i>``, unique in a page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from station.common.formatting import count_text, is_number, ordered, slug, unique_names
from station.kinds.gpio.tables import delay_text
from station.report.figures import (
    FIGSIZE_IN,
    RenderedFigure,
    _new_axes,
    _steps,
    _to_svg,
    legend_outside,
    new_figure,
)

KIND = "gpio"
DISTRIBUTIONS_NAME = "gpio-distributions"
# Cases are unordered categories; one colour per case, the same in every figure.
CASE_COLORS = ("#1f77b4", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
               "#a6761d", "#666666")
# Empty bins sit at this height, below the count axis (as the project's other histograms).
FLOOR = 0.5
LOG_X_RATIO = 20.0  # delays spanning more than this factor get a log delay axis


def histogram_names(loads: Sequence[str]) -> dict[str, str]:
    """load → file stem ``gpio-hist-<load>``; two loads that slug alike get -2, -3 …"""
    return dict(zip(loads, unique_names(f"{KIND}-hist-{slug(load)}" for load in loads),
                    strict=True))


def _usable_histogram(entry: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    h = entry.get("histogram") or {}
    edges = np.asarray(h.get("edges_us") or [], dtype=np.float64)
    counts = np.asarray(h.get("counts") or [], dtype=np.float64)
    if (
        edges.size < 2
        or counts.size != edges.size - 1
        or not counts.any()
        or not np.isfinite(edges).all()
    ):
        return None
    return edges, counts


def _labels(runs: Sequence[Mapping[str, Any]], with_load: bool) -> list[str]:
    """Each run's name in a legend: its case, and what else tells it apart from the others."""
    targets = {r.get("target") for r in runs}
    reps = {(r.get("target"), r.get("case"), r.get("load")) for r in runs}
    several_reps = len(reps) < len(runs)
    out = []
    for r in runs:
        parts = [str(r.get("target"))] if len(targets) > 1 else []
        parts.append(str(r.get("case")))
        if with_load:
            parts.append(str(r.get("load")))
        if several_reps:
            parts.append(f"r{r.get('repetition')}")
        out.append(" · ".join(parts))
    return out


def _style(entry: Mapping[str, Any], cases: Sequence[str]) -> tuple[str, Any]:
    color = CASE_COLORS[cases.index(str(entry.get("case"))) % len(CASE_COLORS)]
    rep = entry.get("repetition")
    return color, ("-" if not rep else (0, (4, 2)))


def _log_x(lo: float, hi: float) -> bool:
    return lo > 0 and hi / lo > LOG_X_RATIO


def histogram_svg(runs: Sequence[Mapping[str, Any]], labels: Sequence[str], cases: Sequence[str],
                  title: str, name: str) -> str:
    """One step curve per run on its own bins; each an SVG group ``<name>-curve-<i>``."""
    fig, ax = _new_axes(title)
    curves = [(r, label, h) for r, label in zip(runs, labels, strict=True)
              if (h := _usable_histogram(r)) is not None]
    if not curves:
        ax.text(0.5, 0.5, "no answered stimuli", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    top = 1.0
    for i, (r, label, (edges, counts)) in enumerate(curves):
        color, linestyle = _style(r, cases)
        top = max(top, float(counts.max()))
        xs, ys = _steps(edges, np.where(counts > 0, counts, FLOOR))
        width = float(edges[1] - edges[0])
        ax.plot(np.r_[xs[0], xs, xs[-1]], np.r_[FLOOR, ys, FLOOR], color=color, linestyle=linestyle,
                linewidth=1.1, gid=f"{name}-curve-{i}",
                label=f"{label}  (n={count_text(int(counts.sum()))}, bins {delay_text(width)} µs)")
    _delay_axis(
        ax, min(float(e[0]) for _, _, (e, _) in curves),
        max(float(e[-1]) for _, _, (e, _) in curves), margin=0.15, pad=0.02
    )
    ax.set_yscale("log")
    ax.set_ylim(0.7, top * 2.5)
    ax.set_xlabel("delay from stimulus to response (µs)")
    ax.set_ylabel("stimuli per bin")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def _delay_axis(ax: Any, lo: float, hi: float, margin: float, pad: float) -> None:
    """Logarithmic when the runs are far apart (kernel and sysfs), with a margin either side."""
    if _log_x(lo, hi):
        ax.set_xscale("log")
        ax.set_xlim(lo / (1 + margin), hi * (1 + margin))
    else:
        room = pad * max(hi - lo, 1e-3)
        ax.set_xlim(lo - room, hi + room)


def distributions_svg(runs: Sequence[Mapping[str, Any]], labels: Sequence[str],
                      cases: Sequence[str], title: str, name: str) -> str:
    """One row per run: min–max line, median–p99 bar, mean ●, p99.9 ▲, max ✕; first run on top."""
    height = max(FIGSIZE_IN[1] * 0.75, 1.3 + 0.32 * len(runs))
    fig = new_figure((FIGSIZE_IN[0], height))
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    values = [v for r in runs for v in (r["delay_us"].get(k) for k in ("min",
                                                                       "max")) if is_number(v)]
    if not values:
        ax.text(0.5, 0.5, "no answered stimuli", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    for i, r in enumerate(runs):
        d = r["delay_us"]
        y = len(runs) - 1 - i
        color, _ = _style(r, cases)
        gid = f"{name}-row-{i}"
        if is_number(d.get("min")) and is_number(d.get("max")):
            ax.plot([d["min"], d["max"]], [y, y], color=color, linewidth=1.0, gid=gid)
        if is_number(d.get("p50")) and is_number(d.get("p99")):
            ax.plot([d["p50"], d["p99"]], [y, y], color=color, linewidth=6.0, alpha=0.55,
                    solid_capstyle="butt", gid=f"{gid}-bulk")
        for key, marker in (("mean", "o"), ("p999", "^"), ("max", "x")):
            if is_number(d.get(key)):
                ax.plot([d[key]], [y], marker=marker, color=color, markersize=5, linestyle="none",
                        gid=f"{gid}-{key}")
    _delay_axis(ax, min(values), max(values), margin=0.3, pad=0.05)
    ax.set_yticks(range(len(runs)), list(reversed(labels)), fontsize=8)
    ax.set_ylim(-0.7, len(runs) - 0.3)
    # two lines: on one, the key ran past the figure's edge at the page's width
    ax.set_xlabel("delay from stimulus to response (µs)\nline min–max, bar median–p99, ● mean, ▲ "
                  "p99.9, ✕ max",
                  fontsize=8)
    return _to_svg(fig, name)


def _histogram_caption(runs: Sequence[Mapping[str, Any]]) -> str:
    n = len(runs)
    return (f"Delay from each stimulus to the response, {n} run{'s' if n != 1 else ''} under this "
            "load, one step curve per run (repetitions dashed) on the analysis's bins, which are "
            "each run's own: compare shapes and positions, not heights. Log count axis: a single "
            "late answer and none look almost alike, so look for the far-right steps.")


def build_gpio_figures(report: Mapping[str, Any],
                       samples: Mapping[str, Any] | None = None) -> list[RenderedFigure]:
    """A delay histogram per load with answered stimuli, in the section's order of loads, then
    the distributions of every measured run. ``samples`` is not used; it keeps the signature of
    the other figure builders."""
    runs = [r for r in (report.get("gpio") or {}).get("runs") or [] if r.get("delay_us")]
    if not runs:
        return []
    cases = ordered(str(r.get("case")) for r in runs)
    loads = ordered(str(r.get("load")) for r in runs)
    names = histogram_names(loads)
    figures = []
    for load in loads:
        group = [r for r in runs if str(r.get("load")) == load and _usable_histogram(r) is not None]
        if not group:
            continue
        name = names[load]
        title = f"Response delay, load {load}"
        figures.append(RenderedFigure(name, KIND, title, _histogram_caption(group),
                                      histogram_svg(group, _labels(group, False), cases, title,
                                                    name)))
    title = "Response delay per run: median, tail and worst case"
    caption = ("One row per run: the thin line spans min to max, the bar median to p99; ● mean, "
               "▲ p99.9, ✕ max. A bar far from its ✕ is a tail worth explaining (see the outliers "
               "table); the delay axis is logarithmic when the cases lie decades apart.")
    figures.append(RenderedFigure(DISTRIBUTIONS_NAME, KIND, title, caption,
                                  distributions_svg(runs, _labels(runs, True), cases, title,
                                                    DISTRIBUTIONS_NAME)))
    return figures
