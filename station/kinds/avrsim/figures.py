"""The avrsim section's figures, drawn from the report dictionary alone (each run carries its
histogram, one bin per CPU cycle):

* ``avrsim-<firmware>``: per firmware, the delay histogram of each case (its runs pooled), one
  step curve per case on one-cycle bins (a masked case filled: its bulk is the other's), log count
  axis. The sketch's figure shades the seed's masked range, so the simulation and the seed's scope
  are read on one axis.

Each curve is an SVG group ``<figure name>-curve-<i>``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from station.common.formatting import count_text, ordered
from station.report.figures import RenderedFigure, _new_axes, _steps, _to_svg, legend_outside

KIND = "avrsim"
COLORS = {"enabled": "#d95f02", "masked": "#1b9e77"}
FALLBACK = ("#1f77b4", "#7570b3", "#e7298a", "#66a61e", "#a6761d")
FLOOR = 0.5  # empty bins sit below the count axis


def _pooled(runs: list[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Every run's (cycles, counts) summed: cycles ascending, one entry per cycle from first to
    last."""
    total: Counter[int] = Counter()
    for r in runs:
        h = r["histogram"]
        total.update(dict(zip(h["cycles"], h["counts"], strict=True)))
    first, last = min(total), max(total)
    cycles = np.arange(first, last + 1)
    return cycles, np.asarray([total.get(int(c), 0) for c in cycles], dtype=np.float64)


def histogram_svg(cases: list[tuple[str, list[Mapping[str, Any]]]], seed: Mapping[str, Any] | None,
                  title: str, name: str) -> str:
    fig, ax = _new_axes(title)
    top, used = 1.0, set()
    for i, (case, runs) in enumerate(cases):
        freq = runs[0]["clock_hz"]
        cycles, counts = _pooled(runs)
        edges = np.r_[cycles - 0.5, cycles[-1] + 0.5] * 1e6 / freq
        xs, ys = _steps(edges, np.where(counts > 0, counts, FLOOR))
        color = COLORS.get(runs[0]["timer0"], FALLBACK[i % len(FALLBACK)])
        color = color if color not in used else FALLBACK[i % len(FALLBACK)]
        used.add(color)
        top = max(top, float(counts.max()))
        lo, hi = cycles[0] * 1e6 / freq, cycles[-1] * 1e6 / freq
        xs, ys = np.r_[xs[0], xs, xs[-1]], np.r_[FLOOR, ys, FLOOR]
        label = (
            f"{case}, timer0 {runs[0]['timer0']}  (n={count_text(int(counts.sum()))}, "
            f"{lo:.4f}–{hi:.4f} µs)"
        )
        if runs[0]["timer0"] == "masked":  # filled: the enabled case's bulk lies on the same cycles
            ax.fill_between(xs, FLOOR, ys, color=color, alpha=0.45, linewidth=0,
                            gid=f"{name}-curve-{i}", label=label)
        else:
            ax.plot(xs, ys, color=color, linewidth=1.1, gid=f"{name}-curve-{i}", label=label)
    if seed:
        lo, hi = seed["masked_us"]
        ax.axvspan(lo, hi, color="#999999", alpha=0.25, linewidth=0,
                   label=f"the seed's Uno, timer0 masked "
                   f"({lo:.4f}–{hi:.4f} µs)")
    ax.set_yscale("log")
    ax.set_ylim(0.7, top * 2.5)
    ax.set_xlabel("delay from the edge to the output's change (µs; one bin per 16 MHz cycle)")
    ax.set_ylabel("edges per cycle")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def build_avrsim_figures(
    report: Mapping[str, Any], samples: Mapping[str, Any] | None = None
) -> list[RenderedFigure]:
    """One histogram per firmware with answered edges. ``samples`` is not used."""
    section = report.get("avrsim") or {}
    runs = [r for r in section.get("runs") or [] if r.get("histogram") and r["histogram"]["cycles"]]
    figures = []
    firmwares = ordered(str(r["firmware"]) for r in runs)
    # the sketch's figure first: it holds the seed's figure, the campaign's question
    firmwares.sort(key=lambda f: f != "sketch")
    for firmware in firmwares:
        mine = [r for r in runs if r["firmware"] == firmware]
        cases = [
            (case, [r for r in mine if r["case"] == case])
            for case in ordered(str(r["case"]) for r in mine)
        ]
        name = f"{KIND}-{firmware}"
        what = (
            "the seed's sketch on the Arduino core"
            if firmware == "sketch"
            else "the bare avr-libc responder"
        )
        title = f"Simulated response delay: {what}"
        caption = ("Delay from each edge to the output's change, simulated cycle by cycle "
                   "(simavr), every run of a "
                   "case pooled, one bin per CPU cycle. The timer0-on curve's far steps are the "
                   "edges that waited "
                   "for timer0's handler" + ("; the grey band is the seed's Uno with timer0 "
                                             "masked, measured with "
                                             "a scope." if firmware == "sketch" else "."))
        figures.append(
            RenderedFigure(
                name,
                KIND,
                title,
                caption,
                histogram_svg(
                    cases, section.get("seed") if firmware == "sketch" else None, title, name
                ),
                glance=firmware == firmwares[0],
            )
        )
    return figures
