"""Parsers for the output of external measurement tools (cyclictest)."""

from station.parsers.cyclictest import (
    CyclictestOutputError,
    CyclictestReport,
    CyclictestThread,
    HistogramOutput,
    StatusLine,
    SysInfo,
    parse_histogram,
    parse_json,
    parse_status_lines,
)

__all__ = [
    "CyclictestOutputError",
    "CyclictestReport",
    "CyclictestThread",
    "HistogramOutput",
    "StatusLine",
    "SysInfo",
    "parse_histogram",
    "parse_json",
    "parse_status_lines",
]
