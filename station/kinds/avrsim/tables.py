"""The avrsim section's tables: one row per run (its delays, timer0's handler, its outliers
against their prediction), and the seed's figure as the last row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.common.formatting import MISSING
from station.report.tables import Cell, Table

HEADERS = ["Run", "Firmware", "timer0", "Edges", "Missed", "Delay min–max (µs)", "Median (µs)",
           "Spread (µs)",
           "On an ATmega (µs)", "timer0 handler", "Outliers", "Predicted", "Explained"]


def _n(text: str) -> Cell:
    return Cell(text, numeric=True)


def _row(r: Mapping[str, Any]) -> list[Cell]:
    status = r.get("status")
    head = [Cell(str(r["id"]), status=status), Cell(str(r.get("firmware"))),
            Cell(str(r.get("timer0")))]
    d = r.get("delay_us")
    if not d:
        return (
            head
            + [_n(str(r.get("stimuli", MISSING))), _n(str(r.get("missed", MISSING)))]
            + [Cell(MISSING)] * 8
        )
    o, t0 = r["outliers"], r["timer0_handler"]
    handler = (
        f"{t0['runs']} runs, {t0['min_cycles']}–{t0['max_cycles']} cycles"
        if t0["runs"]
        else "never ran"
    )
    lo, hi = o["fraction_ci"]
    outliers = f"{o['count']} ({100 * o['fraction']:.3f} %)" if o["count"] else "0"
    predicted = f"{100 * o['expected_fraction']:.3f} %" + ("" if o["as_predicted"] else " ✗")
    return head + [
        _n(str(r["stimuli"])), _n(str(r["missed"])), _n(f"{d['min']:.4f}–{d['max']:.4f}"),
        _n(f"{d['p50']:.4f}"),
        _n(f"{d['spread']:.4f}"), _n(f"{r['hardware_us'][0]:.3f}–{r['hardware_us'][1]:.3f}"),
        Cell(handler),
        Cell(outliers, numeric=True, title=f"above {o['threshold_cycles']} cycles "
             f"({o['baseline']}); {100 * lo:.3f}–{100 * hi:.3f} % at 99 %"),
        Cell(predicted, numeric=True, flags=() if o["as_predicted"] else ("problem",),
             title="timer0's measured rate × its handler's mean length / the clock"),
        _n(f"{o['explained']} of {o['count']}"),
    ]


def runs_table(report: Mapping[str, Any]) -> Table | None:
    section = report.get("avrsim") or {}
    runs = section.get("runs") or []
    if not runs:
        return None
    rows = [_row(r) for r in runs]
    seed = section.get("seed") or {}
    if seed:
        lo, hi = seed["masked_us"]
        rows.append([Cell("the seed (a Uno)"), Cell("sketch"), Cell("masked"), Cell(MISSING),
                     Cell(MISSING),
                     _n(f"{lo:.4f}–{hi:.4f}"), Cell(MISSING), _n(f"{seed['spread_us']:.4f}"),
                     _n(f"{lo:.4f}–{hi:.4f}"),
                     Cell(MISSING), Cell(MISSING), Cell(MISSING), Cell(MISSING)])
    notes = ["Delays are simulated cycles at 16 MHz (one cycle is 0.0625 µs) from each edge to the "
             "output's change; 'On an ATmega' adds what simavr does not count (the 4-cycle "
             "interrupt entry, 1–2 cycles of the pin synchroniser). An outlier is a delay above "
             "its threshold (hover: which); 'Predicted' is timer0's rate × its handler's length "
             "(✗: outside the observed fraction's 99 % interval); 'Explained': outliers that "
             "arrived while a logged handler ran."]
    if seed:
        notes.append(f"Last row: {seed['source']}.")
    return Table("avrsim-runs", "Simulated microcontroller response per run", HEADERS, rows, notes)
