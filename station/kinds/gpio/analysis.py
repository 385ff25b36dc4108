"""The gpio kind's analysis as the campaign's calls it (its work: station/analysis/gpio.py)."""

from __future__ import annotations

from station.analysis import gpio as kind_analysis
from station.analysis.campaign import AnalysisInput, KindReport, section_report


def analyse(given: AnalysisInput) -> KindReport:
    campaign = given.campaign
    return section_report("gpio", *kind_analysis.analyse_runs(given.run_dirs, campaign))
