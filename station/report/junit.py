"""A budget check as JUnit XML (`station check --junit`), the format every CI system reads: one
test case per budget; a missed budget a failure, an undecided one skipped with the reason (a CI
page shows it apart from the passes, and `station check`'s exit status 3 says it too), the
figures and their intervals in each case's message and output."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from station.analysis.budgets import CheckResult
from station.common.atomic_file import replace_atomically

# characters XML 1.0 cannot hold (a target's stderr, a budget written with an escape in it)
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: str) -> str:
    return NOT_XML.sub("\ufffd", value)


def junit_xml(result: CheckResult) -> bytes:
    counts = {v: sum(b.verdict == v for b in result.verdicts) for v in ("met", "missed",
                                                                          "undecided")}
    suites = ET.Element("testsuites", name="irq-station budgets", tests=str(len(result.verdicts)),
                        failures=str(counts["missed"]), errors="0",
                        skipped=str(counts["undecided"]))
    suite = ET.SubElement(suites, "testsuite", name=_text(f"budgets: {result.campaign}"),
                          tests=str(len(result.verdicts)), failures=str(counts["missed"]),
                          errors="0", skipped=str(counts["undecided"]), time="0")
    for v in result.verdicts:
        case = ET.SubElement(suite, "testcase",
                             classname=_text(f"irq-station.{result.campaign}"),
                             name=_text(v.budget), time="0")
        message = _text(v.message)
        if v.verdict == "missed":
            ET.SubElement(case, "failure", type="missed", message=message).text = message
        elif v.verdict == "undecided":
            ET.SubElement(case, "skipped", type="undecided", message=f"undecided: {message}")
        ET.SubElement(case, "system-out").text = _text("\n".join(
            f"{j.label}: {j.text}: {j.verdict}" for j in v.judged) or "no run it applies to")
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(result: CheckResult, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    xml = junit_xml(result)
    replace_atomically(path, lambda tmp: tmp.write_bytes(xml))
