"""report.md: the same content as the HTML page, for a repository, an issue or a terminal."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from station.report.figures import RenderedFigure
from station.report.page import (
    Block,
    Callout,
    Figures,
    Part,
    Section,
    Sentences,
    Subsection,
    Verdict,
    glance,
    page_sections,
)
from station.report.tables import (
    Cell,
    Finding,
    Table,
    audit_entries,
    campaign_facts,
    findings,
    ground_truth_entries,
    twin_preset_table,
)


def _escape(text: str) -> str:
    # Only what breaks a table row or starts emphasis by accident.
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
            .replace("_", "\\_").replace("\n", " "))


def _prose(text: str) -> str:
    """A sentence outside a table, kept as written where Markdown allows: an underscore inside a
    word (rcu_preempt, nohz_full) starts no emphasis, so only the others are escaped."""
    text = text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("\n", " ")
    return re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", text)


def _finding(f: Finding) -> str:
    """Its short sentence and bold figure (`see` is an id on the HTML page: no link here; the
    sentence in full follows under "Findings in full")."""
    figure = f": **{_prose(f.figure)}**" if f.figure else ""
    return f"- {_prose(f.headline)}{figure}."


def _cell(cell: Cell) -> str:
    text = _escape(cell.text)
    text = f"*{text}*†" if cell.weak else text
    if cell.mark:
        text += f" {_escape(cell.mark)}"
    # A flagged cell is bold: Markdown has no colour, and the mark alone is easy to miss.
    if cell.flags:
        text = f"**{text}**"
    return text + "".join(f" `{badge}`" for _, badge in cell.badges)


def render_table(table: Table, level: int = 3) -> str:
    align = ["---:" if any(row[i].numeric for row in table.rows) else "---"
             for i in range(len(table.headers))]
    lines = [f"{'#' * level} {table.title}", "",
             "| " + " | ".join(_escape(h) for h in table.headers) + " |",
             "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines.append("")
        lines += [f"{note}  " for note in table.notes]
    return "\n".join(lines)


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text.rstrip()}\n{fence}"


def _figure_list(figures: Sequence[RenderedFigure], figure_dir: str,
                 level: int | None = 3) -> list[str]:
    """Each figure under its title as a heading, or (level None) with its title leading the
    caption."""
    out = []
    for fig in figures:
        image = f"![{fig.title}]({figure_dir}/{fig.name}.svg)"
        if level is None:
            out += [image, "", f"*{fig.title}.* {fig.caption}", ""]
        else:
            out += [f"{'#' * level} {fig.title}", "", image, "", fig.caption, ""]
    return out


def _blocks(blocks: Sequence[Block], level: int, figure_dir: str) -> list[str]:
    """A section's blocks (level 3) or a subsection's (level 4): headings at that level."""
    out: list[str] = []
    for block in blocks:
        match block:
            case Table():
                out += [render_table(block, level), ""]
            case Figures():
                if block.heading:
                    out += [f"{'#' * level} {_prose(block.heading)}", ""]
                # a figure's title is a heading of its own only where nothing else heads it
                alone = level == 3 and not block.heading
                out += _figure_list(block.figures, figure_dir, level if alone else None)
            case Sentences():
                out += [*(f"- {_prose(item.text)}" for item in block.items), ""]
            case Verdict():
                text = _prose(block.text)
                if block.label:
                    out += [f"> **{_prose(block.label)}:** {text}", ""]
                else:
                    out += [f"> **{text}**" if block.problem else f"> {text}", ""]
            case Callout():
                out += [f"> **{_prose(block.title)}**", ">",
                        *(f"> - {_prose(item)}" for item in block.items), ""]
            case Subsection():
                out += [f"{'#' * level} {_prose(block.heading)}", "", *_blocks(block.blocks,
                                                                               level + 1,
                                                                               figure_dir)]
    return out


def _section(section: Section, figure_dir: str) -> list[str]:
    heading = [f"## {_prose(section.title)}", ""] if section.title else []
    return heading + _blocks(section.blocks, 3, figure_dir)


def render_markdown(report: Mapping[str, Any], figures: Sequence[RenderedFigure],
                    parts: Sequence[Part],
                    figure_dir: str = "figures") -> str:
    """The page as Markdown: the header's facts, the findings, every part's sections (page.py
    orders them), the Target appendix."""
    campaign = report.get("campaign") or {}
    out = [f"# IRQ latency report: {campaign.get('name', 'campaign')}", ""]
    if campaign.get("description"):
        out += [str(campaign["description"]), ""]
    out += [f"- **{label}:** {_escape(value)}" for label, value in campaign_facts(report)]
    out.append("")
    answer = findings(report)
    if answer:  # the campaign opens with its answer: a short bullet per finding, its figure in bold
        out += ["## Findings", "", *(_finding(f) for f in answer), ""]
        out += _figure_list(glance(report, figures), figure_dir)
        out += ["### Findings in full", "", *(f"- {_prose(f.text)}" for f in answer), ""]
    for section in page_sections(report, figures, parts):
        out += _section(section, figure_dir)
    audit = audit_entries(report)
    truth = ground_truth_entries(report)
    preset = twin_preset_table(report)
    if audit or truth or preset:
        out += ["## Target", ""]
        if preset:
            out += [render_table(preset), ""]
        for key, value in audit:
            out += [f"**{_escape(key)}**", "", _fenced(value), ""]
        if truth:
            out += ["**Twin ground truth**", ""]
            out += [f"- {_escape(key)}: {_escape(value)}" for key, value in truth]
            out.append("")
    return "\n".join(out).rstrip() + "\n"
