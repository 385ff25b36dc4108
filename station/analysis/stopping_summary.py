"""The stop rule's last judgement (campaign.json's `stopping`, station/campaign/stopping.py) as
the report's `stopping` entry and its finding, whatever the campaign's kind (docs/stopping.md);
the page's table and figure are station/report/stopping.py's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.common.units import format_duration


def stopping_entry(campaign: Mapping[str, Any]) -> dict[str, Any] | None:
    """campaign.json's `stopping` (station/campaign/stopping.py Judgement.as_dict) for the
    report: its groups as a list."""
    stopping = campaign.get("stopping")
    if not isinstance(stopping, dict) or not isinstance(stopping.get("groups"), dict):
        return None
    entry = {**{k: stopping.get(k) for k in ("rule", "verdict", "rounds", "rounds_left_out")},
             "groups": [{"name": name, **group} for name, group in stopping["groups"].items()]}
    if isinstance(stopping.get("targets"), dict):  # several targets: each judged on its own runs
        entry["targets"] = stopping["targets"]
    return entry


def question(rule: Mapping[str, Any]) -> str:
    if rule.get("deadline") is not None:
        tail = float(rule["miss_below"])
        return (f"whether every condition's median run misses {format_duration(rule['deadline'])} "
                f"at most {tail:g} of its events (its p{100 * (1 - tail):g} at or under it) "
                "or more often")
    if rule.get("exceedance") is not None:
        tail = float(rule["exceedance"])
        width = rule.get("interval_width")
        return (f"an upper bound on every condition's latency exceeded with probability {tail:g} "
                f"(the median run's p{100 * (1 - tail):g})"
                + (f", known to within {format_duration(width)}" if width else ""))
    at = f"p{100 * float(rule.get('at') or 0):g}"
    if rule.get("compare"):
        margin = rule.get("margin") or 0
        return (f"the sign of the two {rule['compare']}' median paired difference (same "
                f"round) of their runs' {at}"
                + (f", or a difference within ±{format_duration(margin)}" if margin else ""))
    if rule.get("worst"):
        return (f"the load set that makes the median run's {at} largest, each interface and "
                "variant on its own (a load dropped once known not to be the worst)")
    return f"every condition's median-run {at} to within {format_duration(rule['interval_width'])}"


def stopping_finding(entry: Mapping[str, Any]) -> dict[str, Any]:
    rule, rounds = entry["rule"], entry["rounds"]
    states = "; ".join(f"{g['name']}: {g['state']}" for g in entry["groups"])
    confidence = f"{100 * float(rule.get('confidence', 0.95)):g} %"
    targets = entry.get("targets") or {}
    if targets:  # several targets, each stopped on its own question
        rounds = " and ".join(f"{t['rounds']} round(s) on {name}" for name, t in targets.items())
    else:
        rounds = f"{rounds} round(s)"
    head = {"answered": f"Answered after {rounds}: {states}.",
            "open": f"Not answered in {rounds}: {states}.",
            "contradicted": f"No answer: {states}."}[entry["verdict"]]
    return {"kind": "stopping", "headline": head,
            "text": f"{head} The question: {question(rule)}, at {confidence} for all groups and "
                    "rounds together (anytime-valid confidence sequences over runs; "
                    "docs/stopping.md).", "figure": str(rounds), "see": "stopping"}
