"""The interruption detector's report section (seed 003) on synthetic entries: the conclusion,
the gap groups with their numbers, the spoiler flags, the figures, interruptions.csv, and the
page in a real browser.

The entries are built here from a list of gaps with plain numpy, independently of
station/kinds/interruptions/analysis.py, so the renderers are checked against known numbers."""

from __future__ import annotations

import copy
import csv
import html as html_lib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import report_synthetic as synthetic
import test_report_browser as browser
from test_report_cyclictest import _parse

from station.report import write_reports

# The browser test's fixture (Chromium's path; skipped without it locally, failed under CI).
chromium = browser.chromium
DASH = "—"
CAUSES = ("interrupt", "preempted", "smi", "unexplained")
LABEL = {"interrupt": "interrupt", "preempted": "preempted", "smi": "SMI", "unexplained": "unexplained"}
SPOILERS = [
    "SMT: CPU 3 shares its core with CPU 1, online: the sibling's work slows this CPU",
    "isolation: CPU 3 is not isolated (isolcpus=, nohz_full=): the scheduler may run other tasks on it",
]
UNREADABLE_SPOILER = "governor: CPU 2 runs the powersave frequency governor, not performance"


def _plain(value: float | None) -> str:
    """As the report prints µs/ms/s values: at most three decimals, whole numbers bare."""
    return DASH if value is None else f"{value:.3f}".rstrip("0").rstrip(".")


def _period(starts_ms: list[float]) -> tuple[float | None, bool, list[float]]:
    if len(starts_ms) < 3:
        return None, False, []
    dt = np.diff(np.sort(starts_ms))
    period = float(np.median(dt))
    return round(period, 6), bool(np.mean(np.abs(dt - period) <= 0.1 * period) >= 2 / 3), dt.round(6).tolist()


def make_entry(run_id: str, target: str, load: str, gaps: list[tuple[str, str, float, float]], *,
               spoilers: list[str] = (), trace: bool = True, smi_counter: bool = True,
               lost_events: int = 0, threshold_us: float = 5.0, measured_s: float = 10.0,
               cpu: int = 3) -> dict[str, Any]:
    """A report["interruptions"]["runs"] entry from gaps (cause, source, duration µs, start ms)."""
    entry: dict[str, Any] = {"id": run_id, "target": target, "load": load, "repetition": 0,
                             "status": "complete", "error": None, "spoilers": list(spoilers)}
    durations = np.array([g[2] for g in gaps], dtype=np.float64)
    by: dict[tuple[str, str], list[tuple[str, str, float, float]]] = {}
    for g in gaps:
        by.setdefault((g[0], g[1]), []).append(g)
    groups = []
    for (cause, source), members in by.items():
        d = np.array([m[2] for m in members])
        period, periodic, _ = _period([m[3] for m in members])
        groups.append({"cause": cause, "source": source, "count": len(members),
                       "median_us": round(float(np.median(d)), 3),
                       "p99_us": round(float(np.percentile(d, 99)), 3), "max_us": round(float(d.max()), 3),
                       "total_ms": round(float(d.sum()) / 1e3, 3), "period_ms": period, "periodic": periodic})
    groups.sort(key=lambda r: (CAUSES.index(r["cause"]), -r["total_ms"]))
    suspects = [g for g in gaps if g[0] == "unexplained"]
    sd = np.array([g[2] for g in suspects])
    period, periodic, intervals = _period([g[3] for g in suspects])
    by_cause = {c: sum(1 for g in gaps if g[0] == c) for c in CAUSES}
    if gaps:
        edges = np.logspace(np.log10(durations.min()), np.log10(durations.max()) + 1e-9, 21)
        counts = {c: np.histogram([g[2] for g in gaps if g[0] == c], bins=edges)[0].tolist()
                  for c in CAUSES if by_cause[c]}
        histogram = {"edges_us": edges.round(4).tolist(), "counts": counts}
        conclusion = (f"{len(gaps)} gaps above {threshold_us:g} µs on CPU {cpu} in {measured_s:g} s "
                      f"(worst {durations.max():g} µs): {by_cause['interrupt']} interrupts, "
                      + ", ".join(sorted({f"{g[1]} preempted" for g in gaps if g[0] == "preempted"}))
                      + "; "
                      f"{by_cause['unexplained']} not explained by any interrupt: firmware (SMI) or a "
                      "hypervisor took the CPU.")
    else:
        histogram = {"edges_us": [], "counts": {}}
        conclusion = (f"0 gaps above {threshold_us:g} µs on CPU {cpu} in {measured_s:g} s: the CPU was "
                      "never taken from the loop for longer.")
    entry |= {
        "cpu": cpu, "clock": "tsc", "threshold_us": threshold_us, "priority": 99, "measured_s": measured_s,
        "gaps": len(gaps), "max_us": round(float(durations.max()), 3) if gaps else None,
        "lost_ms": round(float(durations.sum()) / 1e3, 3), "blind_ms": 1.25, "min_loop_ns": 21,
        "iterations": 400_000_000, "end_reason": "duration", "smi_counter": smi_counter, "trace": trace,
        "trace_lost_events": lost_events if trace else None, "by_cause": by_cause,
        "unexplained": {"count": len(suspects), "median_us": round(float(np.median(sd)), 3) if len(sd) else None,
                        "max_us": round(float(sd.max()), 3) if len(sd) else None,
                        "period_ms": period, "periodic": periodic,
                        "clusters": [{"count": len(suspects), "median_us": round(float(np.median(sd)), 3),
                                      "min_us": round(float(sd.min()), 3), "max_us": round(float(sd.max()), 3),
                                      "period_ms": period, "periodic": periodic}] if len(sd) >= 3 else []},
        "groups": groups, "conclusion": conclusion, "suspect_inter_arrival_ms": intervals,
        "histogram": histogram,
    }
    return entry


def busy_gaps(seed: int = 3) -> list[tuple[str, str, float, float]]:
    rng = np.random.default_rng(seed)
    gaps = [("interrupt", "LOC", float(round(rng.normal(8.2, 0.4), 3)), float(t))
            for t in np.arange(0, 10_000, 50.0)]  # the 20 Hz tick of this synthetic kernel
    gaps += [("interrupt", "24 edu", float(round(rng.normal(15.5, 1.0), 3)), float(t))
             for t in rng.uniform(0, 10_000, 40)]
    gaps += [("preempted", "rcu_preempt", float(round(rng.uniform(30, 60), 3)), float(t))
             for t in rng.uniform(0, 10_000, 5)]
    # A periodic SMI every second, ~120 µs: the finding.
    gaps += [("unexplained", "", float(round(rng.normal(121.0, 2.0), 3)), 3.7 + 1000.0 * k) for k in range(10)]
    return sorted(gaps, key=lambda g: g[3])


def build_report() -> dict[str, Any]:
    busy = make_entry("vm-none-r0", "vm", "none", busy_gaps(), spoilers=SPOILERS, lost_events=3)
    quiet = make_entry("vm-stress-r0", "vm", "stress", [], smi_counter=False)
    unreadable = {"id": "vm-hackbench-r0", "target": "vm", "load": "hackbench", "repetition": 0,
                  "status": "failed", "error": "irqgap exited with status 2",
                  "spoilers": [UNREADABLE_SPOILER]}
    return {"schema_version": 2, "campaign": {"name": "irq-detector", "description": "seed 003"},
            "runs": [], "findings": [],
            "notes": ["Run vm-hackbench-r0 is failed: irqgap exited with status 2",
                      "Run vm-hackbench-r0: its detector output cannot be read: no such file"],
            "interruptions": {"runs": [busy, quiet, unreadable]}}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory):
    report = build_report()
    pristine = copy.deepcopy(report)
    out = tmp_path_factory.mktemp("interruptions")
    paths = write_reports(report, {}, out)
    return pristine, report, out, paths


def _group_cells(g: dict[str, Any]) -> list[str]:
    periodic = "yes" if g["periodic"] else ("no" if g["period_ms"] is not None else DASH)
    return [LABEL[g["cause"]], g["source"] or DASH, str(g["count"]), _plain(g["median_us"]), _plain(g["p99_us"]),
            _plain(g["max_us"]), _plain(g["total_ms"]), _plain(g["period_ms"]), periodic]


def test_page_opens_with_the_section(campaign) -> None:
    _, report, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    page = _parse(html)
    # As cyclictest's: the summary table, the warnings, then the detail (here: each run).
    assert page.sections == ["interruptions", "warnings", "interruption-runs"]
    nav = html[html.index("<nav>"):html.index("</nav>")]
    assert nav.index('href="#interruptions"') < nav.index('href="#interruption-runs"')
    for heading in ("Findings", "Runs", "Figures"):  # no empty module-run sections
        assert f"<h2>{heading}</h2>" not in html
    header, *rows = page.tables[0]
    assert [c["text"] for c in header][:4] == ["Run", "Target", "Load", "Status"]
    col = {c["text"]: i for i, c in enumerate(header)}
    assert [r[0]["text"] for r in rows] == ["vm-none-r0", "vm-stress-r0", "vm-hackbench-r0"]
    busy, quiet, unreadable = rows
    entry = report["interruptions"]["runs"][0]
    assert busy[col["Gaps"]]["text"] == str(entry["gaps"])
    assert busy[col["Worst (µs)"]]["text"] == _plain(entry["max_us"])
    assert busy[col["Time lost (ms)"]]["text"] == _plain(entry["lost_ms"])
    assert busy[col["Threshold (µs)"]]["text"] == "5" and busy[col["Measured (s)"]]["text"] == "10"
    assert busy[col["By cause"]]["text"] == "240 / 0 / 5 / 0 / 10"
    assert "flag-suspect" in busy[col["By cause"]]["class"]
    assert busy[col["Trace"]]["text"] == "yes" and busy[col["Trace"]]["marks"] == "[1]"
    assert busy[col["SMI counter"]]["text"] == "yes"
    assert busy[col["Spoilers"]]["text"] == "2" and "flag-problem" in busy[col["Spoilers"]]["class"]
    assert quiet[col["Gaps"]]["text"] == "0" and quiet[col["Worst (µs)"]]["text"] == DASH
    assert quiet[col["By cause"]]["text"] == "0 / 0 / 0 / 0 / 0"
    assert "flag-suspect" not in quiet[col["By cause"]]["class"]
    assert quiet[col["SMI counter"]]["text"] == "no"
    assert "status-failed" in unreadable[col["Status"]]["class"]
    assert "flag-problem" in unreadable[0]["class"] and unreadable[0]["marks"] == "[2]"
    assert [c["text"] for c in unreadable[4:-1]] == [DASH] * 10
    text = html_lib.unescape(html)
    assert "[1] vm-none-r0: the trace lost 3 events" in text
    assert "[2] vm-hackbench-r0: its detector output could not be read (run failed: irqgap exited" in text


def test_html_conclusions_groups_and_spoilers(campaign) -> None:
    _, report, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    text = html_lib.unescape(html)
    busy, quiet, unreadable = report["interruptions"]["runs"]
    for entry in (busy, quiet):
        assert f'<p class="verdict"><b>Conclusion:</b> {entry["conclusion"]}</p>' in text
    assert "The detector's output could not be read (run failed: irqgap exited with status 2)" in text
    # Spoiler flags: a visible warning list under their own run, each flag an item.
    articles = re.findall(r'<article class="irq-run" id="([^"]+)">(.*?)</article>', text, re.S)
    assert [a for a, _ in articles] == ["interruptions-vm-none-r0", "interruptions-vm-stress-r0",
                                        "interruptions-vm-hackbench-r0"]
    bodies = [b for _, b in articles]
    for flag in SPOILERS:
        assert f"<li>{flag}</li>" in bodies[0]
    assert "spoilers" not in bodies[1]
    assert f"<li>{UNREADABLE_SPOILER}</li>" in bodies[2]
    # The groups: one table per run with gaps, rows in the analysis's order with its numbers.
    page = _parse(html)
    assert len(page.tables) == 3
    header, *rows = page.tables[1]
    assert [c["text"] for c in header] == ["Cause", "Source", "Count", "Median (µs)", "p99 (µs)", "Max (µs)",
                                           "Total (ms)", "Period (ms)", "Periodic"]
    assert [[c["text"] for c in r] for r in rows] == [_group_cells(g) for g in busy["groups"]]
    smi = rows[-1]
    assert smi[0]["text"] == "unexplained" and smi[-1]["text"] == "yes" and smi[7]["text"] == "1000"
    assert "flag-suspect" in smi[0]["class"] and "flag-suspect" in smi[-1]["class"]
    # The families of unexplained gaps: the periodic one flagged, with its length and period.
    header, *rows = page.tables[2]
    assert [c["text"] for c in header] == ["Gaps", "Median (µs)", "Range (µs)", "Period (ms)", "Periodic"]
    [family] = busy["unexplained"]["clusters"]
    assert [c["text"] for c in rows[0]][0] == str(family["count"])
    assert rows[0][3]["text"] == "1000" and rows[0][4]["text"] == "yes" and "flag-suspect" in rows[0][4]["class"]


def test_markdown(campaign) -> None:
    _, report, out, _ = campaign
    md = (out / "report.md").read_text(encoding="utf-8")
    lines = md.splitlines()
    assert lines.index("## Interruptions") < lines.index("> **Warnings**") < lines.index("## Interruptions, per run")
    assert not any(ln.startswith("| ") for ln in lines[:lines.index("## Interruptions")])
    busy, quiet, _ = report["interruptions"]["runs"]
    assert "rcu_preempt" in busy["conclusion"]
    for entry in (busy, quiet):
        assert f"> **Conclusion:** {entry['conclusion']}" in lines
    for group in busy["groups"]:
        cells = [c.replace("_", "\\_") for c in _group_cells(group)]
        if group["cause"] == "unexplained":
            cells = [f"**{cells[0]}**", *cells[1:-1], f"**{cells[-1]}**"]
        assert "| " + " | ".join(cells) + " |" in lines, cells
    # Prose stays as written (an underscore inside a word starts no emphasis): nohz_full, rcu_preempt.
    for flag in [*SPOILERS, UNREADABLE_SPOILER]:
        assert "> - " + flag in lines
    assert "**The detector's output could not be read (run failed: irqgap exited with status 2); see the warnings.**" \
        in md
    assert "![vm-none-r0: gap durations by cause](figures/interruptions-vm-none-r0-gaps.svg)" in lines
    assert "![vm-none-r0: time between unexplained gaps](figures/interruptions-vm-none-r0-arrivals.svg)" in lines
    assert not re.search(r"^## (Findings|Runs|Figures)$", md, re.M)


def test_figures(campaign) -> None:
    _, report, out, paths = campaign
    names = ["interruptions-vm-none-r0-gaps", "interruptions-vm-none-r0-arrivals"]
    # The quiet run has no gaps, the unreadable one nothing: no figure for either.
    assert sorted(k for k in paths if k.startswith("figures/")) == sorted(f"figures/{n}.svg" for n in names)
    gaps_svg = (out / "figures" / f"{names[0]}.svg").read_text(encoding="utf-8")
    root = ET.fromstring(gaps_svg)
    ids = {g.get("id") for g in root.iter("{http://www.w3.org/2000/svg}g")}
    assert {f"{names[0]}-cause-{c}" for c in ("interrupt", "preempted", "unexplained")} <= ids
    assert f"{names[0]}-cause-smi" not in ids
    assert "unexplained (10)" in gaps_svg and "interrupt (240)" in gaps_svg and "threshold 5 µs" in gaps_svg
    arrivals = (out / "figures" / f"{names[1]}.svg").read_text(encoding="utf-8")
    root = ET.fromstring(arrivals)
    assert f"{names[1]}-bars" in {g.get("id") for g in root.iter("{http://www.w3.org/2000/svg}g")}
    assert "9 intervals" in arrivals and "period 1000 ms" in arrivals
    html = html_lib.unescape((out / "report.html").read_text(encoding="utf-8"))
    assert html.count("<svg") == 2
    # Each figure sits in its run's block, with a caption saying what to read from it.
    body = html[html.index('id="interruptions-vm-none-r0"'):html.index('id="interruptions-vm-stress-r0"')]
    assert f'id="fig-{names[0]}"' in body and f'id="fig-{names[1]}"' in body
    assert "periodic, every 1000 ms" in body and "One narrow peak means" in body


def test_csv_and_json(campaign) -> None:
    pristine, report, out, paths = campaign
    assert report == pristine
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["interruptions"] == pristine["interruptions"]
    assert paths["interruptions.csv"] == out / "interruptions.csv"
    with (out / "interruptions.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    busy, quiet, _ = report["interruptions"]["runs"]
    expected = [("vm-none-r0", g["cause"], g["source"]) for g in busy["groups"]] + [("vm-stress-r0", "", "")]
    assert [(r["run_id"], r["cause"], r["source"]) for r in rows] == expected
    for row, g in zip(rows, busy["groups"], strict=False):
        assert int(row["count"]) == g["count"] and float(row["median_us"]) == g["median_us"]
        assert float(row["p99_us"]) == g["p99_us"] and float(row["total_ms"]) == g["total_ms"]
        assert row["periodic"] == ("true" if g["periodic"] else "false")
        assert row["trace"] == "true" and row["run_gaps"] == str(busy["gaps"])
    assert rows[-1]["count"] == "0" and rows[-1]["smi_counter"] == "false" and rows[-1]["run_max_us"] == ""
    with (out / "stats.csv").open(newline="") as f:
        assert list(csv.DictReader(f)) == []  # no module runs


def test_alongside_module_runs(tmp_path: Path) -> None:
    """Module runs and the section in one report: the module runs lead, the section follows them."""
    report, samples = synthetic.build(n=2000)
    report["interruptions"] = build_report()["interruptions"]
    paths = write_reports(report, samples, tmp_path)
    html = paths["report.html"].read_text(encoding="utf-8")
    sections = _parse(html).sections
    assert sections.index("warnings") < sections.index("runs") < sections.index("interruptions") \
        < sections.index("interruption-runs") < sections.index("figures")
    figures_section = html[html.index('<section id="figures">'):]
    assert "interruptions-vm-none-r0" not in figures_section
    md = paths["report.md"].read_text(encoding="utf-8")
    assert md.index("## Runs") < md.index("## Interruptions\n") < md.index("## Interruptions, per run") \
        < md.index("## Figures")
    assert "interruptions-" not in md[md.index("## Figures"):]
    assert "interruptions.csv" in paths and "stats.csv" in paths


def test_sparse_section(tmp_path: Path) -> None:
    """Only unreadable runs, no spoilers, no notes: renders, no figures, an empty CSV."""
    report = {"schema_version": 2, "campaign": {"name": "sparse", "description": ""}, "runs": [], "notes": [],
              "findings": [], "interruptions": {"runs": [
        {"id": "x", "target": None, "load": None, "repetition": None, "status": "failed", "error": None,
         "spoilers": []}]}}
    paths = write_reports(report, {}, tmp_path)
    assert not any(k.startswith("figures/") for k in paths)
    assert paths["interruptions.csv"].read_text().count("\n") == 1  # the header only
    assert "could not be read (run failed)" in paths["report.md"].read_text(encoding="utf-8")


def test_section_visible_in_browser_without_console_errors(chromium: str, campaign, tmp_path: Path) -> None:
    _, report, out, _ = campaign
    screen = browser.Screenful(chromium, out / "report.html", tmp_path)
    dom, shown = screen.dom, screen.shown
    assert not screen.console
    # the conclusion's box, the summary's flagged cells, the spoiler warning box
    assert shown("p.verdict") and shown("td.flag-suspect") and shown(".warnings")
    assert '<section id="interruptions">' in dom
    assert html_lib.escape(report["interruptions"]["runs"][0]["conclusion"], quote=False) in dom
    assert dom.count("<svg") == 2 and dom.count("<path") > 20


def test_side_by_side_with_rtla_osnoise() -> None:
    from station.kinds.interruptions.tables import comparison_table

    entry = {"id": "rt-r0", "measured_s": 6.0, "gaps": 137, "max_us": 7170.97,
             "by_cause": {"interrupt": 115, "preempted": 0, "smi": 1, "unexplained": 22},
             "osnoise": {"cpu": 1, "duration_s": 6, "hw": 3, "nmi": 0, "irq": 1496, "softirq": 4, "thread": 289,
                         "max_single_us": 5241}}
    table = comparison_table(entry, "x")
    assert table is not None and table.title == "Side by side with rtla osnoise: rt-r0"
    detector, osnoise = ([c.text for c in row] for row in table.rows)
    assert detector[:7] == ["irq-station detector (irqgap)", "6.0", "137", "7170.97", "23", "115", "0"]
    assert osnoise == ["rtla osnoise (the kernel's tracer)", "6", "1 792", "5241", "3", "1 500", "289", "0"]
    assert comparison_table({"id": "r"}, "x") is None


def test_the_page_fits_1280_px(chromium: str, campaign, tmp_path: Path) -> None:
    """No table wider than the page's column (the columns that matter hidden off to the right) and
    no figure text clipped, as headless Chromium lays the page out at 1280 px."""
    out = campaign[2]
    assert browser.layout_problems(chromium, out / "report.html", tmp_path) == {"tables": [], "labels": []}


def test_findings_lead_with_each_runs_longest_gap_and_its_cause(tmp_path: Path) -> None:
    """Issue 30's first page for the detector: a finding per readable run (its longest gap, what took
    the CPU, how many gaps), from the injected gaps, shown before the summary table; the unreadable
    run has none."""
    from station.kinds.interruptions.analysis import CAUSE_WORDS, finding

    report = build_report()
    section = report["interruptions"]
    section["findings"] = [f for e in section["runs"] if (f := finding(e))]
    report["findings"] = list(section["findings"])
    busy, quiet = section["findings"]
    injected = busy_gaps()
    cause, _, longest, _ = max(injected, key=lambda g: g[2])
    assert busy["run"] == "vm-none-r0" and busy["text"] == section["runs"][0]["conclusion"]
    assert busy["figure"].startswith(f"{longest:.3g} µs ({CAUSE_WORDS[cause]}), {len(injected)} gaps above 5 µs")
    assert quiet["figure"] == "no gap" and "never taken" in quiet["headline"]
    out = tmp_path / "out"
    write_reports(report, {}, out)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert _parse(html).sections == ["findings", "interruptions", "warnings", "interruption-runs"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.index("## Findings") < md.index("## Interruptions")
