"""Figures: fixed bins, bounded SVG size, and the seed's min/max marks."""

from __future__ import annotations

import re

import numpy as np

from station.report.figures import (
    BIN_NS,
    MAX_BINS,
    Series,
    bin_edges,
    bin_width_ns,
    ccdf_svg,
    histogram_svg,
)


def _heavy_tail(n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = 5700 + rng.gamma(4.0, 600.0, n)
    x[:: n // 20] = rng.uniform(25_000, 40_000, len(x[:: n // 20]))  # sparse far outliers
    return np.round(x).astype(np.int64)


def test_bins_are_fixed_width_and_aligned() -> None:
    assert bin_width_ns(5_000, 40_000) == BIN_NS
    edges = bin_edges([Series("a", np.array([5_720, 9_990]), "k"),
                       Series("b", np.array([4_810.5, 39_926]), "k")])
    assert edges[0] == 4_800 and edges[-1] == 40_000
    assert np.allclose(np.diff(edges), BIN_NS)
    # A 10 ms outlier widens bins in 1-2-5 steps instead of making 100 000 of them.
    width = bin_width_ns(5_000, 10_000_000)
    assert width in (200, 500, 1000, 2000, 5000) and 9_995_000 / width <= MAX_BINS


def test_svg_stays_small_with_a_million_samples() -> None:
    sw = _heavy_tail(1_000_000)
    hw = sw + 2000.0
    series = [Series("SW", sw, "#1f77b4"), Series("HW", hw, "#d95f02")]
    hist = histogram_svg(series, "t", "big-hist")
    tail = ccdf_svg(series, "t", "big-ccdf")
    assert len(hist) < 150_000 and len(tail) < 150_000
    assert "<image" not in hist + tail  # nothing rasterised


def test_histogram_marks_min_and_max() -> None:
    values = np.array([5_000, 6_000, 6_000, 12_345])
    svg = histogram_svg([Series("LPT SW", values, "#1f77b4")], "t", "minmax")
    assert "min 5.000, max 12.345 µs" in svg  # text stays text (svg.fonttype none)
    assert len(re.findall(r"stroke-dasharray", svg)) >= 2


def test_same_figure_name_gives_identical_svg() -> None:
    values = _heavy_tail(10_000)
    a = histogram_svg([Series("x", values, "k")], "t", "same")
    b = histogram_svg([Series("x", values, "k")], "t", "same")
    assert a == b


def test_empty_series_draws_placeholder() -> None:
    assert "no samples" in histogram_svg([Series("x", np.empty(0), "k")], "t", "empty")


def test_a_log_axis_minor_ticks_drawn_as_one_artist_look_as_matplotlibs_own() -> None:
    """The report draws a log axis' minor ticks as one artist (figures._MinorMarks: Ticks cost 40 %
    of a histogram's time); rendered to pixels at 200 dpi, the histogram and the CCDF (log on both
    axes) are the same as with matplotlib's own Ticks, and not the same without the marks."""
    import io
    from unittest.mock import patch

    import matplotlib.image as mpimg

    from station.analysis.distribution import Distribution
    from station.report import figures

    series = [figures.Series("t_SW (software)", Distribution.of(_heavy_tail(200_000, 3)), "#1f77b4"),
              figures.Series("t_HW (scope)", Distribution.of(_heavy_tail(200_000, 4) + 200), "#ff7f0e")]
    pixels: dict[str, np.ndarray] = {}
    to_svg = figures._to_svg

    def drawn(fig, name):  # the SVG as the report writes it, then the same figure as pixels
        svg = to_svg(fig, name)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=200)
        pixels[name] = mpimg.imread(io.BytesIO(png.getvalue()))
        return svg

    with patch.object(figures, "_to_svg", drawn):
        for kind, draw in (("hist", figures.histogram_svg), ("ccdf", figures.ccdf_svg)):
            draw(series, kind, f"{kind}-one")
            with patch.object(figures, "_MINOR_AS_ONE_ARTIST", False):
                draw(series, kind, f"{kind}-ticks")
            with patch.object(figures._MinorMarks, "place", lambda self: None):
                draw(series, kind, f"{kind}-none")
            assert np.array_equal(pixels[f"{kind}-one"], pixels[f"{kind}-ticks"]), kind
            assert not np.array_equal(pixels[f"{kind}-none"], pixels[f"{kind}-ticks"]), kind


def test_minor_ticks_stay_matplotlibs_where_one_artist_would_move_the_layout() -> None:
    """Where a log axis has no major tick in view (gaps of 20-80 µs: no power of ten), matplotlib
    places the axis label below the minor ticks' empty labels: the report keeps the Ticks there, so
    the figure (its pixels at 200 dpi, its axes box) is the one matplotlib draws."""
    import io
    from unittest.mock import patch

    import matplotlib.image as mpimg

    from station.kinds.interruptions import figures as gaps
    from station.report import figures

    drawn: dict[bool, tuple[np.ndarray, tuple]] = {}
    to_svg = figures._to_svg
    one_artist = True

    def render(fig, name):
        svg = to_svg(fig, name)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=200)
        drawn[one_artist] = (mpimg.imread(io.BytesIO(png.getvalue())), fig.axes[0].get_position().bounds)
        return svg

    histogram = {"edges_us": list(np.logspace(np.log10(20), np.log10(80), 21)), "counts": {"unexplained": [5] * 20}}
    with patch.object(gaps, "_to_svg", render):
        for one_artist in (True, False):
            with patch.object(figures, "_MINOR_AS_ONE_ARTIST", one_artist):
                gaps.gaps_svg(histogram, 20.0, "gaps 20-80 µs", f"g{int(one_artist)}")
    assert np.array_equal(drawn[True][0], drawn[False][0])
    assert drawn[True][1] == drawn[False][1]
