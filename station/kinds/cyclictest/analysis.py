"""The cyclictest kind's analysis as the campaign's calls it (its work: station/analysis/cyclictest.py)."""

from __future__ import annotations

from station.analysis import cyclictest as kind_analysis
from station.analysis.campaign import AnalysisInput, KindReport, section_report


def analyse(given: AnalysisInput) -> KindReport:
    campaign = given.campaign
    if given.deadline_given:  # `station report --deadline` wins over cyclictest.deadline too
        config = dict(campaign.get("config") or {})
        config["cyclictest"] = {**(config.get("cyclictest") or {}), "deadline": (given.deadline_ns or 0) / 1e9}
        campaign = {**campaign, "config": config}
    return section_report("cyclictest", *kind_analysis.analyse_runs(given.run_dirs, campaign))
