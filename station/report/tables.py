"""The report's tables as display-ready text, shared by the HTML and Markdown renderers.

Deciding *what* a table shows lives here once; html.py and markdown.py only
decide how a cell looks. Missing optional parts give missing tables (None) or
'—' cells, never errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from station.common.formatting import (
    MISSING,
    count_text,
    interface_label,
    is_number,
    ordered,
    readable,
    us,
)


@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool = False
    weak: bool = False  # shown, but marked: a percentile from too few samples
    status: str | None = None  # complete|incomplete|failed, for colouring
    wrap: bool = False  # prose (a verdict) may wrap; names and numbers may not
    mark: str = ""  # short marker after the text in every format: "▲", a footnote "[1]"
    flags: tuple[str, ...] = ()  # why the cell is highlighted: "problem", "over-deadline"
    title: str | None = None  # the full explanation, a tooltip in HTML
    # (kind, text) labels after the text: kernel, emulation
    badges: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Table:
    key: str
    title: str
    headers: list[str]
    rows: list[list[Cell]]
    notes: list[str] = field(default_factory=list)
    row_headers: bool = False  # the first column names the row (a target), not a value


def _t(value: Any) -> Cell:
    return Cell(MISSING if value is None or value == "" else str(value))


def _n(text: str) -> Cell:
    return Cell(text, numeric=True)


def campaign_facts(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Label/value lines describing where and how the data was taken."""
    campaign = report.get("campaign") or {}
    target = campaign.get("target") or {}
    scope = campaign.get("scope") or None
    twin = campaign.get("twin") or None
    # "": a single unnamed target
    targets = {n: d for n, d in (campaign.get("targets") or {}).items() if n}
    facts = [
        ("Created (UTC)", campaign.get("created_utc")),
        ("Station version", campaign.get("station_version")),
        ("Config", campaign.get("config_path")),
    ]
    if targets:  # a campaign over several named targets (cyclictest: regular vs PREEMPT_RT)
        facts.append(("Targets", "; ".join(_target_fact(str(n), d) for n, d in targets.items())))
    else:
        facts.append(("Target", f"{target.get('kind', MISSING)} {target.get('host', '')}".strip()))
    facts.append(("Oscilloscope", f"{scope.get('idn', MISSING)} at {scope.get('resource', MISSING)}"
                  if scope else "none"))
    generator = campaign.get("generator")
    if generator:
        facts.append(("Generator",
                      f"{generator.get('idn', MISSING)} at {generator.get('resource', MISSING)}"))
    if twin:
        facts.append(_twin_fact(twin))
    facts.append(("Schema", f"report.json schema_version {report.get('schema_version', MISSING)}"
                            " (docs/report-schema.md)"))
    return [(label, MISSING if value in (None, "") else str(value)) for label, value in facts]


def _twin_fact(twin: Mapping[str, Any]) -> tuple[str, str]:
    """Which model the twin played: the latency modules' preset by name, or the GPIO board."""
    if twin.get("board"):
        return ("Twin", "a Raspberry Pi answering GPIO edges (station/twin/board.py)")
    preset = twin.get("preset")
    name = preset.get("name") if isinstance(preset, Mapping) else preset
    if not name:
        return ("Twin preset", MISSING)
    text = f"{name} (station/twin/presets/{name}.yaml)"
    changed = [f"{interface_label(str(i))} {k}"
               for i, params in _overrides(twin).items() for k in params]
    if changed:
        text += (
            "; overridden by the campaign: "
            + ", ".join(changed)
            + " (see Twin preset under Target)"
        )
    return ("Twin preset", text)


def _overrides(twin: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    overrides = twin.get("overrides")
    if not isinstance(overrides, Mapping):
        return {}
    return {str(i): p for i, p in overrides.items() if isinstance(p, Mapping)}


#: The twin's per-interface parameters (station/twin/presets/*.yaml), as people read them:
#: (meaning, unit). Times in the preset are ns and are shown in µs like every time here.
TWIN_PARAMETERS = {
    "sw_min": ("software latency t_SW: minimum", "µs"),
    "sw_mean": ("software latency t_SW: mean", "µs"),
    "sw_std": ("software latency t_SW: standard deviation", "µs"),
    "t_rw": ("bus read/write time t_rw", "µs"),
    "t_rw_jitter": ("t_rw jitter (standard deviation per access)", "µs"),
    "tail_fraction": ("IRQ-side late events, seen by software and scope (fraction of events)",
                      "fraction"),
    "tail_scale": ("their extra delay (exponential scale)", "µs"),
    "outlier_fraction": ("software-side delays between timestamp and write (fraction of events)",
                         "fraction"),
    "outlier_delay": ("their delay (uniform between)", "µs"),
    "idle_spread": ("with no load, t_SW − min shrinks by this factor", "factor"),
    "timer_jitter": ("wake-up jitter of the periodic task (mean)", "µs"),
    "clock_hz": ("board clock (timestamps of the pulse width); 0: none", "MHz"),
}


def _twin_value(value: Any, unit: str) -> str:
    if isinstance(value, list | tuple):
        return " – ".join(_twin_value(v, unit) for v in value)
    if not is_number(value):
        return MISSING if value is None else str(value)
    if unit == "µs":
        return us(value)
    if unit == "MHz":
        return f"{value / 1e6:g}"
    if unit == "fraction":
        return f"{value:.1e}" if value else "0"
    return f"{value:g}"


def twin_preset_table(report: Mapping[str, Any]) -> Table | None:
    """The event model's parameters per interface, with units; the campaign's overrides flagged."""
    twin = (report.get("campaign") or {}).get("twin") or {}
    preset = twin.get("preset")
    if not isinstance(preset, Mapping) or not isinstance(preset.get("interfaces"), Mapping):
        return None
    interfaces = ordered(preset["interfaces"], ("lpt", "pcie"))
    overrides = _overrides(twin)
    params = ordered((k for i in interfaces for k in preset["interfaces"][i] or {}),
                     TWIN_PARAMETERS)
    rows = []
    for key in params:
        meaning, unit = TWIN_PARAMETERS.get(key, ("", ""))
        row = [Cell(key), Cell(meaning or MISSING, wrap=True), _t(unit)]
        for iface in interfaces:
            value = (preset["interfaces"][iface] or {}).get(key)
            overridden = key in overrides.get(iface, {})
            row.append(
                Cell(
                    _twin_value(value, unit), numeric=True, mark="◆" if overridden else "",
                    flags=("override",) if overridden else (),
                    title="set by the campaign (bench.twin.overrides)" if overridden else None
                )
            )
        rows.append(row)
    notes = ["Times in µs (the preset file holds ns), fractions of all events, the clock in MHz."]
    if overrides:
        notes.append("◆ set by the campaign's bench.twin.overrides, replacing the preset's value: "
                     + "; ".join(f"{interface_label(i)} {k} = "
                                 f"{_twin_value(v, TWIN_PARAMETERS.get(k, ('', ''))[1])}"
                                 for i, p in overrides.items() for k, v in p.items()) + ".")
    if is_number(preset.get("calibration_samples")):
        notes.append(f"Calibrated to {count_text(preset['calibration_samples'])} samples per "
                     "interface: its minimum is that sample count's minimum.")
    return Table("twin_preset", f"Twin preset {preset.get('name') or ''}".strip(),
                 ["Parameter", "Meaning", "Unit", *(interface_label(i) for i in interfaces)], rows,
                 notes)


@dataclass(frozen=True)
class Finding:
    """One finding as the first page shows it: a short sentence, its backing figure (bold), a link
    to the table or figures holding the rest (`see`: an id on the HTML page), and `text` in full."""

    kind: str
    headline: str
    figure: str
    see: str
    text: str


def findings(report: Mapping[str, Any]) -> list[Finding]:
    """The module campaign's findings (report["findings"]), in their order; a report from before
    headlines existed shows each sentence whole as its headline."""
    out = []
    for f in report.get("findings") or []:
        if not (isinstance(f, Mapping) and f.get("text")):
            continue
        text = readable(str(f["text"]))
        out.append(Finding(str(f.get("kind", "")), readable(str(f.get("headline") or text)),
                           readable(str(f.get("figure") or "")), str(f.get("see") or ""), text))
    return out


def glance_figures(figures: Sequence[Any]) -> list[Any]:
    """The first figure of each kind its builder marked `glance` (for module runs the latency per
    interface and its tail, for cyclictest the maxima): the page shows them under the findings."""
    firsts: dict[str, Any] = {}
    for f in figures:
        if f.glance:
            firsts.setdefault(f.kind, f)
    return list(firsts.values())


def _target_fact(name: str, description: Any) -> str:
    if isinstance(description, Mapping):
        where = " ".join(str(description[k]) for k in ("kind", "host") if description.get(k))
        return f"{name} ({where})" if where else name
    return f"{name}: {description}" if description else name


def audit_entries(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The target audit (uname, cmdline, /proc/interrupts excerpt …), free-form text."""
    audit = ((report.get("campaign") or {}).get("target") or {}).get("audit") or {}
    return [(str(k), str(v)) for k, v in audit.items()]


def ground_truth_entries(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the twin injected, for checking estimates against it."""
    twin = (report.get("campaign") or {}).get("twin") or {}
    truth = twin.get("ground_truth") or {}
    return [(str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str))
            for k, v in truth.items()]
