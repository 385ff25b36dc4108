"""cyclictest output (its --json file, the -h histogram text or bare status lines) as a
cyclictest run: the files a CyclictestRun would have written, read here by the same
parsers and analysis (station/kinds/cyclictest/analysis.py) as the report will read them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from station.importers.source import ImportInputError, Source
from station.kinds.cyclictest import analysis as ct_analysis
from station.parsers.cyclictest import (
    CyclictestOutputError,
    StatusLine,
    parse_histogram,
    parse_json,
    parse_status_lines,
)

FORMS = ("json", "histogram", "status")
# bare status lines, kept as given (the analysis reads the JSON made of them)
STATUS_FILE = "cyclictest.status"


@dataclass
class CyclictestImport:
    source: Source
    form: str  # one of FORMS
    # run-directory file -> content: the original byte for byte, and what is derived
    files: dict[str, bytes]
    summary: dict[str, Any]  # analysis/cyclictest.summary, as a CyclictestRun's manifest holds it
    version: str | None
    arguments: list[str] | None


def read_cyclictest(src: Source) -> CyclictestImport:
    text = src.text()
    try:
        if text.lstrip().startswith("{"):
            report = parse_json(src.data)
            out = ct_analysis.RunOutput(None, report)
            files = {"cyclictest.json": src.data}
            form, version, arguments = "json", report.rt_test_version, report.cmdline.split()[1:]
        elif any(line.rstrip() == "# Histogram" for line in text.splitlines()):
            out = ct_analysis.RunOutput(parse_histogram(src.data), None)
            files, form, version, arguments = {"cyclictest.out": src.data}, "histogram", None, None
        else:
            derived = _json_of_status(src, parse_status_lines(src.data))
            try:
                out = ct_analysis.RunOutput(None, parse_json(derived))
            # a figure of a status line that cyclictest cannot print
            except CyclictestOutputError as exc:
                raise ImportInputError(src.path, f"the last status lines: {exc}") from None
            files = {STATUS_FILE: src.data, "cyclictest.json": derived}
            form, version, arguments = "status", None, None
        if not out.threads:
            raise ImportInputError(src.path, "cyclictest printed no thread's results")
        summary = ct_analysis.summary(out)
    except CyclictestOutputError as exc:
        raise ImportInputError(src.path, exc.reason if exc.line else str(exc),
                               line=exc.line) from None
    # the histogram statistics refused the figures (analysis/histogram.py)
    except ValueError as exc:
        if isinstance(exc, ImportInputError):
            raise
        raise ImportInputError(src.path,
                               f"cyclictest output that cannot be analysed: {exc}") from None
    if form == "status":
        summary["kernel"] = None  # the derived JSON's sysinfo is a placeholder, not the target's
    return CyclictestImport(src, form, files, summary, version, arguments)


def _json_of_status(src: Source, status: dict[int, StatusLine]) -> bytes:
    """The --json file cyclictest would have written with these final figures (no histogram,
    CPU unknown, µs): the form analysis/cyclictest.py reads when there is no -h text."""
    if not status:
        raise ImportInputError(src.path, "no '# Histogram' line, no JSON and no status line 'T: n "
                               "(tid) P:prio I:interval C:cycles Min: Act: Avg: Max:'", line=1)
    if sorted(status) != list(range(len(status))):
        raise ImportInputError(src.path, f"status lines for threads {sorted(status)[:8]}: "
                               f"expected 0..{len(status) - 1}")
    doc = {
        "file_version": 1, "cmdline:": "cyclictest", "rt_test_version:": "unknown",
        "start_time": "", "end_time": "", "return_code": 0,
        "sysinfo": {"release": "unknown", "version": "unknown", "realtime": 0},
        "num_threads": len(status), "resolution_in_ns": 0,
        "thread": {str(i): {"cycles": s.cycles, "min": s.min, "max": s.max, "avg": s.avg, "cpu": -1,
                            "node": -1}
                   for i, s in sorted(status.items())},
        "derived_by": "station import, from the last status line of each thread",
    }
    return (json.dumps(doc, indent=2) + "\n").encode()
