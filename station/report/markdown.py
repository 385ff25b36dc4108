"""report.md: the same content as the HTML page, for a repository, an issue or a terminal."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from station.report.cyclictest_figures import KIND as CYCLICTEST_KIND
from station.report.cyclictest_tables import cyclictest_tables
from station.report.figures import RenderedFigure
from station.report.gpio_figures import KIND as GPIO_KIND
from station.report.gpio_tables import GpioTables, gpio_tables
from station.report.gpio_tables import leads as gpio_leads
from station.report.interruptions_figures import KIND as INTERRUPTIONS_KIND
from station.report.interruptions_figures import run_figures
from station.report.interruptions_tables import InterruptionsTables, interruptions_tables, leads
from station.report.tables import (
    Cell,
    Finding,
    Table,
    all_tables,
    audit_entries,
    campaign_facts,
    findings,
    glance_figures,
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


def _figure_list(figures: Sequence[RenderedFigure], figure_dir: str) -> list[str]:
    out = []
    for fig in figures:
        out += [f"### {fig.title}", "", f"![{fig.title}]({figure_dir}/{fig.name}.svg)", "",
                fig.caption, ""]
    return out


def _interruption_runs(it: InterruptionsTables, figures: Sequence[RenderedFigure],
                       figure_dir: str) -> list[str]:
    out = ["## Interruptions, per run", ""]
    for run in it.runs:
        out += [f"### {_prose(run.heading)}", ""]
        if run.conclusion:
            out += [f"> **Conclusion:** {_prose(run.conclusion)}", ""]
        if run.problem:
            out += [f"> **{_prose(run.problem)}**", ""]
        if run.spoilers:
            out += ["> **Spoilers: the measured CPU's settings may disturb the measurement**", ">"]
            out += [f"> - {_prose(flag)}" for flag in run.spoilers]
            out.append("")
        if run.groups:
            out += [render_table(run.groups, 4), ""]
        if run.families:
            out += [render_table(run.families, 4), ""]
        if run.comparison:
            out += [render_table(run.comparison, 4), ""]
        for fig in run_figures(figures, run.anchor):
            out += [f"![{fig.title}]({figure_dir}/{fig.name}.svg)", "", f"*{fig.title}.* {fig.caption}",
                    ""]
    return out


def _gpio(gt: GpioTables, figures: Sequence[RenderedFigure], figure_dir: str) -> list[str]:
    """The section: findings (one sentence each), its tables, then its plots."""
    out = ["## GPIO response", ""]
    if gt.findings:
        out += ["**Findings**", "", *(f"- {_prose(f.text)}" for f in gt.findings), ""]
    for table in (gt.runs, gt.outliers, gt.comparisons):
        if table:
            out += [render_table(table), ""]
    plots = [f for f in figures if f.kind == GPIO_KIND]
    if plots:
        out += ["## GPIO response plots", "", *_figure_list(plots, figure_dir)]
    return out


def render_markdown(report: Mapping[str, Any], figures: Sequence[RenderedFigure],
                    figure_dir: str = "figures") -> str:
    campaign = report.get("campaign") or {}
    tables = all_tables(report)
    out = [f"# IRQ latency report: {campaign.get('name', 'campaign')}", ""]
    if campaign.get("description"):
        out += [str(campaign["description"]), ""]
    out += [f"- **{label}:** {_escape(value)}" for label, value in campaign_facts(report)]
    out.append("")
    answer = findings(report)
    glance = glance_figures(figures) if answer else []
    if answer:  # a module campaign opens with its answer: a short bullet per finding, its figure in bold
        out += ["## Findings", "", *(_finding(f) for f in answer), ""]
        out += _figure_list(glance, figure_dir)
        out += ["### Findings in full", "", *(f"- {_prose(f.text)}" for f in answer), ""]
    gt = gpio_tables(report)
    # A gpio campaign opens with its findings, tables and plots; then the warnings.
    if gt and gpio_leads(report):
        out += _gpio(gt, figures, figure_dir)
    it = interruptions_tables(report)
    # An interruptions campaign opens with its summary, then the warnings, then each run, as on
    # the HTML page; beside module runs the section follows them.
    if it and leads(report):
        out += ["## Interruptions", "", render_table(it.summary), ""]
    # cyclictest's maximum-latency table comes first, as on the HTML page.
    ct = cyclictest_tables(report)
    if ct:
        out += ["## cyclictest: maximum latency", "", render_table(ct.max_latency), ""]
        if ct.deadline:
            out += [render_table(ct.deadline), ""]
        if ct.targets:
            out += [render_table(ct.targets), ""]
    if report.get("notes"):
        out += ["> **Warnings**", ">"]
        out += [f"> - {_escape(str(n))}" for n in report["notes"]]
        out.append("")
    if it and leads(report):
        out += _interruption_runs(it, figures, figure_dir)
    ct_figures = [f for f in figures if f.kind == CYCLICTEST_KIND]
    if ct_figures:
        out += ["## Latency plots", "", *_figure_list(ct_figures, figure_dir)]
    if ct and ct.threads:
        out += ["## cyclictest runs, per thread", ""]
        for table in ct.threads:
            out += [render_table(table), ""]
    compared = [k for k in ("worst_case", "t_rw", "cross_interface_outliers") if k in tables]
    if compared:
        out += ["## Comparisons", ""]
        for key in compared:
            out += [render_table(tables[key]), ""]
    if "runs" in tables or "stats" in tables:
        out += ["## Runs", ""]
        for key in ("runs", "capture", "scope_measurement", "pairing", "stats"):
            if key in tables:
                out += [render_table(tables[key]), ""]
    if it and not leads(report):
        out += ["## Interruptions", "", render_table(it.summary), "",
                *_interruption_runs(it, figures, figure_dir)]
    if gt and not gpio_leads(report):
        out += _gpio(gt, figures, figure_dir)
    others = [f for f in figures if f.kind not in (CYCLICTEST_KIND, INTERRUPTIONS_KIND, GPIO_KIND)
              and all(f is not g for g in glance)]
    if others:
        out += ["## Figures", "", *_figure_list(others, figure_dir)]
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
