"""report.json's schema (station/report/model.py and each kind's report_model.py): the reports of
every kind, written through write_reports, fit the JSON Schema it generates — checked by jsonschema,
a validator that is not pydantic — the schema refuses what it should, and a schema-1 report.json
is still read where the station reads report.json files."""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from station import api
from station.analysis import SCHEMA_VERSION
from station.report import ReportSchemaError, write_reports
from station.report.schema_doc import documented_model, render_doc, tables
from tests import report_synthetic
from tests.conftest import run_station
from tests.import_graph import REPO
from tests.test_report_gpio import build_report as gpio_report
from tests.test_report_interruptions import build_report as interruptions_report

CT_FIXTURE = REPO / "tests/fixtures/cyclictest/rt-tests-2.4/q-h50-t-a"


def _module() -> tuple[dict[str, Any], dict]:
    return report_synthetic.build(n=2000)


def _cyclictest() -> tuple[dict[str, Any], dict]:
    return report_synthetic.build_cyclictest(n=500)


REPORTS: dict[str, Callable[[], tuple[dict[str, Any], dict]]] = {
    "module": _module,
    "cyclictest": _cyclictest,
    "gpio": lambda: (gpio_report(), {}),
    "interruptions": lambda: (interruptions_report(), {}),
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    schema = api.report_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)  # a schema, before it judges anything
    return schema


@pytest.mark.parametrize("kind", list(REPORTS))
def test_each_kinds_report_json_fits_the_schema(kind: str, schema: dict[str, Any], tmp_path: Path) -> None:
    report, samples = REPORTS[kind]()
    written = json.loads(write_reports(report, samples, tmp_path)["report.json"].read_text())
    assert written.get(kind) or written["runs"]  # the kind's part is there to be checked
    jsonschema.validate(written, schema)


def _refusals(report: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str]]:
    """Reports the schema must refuse, each with what jsonschema says of it."""
    def changed(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        bad = copy.deepcopy(report)
        edit(bad)
        return bad

    return {
        "missing notes": (changed(lambda r: r.pop("notes")), "'notes' is a required property"),
        "a count as text": (changed(lambda r: r["runs"][0]["sw"].update(count="many")),
                            "'many' is not of type 'integer'"),
        "an unknown status": (changed(lambda r: r["runs"][0].update(status="done")), "'done' is not one of"),
        "an unknown key": (changed(lambda r: r["campaign"].update(colour="red")),
                           "Additional properties are not allowed"),
        "a section of the wrong type": (changed(lambda r: r.update(gpio=["not", "an", "object"])),
                                        "is not valid under any of the given schemas"),
    }


@pytest.mark.parametrize("case", list(_refusals(_module()[0])))
def test_the_schema_refuses_a_broken_report(case: str, schema: dict[str, Any], tmp_path: Path) -> None:
    report, samples = _module()
    jsonschema.validate(json.loads(json.dumps(report)), schema)  # the unbroken one passes
    bad, message = _refusals(report)[case]
    with pytest.raises(jsonschema.ValidationError, match=message):
        jsonschema.validate(json.loads(json.dumps(bad)), schema)
    # and where it is produced: write_reports writes nothing of it
    with pytest.raises(ReportSchemaError, match="does not fit report.json's schema"):
        write_reports(bad, samples, tmp_path)
    assert not any(tmp_path.iterdir())


def _cyclictest_campaign(root: Path, name: str) -> Path:
    """A cyclictest campaign from cyclictest's own output: one run under no load."""
    run = root / "runs" / "no-load-r0"
    run.mkdir(parents=True)
    shutil.copy(CT_FIXTURE / "stdout.txt", run / "cyclictest.out")
    shutil.copy(CT_FIXTURE / "out.json", run / "cyclictest.json")
    (run / "manifest.json").write_text(json.dumps({
        "run_id": run.name, "status": "complete", "kind": "cyclictest", "error": None,
        "run": {"target": None, "load": "no-load", "repetition": 0}}))
    (root / "campaign.json").write_text(json.dumps({"name": name, "config": {"matrix": {"loads": ["no-load"]}}}))
    return root


def test_a_schema_1_report_json_is_still_read(schema: dict[str, Any], tmp_path: Path) -> None:
    new = _cyclictest_campaign(tmp_path / "new", "new")
    old = _cyclictest_campaign(tmp_path / "old", "old")
    api.write_campaign_report(new)
    api.write_campaign_report(old)
    written = json.loads((new / "report.json").read_text())
    assert written["schema_version"] == SCHEMA_VERSION == 2 and "comparisons" not in written
    jsonschema.validate(written, schema)  # the analysis's own report, not a hand-built one
    # what a schema-1 station wrote: its version, and the module runs' comparisons even without any
    report = json.loads((old / "report.json").read_text())
    report |= {"schema_version": 1, "comparisons": {"t_rw": [], "cross_interface_outliers": [], "worst_case": []}}
    (old / "report.json").write_text(json.dumps(report))
    result = api.compare_campaigns([old, new])
    assert not any("no report.json" in n for n in result["notes"])  # read from the file, not analysed again
    assert result["cyclictest"]["max_latency_us"][0][0] == result["cyclictest"]["max_latency_us"][0][1] is not None
    assert api.unmatched_runs(old) == {}
    jsonschema.validate(report, schema)  # its fields are a subset of schema 2's


def test_unmatched_runs_reads_a_schema_1_module_report(tmp_path: Path) -> None:
    report, _ = _module()
    report["schema_version"] = 1
    report["runs"][0]["pairing"] = {"unmatched": True, "note": "the scope watches something else"}
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert api.unmatched_runs(tmp_path) == {report["runs"][0]["id"]: "the scope watches something else"}


DOC = REPO / "docs" / "report-schema.md"


def test_the_docs_field_tables_are_the_models() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert render_doc(text) == text, "docs/report-schema.md is stale: run python scripts/report_schema_doc.py"
    assert ('| `status` | `"complete"` \\| `"incomplete"` \\| `"failed"` \\| `"interrupted"` \\| `"running"` | '
            "whether the run finished") in text
    # a table edited by hand is put back; a model without its block is refused
    edited = text.replace("| `sw_lost` | int |", "| `sw_lost` | float |")
    assert edited != text and render_doc(edited) == text
    with pytest.raises(ValueError, match=r"models without a block \['Losses'\]"):
        render_doc(re.sub(r"<!-- generated: Losses -->.*?<!-- end generated -->", "", text, flags=re.S))


def test_station_schema_report_prints_report_jsons_schema(tmp_path: Path) -> None:
    res = run_station("schema", "--report")
    assert res.returncode == 0, res.stderr
    printed = json.loads(res.stdout)
    assert printed == documented_model().model_json_schema()  # the station's own kinds, nothing else
    assert {"cyclictest", "interruptions", "gpio", "runs", "comparisons"} <= set(printed["properties"])
    report, samples = _module()
    jsonschema.validate(json.loads(write_reports(report, samples, tmp_path)["report.json"].read_text()), printed)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**report, "schema_version": "2"}, printed)
    # the campaign schema is still the default
    assert "matrix" in json.loads(run_station("schema").stdout)["properties"]
    md = run_station("schema", "--report", "--markdown")
    assert md.returncode == 0 and md.stdout == "\n\n".join(tables().values()) + "\n"
    assert run_station("schema", "--markdown").returncode == 2
