"""The comparison's figures: one overlaid CCDF per interface × variant × load, a curve per
campaign (solid: t_SW, dashed: t_HW), in the report's style (figures.py: its axes, bins, steps and
SVG settings) but with the legend under the axes: the curves of several campaigns fill the upper
right corner where the report's legend sits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.analysis.distribution import Distribution
from station.common.formatting import interface_label, slug
from station.report.figures import (
    FALLBACK_COLORS,
    RenderedFigure,
    Series,
    _new_axes,
    _to_svg,
    bin_edges,
    exceedance_steps,
)

KIND = "compare"
CAMPAIGN_COLORS = ("#1f77b4", "#d95f02", *FALLBACK_COLORS)
HW_STYLE = (0, (4, 2))


def compare_ccdf_svg(series: list[Series], title: str, name: str) -> str:
    """P(latency ≥ x) per series on a log axis, each curve ending at 1/n; legend below the axes."""
    fig, ax = _new_axes(title)
    edges = bin_edges(series)
    smallest = 1.0
    for s in series:
        xs, ys, n = exceedance_steps(s.values, edges)
        smallest = min(smallest, 1.0 / n)
        ax.plot(xs / 1000.0, ys, color=s.color, linestyle=s.linestyle, linewidth=1.1,
                label=f"{s.label}  (n={n:,})")
    ax.set_yscale("log")
    ax.set_ylim(smallest / 3, 1.5)
    ax.set_xlabel(f"latency x (µs), {edges[1] - edges[0]:g} ns resolution")
    ax.set_ylabel("P(latency ≥ x)")
    # room for the legend rows
    fig.set_figheight(fig.get_figheight() + 0.25 * ((len(series) + 1) // 2))
    fig.legend(fontsize=8, loc="outside lower center", ncols=2, frameon=False)
    return _to_svg(fig, name)


def build_compare_figures(result: Mapping[str, Any],
                          samples: Mapping[tuple, Distribution]) -> list[RenderedFigure]:
    """samples: ns by (campaign label, source, interface, variant, load)."""
    labels = [c["label"] for c in result["campaigns"]]
    groups = list(dict.fromkeys(key[2:] for key in samples))
    figures = []
    for interface, variant, load in groups:
        series = []
        for source in ("sw", "hw"):
            for i, label in enumerate(labels):
                values = samples.get((label, source, interface, variant, load))
                if values is not None and values.count:
                    series.append(Series(f"{label} {'t_SW' if source == 'sw' else 't_HW'}", values,
                                         CAMPAIGN_COLORS[i % len(CAMPAIGN_COLORS)],
                                         "-" if source == "sw" else HW_STYLE))
        if not series:
            continue
        name = "compare-ccdf-" + slug(f"{interface}-{variant}-{load}")
        title = f"{interface_label(interface)}, {variant}, load {load}"
        figures.append(RenderedFigure(
            name, KIND, f"Tails across campaigns: {title}",
            "P(latency ≥ x) per campaign; solid: software (t_SW), dashed: oscilloscope (t_HW). "
            "Each curve ends at 1/n at its largest sample.",
            compare_ccdf_svg(series, f"CCDF, {title}", name)))
    return figures
