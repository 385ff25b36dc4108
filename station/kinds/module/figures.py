"""The module kind's figures: software latency per interface, its tail (CCDF), the scope's
inb vs no-inb widths (t_rw) and each run's software vs scope, drawn with report/figures.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from station.analysis.distribution import Distribution
from station.analysis.samples import RunSamples
from station.common.formatting import interface_label, ordered, slug
from station.report.figures import (
    HW_COLOR,
    INTERFACE_COLOR,
    SW_COLOR,
    VARIANT_COLOR,
    VARIANT_ORDER,
    RenderedFigure,
    Series,
    _color,
    ccdf_svg,
    histogram_svg,
    over_time_svg,
)


def build_figures(report: Mapping[str, Any],
                  samples: Mapping[str, RunSamples]) -> list[RenderedFigure]:
    """Every figure the report's runs and samples allow, in reading order; the histograms and CCDFs
    still to draw (report.figures.drawn draws them, several at once where it can).

    Repetitions of the same interface × variant × load are pooled; loads are
    never pooled together (a loaded and an idle system are different
    distributions). Runs without samples are skipped, never an error.
    """
    runs = [r for r in report.get("runs") or [] if r.get("id") in samples
            and samples[r["id"]].sw.count]
    if not runs:
        return []
    def key(r: Mapping[str, Any]) -> tuple[str, str, str]:
        return (str(r.get("interface", "unknown")), str(r.get("variant", "unknown")),
                str(r.get("load", "none")))

    interfaces = ordered([key(r)[0] for r in runs], ("lpt", "pcie"))
    variants = ordered([key(r)[1] for r in runs], VARIANT_ORDER)
    loads = ordered([key(r)[2] for r in runs])
    one_load = len(loads) == 1

    def group(interface: str, variant: str, load: str, source: str) -> Distribution:
        return Distribution.pooled(getattr(samples[r["id"]], source) for r in runs
                                   if key(r) == (interface, variant,
                                                 load) and getattr(samples[r["id"]], source))

    def suffix(*parts: str) -> str:
        return slug("-".join(parts))

    def load_text(load: str) -> str:
        return "" if one_load else f", load {load}"

    overview: list[RenderedFigure] = []
    tails: list[RenderedFigure] = []
    scope: list[RenderedFigure] = []
    for load in loads:
        for variant in variants:
            sw_by_interface = {i: group(i, variant, load, "sw") for i in interfaces}
            sw_by_interface = {i: a for i, a in sw_by_interface.items() if a.count}
            if not sw_by_interface:
                continue
            sw = [Series(f"{interface_label(i)} t_SW", a, _color(INTERFACE_COLOR, i, interfaces))
                  for i, a in sw_by_interface.items()]
            name = "sw-hist-" + (suffix(variant) if one_load else suffix(variant, load))
            overview.append(RenderedFigure(
                name, "overview",
                f"Software latency, variant {variant}{load_text(load)}",
                "Software-measured latency per interface, repetitions pooled. Log count axis: "
                "a single occurrence and none look almost alike. Dashed lines: min and max.",
                partial(histogram_svg, sw, f"Software latency t_SW, {variant}{load_text(load)}",
                        name,
                        xlabel="software latency t_SW (µs)"), glance=True))
            tail_series = []
            for i, s in zip(sw_by_interface, sw, strict=True):
                tail_series.append(s)
                hw = group(i, variant, load, "hw")
                if hw.count:
                    tail_series.append(Series(f"{interface_label(i)} t_HW (scope)", hw, s.color,
                                              (0, (4, 2))))
            name = "ccdf-" + (suffix(variant) if one_load else suffix(variant, load))
            tails.append(RenderedFigure(
                name, "tail",
                f"Tail: exceedance probability, variant {variant}{load_text(load)}",
                "P(latency ≥ x) per interface; solid: software, dashed: oscilloscope. "
                "Each curve ends at 1/n at its largest sample.",
                partial(ccdf_svg, tail_series, f"CCDF, {variant}{load_text(load)}", name,
                        what=_what(tail_series)), glance=True))
        for i in interfaces:
            hw = [Series(f"scope, {v}", group(i, v, load, "hw"),
                         _color(VARIANT_COLOR, v, variants)) for v in variants]
            hw = [s for s in hw if s.values.count]
            if len(hw) < 2:
                continue
            name = "scope-variants-" + (suffix(i) if one_load else suffix(i, load))
            title = f"{interface_label(i)} scope pulse widths by handler variant{load_text(load)}"
            scope.append(RenderedFigure(
                name, "scope", title,
                _trw_caption(report, i),
                partial(histogram_svg, hw, title, name, xlabel="pulse width t_HW (µs)")))
    per_run = []
    for r in runs:
        s = samples[r["id"]]
        series = [Series("t_SW (software)", s.sw, SW_COLOR)]
        if s.hw is not None and s.hw.count:
            series.append(Series("t_HW (scope pulse width)", s.hw, HW_COLOR))
        name = "run-" + slug(r["id"])
        interface, variant, load = key(r)
        title = f"{r['id']}: {interface_label(interface)}, {variant}, load {load}"
        per_run.append(RenderedFigure(
            name, "run", title,
            "Software latency and scope pulse width of the same events."
            if len(series) == 2 else "Software latency only: no scope data for this run.",
            partial(histogram_svg, series, title, name, xlabel=_what(series) + " (µs)")))
    return (overview + tails + scope + _over_time(runs, samples, interfaces) + per_run
            + stage_band_figures(report))


def _over_time(runs: Sequence[Mapping[str, Any]], samples: Mapping[str, RunSamples],
               interfaces: Sequence[str]) -> list[RenderedFigure]:
    """Each run's latency against time (rolling median and p99), a figure per interface: the phases
    and drift the dependence-aware intervals account for (report `runs[].dependence`)."""
    out = []
    for i in interfaces:
        mine = [
            r for r in runs if r.get("interface") == i and samples[r["id"]].over_time is not None
        ]
        if not mine:
            continue
        palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf",
                   "#7f7f7f"]
        lines = [(str(r["id"]), palette[k % len(palette)], samples[r["id"]].over_time)
                 for k, r in enumerate(mine)]
        sentences = "; ".join(
            f"{r['id']}: {(r.get('dependence') or {}).get('sentence', '')}" for r in mine
        )
        name = "over-time-" + slug(i)
        title = f"{interface_label(i)} software latency over time"
        out.append(RenderedFigure(
            name, "time", title,
            "Median (solid) and p99 (dashed) of t_SW over consecutive stretches of each run: a "
            f"load's phases show as steps, a machine's drift as a run's level. {sentences}",
            partial(over_time_svg, lines, title, name)))
    return out


def _what(series: Sequence[Series]) -> str:
    """What a figure's x axis holds: software latencies, scope pulse widths, or both."""
    hw = any("t_HW" in s.label for s in series)
    sw = any("t_SW" in s.label for s in series)
    if hw and sw:
        return "software latency t_SW or pulse width t_HW"
    return "pulse width t_HW" if hw else "software latency t_SW"


def _trw_caption(report: Mapping[str, Any], interface: str) -> str:
    text = ("Oscilloscope pulse widths with and without the inb check in the IRQ handler; "
            "the shift between them is t_rw, one bus read.")
    for c in (report.get("comparisons") or {}).get("t_rw") or []:
        if c.get("interface") == interface and isinstance(c.get("estimate_ns"), int | float):
            text += f" Estimated t_rw = {c['estimate_ns'] / 1000:.3f} µs"
            ci = c.get("ci95_ns")
            if isinstance(ci, list | tuple) and len(ci) == 2:
                text += f" (95% CI {ci[0] / 1000:.3f} – {ci[1] / 1000:.3f} µs)"
            text += "."
    return text


STAGE_COLOR = {"delivery": "#4c72b0", "dispatch": "#dd8452"}


def stage_band_figures(report: Mapping[str, Any]) -> list[RenderedFigure]:
    """Per traced run: the mean of each stage in t_SW percentile bands, stacked — where the tail's
    extra time goes (docs/decomposition.md)."""
    from station.report.figures import _new_axes, _to_svg, legend_outside

    out = []
    for r in report.get("runs") or []:
        d = r.get("decomposition")
        bands = (d or {}).get("bands") or []
        if not bands:
            continue
        fig, ax = _new_axes(f"Where t_SW went, by percentile band: {r['id']}")
        labels = [f"p{b['from_pct']:g}–p{b['to_pct']:g}\n({b['events']})" for b in bands]
        left = [0.0] * len(bands)
        for stage in ("delivery", "dispatch"):
            widths = [b[f"{stage}_mean_ns"] / 1e3 for b in bands]
            ax.barh(labels, widths, left=left, color=STAGE_COLOR[stage], label=stage)
            left = [a + w for a, w in zip(left, widths, strict=True)]
        ax.invert_yaxis()
        ax.set_xlabel("mean time in the band (µs)")
        legend_outside(fig, ax)
        name = f"stages-{slug(r['id'])}"
        out.append(RenderedFigure(name, "stages", f"Where t_SW went: {r['id']}",
                                  "Traced run: the decomposed events in t_SW percentile bands "
                                  "(event counts in brackets), each band's mean delivery (write → "
                                  "the kernel's IRQ entry) and dispatch (entry → the handler's "
                                  "timestamp) stacked: their sum is the band's mean "
                                  "t_SW.", _to_svg(fig, name)))
    return out
