"""The report page is a list of kind-neutral sections (station/report/page.py): a kind brings its
part, a section builder, and neither renderer changes; the renderers name no kind."""

from __future__ import annotations

import ast
import html as html_lib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import report_synthetic as synthetic

from station import kind_registry
from station.report import write_reports
from station.report.figures import RenderedFigure
from station.report.page import KindPage, Section, Sentence, Sentences, Verdict, page_sections
from station.report.tables import Cell, Table

REPORT = Path(__file__).resolve().parents[1] / "station" / "report"
RENDERERS = ("markdown.py", "html.py", "templates/report.html.j2")

MADE_UP = {"verdict": "The made-up probe counted every tick.", "counts": {"tick": 3, "tock": 0},
           "findings": ["Ticks outnumber tocks."]}


def made_up_sections(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
    """A throw-away kind's part: its answer (a paragraph and a table) and a detail section."""
    section = report.get("made_up")
    if not section:
        return []
    table = Table("made-up-counts", "Made-up counts", ["Probe", "Count"],
                  [[Cell(k), Cell(str(v), numeric=True)] for k, v in section["counts"].items()],
                  ["Counted by the made-up probe."])
    return [Section("made-up", "Made-up probe", [Verdict(section["verdict"], "Conclusion"), table], "summary",
                    "Made-up probe", "The made-up probe counts in whole ticks."),
            Section("made-up-detail", "Made-up probe, in detail",
                    [Sentences([Sentence(s, "made-up") for s in section["findings"]])], "detail", "Made-up detail")]


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def _nav(html: str) -> list[str]:
    nav = html[html.index("<nav>"):html.index("</nav>")]
    return re.findall(r'href="#([^"]+)"', nav)


def _headings(html: str, md: str) -> tuple[list[str], list[str]]:
    """The page's second-level headings in both formats."""
    return ([html_lib.unescape(h) for h in re.findall(r"<h2>(.*?)</h2>", html)],
            re.findall(r"^## (.*)$", md, re.M))


@pytest.fixture(autouse=True)
def _made_up_kind():
    """The throw-away kind registered with its report part only, for this module's tests."""
    kind_registry.register(kind_registry.Kind(name="made_up", summary="a made-up probe",
                                              report=KindPage(made_up_sections)))
    yield
    kind_registry.unregister("made_up")


def _render(report: dict[str, Any], samples: dict, out: Path) -> tuple[str, str]:
    paths = write_reports(report, samples, out)
    return paths["report.html"].read_text(encoding="utf-8"), paths["report.md"].read_text(encoding="utf-8")


def _shows_the_made_up_part(html: str, md: str) -> None:
    text = html_lib.unescape(html)
    made_up = text[text.index('<section id="made-up">'):text.index("</section>", text.index('id="made-up"'))]
    assert f'<p class="verdict"><b>Conclusion:</b> {MADE_UP["verdict"]}</p>' in made_up
    assert '<h3 id="table-made-up-counts">Made-up counts</h3>' in made_up and ">tock</td>" in made_up
    assert '<li class="finding-made-up">Ticks outnumber tocks.</li>' in text
    assert "The made-up probe counts in whole ticks." in text[text.index("<footer>"):]
    assert f"> **Conclusion:** {MADE_UP['verdict']}" in md
    assert "### Made-up counts" in md and "| tick | 3 |" in md and "- Ticks outnumber tocks." in md
    html_headings, md_headings = _headings(html, md)
    assert html_headings == md_headings  # one list of sections, rendered twice


def test_a_new_kind_alone_leads_the_page(tmp_path: Path) -> None:
    """The made-up kind's answer opens the page, the warnings follow it, then its detail."""
    report = {"schema_version": 2, "campaign": {"name": "made-up", "description": ""}, "runs": [],
              "made_up": MADE_UP, "notes": ["A made-up warning."], "findings": []}
    html, md = _render(report, {}, tmp_path)
    assert _sections(html) == ["made-up", "warnings", "made-up-detail"]
    assert _nav(html) == ["made-up", "made-up-detail"]
    assert md.index("## Made-up probe\n") < md.index("> **Warnings**") < md.index("## Made-up probe, in detail")
    _shows_the_made_up_part(html, md)


def test_a_new_kind_beside_module_runs_follows_them(tmp_path: Path) -> None:
    """The module runs lead; the made-up kind's sections come after theirs, before the figures."""
    report, samples = synthetic.build(n=2000)
    report["made_up"] = MADE_UP
    html, md = _render(report, samples, tmp_path)
    assert _sections(html) == ["warnings", "comparisons", "runs", "made-up", "made-up-detail", "figures", "target"]
    assert _nav(html) == ["comparisons", "runs", "made-up", "made-up-detail", "figures", "target"]
    assert md.index("> **Warnings**") < md.index("## Runs") < md.index("## Made-up probe\n") \
        < md.index("## Made-up probe, in detail") < md.index("## Figures")
    _shows_the_made_up_part(html, md)


def test_the_parts_order_decides_who_leads() -> None:
    """The first part with a summary or detail leads; a part with nothing to show is passed over."""
    report = {"made_up": MADE_UP, "notes": ["n"]}

    def other(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
        return [Section("other", "Other", [Verdict("other")], "summary"),
                Section("other-figures", "Other figures", [], "figures")]

    def nothing(report: Mapping[str, Any], figures: Sequence[RenderedFigure]) -> list[Section]:
        return []

    ids = [s.id for s in page_sections(report, [], (nothing, other, made_up_sections))]
    assert ids == ["other", "warnings", "made-up", "made-up-detail", "other-figures"]
    ids = [s.id for s in page_sections(report, [], (made_up_sections, other))]
    assert ids == ["made-up", "warnings", "made-up-detail", "other", "other-figures"]
    with pytest.raises(ValueError, match="made-up"):
        page_sections(report, [], (made_up_sections, made_up_sections))


def _kind_patterns() -> list[str]:
    # every registered kind's name anywhere (render_gpio, gpio_first, #interruption-runs), in any
    # case; and what names a kind without saying it: a figure kind's constant, a part's own leads()
    names = {*kind_registry.kinds(), "interruption", "irqgap"}
    return [f"(?i){re.escape(n)}" for n in sorted(names)] + [r"\b[A-Z]+_KIND\b", r"\bFIGURE_GROUPS\b", r"\bleads\("]


@pytest.mark.parametrize("name", RENDERERS)
def test_the_renderers_name_no_kind(name: str) -> None:
    source = (REPORT / name).read_text(encoding="utf-8")
    named = sorted({m.group(0) for p in _kind_patterns() for m in re.finditer(p, source)})
    assert named == [], f"{name} names a run kind: {named}"


@pytest.mark.parametrize("name", RENDERERS[:2])
def test_the_renderers_import_only_the_page_model(name: str) -> None:
    """What a renderer draws comes to it as sections: it imports no kind's tables or figures."""
    tree = ast.parse((REPORT / name).read_text(encoding="utf-8"))
    report_modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                      and (node.module or "").startswith("station.report")}
    assert report_modules <= {"station.report.page", "station.report.tables", "station.report.figures"}
