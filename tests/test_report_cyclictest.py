"""The cyclictest report (seed 004) on a synthetic campaign with the seed's maximum latencies:
what a reader relies on — the table the page opens with, its flags, the plots, the exports."""

from __future__ import annotations

import copy
import csv
import html as html_lib
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import report_synthetic as synthetic
import test_report_browser as browser
from PIL import Image

from station.common.formatting import count_text
from station.kinds.cyclictest.tables import EMULATED_BADGE, EMULATED_NOTE
from station.report import write_reports

# The browser test's fixture (Chromium's path; skipped without it locally, failed under CI).
chromium = browser.chromium
DASH = "—"


class _Tables(HTMLParser):
    """Every <table> of a page: rows of cells {text, class, title, marks, badges}, in order,
    and the order of the section ids."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[dict]]] = []
        self.sections: list[str] = []
        self.cell: dict | None = None
        self.span: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("id") or "")
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = {"tag": tag, "text": "", "class": (a.get("class") or "").split(),
                         "title": a.get("title"), "marks": "", "badges": []}
        elif tag in ("sup", "span") and self.cell is not None:
            self.span = "marks" if tag == "sup" else "badges"
            if tag == "span":
                self.cell["badges"].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(self.cell)
            self.cell = None
        elif tag in ("sup", "span"):
            self.span = None

    def handle_data(self, data: str) -> None:
        if self.cell is None:
            return
        if self.span == "marks":
            self.cell["marks"] += data
        elif self.span == "badges":
            self.cell["badges"][-1] += data
        else:
            self.cell["text"] += data


def _parse(html: str) -> _Tables:
    parser = _Tables()
    parser.feed(html)
    return parser


def _expected_cell(target: str, case: str) -> str:
    value = synthetic.CT_SEED_MAX_US[target][synthetic.CT_CASES.index(case)]
    return DASH if (target, case) == synthetic.CT_FAILED else str(value)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory):
    report, samples = synthetic.build_cyclictest()
    pristine = copy.deepcopy(report)
    out = tmp_path_factory.mktemp("cyclictest")
    paths = write_reports(report, samples, out)
    return pristine, report, samples, out, paths


def test_page_opens_with_the_max_latency_table(campaign) -> None:
    _, _, _, out, _ = campaign
    page = _parse((out / "report.html").read_text(encoding="utf-8"))
    assert page.sections[0] == "max-latency"
    header, *rows = page.tables[0]
    assert [c["text"] for c in header] == ["Target", *synthetic.CT_CASES]
    assert [r[0]["text"].strip() for r in rows] == list(synthetic.CT_TARGETS)
    for row, target in zip(rows, synthetic.CT_TARGETS, strict=True):
        assert row[0]["tag"] == "th"
        kernel = "PREEMPT_RT" if target == "rt" else "regular"
        assert row[0]["badges"] == [kernel, EMULATED_BADGE[1]]
        values = [c["text"].strip() for c in row[1:]]
        assert values == [_expected_cell(target, case) for case in synthetic.CT_CASES]


def test_problem_and_deadline_cells_are_flagged(campaign) -> None:
    _, report, _, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    _, *rows = _parse(html).tables[0]
    deadline = report["cyclictest"]["deadline_us"]
    footnotes = []
    for row, target in zip(rows, synthetic.CT_TARGETS, strict=True):
        for cell, case in zip(row[1:], synthetic.CT_CASES, strict=True):
            problem = synthetic.CT_PROBLEMS.get(target, {}).get(case)
            value = report["cyclictest"]["table"]["max_latency_us"][target][case]
            assert ("flag-problem" in cell["class"]) == bool(problem), (target, case)
            over = value is not None and value > deadline
            assert ("flag-over-deadline" in cell["class"]) == over, (target, case)
            assert ("▲" in cell["marks"]) == over
            if problem:
                mark = re.search(r"\[(\d+)\]", cell["marks"]).group(1)
                footnotes.append(f"[{mark}] {target} · {case}: {problem}")
                assert problem in cell["title"]
    assert len(footnotes) == 2  # the failed cell (no value) and the one with an incomplete run
    text = html_lib.unescape(html)
    for note in footnotes:
        assert note in text
    assert EMULATED_NOTE in text and "above the deadline of 125 µs (7 of 10 cells)" in html


def test_markdown_table_comes_first_and_matches(campaign) -> None:
    _, _, _, out, _ = campaign
    md = (out / "report.md").read_text(encoding="utf-8")
    lines = md.splitlines()
    start = lines.index("| Target | " + " | ".join(synthetic.CT_CASES) + " |")
    assert start < lines.index("> **Warnings**")
    assert not any(ln.startswith("| ") for ln in lines[:start])  # no table before it
    for line, target in zip(lines[start + 2:start + 4], synthetic.CT_TARGETS, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0].startswith(f"{target} `")
        assert f"`{EMULATED_BADGE[1]}`" in cells[0]
        # bold and marks on flagged cells; the value is the first word
        values = [c.strip("*").split()[0] for c in cells[1:]]
        assert values == [_expected_cell(target, case) for case in synthetic.CT_CASES]
    assert "[1] regular · hackbench: failed: cyclictest exited with status 1" in md


def test_json_round_trips_and_report_is_untouched(campaign) -> None:
    pristine, report, _, out, _ = campaign
    assert report == pristine
    loaded = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert loaded["cyclictest"] == pristine["cyclictest"]


def test_cyclictest_csv(campaign) -> None:
    _, report, _, out, paths = campaign
    assert paths["cyclictest.csv"] == out / "cyclictest.csv"
    with (out / "cyclictest.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    expected = [(r["id"], str(t["thread"])) for r in report["cyclictest"]["runs"]
                for t in [*r["threads"], *([{"thread": "all"}] if r["combined"] else [])]]
    assert [(row["run_id"], row["thread"]) for row in rows] == expected
    by_key = {(row["run_id"], row["thread"]): row for row in rows}
    # The seed's worst regular cell: 7937 µs, beyond the 6000 µs histogram.
    row = by_key[("regular-stress-hard-r0", "1")]
    assert row["max_us"] == "7937" and row["overflows"] == "1"
    assert row["p99.999_ns"] == "" and row["beyond_range_percentiles"] == "p99.999"
    assert row["unreliable_percentiles"] == "p99.99"  # 20 000 samples
    with (out / "stats.csv").open(newline="") as f:
        assert list(csv.DictReader(f)) == []  # no module runs


def test_one_plot_per_target_and_case_with_a_curve_per_thread(campaign) -> None:
    _, report, samples, out, paths = campaign
    cells = [(t, c) for t in synthetic.CT_TARGETS for c in synthetic.CT_CASES
             if (t, c) != synthetic.CT_FAILED]
    names = [f"cyclictest-{t}-{c}" for t, c in cells]
    assert sorted(k for k in paths if k.startswith("figures/")) == sorted(
        f"figures/{n}.svg" for n in names)
    for (target, case), name in zip(cells, names, strict=True):
        svg = (out / "figures" / f"{name}.svg").read_text(encoding="utf-8")
        root = ET.fromstring(svg)  # well-formed XML, an <svg> document
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        ids = [g.get("id") for g in root.iter("{http://www.w3.org/2000/svg}g")]
        assert sum(bool(re.fullmatch(rf"{name}-curve-\d+", i or "")) for i in ids) == 2
        # each thread's max: a line inside the range, or a marker at its edge when beyond it
        lines = {int(i.rsplit("-", 1)[1]) for i in ids if re.fullmatch(rf"{name}-max-\d+", i or "")}
        edges = {int(i.rsplit("-", 1)[1]) for i in ids if re.fullmatch(rf"{name}-overflow-\d+", i or "")}
        assert lines.isdisjoint(edges) and lines | edges == {0, 1}
        # the plot's maxima are the tables': every thread's legend gives its complete runs' max
        runs = [r for r in report["cyclictest"]["runs"] if (r["target"], r["load"]) == (target, case)]
        used = [r for r in runs if r["status"] == "complete"] or runs
        for i, thread in enumerate(sorted({t["thread"] for r in used for t in r["threads"]})):
            rows = [t for r in used for t in r["threads"] if t["thread"] == thread]
            worst = max(t["max_us"] for t in rows)
            overflows = sum(t["overflows"] or 0 for t in rows)
            assert re.search(rf"\(n=[^,]*, max {worst:g} µs", svg), (name, thread, worst)
            assert (i in edges) == (overflows > 0 and worst > max(
                int(b) for r in used for h in [samples[r["id"]].histograms[i]] for b in h.bucket_us[-1:]))
        assert f"{target}: {case}" in svg
    # Repetitions pooled per thread, the incomplete one left out: rt stress-hard draws r0 only,
    # and its max line is the table's 176 µs, not the incomplete run's 250.
    svg = (out / "figures" / "cyclictest-rt-stress-hard.svg").read_text(encoding="utf-8")
    thread1 = samples["rt-stress-hard-r0"].histograms[1]
    # counts grouped as everywhere in the report: 20 000
    assert f"thread 1 (CPU 1)  (n={count_text(int(thread1.counts.sum()))}, max 176 µs)" in svg
    svg = (out / "figures" / "cyclictest-rt-no-load.svg").read_text(encoding="utf-8")
    pooled = sum(int(samples[f"rt-no-load-r{k}"].histograms[0].counts.sum()) for k in (0, 1))
    assert f"thread 0 (CPU 0)  (n={count_text(pooled)}," in svg


def test_html_puts_plots_under_the_table_then_threads(campaign) -> None:
    _, report, _, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    page = _parse(html)
    assert page.sections == ["max-latency", "warnings", "latency-plots", "threads"]
    # No empty module-run sections, no links to them.
    for heading in ("Findings", "Runs", "Figures"):
        assert f"<h2>{heading}</h2>" not in html and f'href="#{heading.lower()}"' not in html
    md = (out / "report.md").read_text(encoding="utf-8")
    assert not re.search(r"^## (Findings|Runs|Figures)$", md, re.M)
    assert html.count("<svg") == 9
    # Each figure's curves keep page-unique ids, so nine inlined plots stay addressable.
    curves = re.findall(r'\sid="(cyclictest-[^"]+-(?:curve|max|overflow)-\d+)"', html)
    assert len(curves) == 9 * 4 and len(set(curves)) == len(curves)


def test_thread_tables(campaign) -> None:
    _, report, _, out, _ = campaign
    page = _parse((out / "report.html").read_text(encoding="utf-8"))
    # max latency, targets, then one per-thread table per target
    header, *rows = page.tables[3]
    names = [c["text"] for c in header]
    assert names[:10] == ["Run", "Case", "Rep.", "Status", "Thread", "CPU", "Cycles", "Min",
                          "Avg", "Max"]
    col = {n: i for i, n in enumerate(names)}
    row = next(r for r in rows if r[0]["text"] == "rt-stress-hard-r1" and r[4]["text"] == "0")
    thread = report["cyclictest"]["runs"][-1]["threads"][0]
    assert row[col["Max"]]["text"] == str(thread["max_us"])
    assert row[col["Avg"]]["text"] == f"{thread['avg_us']:.2f}"
    assert row[col["p50"]]["text"] == str(int(thread["stats"]["percentiles_ns"]["p50"] / 1000))
    assert "status-incomplete" in row[col["Status"]]["class"]
    # p99.999 of 20 000 samples is shown but marked; p50 is not
    assert "weak" in row[col["p99.999"]]["class"] and "weak" not in row[col["p50"]]["class"]
    header, *rows = page.tables[2]
    regular = {(r[0]["text"], r[4]["text"]): r for r in rows}
    hard = regular[("regular-stress-hard-r0", "1")]
    assert hard[col["p99.999"]]["text"] == "> range" and hard[col["Max"]]["text"] == "7937"
    assert regular[("regular-stress-hard-r0", "all")][col["Max"]]["text"] == "7937"
    failed = regular[("regular-hackbench-r0", DASH)]
    assert "status-failed" in failed[col["Status"]]["class"]


def test_alongside_module_runs(tmp_path: Path) -> None:
    """Module runs and a cyclictest section in one report: the table still comes first."""
    report, samples = synthetic.build(n=2000)
    ct_report, ct_samples = synthetic.build_cyclictest(n=500)
    report["cyclictest"] = ct_report["cyclictest"]
    paths = write_reports(report, {**samples, **ct_samples}, tmp_path)
    page = _parse(paths["report.html"].read_text(encoding="utf-8"))
    assert page.sections[:3] == ["max-latency", "warnings", "latency-plots"]
    assert {"comparisons", "runs", "figures"} <= set(page.sections)
    assert [c["text"] for c in page.tables[0][0]] == ["Target", *synthetic.CT_CASES]
    md = paths["report.md"].read_text(encoding="utf-8")
    assert md.index("## cyclictest: maximum latency") < md.index("## Comparisons")
    assert md.index("](figures/cyclictest-rt-no-load.svg)") < md.index("## Figures")


def test_table_visible_in_browser_without_console_errors(chromium: str, campaign,
                                                          tmp_path: Path) -> None:
    _, _, _, out, _ = campaign
    html = (out / "report.html").read_text(encoding="utf-8")
    png = tmp_path / "top.png"
    proc = browser._run(chromium, tmp_path, "--enable-logging=stderr", "--v=0",
                        f"--screenshot={png}", "--window-size=1280,900",
                        (out / "report.html").as_uri())
    assert png.exists(), proc.stderr[-2000:]
    # Anything the page logs (an SVG attribute the parser rejects, say) is an error:
    # the page has no script of its own.
    assert not [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    image = np.asarray(Image.open(png).convert("RGB")).astype(int)

    def shown(css_class: str) -> bool:
        # The colour the page's own CSS gives these cells, found in the first screenful.
        colour = re.search(rf"\.{css_class} \{{ background: #([0-9a-f]{{6}})", html).group(1)
        rgb = np.array([int(colour[i:i + 2], 16) for i in (0, 2, 4)])
        return int((np.abs(image - rgb).max(axis=2) <= 2).sum()) > 200

    assert shown("flag-over-deadline") and shown("flag-problem") and shown("badge-rt")


def test_sparse_section_renders(tmp_path: Path) -> None:
    """Only what a first analysis might give: no targets, problems, deadline or samples."""
    report = {"schema_version": 2, "campaign": {"name": "sparse", "description": ""}, "runs": [],
              "notes": [], "findings": [],
              "cyclictest": {"table": {"targets": ["rt"], "cases": ["no-load", "hackbench"],
                                       "max_latency_us": {"rt": {"no-load": 42.0}}},
                             "runs": [{"id": "rt-hackbench-r0", "target": "rt",
                                       "load": "hackbench", "repetition": 0, "status": "failed",
                                       "error": "no cyclictest on the target"}]}}
    paths = write_reports(report, {}, tmp_path)
    _, row = _parse(paths["report.html"].read_text(encoding="utf-8")).tables[0]
    assert [c["text"] for c in row] == ["rt", "42", DASH] and row[0]["badges"] == []
    assert not any(k.startswith("figures/") for k in paths)
    assert "no cyclictest on the target" in paths["report.md"].read_text(encoding="utf-8")


def test_overflows_without_a_known_maximum_are_never_drawn_as_one() -> None:
    """A thread whose cycles overflowed but whose maximum cyclictest did not print: the largest
    in-range bucket is not its maximum, so no max line there; the edge marker says it is beyond."""
    from station.kinds.cyclictest.figures import Curve, latency_plot_svg

    svg = latency_plot_svg({"thread 0": Curve(np.array([5, 6, 7]), np.array([10, 5, 1]), None, 3)}, "t", "x")
    assert "max beyond the range" in svg and 'id="x-overflow-0"' in svg and 'id="x-max-0"' not in svg
    assert "max 7 µs" not in svg


def test_a_thread_whose_every_cycle_overflowed_still_has_its_legend_and_marker() -> None:
    """Every cycle beyond the range: no bucket to draw, but the figure must not pretend the thread
    is absent (it was the worst one); beside a thread in range, and alone."""
    from station.common.formatting import count_text
    from station.kinds.cyclictest.figures import Curve, latency_plot_svg

    empty = np.array([], dtype=np.int64)
    both = latency_plot_svg({"thread 0": Curve(np.array([5, 6]), np.array([10, 5]), 6.0, 0),
                             "thread 1": Curve(empty, empty, 7045.0, 2000)}, "t", "x")
    assert 'id="x-overflow-1"' in both and "max 7045 µs" in both and f"{count_text(2000)} beyond the range" in both
    assert 'id="x-max-0"' in both and 'id="x-max-1"' not in both
    alone = latency_plot_svg({"thread 1": Curve(empty, empty, None, 12)}, "t", "y")
    assert 'id="y-overflow-0"' in alone and "max beyond the range" in alone and "no samples" not in alone


def test_findings_lead_with_each_targets_largest_latency_and_the_maxima_figure(tmp_path: Path) -> None:
    """Issue 30's first page for cyclictest: a finding per target (its largest latency of any case,
    the figure bold, its kernel and that it is emulated said), the deadline's count, then the maxima
    figure, before the maximum-latency table; the figure's values are the table's."""
    from station.kinds.cyclictest import analysis as cyclictest

    report, samples = synthetic.build_cyclictest()
    section = report["cyclictest"]
    section["deadline_view"] = [  # two cells: one reached the deadline
        {"target": "rt", "load": "no-load", "deadline_us": 125, "cycles": 1000, "above": 0, "overflows": 0,
         "p_exceed": 0.0, "ci_low": 0.0, "ci_high": 0.0037},
        {"target": "regular", "load": "stress-hard", "deadline_us": 125, "cycles": 1000, "above": 40,
         "overflows": 0, "p_exceed": 0.04, "ci_low": 0.029, "ci_high": 0.054}]
    section["findings"] = cyclictest.findings(section)
    report["findings"] = list(section["findings"])
    for f, target in zip(section["findings"], synthetic.CT_TARGETS, strict=False):
        cells = {c: int(v) for c in synthetic.CT_CASES if (v := _expected_cell(target, c)) != DASH}
        case = max(cells, key=cells.get)
        assert (f["target"], f["load"], f["max_us"]) == (target, case, cells[case])
        assert f["figure"] == f"{cells[case]:g} µs under {case}"
        assert ("PREEMPT_RT" if target == "rt" else "regular kernel") in f["headline"]
        assert "emulated" in f["headline"] and "one draw" in f["text"]
    deadline = section["findings"][-1]
    assert deadline["kind"] == "cyclictest_deadline" and deadline["figure"] == "1 of 2 target × case cells"
    assert "regular under stress-hard: 40 of 1000 cycles" in deadline["text"]

    out = tmp_path / "out"
    paths = write_reports(report, samples, out)
    html = (out / "report.html").read_text(encoding="utf-8")
    page = _parse(html)
    assert page.sections[:2] == ["findings", "max-latency"]
    findings_html = html[html.index('<section id="findings">'):html.index('<section id="max-latency">')]
    assert 'id="fig-cyclictest-maxima"' in findings_html and html.count('id="fig-cyclictest-maxima"') == 1
    from station.common.formatting import readable

    for f in report["findings"]:  # counts grouped on the page, as everywhere: 7 937
        assert f"<strong>{html_lib.escape(readable(f['figure']), quote=False)}</strong>" in findings_html
    svg = (out / "figures" / "cyclictest-maxima.svg").read_text(encoding="utf-8")
    assert "figures/cyclictest-maxima.svg" in paths
    for target in synthetic.CT_TARGETS:
        for case in synthetic.CT_CASES:
            if (value := _expected_cell(target, case)) != DASH:
                assert f">{value}<" in svg or f"<!-- {value} -->" in svg, (target, case, value)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.index("## Findings") < md.index("figures/cyclictest-maxima.svg") < md.index("## cyclictest: maximum")
