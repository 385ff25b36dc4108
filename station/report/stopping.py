"""The stop rule in the report (docs/stopping.md), whatever the campaign's kind: campaign.json's
`stopping` as the report's entry, its finding, its table and its figure (each group's interval
against the rounds, the line it had to clear, the round it stopped at). Matplotlib is imported
only to draw (the analysis imports this module)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from station.analysis.stopping_summary import confidence_text, question, time_budget_text
from station.report.tables import Cell, Table

if TYPE_CHECKING:
    from station.report.figures import RenderedFigure


def _us(ns: Any) -> str:
    return "−∞" if ns is None else f"{ns / 1000:.3f}"


def stopping_table(report: Mapping[str, Any]) -> Table | None:
    entry = report.get("stopping")
    if not entry:
        return None
    rows = []
    for g in entry["groups"]:
        lo, hi = g["interval_ns"]
        interval = f"[{_us(lo)}, {'+∞' if hi is None else _us(hi)}]"
        rows.append([Cell(g["name"]), Cell(str(g["units"]), numeric=True),
                     Cell(interval, numeric=True), Cell(g["state"], wrap=True)])
    rule = entry["rule"]
    targets = entry.get("targets") or {}
    after = (" and ".join(f"{t['rounds']} round(s) on {name}" for name, t in targets.items())
             if targets else f"{entry['rounds']} round(s)")
    notes = [f"The question: {question(rule)}; {confidence_text(entry)}. Verdict: "
             f"{entry['verdict']} after {after}."]
    if spent := time_budget_text(entry):
        notes.append(spent)
    left_out = ({name: t.get("rounds_left_out") for name, t in targets.items()} if targets
                else {"": entry.get("rounds_left_out")})
    for name, rounds in left_out.items():
        if rounds:
            notes.append(f"Rounds left out (a run not complete){f' on {name}' if name else ''}: "
                         f"{', '.join(str(r + 1) for r in rounds)}.")
    notes.append("Each interval is a confidence sequence over runs (one value a round): it holds "
                 "at every round at once, so stopping when it answered keeps its confidence; it "
                 "assumes the rounds' runs are independent and alike (docs/stopping.md).")
    return Table("stopping", "The question and its answer",
                 ["Group", "Rounds", "Interval (µs)", "State"], rows, notes)


def stopping_figures(report: Mapping[str, Any]) -> list[RenderedFigure]:
    from station.report.figures import RenderedFigure

    entry = report.get("stopping")
    if not entry or not any(g["path"] for g in entry["groups"]):
        return []
    title = "Stop rule: each interval, round by round"
    return [RenderedFigure(
        "stopping", "stopping", title,
        "Each group's confidence sequence after every round (faded: an end still open, drawn to "
        "the edge); "
        + ("dotted: the line a comparison must clear (0, and ±margin). " if entry["rule"].get(
            "compare") else "dotted: the deadline. " if entry["rule"].get("deadline") is not None
            else "")
        + "The vertical line: after the last round judged.",
        partial(stopping_svg, entry["groups"], entry["rule"], entry["rounds"], title, "stopping"))]


def stopping_svg(groups: list[Mapping[str, Any]], rule: Mapping[str, Any], rounds: int,
                 title: str, name: str) -> str:
    """One vertical bar per round and group (its interval; an open end faded to the edge), the
    lines a comparison must clear, and the last round judged."""
    from station.report.figures import _new_axes, _to_svg, legend_outside

    fig, ax = _new_axes(title)
    margin_ns = (rule.get("margin") or 0) * 1e9
    lines = (sorted({0.0, margin_ns, -margin_ns}) if rule.get("compare")
             else [rule["deadline"] * 1e9] if rule.get("deadline") is not None else [])
    finite = [v for g in groups for _, lo, hi in g["path"] for v in (lo, hi) if v is not None]
    span = [*finite, *lines] or [-1.0, 1.0]
    pad = 0.15 * ((max(span) - min(span)) or 1.0)
    bottom, top = min(span) - pad, max(span) + pad
    palette = ["#1f77b4", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e"]
    offsets = np.linspace(-0.15, 0.15, len(groups)) if len(groups) > 1 else [0.0]
    for k, g in enumerate(groups):
        color = palette[k % len(palette)]
        for n, (r, lo, hi) in enumerate(g["path"]):
            x = r + 1 + offsets[k]
            low, high = bottom if lo is None else lo, top if hi is None else hi
            open_end = lo is None or hi is None
            ax.vlines(x, low / 1000, high / 1000, color=color, linewidth=3,
                      alpha=0.35 if open_end else 0.9, label=g["name"] if n == 0 else None)
    for y in lines:
        ax.axhline(y / 1000, color="#333333", linestyle=":", linewidth=1)
    last = max((r + 1 for g in groups for r, _, _ in g["path"]), default=max(rounds, 1))
    ax.axvline(last + 0.5, color="#333333", linewidth=1)
    ax.set_ylim(bottom / 1000, top / 1000)
    ax.set_xlim(0.4, last + 0.8)
    ax.set_xlabel("round (faded: an end still open)")
    ax.set_ylabel("difference (µs)" if rule.get("compare") else "median run's percentile (µs)")
    legend_outside(fig, ax)
    return _to_svg(fig, name)
