"""report.md: the same content as the HTML page, for a repository, an issue or a terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from station.report.figures import RenderedFigure
from station.report.tables import (
    Cell,
    Table,
    all_tables,
    audit_entries,
    campaign_facts,
    ground_truth_entries,
)


def _escape(text: str) -> str:
    # Only what breaks a table row or starts emphasis by accident.
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
            .replace("_", "\\_").replace("\n", " "))


def _cell(cell: Cell) -> str:
    text = _escape(cell.text)
    return f"*{text}*†" if cell.weak else text


def render_table(table: Table) -> str:
    align = ["---:" if any(row[i].numeric for row in table.rows) else "---"
             for i in range(len(table.headers))]
    lines = [f"### {table.title}", "",
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


def render_markdown(report: Mapping[str, Any], figures: Sequence[RenderedFigure],
                    figure_dir: str = "figures") -> str:
    campaign = report.get("campaign") or {}
    tables = all_tables(report)
    out = [f"# IRQ latency report: {campaign.get('name', 'campaign')}", ""]
    if campaign.get("description"):
        out += [str(campaign["description"]), ""]
    out += [f"- **{label}:** {_escape(value)}" for label, value in campaign_facts(report)]
    out.append("")
    if report.get("notes"):
        out += ["> **Warnings**", ">"]
        out += [f"> - {_escape(str(n))}" for n in report["notes"]]
        out.append("")
    findings = [k for k in ("worst_case", "t_rw", "cross_interface_outliers") if k in tables]
    if findings:
        out += ["## Findings", ""]
        for key in findings:
            out += [render_table(tables[key]), ""]
    if "runs" in tables or "stats" in tables:
        out += ["## Runs", ""]
        for key in ("runs", "pairing", "stats"):
            if key in tables:
                out += [render_table(tables[key]), ""]
    if figures:
        out += ["## Figures", ""]
        for fig in figures:
            out += [f"### {fig.title}", "", f"![{fig.title}]({figure_dir}/{fig.name}.svg)", "",
                    fig.caption, ""]
    audit = audit_entries(report)
    truth = ground_truth_entries(report)
    if audit or truth:
        out += ["## Target", ""]
        for key, value in audit:
            out += [f"**{_escape(key)}**", "", _fenced(value), ""]
        if truth:
            out += ["**Twin ground truth**", ""]
            out += [f"- {_escape(key)}: {_escape(value)}" for key, value in truth]
            out.append("")
    return "\n".join(out).rstrip() + "\n"
