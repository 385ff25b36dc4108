"""One self-contained page per monitored target: the latency maxima over time (each window's,
kernel changes and gaps marked), the long-term histogram, the latest windows, and each phase's
regression verdict."""

from __future__ import annotations

import html
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from station.monitor.ledger import Entry, Ledger
from station.monitor.regression import verdict
from station.monitor.schedule import Schedule

OVERVIEW_DIR = "overview"


def phase_verdicts(entries: list[Entry], phases: list[str], false_alarm: float) -> dict[str,
                                                                                        dict[str,
                                                                                             Any]]:
    """For each phase: its latest cycle's measured windows against every earlier one."""
    out = {}
    for phase in phases:
        measured = [e for e in entries if e.phase == phase and e.max_ns is not None]
        if not measured:
            out[phase] = verdict([], [], false_alarm)
            continue
        latest_cycle = max(e.cycle for e in measured)
        latest = [e.max_ns for e in measured if e.cycle == latest_cycle]
        earlier = [e for e in sorted(measured, key=lambda e: (e.cycle,
                                                              e.window)) if e.cycle < latest_cycle]
        out[phase] = {**verdict([e.max_ns for e in earlier], latest, false_alarm,
                                [e.cycle for e in earlier]),
                      "cycle": latest_cycle}
    return out


def _trend_text(v: dict[str, Any]) -> str:
    if v.get("trend_tau") is None:
        return "—"
    moves = f"; {v['moves']}" if v.get("moves") else ""
    return f"Kendall τ {v['trend_tau']:+.2f} (p {v['trend_p']:.2g}){moves}"


def kernel_changes(entries: list[Entry]) -> list[tuple[float, str, str]]:
    """(when, from, to) each time the target's kernel release differs from the window before."""
    changes, before = [], None
    for e in sorted((e for e in entries if e.kernel), key=lambda e: e.started):
        if before is not None and e.kernel != before:
            changes.append((e.started, before, e.kernel))
        before = e.kernel
    return changes


def write_pages(store: Path, ledger: Ledger, schedule: Schedule) -> list[Path]:
    entries = ledger.entries()
    measured_targets = {e.target for e in entries if e.status != "gap"}
    pages = []
    for target in sorted(measured_targets or {e.target for e in entries}):
        # a gap before the target ever answered has no name but "target": it belongs to every page
        mine = [
            e for e in entries if e.target == target or (e.status == "gap" and e.target == "target")
        ]
        pages.append(_write_page(store, target, mine, schedule))
    return pages


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _over_time(entries: list[Entry], phases: list[str]) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6))
    ax = fig.subplots()
    for k, phase in enumerate(phases):
        points = sorted(
            (e.started, e.max_ns / 1e3)
            for e in entries
            if e.phase == phase and e.max_ns is not None
        )
        if points:
            ax.plot([datetime.fromtimestamp(t, UTC) for t, _ in points], [v for _, v in points],
                    "o-",
                    ms=3, lw=0.8, color=f"C{k}", label=f"{phase}: maximum per window")
    gaps = [e for e in entries if e.status == "gap"]
    for k, e in enumerate(gaps):
        ax.axvspan(datetime.fromtimestamp(e.started, UTC), datetime.fromtimestamp(e.ended, UTC),
                   color="tab:red", alpha=0.2, label="gap (no measurement)" if k == 0 else None)
    for when, old, new in kernel_changes(entries):
        ax.axvline(datetime.fromtimestamp(when, UTC), color="k", ls="--", lw=1)
        ax.annotate(f"kernel {old} → {new}", (datetime.fromtimestamp(when, UTC), 1),
                    xycoords=("data",
                    "axes fraction"), rotation=90, va="top", ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("latency maximum (µs)")
    ax.set_xlabel("window start (UTC)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.autofmt_xdate()
    return _svg(fig)


def long_term_histogram(store: Path, entries: list[Entry]) -> dict[str, list[tuple[float, int]]]:
    """Each phase's cyclictest histogram summed over every window of this target (the store's
    cyclictest_histogram table, read with DuckDB): latency (µs) -> cycles."""
    from station.store.result_store import ResultStore

    out = {}
    for phase in sorted({e.phase for e in entries}):
        dirs = sorted(
            {
                store / e.campaign_dir
                for e in entries
                if e.phase == phase
                and e.campaign_dir
                and e.status != "gap"
                and (store / e.campaign_dir).exists()
            }
        )
        if not dirs:
            continue
        try:
            rel = ResultStore(dirs).relation("cyclictest_histogram")
        except Exception:  # noqa: BLE001 - a phase without cyclictest runs has no histogram
            continue
        if rel is None:
            continue
        rows = rel.aggregate("latency_us, sum(count) AS n",
                             "latency_us").order("latency_us").fetchall()
        out[phase] = [(float(lat), int(n)) for lat, n in rows if n]
    return out


def _histogram_svg(histograms: dict[str, list[tuple[float, int]]], phases: list[str]) -> str | None:
    if not histograms:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.2))
    ax = fig.subplots()
    for k, phase in enumerate(phases):  # the colours of the plot above
        if rows := histograms.get(phase):
            ax.step([lat for lat, _ in rows], [n for _, n in rows], where="mid", label=phase, lw=1,
                    color=f"C{k}")
    ax.set_yscale("log")
    ax.set_xlabel("latency (µs)")
    ax.set_ylabel("cycles, all windows")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)


def _kernel_now(entries: list[Entry]) -> str:
    """The kernel of the latest window that ran on the target (a gap's is unknown)."""
    ran = [e for e in entries if e.kernel]
    return f" Kernel: {html.escape(max(ran, key=lambda e: e.started).kernel)}." if ran else ""


def _table(head: list[str], rows: list[list[Any]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _write_page(store: Path, target: str, entries: list[Entry], schedule: Schedule) -> Path:
    phases = [p.name for p in schedule.phases]
    verdicts = phase_verdicts(entries, phases, schedule.false_alarm)
    latest = []
    for phase in phases:
        mine = [e for e in entries if e.phase == phase]
        if mine:
            e = max(mine, key=lambda e: (e.cycle, e.window))
            latest.append([phase, e.cycle, e.window, _when(e.started), e.status,
                           "—" if e.max_ns is None else f"{e.max_ns / 1e3:.1f}", e.kernel or "—",
                           e.reason or ""])
    gaps = [[e.phase, e.cycle, e.window, _when(e.started),
             e.reason or ""] for e in entries if e.status == "gap"]
    histogram = _histogram_svg(long_term_histogram(store, entries), phases)
    summary = {"target": target, "schedule": schedule.name, "verdicts": verdicts,
               "windows": sum(e.max_ns is not None for e in entries), "gaps": len(gaps),
               "kernel_changes": kernel_changes(entries)}
    verdict_rows = [[p, v["verdict"], "—" if v["p_value"] is None else f"{v['p_value']:.4f}",
                     v["history_windows"],
                     v["latest_windows"], f"{v['false_alarm']:.1%}", _trend_text(v)]
                     for p, v in verdicts.items()]
    body = [
        f"<h1>{html.escape(target)}: latency over time</h1>",
        f"<p>Schedule <b>{html.escape(schedule.name)}</b>: every {schedule.every:g} s, windows of "
        f"{schedule.window:g} s; {summary['windows']} windows measured, {len(gaps)} "
        f"gaps.{_kernel_now(entries)}</p>",
        "<h2>Regression verdict</h2>",
        _table(["phase", "verdict", "p", "earlier windows", "latest windows", "false-alarm rate",
                "history: trend over its windows"], verdict_rows),
        "<p class=note>A one-sided exact rank test (Mann-Whitney) of the latest cycle's window "
        "maxima against every earlier window of the phase (at most the latest 200): under no "
        "change the windows are exchangeable, so a phase is flagged by chance with probability at "
        "most the false-alarm rate. The history is checked for that first (a trend, or cycles that "
        "differ, at 0.1 %); where it moves, the cycles are the units and a flag needs their test "
        "too.</p>",
        "<h2>Maximum per window</h2>",
        f"<figure id=over-time>{_over_time(entries, phases)}</figure>",
    ]
    if histogram:
        body += ["<h2>Long-term histogram</h2>", f"<figure id=histogram>{histogram}</figure>"]
    body += ["<h2>Latest windows</h2>",
             _table(["phase", "cycle", "window", "started", "status", "max (µs)", "kernel", "note"],
                    latest)]
    if summary["kernel_changes"]:  # the plot's dashed lines, as text a reader can search and copy
        body += ["<h2>Kernel changes</h2>", _table(["first window on it", "from", "to"],
                                                   [[_when(t), a, b] for t, a,
                                                    b in summary["kernel_changes"]])]
    if gaps:
        body += ["<h2>Gaps</h2>", _table(["phase", "cycle", "window", "when", "why"], gaps)]
    page = (
        "<!doctype html><html><head><meta charset=utf-8><title>"
        f"{html.escape(target)} — irq-station monitor</title><style>"
        "body{font:14px system-ui,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px "
        "6px;text-align:left}"
        "figure{margin:0}svg{max-width:100%;height:auto}.note{color:#555;font-size:12px}"
        "</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
    out = store / OVERVIEW_DIR
    out.mkdir(parents=True, exist_ok=True)
    # a host name the target reported
    target = re.sub(r"[^A-Za-z0-9._-]", "_", target).lstrip(".") or "target"
    path = out / f"{target}.html"
    path.write_text(page)
    (out / f"{target}.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    _write_csv(out / f"{target}.csv", entries)
    return path


def _write_csv(path: Path, entries: list[Entry]) -> None:
    """The target's history, a window a line (OSADL publishes no data format to follow:
    docs/lab.md)."""
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["window_start_utc", "phase", "cycle", "window", "status", "max_us",
                         "kernel", "reason"])
        for e in sorted(entries, key=lambda e: (e.started, e.phase, e.window)):
            writer.writerow([_when(e.started), e.phase, e.cycle, e.window, e.status,
                             "" if e.max_ns is None else f"{e.max_ns / 1e3:.3f}", e.kernel or "",
                             e.reason or ""])
