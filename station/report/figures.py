"""The report's figures: latency histograms and tail (CCDF) plots, as SVG text.

Every figure bins with one fixed width in ns shared by all its series (100 ns
unless the span would need too many bins), so shapes are comparable, and draws
steps rather than points, so an SVG stays a few tens of kB whatever the sample
count.

matplotlib is used through ``Figure`` objects, not pyplot: no GUI backend is
selected, nothing global is registered, and the caller's own backend (a
notebook's, say) is left alone. Text stays text in the SVG (``svg.fonttype:
none``), which keeps files small and lets the numbers be found in the page.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.figure import Figure
from matplotlib.lines import TICKDOWN, TICKLEFT, Line2D
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, Locator, NullFormatter, NullLocator

from station.analysis.distribution import Distribution
from station.common.formatting import count_text

BIN_NS = 100
#: Above this many bins the width steps up 100 → 200 → 500 → 1000 ns …
MAX_BINS = 4000
FIGSIZE_IN = (6.4, 3.4)
#: Every text of a figure is at least this tall on the HTML page at its narrowest usual width:
#: two figures side by side in a 1400 px window leave each FIGURE_PAGE_PX px (report.html.j2's
#: .figures grid), and an SVG scales its text with its width.
MIN_FONT_PX = 12.0
FIGURE_PAGE_PX = 565.0
FONT_PT = 10.0

INTERFACE_COLOR = {"lpt": "#1f77b4", "pcie": "#d95f02"}
VARIANT_COLOR = {"inb": "#c0392b", "no-inb": "#1b9e77"}
SW_COLOR, HW_COLOR = "#1f77b4", "#d95f02"
FALLBACK_COLORS = ("#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")
VARIANT_ORDER = ("inb", "no-inb")


@dataclass(frozen=True)
class Series:
    """One distribution in a figure: ``values`` in ns, a sample or its Distribution."""

    label: str
    values: Distribution
    color: str
    linestyle: Any = "-"

    def __post_init__(self) -> None:
        if not isinstance(self.values, Distribution):
            object.__setattr__(self, "values", Distribution.of(np.asarray(self.values)))


@dataclass(frozen=True)
class RenderedFigure:
    """A figure: ``name`` is the file stem under figures/. ``svg`` is the SVG, or what draws it (a
    call without arguments, e.g. ``partial(histogram_svg, …)``): drawn() draws those several at
    once, where it can."""

    name: str
    kind: str  # what it shows, within its run kind ("overview", "tail", "cyclictest" …)
    title: str
    caption: str
    svg: str | Callable[[], str]
    # it answers the campaign's question: the first of its kind sits under the findings
    glance: bool = False


# figures to draw above which forked workers draw them (run_pool.py): each takes ~65 ms, a worker's
# fork and its SVGs' way back a few ms
DRAWN_APART = 4


def drawn(figures: Sequence[RenderedFigure]) -> list[RenderedFigure]:
    """The figures with every SVG drawn: in forked workers when DRAWN_APART or more are still to be
    drawn (or two, with IRQ_STATION_RUNS_IN=processes) and the process can fork (run_pool.where),
    else one after another here (matplotlib holds the GIL: threads would not help). The same SVGs
    either way. (The figures' data stay alive until then: ~0.1 GB at seed scale.)"""
    from station.analysis import run_pool

    todo = [f for f in figures if not isinstance(f.svg, str)]
    svgs = iter(run_pool.mapped(_draw, todo, len(todo) >= DRAWN_APART, fallback="here",
                                what="drawing"))
    return [f if isinstance(f.svg, str) else replace(f, svg=next(svgs)) for f in figures]


def _draw(figure: RenderedFigure) -> str:
    assert not isinstance(figure.svg, str)
    return figure.svg()


def bin_width_ns(lo_ns: float, hi_ns: float) -> int:
    """BIN_NS, or the next 1-2-5 step that keeps the span under MAX_BINS bins."""
    span = max(hi_ns - lo_ns, 1.0)
    width = BIN_NS
    steps = (2, 2.5, 2)  # 100 → 200 → 500 → 1000 → 2000 …
    i = 0
    while span / width > MAX_BINS:
        width = int(width * steps[i % 3])
        i += 1
    return width


def bin_edges(series: Sequence[Series]) -> np.ndarray:
    """Edges aligned to multiples of the width, covering every series."""
    lo = min(s.values.min for s in series)
    hi = max(s.values.max for s in series)
    width = bin_width_ns(lo, hi)
    first = np.floor(lo / width) * width
    last = (np.floor(hi / width) + 1) * width
    return np.arange(first, last + width / 2, width, dtype=np.float64)


def _steps(edges: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step outline of per-bin values, with runs of equal values merged.

    Merging keeps an empty stretch between the body and a far outlier at two
    vertices instead of one per bin.
    """
    starts = np.r_[0, np.flatnonzero(np.diff(values)) + 1]
    xs = np.repeat(np.r_[edges[starts], edges[-1]], 2)[1:-1]
    ys = np.repeat(values[starts], 2)
    return xs, ys


def new_figure(figsize: tuple[float, float] = FIGSIZE_IN) -> Figure:
    """A figure for _to_svg, which lays it out (_fit_layout): one axes, any figure legend under it
    (legend_outside)."""
    return Figure(figsize=figsize)


def _new_axes(title: str) -> tuple[Figure, Any]:
    fig = new_figure()
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=FONT_PT + 1)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def legend_outside(fig: Figure, ax: Any, ncols: int | None = None) -> None:
    """The axes' legend under the plot, never over the data; the figure grows by its rows so the
    plot keeps its size. One column for long labels (counts and extremes), else two or three."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if ncols is None:
        longest = max(len(label) for label in labels)
        ncols = 1 if longest > 34 else 2 if longest > 20 or len(labels) <= 4 else 3
    ncols = max(1, min(ncols, len(labels)))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False,
               fontsize=FONT_PT)
    rows = math.ceil(len(labels) / ncols)
    fig.set_figheight(fig.get_figheight() + rows * 1.45 * _min_font_pt(fig) / 72 + 0.05)


def _min_font_pt(fig: Figure) -> float:
    # the SVG is fig width × 72 user units wide, shown FIGURE_PAGE_PX px wide
    return MIN_FONT_PX * fig.get_figwidth() * 72 / FIGURE_PAGE_PX


def write_figures(figures: Sequence[RenderedFigure], out_dir: Path) -> dict[str, Path]:
    """Each figure as out_dir/figures/<name>.svg; the paths keyed by their name relative to
    out_dir."""
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for fig in figures:
        rel = f"figures/{fig.name}.svg"
        (out_dir / rel).write_text(fig.svg, encoding="utf-8")
        paths[rel] = out_dir / rel
    return paths


def _log_tick(value: float, _pos: int) -> str:
    """A decade of a log axis: a count as digits (1 000 000), a probability as 1e-6."""
    if value >= 1:
        return count_text(int(round(value)))
    return f"{value:.0e}".replace("e-0", "e-")


LOG_TICK_LABEL = FuncFormatter(_log_tick)


def _texts(artist: Artist) -> list[Text]:
    """Every text of an artist and its children, like ``findobj(Text)``, but an axis gives only
    the ticks it has already made: ``Axis.get_children`` would make every tick of the current
    view (the layout and the drawing make them later, of the sizes of the first one)."""
    if isinstance(artist, Axis):
        ticks = [*artist.majorTicks, *artist.minorTicks]  # the first of each, made now if not yet
        return [artist.label, artist.offsetText, *(t for tick in ticks for t in (tick.label1,
                                                                                 tick.label2))]
    texts = [artist] if isinstance(artist, Text) else []
    for child in artist.get_children():
        texts += _texts(child)
    return texts


def _fit_layout(fig: Figure) -> None:
    """Place the axes as ``layout="constrained"`` does, without its extra drawing pass.

    As constrained layout: the axes' decorations (tick labels, axis labels, title) measured with
    the SVG renderer's own text metrics, w_pad/h_pad (rcParams) around them, and the figure
    legends (legend_outside: under the axes) as high as they are plus a pad either side. Measured
    a second time where the axes landed only when their ticks differ there (constrained layout
    always measures twice): with the same ticks the decorations keep their size and place around
    the axes, bar an end tick label sticking out past them, which moves by a fraction of its
    half-size as the axes resize (within the pad). A figure of several axes gets constrained
    layout itself."""
    if len(fig.axes) != 1:
        fig.set_layout_engine("constrained")
        return
    (ax,) = fig.axes
    fig.set_dpi(72)  # the SVG backend draws at 72 dpi whatever the figure's: measure the text there
    width, height = fig.get_size_inches()
    w_pad = mpl.rcParams["figure.constrained_layout.w_pad"] / width
    h_pad = mpl.rcParams["figure.constrained_layout.h_pad"] / height
    renderer = RendererSVG(width * fig.dpi, height * fig.dpi, io.StringIO())
    to_fig = fig.transFigure.inverted()
    legends = max((to_fig.transform_bbox(legend.get_tightbbox(renderer)).height + 2 * h_pad
                   for legend in fig.legends), default=0.0)
    ticks = None
    for _ in range(2):
        pos = ax.get_position(original=True)
        measured = _tick_locations(ax)
        if measured == ticks:
            return
        tight = ax.get_tightbbox(renderer, for_layout_only=True)
        box = pos if tight is None else to_fig.transform_bbox(tight)
        left, right = w_pad + pos.x0 - box.x0, 1 - w_pad - (box.x1 - pos.x1)
        bottom, top = legends + h_pad + pos.y0 - box.y0, 1 - h_pad - (box.y1 - pos.y1)
        if not (left < right and bottom < top):  # decorations larger than the figure: leave it be
            return
        fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top)
        ticks = measured


def _tick_locations(ax: Any) -> list[list[float]]:
    """Where the axes' ticks are: their locators' answers, which depend on the axes' size."""
    return [list(locs) for axis in (ax.xaxis, ax.yaxis)
            for locs in (axis.get_majorticklocs(), axis.get_minorticklocs())]


class _InView(Locator):
    """Another locator's ticks, only those in the axis' view: matplotlib makes a Tick (slow: five
    artists) for every location its locator gives, drawn or not, and a log axis' minor locator
    gives a decade of them either side of the view."""

    def __init__(self, locator: Locator) -> None:
        self.locator = locator

    def set_axis(self, axis: Axis) -> None:
        super().set_axis(axis)
        self.locator.set_axis(axis)

    def tick_values(self, vmin: float, vmax: float) -> Any:
        return self.locator.tick_values(vmin, vmax)

    def __call__(self) -> Any:
        locs = np.asarray(self.locator(), dtype=np.float64)
        # compared where the axis is linear (log10 of a log axis)
        transform = self.axis.get_transform()
        lo, hi = sorted(transform.transform(self.axis.get_view_interval()))
        slack = 1e-6 * (hi - lo)  # wider than matplotlib's own test of which ticks it draws
        with np.errstate(divide="ignore", invalid="ignore"):
            t = transform.transform(locs)
        return locs[(t >= lo - slack) & (t <= hi + slack)]


class _MinorMarks:
    """A log axis' minor ticks drawn as one artist: a marker at each location, as each Tick draws
    its tick1line (marker, size, width, colour, transform), so the figure looks the same; made as
    Ticks, each one costs five artists and deep copies of their markers (40 % of a histogram's
    time). Only for the plain case (outward ticks, on one side, unlabelled): otherwise the axis
    keeps its Ticks. The locations come after the layout, for the axes' final size."""

    MARKERS = {("x", "out"): TICKDOWN, ("y", "out"): TICKLEFT}

    PLAIN_MINOR = {"gridOn": False, "tick1On": True, "tick2On": False, "label1On": True,
                   "label2On": False}

    @staticmethod
    def can_draw(axis: Axis) -> bool:
        """The plain case only: a log axis of its own (not shared), visible, ticks outward on its
        first side alone, minor ticks as the defaults make them, and a major tick in view (without
        one, matplotlib places the axis label below the minor ticks' empty labels: the layout
        would change)."""
        name = axis.axis_name
        ax = axis.axes
        first, second = ("bottom", "top") if name == "x" else ("left", "right")
        shared = ax.get_shared_x_axes() if name == "x" else ax.get_shared_y_axes()
        if not (
            _MINOR_AS_ONE_ARTIST
            and axis.get_scale() == "log"
            and axis.get_visible()
            and isinstance(axis.get_minor_formatter(), NullFormatter)
            and (name, mpl.rcParams[f"{name}tick.direction"]) in _MinorMarks.MARKERS
            and not mpl.rcParams[f"{name}tick.{second}"]
            and mpl.rcParams[f"{name}tick.minor.{first}"]
            and mpl.rcParams[f"{name}tick.minor.visible"] is False
            and axis.get_ticks_position() == first
            and len(shared.get_siblings(ax)) == 1
            and getattr(axis, "_minor_tick_kw", None) == _MinorMarks.PLAIN_MINOR
        ):
            return False
        lo, hi = sorted(axis.get_view_interval())
        majors = np.asarray(axis.get_majorticklocs(), dtype=np.float64)
        return bool(((majors >= lo) & (majors <= hi)).any())

    def __init__(self, axis: Axis) -> None:
        self.axis = axis
        self.locator = axis.get_minor_locator()
        axis.set_minor_locator(NullLocator())
        self.locator.set_axis(axis)  # still asked of this axis' view, without making its Ticks

    def place(self) -> None:
        axis, name = self.axis, self.axis.axis_name
        locs = np.asarray(self.locator(), dtype=np.float64)
        ax = axis.axes
        if name == "x":
            xs, ys, transform = locs, np.zeros(len(locs)), ax.get_xaxis_transform(which="tick1")
        else:
            xs, ys, transform = np.zeros(len(locs)), locs, ax.get_yaxis_transform(which="tick1")
        color = mpl.rcParams[f"{name}tick.color"]
        marks = Line2D(xs, ys, transform=transform, linestyle="none",
                       marker=self.MARKERS[(name, mpl.rcParams[f"{name}tick.direction"])],
                       markersize=mpl.rcParams[f"{name}tick.minor.size"],
                       markeredgewidth=mpl.rcParams[f"{name}tick.minor.width"],
                       color=color, markeredgecolor=color, clip_on=False, zorder=axis.get_zorder())
        marks.set_in_layout(False)
        ax.add_artist(marks)


_MINOR_AS_ONE_ARTIST = True  # False: matplotlib's own Ticks (the test comparing the two draws)


def _to_svg(fig: Figure, name: str) -> str:
    # No text smaller than MIN_FONT_PX on the page, whatever size a caller asked for.
    smallest = _min_font_pt(fig)
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "log":  # plain text: matplotlib's 10^k labels go through mathtext, slowly
                axis.set_major_formatter(LOG_TICK_LABEL)
                axis.set_minor_formatter(NullFormatter())  # minor ticks kept, unlabelled
                if not isinstance(axis.get_minor_locator(), _InView):
                    axis.set_minor_locator(_InView(axis.get_minor_locator()))
    for text in _texts(fig):
        if text.get_fontsize() < smallest:
            text.set_fontsize(smallest)
    minor = [
        _MinorMarks(axis)
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        if _MinorMarks.can_draw(axis)
    ]
    if fig.get_layout_engine() is None:
        _fit_layout(fig)
    for marks in minor:
        marks.place()
    buf = io.StringIO()
    # A per-figure salt gives every figure its own clip-path/marker ids, so many
    # SVGs can be inlined in one HTML page without their ids colliding; a fixed
    # salt and no date make the output reproducible.
    with mpl.rc_context({"svg.hashsalt": f"irq-station-{name}", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def histogram_svg(series: Sequence[Series], title: str, name: str,
                  minmax_lines: bool = True, xlabel: str = "latency (µs)") -> str:
    """Counts per fixed-width bin on a log axis, one step line per series.

    Dashed vertical lines mark each series' min and max, as in the seed's
    figure; with a log axis a single occurrence is otherwise easy to miss.
    """
    series = [s for s in series if s.values.count]
    fig, ax = _new_axes(title)
    if not series:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    edges = bin_edges(series)
    width = edges[1] - edges[0]
    # Zero counts are drawn at 0.5, just below the axis, so the line drops out
    # of view between populated bins instead of breaking the log scale.
    floor = 0.5
    top = 1.0
    for s in series:
        counts = s.values.histogram(edges)
        top = max(top, float(counts.max()))
        xs, ys = _steps(edges, np.where(counts > 0, counts, floor).astype(np.float64))
        xs = np.r_[xs[0], xs, xs[-1]] / 1000.0
        ys = np.r_[floor, ys, floor]
        lo_us, hi_us = s.values.min / 1000, s.values.max / 1000
        ax.plot(xs, ys, color=s.color, linestyle=s.linestyle, linewidth=1.1,
                label=f"{s.label}  (n={count_text(s.values.count)}, min {lo_us:.3f}, max "
                      f"{hi_us:.3f} µs)")
        if minmax_lines:
            for x in (lo_us, hi_us):
                ax.axvline(x, color=s.color, linestyle=(0, (4, 3)), linewidth=0.8, alpha=0.9)
    ax.set_yscale("log")
    ax.set_ylim(0.7, top * 2.5)
    pad = 0.02 * (edges[-1] - edges[0]) / 1000  # keeps the dashed max line off the frame
    ax.set_xlim(edges[0] / 1000 - pad, edges[-1] / 1000 + pad)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"count per {width:g} ns bin")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def over_time_svg(runs: Sequence[tuple[str, str, tuple[np.ndarray, np.ndarray, np.ndarray]]],
                  title: str,
                  name: str) -> str:
    """Latency against time, one pair of lines per run (label, colour, (s, median, p99)): the median
    solid, p99 dashed, so a reader sees a load's phases and a run's drift."""
    fig, ax = _new_axes(title)
    for label, color, (t, median, p99) in runs:
        ax.plot(t, median / 1000.0, color=color, linewidth=1.1, label=f"{label} median")
        ax.plot(t, p99 / 1000.0, color=color, linewidth=0.9, linestyle=(0, (4, 2)),
                label=f"{label} p99")
    ax.set_xlabel("time from the run's first record (s)")
    ax.set_ylabel("software latency t_SW (µs)")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


def exceedance_steps(values: Distribution, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The CCDF's step outline at the bins' left edges, P(X ≥ edge), up to the largest sample's
    bin; and the sample count."""
    counts = values.histogram(edges)
    n = int(counts.sum())
    exceed = (n - np.r_[0, np.cumsum(counts)[:-1]]) / n  # the fraction in this bin or above
    last = int(np.flatnonzero(counts)[-1])
    xs, ys = _steps(edges[: last + 2], exceed[: last + 1])
    return xs, ys, n


def ccdf_svg(series: Sequence[Series], title: str, name: str, what: str = "latency") -> str:
    """Exceedance probability P(latency ≥ x) on a log axis, binned at the histogram width.

    The curve ends at 1/n at the largest sample: the tail is visible down to
    the resolution the sample count allows, and no further.
    """
    series = [s for s in series if s.values.count]
    fig, ax = _new_axes(title)
    if not series:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)
    edges = bin_edges(series)
    width = edges[1] - edges[0]
    smallest = 1.0
    for s in series:
        xs, ys, n = exceedance_steps(s.values, edges)
        smallest = min(smallest, 1.0 / n)
        ax.plot(xs / 1000.0, ys, color=s.color, linestyle=s.linestyle, linewidth=1.1,
                label=f"{s.label}  (n={count_text(n)})")
    ax.set_yscale("log")
    ax.set_ylim(smallest / 3, 1.5)
    ax.set_xlabel(f"{what} x (µs), {width:g} ns resolution")
    # the symbol when the axis holds one quantity (t_SW), "value" when it holds two
    ax.set_ylabel(f"P({'value' if ' or ' in what else what.split(' ')[-1]} ≥ x)")
    legend_outside(fig, ax)
    return _to_svg(fig, name)


# --- choosing what to draw from a report -------------------------------------------------------


def _color(mapping: Mapping[str, str], key: str, order: Sequence[str]) -> str:
    if key in mapping:
        return mapping[key]
    return FALLBACK_COLORS[order.index(key) % len(FALLBACK_COLORS)]
