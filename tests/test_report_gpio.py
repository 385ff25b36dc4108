"""The GPIO response section (seed 002) on synthetic report entries: the findings leading the
page, the per-run delays, the outliers and their collision window, the comparisons, the figures,
gpio.csv, a run that answered nothing, and the page in a real browser.

The entries are built here from delays drawn with plain numpy, independently of
station/kinds/gpio/analysis.py, so the renderers are checked against known numbers."""

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
SVG = "{http://www.w3.org/2000/svg}"
PERIOD_US = 125.0  # the synthetic kernel's 8 kHz timer interrupt
CSV_COLUMNS = [
    "run_id", "target", "case", "load", "repetition", "status", "responder", "mode", "threaded",
    "priority", "governor", "stimuli", "answered", "missed", "censored", "ambiguous", "unanswering",
    "miss_fraction", "resolution_ns", "min_us", "p50_us", "mean_us", "mean_ci_lo_us",
    "mean_ci_hi_us", "std_us", "p99_us", "p999_us", "max_us", "spread_us", "outlier_threshold_us",
    "outlier_count", "outlier_fraction", "outlier_excess_max_us", "outlier_period_us",
    "outlier_period_share", "outlier_window_us", "outlier_expected_fraction", "outlier_explanation"]
CASES = {  # case → (responder, mode, threaded, priority, governor)
    "kernel": ("kernel", "echo", True, 0, "performance"),
    "sysfs": ("sysfs", "toggle", False, 50, "ondemand"),
}


def _delay(value: float | None) -> str:
    """As the report prints a delay: 3 decimals below 100 µs, 2 below 1000, 1 above."""
    if value is None:
        return DASH
    return f"{value:.{3 if abs(value) < 100 else 2 if abs(value) < 1000 else 1}f}"


def _pct(value: float | None) -> str:
    return DASH if value is None else ("0%" if value == 0 else f"{value * 100:.3g}%")


def make_run(run_id: str, case: str, load: str, delays_us: np.ndarray | None, *, missed: int = 0,
             censored: int = 0, period: bool = False, status: str = "complete",
             error: str | None = None) -> dict[str, Any]:
    """A report["gpio"]["runs"] entry from the answered delays (µs)."""
    responder, mode, threaded, priority, governor = CASES[case]
    answered = 0 if delays_us is None else len(delays_us)
    stimuli = answered + missed
    entry: dict[str, Any] = {
        "id": run_id, "case": case, "load": load, "repetition": 0, "target": None,
        "status": status, "error": error, "responder": responder, "mode": mode,
        "threaded": threaded, "priority": priority, "governor": governor,
        "stimuli": stimuli, "answered": answered, "missed": missed, "censored": censored,
        "ambiguous": 0, "unanswering": 0, "miss_fraction": missed / stimuli if stimuli else None,
        "resolution_ns": 20.0, "delay_us": None, "histogram": None, "outliers": None}
    if delays_us is None or not answered:
        return entry
    d = np.asarray(delays_us, dtype=np.float64)
    mean, std = float(d.mean()), float(d.std(ddof=1))
    half = 1.96 * std / np.sqrt(d.size)
    p50, p99, p999 = (float(v) for v in np.percentile(d, [50, 99, 99.9]))
    entry["delay_us"] = {"min": float(d.min()), "p50": p50, "mean": mean, "mean_ci": [mean - half, mean + half],
                         "std": std, "p99": p99, "p999": p999, "max": float(d.max()),
                         "spread": float(d.max() - d.min())}
    counts, edges = np.histogram(d, bins=120)
    entry["histogram"] = {"edges_us": edges.tolist(), "counts": counts.astype(int).tolist()}
    threshold = p50 + 6 * 1.4826 * float(np.median(np.abs(d - p50)))
    out = d > threshold
    o: dict[str, Any] = {"threshold_us": threshold, "count": int(out.sum()), "fraction": float(out.mean()),
                         "excess_max_us": float(d[out].max() - p50) if out.any() else 0.0,
                         "period_us": None, "period_share": None, "window_us": None, "expected_fraction": None,
                         "explanation": "no delay stands out from the bulk"}
    if period:
        window = o["fraction"] * PERIOD_US
        o |= {"period_us": PERIOD_US, "period_share": 0.93, "window_us": window,
              "expected_fraction": window / PERIOD_US,
              "explanation": f"outliers recur at multiples of {PERIOD_US:.1f} µs (8 kHz; 93% of their spacings): "
                             f"collisions with a periodic interrupt whose handler holds the CPU about "
                             f"{window:.2f} µs"}
    elif out.any():
        o["explanation"] = f"{o['count']} delays stand out, at no common spacing"
    entry["outliers"] = o
    return entry


def kernel_delays(rng: np.random.Generator, n: int, centre: float) -> np.ndarray:
    d = centre + rng.gamma(6.0, 0.02, n)  # a handler's few µs, ~0.1 µs of jitter
    hit = rng.choice(n, n // 80, replace=False)  # 1.25% collide with the 125 µs timer tick
    d[hit] += rng.uniform(0.2, 1.6, hit.size)
    return np.round(d / 0.02) * 0.02  # the scope's 20 ns grid


def sysfs_delays(rng: np.random.Generator, n: int, centre: float) -> np.ndarray:
    d = centre + rng.gamma(3.0, 12.0, n)
    d[:3] += 2400.0  # three late wake-ups, beyond 1000 µs
    return np.round(d / 0.02) * 0.02


def _comparison(a: dict[str, Any], b: dict[str, Any], p: float | None, differs: str) -> dict[str, Any]:
    """Two conditions of one run each (p None: not tested, as the analysis leaves them) or, for the
    table's sake, of three (p given)."""
    ma, mb = a["delay_us"]["mean"], b["delay_us"]["mean"]
    runs = 1 if p is None else 3
    return {"a": f"{a['case']} under {a['load']}", "b": f"{b['case']} under {b['load']}", "differs": differs,
            "runs_a": [a["id"]] * runs, "runs_b": [b["id"]] * runs, "mean_a_us": ma, "mean_b_us": mb,
            "ratio": ma / mb, "p_value": p, "p_holm": None if p is None else min(1.0, 2 * p),
            "significant": None if p is None else 2 * p < 0.05, "runs_needed": 2 if p is None else None,
            "events_p_value": 1e-12, "note": "one run on a side" if p is None else None}


def build_report() -> dict[str, Any]:
    rng = np.random.default_rng(2016)
    runs = [
        make_run("kernel-idle-r0", "kernel", "idle", kernel_delays(rng, 2000, 5.1), period=True),
        make_run("sysfs-idle-r0", "sysfs", "idle", sysfs_delays(rng, 1998, 180.0), missed=2, censored=3),
        make_run("kernel-stress-r0", "kernel", "stress", kernel_delays(rng, 2000, 5.4), period=True),
        make_run("sysfs-stress-r0", "sysfs", "stress", sysfs_delays(rng, 1950, 150.0), missed=50),
    ]
    k_idle, s_idle, k_stress, s_stress = runs
    comparisons = [_comparison(k_idle, s_idle, 0.0, "case"), _comparison(k_stress, s_stress, None, "case"),
                   _comparison(k_idle, k_stress, 0.0421, "load"), _comparison(s_idle, s_stress, 2.5e-9, "load")]
    findings = [
        {"kind": "ranking", "load": "idle",
         "text": "idle: mean response, fastest first: kernel 5.2 µs < sysfs 216 µs."},
        {"kind": "ratio", "load": "idle", "text": "idle: sysfs (sysfs, ondemand governor) is 41× slower on average "
                                                  "than kernel (kernel, performance governor)."},
        {"kind": "load", "load": None, "text": "sysfs: faster under load 'stress' (186 µs) than under 'idle' (216 µs) "
                                               "— the ondemand governor lowers an idle CPU's clock."},
        {"kind": "outliers", "load": "idle", "text": f"kernel-idle-r0: {k_idle['outliers']['explanation']}."},
    ]
    return {"schema_version": 2, "campaign": {"name": "gpio-seed-002", "description": "seed 002"},
            "runs": [], "findings": [],
            "notes": ["Run sysfs-stress-r0: 50 of 2000 stimuli had no response within 2000 µs."],
            "gpio": {"runs": runs, "findings": findings, "comparisons": comparisons}}


def build_failed_report() -> dict[str, Any]:
    """One measured run beside one that answered nothing and one whose delays could not be read."""
    rng = np.random.default_rng(7)
    ok = make_run("kernel-idle-r0", "kernel", "idle", kernel_delays(rng, 500, 5.0))
    silent = make_run("sysfs-idle-r0", "sysfs", "idle", None, missed=500, status="incomplete",
                      error="no response to any of 500 stimuli: check the responder")
    unreadable = {"id": "sysfs-stress-r0", "case": "sysfs", "load": "stress", "repetition": 0, "target": None,
                  "status": "failed", "error": "the responder exited with status 1", "responder": "sysfs",
                  "mode": "toggle", "threaded": False, "priority": 50, "governor": "ondemand",
                  "resolution_ns": None, "delay_us": None, "histogram": None, "outliers": None}
    return {"schema_version": 2, "campaign": {"name": "gpio-failed", "description": ""}, "runs": [], "findings": [],
            "notes": ["Run sysfs-stress-r0 is failed: the responder exited with status 1"],
            "gpio": {"runs": [ok, silent, unreadable], "findings": [], "comparisons": []}}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory):
    report = build_report()
    pristine = copy.deepcopy(report)
    out = tmp_path_factory.mktemp("gpio")
    paths = write_reports(report, {}, out)
    return pristine, report, out, paths


def _run_cells(r: dict[str, Any]) -> dict[str, str]:
    d = r["delay_us"]
    return {"Min (µs)": _delay(d["min"]), "Median (µs)": _delay(d["p50"]), "Mean (µs)": _delay(d["mean"]),
            "Mean CI (µs)": f"{_delay(d['mean_ci'][0])} – {_delay(d['mean_ci'][1])}",
            "p99 (µs)": _delay(d["p99"]), "p99.9 (µs)": _delay(d["p999"]), "Max (µs)": _delay(d["max"]),
            "Spread (µs)": _delay(d["spread"]), "Resolution (ns)": "20",
            "Stimuli": f"{r['stimuli']:,}".replace(",", " "),
            "Missed": f"{r['missed']} ({_pct(r['miss_fraction'])})"}


def test_page_opens_with_the_findings(campaign) -> None:
    _, report, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    # The answer first: the section with its findings, then its plots, then the warnings.
    assert _parse(html).sections == ["gpio", "gpio-plots", "warnings"]
    nav = html[html.index("<nav>"):html.index("</nav>")]
    assert nav.index('href="#gpio"') < nav.index('href="#gpio-plots"')
    for heading in ("Findings", "Runs", "Figures", "Interruptions"):  # no empty module-run sections
        assert f"<h2>{heading}</h2>" not in html
    text = html_lib.unescape(html)
    body = text[text.index("</header>"):]
    findings = [f["text"] for f in report["gpio"]["findings"]]
    positions = [body.index(f">{f}</li>") for f in findings]
    assert positions == sorted(positions) and positions[-1] < body.index("<table")
    assert '<ul class="findings">' in body[:positions[0]]
    assert "gpio.csv holds one row per run" in text


def test_runs_table(campaign) -> None:
    _, report, out, _ = campaign
    page = _parse((out / "report.html").read_text(encoding="utf-8"))
    header, *rows = page.tables[0]
    col = {c["text"]: i for i, c in enumerate(header)}
    assert list(col)[:7] == ["Run", "Case", "Load", "Governor", "Responder", "Status", "Stimuli"]
    assert "Target" not in col  # no run names one
    runs = report["gpio"]["runs"]
    assert [r[0]["text"] for r in rows] == [r["id"] for r in runs]
    for row, run in zip(rows, runs, strict=True):
        for name, expected in _run_cells(run).items():
            assert row[col[name]]["text"] == expected, (run["id"], name)
        assert row[col["Case"]]["text"] == run["case"] and row[col["Governor"]]["text"] == run["governor"]
        # p99 of 2 000 answers has 20 above it; p99.9 has 2: marked as a lower bound
        assert "weak" not in row[col["p99 (µs)"]]["class"] and "weak" in row[col["p99.9 (µs)"]]["class"]
    kernel, sysfs, _, loaded_sysfs = rows
    assert kernel[col["Responder"]]["text"] == "kernel, echo, threaded"
    assert sysfs[col["Responder"]]["text"] == "sysfs, toggle, SCHED_FIFO 50"
    # The kernel's few µs to the ns, sysfs's hundreds with two decimals, a late wake-up with one.
    assert re.fullmatch(r"5\.\d{3}", kernel[col["Min (µs)"]]["text"])
    assert re.fullmatch(r"\d{3}\.\d{2}", sysfs[col["Median (µs)"]]["text"])
    assert re.fullmatch(r"\d{4}\.\d", sysfs[col["Max (µs)"]]["text"])
    assert sysfs[col["Missed"]]["text"] == "2 (0.1%)" and "flag-problem" not in sysfs[col["Missed"]]["class"]
    assert "3 censored" in sysfs[col["Missed"]]["title"]
    assert loaded_sysfs[col["Missed"]]["text"] == "50 (2.5%)" and "flag-problem" in loaded_sysfs[col["Missed"]]["class"]


def test_outliers_and_comparisons(campaign) -> None:
    _, report, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    page = _parse(html)
    header, *rows = page.tables[1]
    assert [c["text"] for c in header] == [
        "Run", "Case · load", "Threshold (µs)", "Outliers", "Observed", "Excess max (µs)", "Period (µs)", "Share",
        "Collision window (µs)", "Expected", "Explanation"]
    runs = report["gpio"]["runs"]
    assert [r[0]["text"] for r in rows] == [r["id"] for r in runs]
    for row, run in zip(rows, runs, strict=True):
        o = run["outliers"]
        cells = [c["text"] for c in row]
        assert cells[1] == f"{run['case']} · {run['load']}"
        assert cells[2:6] == [_delay(o["threshold_us"]), str(o["count"]), _pct(o["fraction"]),
                              _delay(o["excess_max_us"])]
        assert cells[6:10] == [_delay(o["period_us"]), _pct(o["period_share"]), _delay(o["window_us"]),
                               _pct(o["expected_fraction"])]
        assert cells[10] == o["explanation"]
        assert ("flag-suspect" in row[6]["class"]) == (o["period_us"] is not None)
    assert rows[0][6]["text"] == "125.00" and rows[0][7]["text"] == "93%"
    assert rows[1][6]["text"] == DASH
    header, *rows = page.tables[2]
    assert [c["text"] for c in header] == ["A", "B", "Differs in", "Runs", "Mean A (µs)", "Mean B (µs)", "Ratio",
                                           "p (runs)", "Significant", "p (events)"]
    for row, c in zip(rows, report["gpio"]["comparisons"], strict=True):
        assert [x["text"] for x in row[:2]] == [c["a"], c["b"]]
        assert row[3]["text"] == f"{len(c['runs_a'])} / {len(c['runs_b'])}"
        assert row[4]["text"] == _delay(c["mean_a_us"]) and row[5]["text"] == _delay(c["mean_b_us"])
        assert row[6]["text"] == f"{c['ratio']:.3g}×"
        assert row[8]["text"] == ("not tested" if c["significant"] is None else "yes" if c["significant"] else "no")
        assert row[9]["text"] == "1.0e-12"
    assert [r[2]["text"] for r in rows] == ["case", "case", "load", "load"]
    # the Holm-adjusted p of the runs' test; a pair of single runs has none
    assert [r[7]["text"] for r in rows] == ["< 1e-300", DASH, "0.0842", "5.0e-09"]
    assert [r[8]["text"] for r in rows] == ["yes", "not tested", "no", "yes"]


def test_markdown(campaign) -> None:
    _, report, out, _ = campaign
    md = (out / "report.md").read_text(encoding="utf-8")
    lines = md.splitlines()
    headings = [ln for ln in lines if ln.startswith("## ")]
    assert headings == ["## GPIO response", "## GPIO response plots"]
    first_table = next(i for i, ln in enumerate(lines) if ln.startswith("| "))
    findings = [f"- {f['text']}" for f in report["gpio"]["findings"]]
    assert [lines.index(f) for f in findings] == sorted(lines.index(f) for f in findings)
    assert lines.index("## GPIO response") < lines.index(findings[0]) < lines.index(findings[-1]) < first_table
    assert lines.index("## GPIO response plots") < lines.index("> **Warnings**")
    for run in report["gpio"]["runs"]:
        row = next(ln for ln in lines if ln.startswith(f"| {run['id']} |"))
        for expected in _run_cells(run).values():
            # plain, weak (italics and †) or flagged (bold)
            assert any(f" {form} " in row for form in (expected, f"*{expected}*†", f"**{expected}**")), \
                (run["id"], expected)
    assert "| *" + _delay(report["gpio"]["runs"][0]["delay_us"]["p999"]) + "*† |" in md
    for name, title in (("gpio-hist-idle", "Response delay, load idle"),
                        ("gpio-hist-stress", "Response delay, load stress")):
        assert f"![{title}](figures/{name}.svg)" in lines
    assert "![Response delay per run: median, tail and worst case](figures/gpio-distributions.svg)" in lines


def test_figures(campaign) -> None:
    _, report, out, paths = campaign
    names = ["gpio-hist-idle", "gpio-hist-stress", "gpio-distributions"]
    assert sorted(k for k in paths if k.startswith("figures/")) == sorted(f"figures/{n}.svg" for n in names)
    for name in names:
        svg = (out / "figures" / f"{name}.svg").read_text(encoding="utf-8")
        root = ET.fromstring(svg)  # well-formed SVG
        assert root.tag == f"{SVG}svg"
        ids = {g.get("id") for g in root.iter(f"{SVG}g")}
        if name.startswith("gpio-hist"):
            # a step curve per case of that load, on a log count axis, decades apart: log delay axis too
            assert {f"{name}-curve-0", f"{name}-curve-1"} <= ids and f"{name}-curve-2" not in ids
            assert "kernel  (n=2 000" in svg and "sysfs  (n=" in svg
        else:
            assert {f"{name}-row-{i}" for i in range(4)} <= ids and {f"{name}-row-{i}-max" for i in range(4)} <= ids
            assert "kernel · idle" in svg and "sysfs · stress" in svg
    html = html_lib.unescape((out / "report.html").read_text(encoding="utf-8"))
    assert html.count("<svg") == 3
    plots = html[html.index('<section id="gpio-plots">'):html.index('id="warnings"')]
    for name in names:
        assert f'id="fig-{name}"' in plots


def test_csv_and_json(campaign) -> None:
    pristine, report, out, paths = campaign
    assert report == pristine
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["gpio"] == pristine["gpio"]
    assert paths["gpio.csv"] == out / "gpio.csv"
    with (out / "gpio.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == CSV_COLUMNS
        rows = list(reader)
    runs = report["gpio"]["runs"]
    assert [r["run_id"] for r in rows] == [r["id"] for r in runs]
    for row, run in zip(rows, runs, strict=True):
        d, o = run["delay_us"], run["outliers"]
        assert (row["case"], row["load"], row["responder"], row["mode"], row["governor"]) == (
            run["case"], run["load"], run["responder"], run["mode"], run["governor"])
        assert row["threaded"] == ("true" if run["threaded"] else "false") and row["target"] == ""
        assert [int(row[k]) for k in ("stimuli", "answered", "missed", "censored", "priority")] == [
            run[k] for k in ("stimuli", "answered", "missed", "censored", "priority")]
        assert float(row["miss_fraction"]) == run["miss_fraction"] and float(row["resolution_ns"]) == 20.0
        for key in ("min", "p50", "mean", "std", "p99", "p999", "max", "spread"):
            assert float(row[f"{key}_us"]) == d[key]  # full precision, not the page's digits
        assert [float(row["mean_ci_lo_us"]), float(row["mean_ci_hi_us"])] == d["mean_ci"]
        assert float(row["outlier_threshold_us"]) == o["threshold_us"] and int(row["outlier_count"]) == o["count"]
        assert float(row["outlier_fraction"]) == o["fraction"] and row["outlier_explanation"] == o["explanation"]
        if o["period_us"] is None:
            assert row["outlier_period_us"] == row["outlier_window_us"] == row["outlier_expected_fraction"] == ""
        else:
            assert float(row["outlier_period_us"]) == o["period_us"]
            assert float(row["outlier_window_us"]) == o["window_us"]
            assert float(row["outlier_period_share"]) == o["period_share"]
    with (out / "stats.csv").open(newline="") as f:
        assert list(csv.DictReader(f)) == []  # no module runs


def test_runs_that_answered_nothing(tmp_path: Path) -> None:
    report = build_failed_report()
    paths = write_reports(report, {}, tmp_path)
    html = paths["report.html"].read_text(encoding="utf-8")
    text = html_lib.unescape(html)
    page = _parse(html)
    header, *rows = page.tables[0]
    col = {c["text"]: i for i, c in enumerate(header)}
    assert [r[0]["text"] for r in rows] == ["kernel-idle-r0", "sysfs-idle-r0", "sysfs-stress-r0"]
    ok, silent, unreadable = rows
    assert ok[0]["marks"] == "" and "flag-problem" not in ok[0]["class"]
    assert silent[0]["marks"] == "[1]" and unreadable[0]["marks"] == "[2]"
    assert silent[col["Missed"]]["text"] == "500 (100%)" and "flag-problem" in silent[col["Missed"]]["class"]
    assert [c["text"] for c in silent[col["Min (µs)"]:]] == [DASH] * 8 + ["20"]
    assert [c["text"] for c in unreadable[col["Stimuli"]:]] == [DASH] * 11
    assert "status-failed" in unreadable[col["Status"]]["class"]
    assert ("[1] sysfs-idle-r0: run incomplete: no response to any of 500 stimuli: check the responder; "
            "no stimulus was answered, so no delay was measured.") in text
    assert "[2] sysfs-stress-r0: run failed: the responder exited with status 1" in text
    # Outliers only for the run with delays; no comparisons, no findings box.
    assert [r[0]["text"] for r in page.tables[1][1:]] == ["kernel-idle-r0"] and len(page.tables) == 2
    assert '<ul class="findings">' not in html
    # A figure for the load something answered under, none for the other.
    assert sorted(k for k in paths if k.startswith("figures/")) == ["figures/gpio-distributions.svg",
                                                                    "figures/gpio-hist-idle.svg"]
    svg = paths["figures/gpio-hist-idle.svg"].read_text(encoding="utf-8")
    assert "kernel  (n=500" in svg and "sysfs" not in svg
    with paths["gpio.csv"].open(newline="") as f:
        rows_csv = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows_csv] == ["kernel-idle-r0", "sysfs-idle-r0", "sysfs-stress-r0"]
    silent_row, unreadable_row = rows_csv[1:]
    assert silent_row["stimuli"] == "500" and silent_row["answered"] == "0" and silent_row["miss_fraction"] == "1.0"
    assert all(silent_row[k] == "" for k in CSV_COLUMNS if k.endswith("_us") or k.startswith("outlier_"))
    assert unreadable_row["status"] == "failed" and unreadable_row["stimuli"] == ""
    md = paths["report.md"].read_text(encoding="utf-8")
    assert "| **sysfs-stress-r0 [2]** |" in md  # flagged (bold), with its footnote's mark


def test_nothing_answered_at_all(tmp_path: Path) -> None:
    """Only runs without delays, an empty section's lists, no notes: renders, no figures."""
    report = build_failed_report()
    report["gpio"]["runs"] = report["gpio"]["runs"][1:]
    report["notes"] = []
    paths = write_reports(report, {}, tmp_path)
    assert not any(k.startswith("figures/") for k in paths)
    assert paths["gpio.csv"].read_text().count("\n") == 3  # header and two rows
    html = paths["report.html"].read_text(encoding="utf-8")
    assert _parse(html).sections == ["gpio"] and "#gpio-plots" not in html
    assert "## GPIO response plots" not in paths["report.md"].read_text(encoding="utf-8")


def test_load_names_are_made_file_safe(tmp_path: Path) -> None:
    report = build_report()
    for run, load in zip(report["gpio"]["runs"], ["io load", "io load", "io/load", "io/load"], strict=True):
        run["load"] = load
    paths = write_reports(report, {}, tmp_path)
    assert {"figures/gpio-hist-io-load.svg", "figures/gpio-hist-io-load-2.svg"} <= set(paths)
    assert "Response delay, load io/load" in paths["report.html"].read_text(encoding="utf-8")


def test_alongside_module_runs(tmp_path: Path) -> None:
    """Module runs and the section in one report: the module runs lead, the section follows them."""
    report, samples = synthetic.build(n=2000)
    report["gpio"] = build_report()["gpio"]
    paths = write_reports(report, samples, tmp_path)
    html = paths["report.html"].read_text(encoding="utf-8")
    sections = _parse(html).sections
    assert sections.index("warnings") < sections.index("runs") < sections.index("gpio") \
        < sections.index("gpio-plots") < sections.index("figures")
    assert "gpio-" not in html[html.index('<section id="figures">'):]
    md = paths["report.md"].read_text(encoding="utf-8")
    assert md.index("## Runs") < md.index("## GPIO response\n") < md.index("## GPIO response plots") \
        < md.index("## Figures")
    assert "gpio-" not in md[md.index("## Figures"):]
    assert "gpio.csv" in paths and "stats.csv" in paths


def test_section_visible_in_browser_without_console_errors(chromium: str, campaign, tmp_path: Path) -> None:
    _, report, out, _ = campaign
    screen = browser.Screenful(chromium, out / "report.html", tmp_path)
    dom, shown = screen.dom, screen.shown
    assert not screen.console
    # the findings box and the flagged cells (a period found, a run missing 2.5%) near the top
    assert shown("ul.findings") and shown("td.flag-suspect") and shown("td.flag-problem")
    assert '<section id="gpio">' in dom
    for finding in report["gpio"]["findings"]:
        assert html_lib.escape(finding["text"], quote=False) in dom
    for run in report["gpio"]["runs"]:
        assert run["id"] in dom
    assert dom.count("<svg") == 3 and dom.count("<path") > 30


def test_the_page_fits_1280_px(chromium: str, campaign, tmp_path: Path) -> None:
    """No table wider than the page's column (the columns that matter hidden off to the right) and
    no figure text clipped, as headless Chromium lays the page out at 1280 px."""
    out = campaign[2]
    assert browser.layout_problems(chromium, out / "report.html", tmp_path) == {"tables": [], "labels": []}
