"""The stop rule's last judgement (campaign.json's `stopping`, station/campaign/stopping.py) as
the report's `stopping` entry and its finding, whatever the campaign's kind (docs/stopping.md);
the page's table and figure are station/report/stopping.py's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from station.common.formatting import wall_time
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
    if isinstance(campaign.get("time_budget"), dict) and campaign["time_budget"]:  # loop.py's
        entry["time_budget"] = campaign["time_budget"]
    return entry


def time_budget_text(entry: Mapping[str, Any]) -> str:
    """Where the rule's time budget stopped rounds, as a sentence ("" where it did not)."""
    parts = [f"{f'on {name}: ' if name else ''}{wall_time(b['budget_s'])} would have "
             f"been overrun by round {b['stopped_before_round']} ({wall_time(b['spent_s'])} "
             f"spent in that session on {b['runs']} run(s) in {b['rounds']} round(s))"
             for name, b in (entry.get("time_budget") or {}).items()]
    return f"The stop rule's time budget ended its rounds: {'; '.join(parts)}." if parts else ""


def confidence_text(entry: Mapping[str, Any]) -> str:
    """What the rule's confidence is about: every group's interval together, or, for a search,
    the load it names (each load's interval spends its error on one side only: elimination.py)."""
    from station.analysis.anytime.elimination import interval_confidence

    rule = entry["rule"]
    confidence = float(rule.get("confidence", 0.95))
    several = " and target" if entry.get("targets") else ""
    if rule.get("worst"):
        # each cell's search at alpha/cells (and /targets): an arm's share is 2·alpha/groups
        groups = max(len(entry["groups"]), 1)
        alone, _ = interval_confidence(1 - confidence, groups)
        together = max(1 - 2 * (1 - confidence), 0.0)
        return (f"confidence {100 * confidence:g} % that the load named the worst is (at every "
                f"round, over every search{several}); each load's interval holds alone at "
                f"{100 * alone:.4g} %, all of them together at {100 * together:.4g} %")
    return (f"confidence {100 * confidence:g} % for all groups and all rounds together"
            + (", every target judged on its own runs" if several else ""))


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
    targets = entry.get("targets") or {}
    if targets:  # several targets, each stopped on its own question
        rounds = " and ".join(f"{t['rounds']} round(s) on {name}" for name, t in targets.items())
    else:
        rounds = f"{rounds} round(s)"
    head = {"answered": f"Answered after {rounds}: {states}.",
            "open": f"Not answered in {rounds}: {states}.",
            "contradicted": f"No answer: {states}."}[entry["verdict"]]
    spent = time_budget_text(entry)
    return {"kind": "stopping", "headline": head,
            "text": f"{head} The question: {question(rule)}; {confidence_text(entry)} "
                    "(anytime-valid confidence sequences over runs; docs/stopping.md)."
                    + (f" {spent}" if spent else ""), "figure": str(rounds), "see": "stopping"}
