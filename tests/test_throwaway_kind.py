"""Issue 30's proof that a run kind is one package: tests/throwaway_kind (settings, measurement,
analysis, report part) is registered with one line and runs through a whole twin campaign — the
campaign file, the bench, the lifecycle over real SSH, the analysis, the HTML/Markdown/JSON/CSV
report — touching no file of the station."""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import throwaway_kind

from station import api, kind_registry
from station.config import ConfigError, expand_runs, json_schema, measurement_hash, parse_campaign

SAMPLES = 6
CAMPAIGN = f"""\
name: throwaway
bench:
  target: {{kind: twin}}
  scope: {{kind: none}}
matrix: {{kind: loadavg, loads: [none, io], samples: {SAMPLES}, max_duration: 20s}}
loadavg: {{period: 50ms, busy_above: 1}}
loads:
  none: []
  io: [{{name: dd, command: 'while :; do dd if=/dev/zero of=x bs=1M count=1; done'}}]
"""


@pytest.fixture(scope="module", autouse=True)
def _registered():
    kind_registry.register(throwaway_kind.KIND)  # the one registration line
    yield
    kind_registry.unregister(throwaway_kind.KIND.name)


def test_its_settings_join_the_campaign_schema():
    campaign = parse_campaign(CAMPAIGN)
    assert campaign.loadavg.period == 0.05 and campaign.loadavg.busy_above == 1.0
    assert [s.id for s in expand_runs(campaign, as_written=True)] == ["none-r0", "io-r0"]
    assert sorted(s.id for s in expand_runs(campaign)) == ["io-r0", "none-r0"]
    schema = json.loads(json_schema())
    assert "loadavg" in schema["properties"]
    with pytest.raises(ConfigError, match=r"<string>:3: loadavg: loadavg options are for matrix.kind: loadavg"):
        parse_campaign("name: x\nmatrix: {samples: 10}\nloadavg: {period: 50ms}\n")
    with pytest.raises(ConfigError, match=r"matrix.samples: the load average probe counts samples"):
        parse_campaign(CAMPAIGN.replace(f"samples: {SAMPLES}", "duration: 1s"))
    with pytest.raises(ConfigError, match=r"matrix.period: is a module-run key; a loadavg campaign"):
        parse_campaign(CAMPAIGN.replace("kind: loadavg,", "kind: loadavg, period: 100us,"))


def test_a_campaign_of_it_runs_to_a_rendered_report(tmp_path: Path):
    out = tmp_path / "out"
    result = asyncio.run(api.run_campaign_async(parse_campaign(CAMPAIGN), out))
    assert [r.status for r in result.outcomes] == ["complete", "complete"], result.outcomes
    report = json.loads((out / "report.json").read_text())
    # report.json fits the schema with the kind's own part (its package's report_model), typed
    schema = api.report_json_schema()
    assert schema["properties"]["loadavg"]["anyOf"][0] == {"$ref": "#/$defs/LoadavgSection"}
    jsonschema.validate(report, schema)
    with pytest.raises(jsonschema.ValidationError, match="'many' is not of type 'integer'"):
        jsonschema.validate({**report, "loadavg": {**report["loadavg"], "runs": [
            {**report["loadavg"]["runs"][0], "samples": "many"}]}}, schema)
    runs = {r["id"]: r for r in report["loadavg"]["runs"]}
    assert set(runs) == {"none-r0", "io-r0"} and report["runs"] == []
    assert all(r["samples"] == SAMPLES for r in runs.values())
    # the io load (dd in a loop) kept the twin busy for every sample; with no load it idles
    assert runs["io-r0"]["busy"] == SAMPLES and runs["none-r0"]["busy"] == 0
    assert report["findings"][0]["figure"] == f"{SAMPLES} of {2 * SAMPLES}"

    html = (out / "report.html").read_text()
    assert '<section id="loadavg">' in html and 'href="#loadavg"' in html
    assert '<h3 id="table-loadavg-runs">Load average per run</h3>' in html
    assert f"Samples that read busy: <strong>{SAMPLES} of {2 * SAMPLES}</strong>" in html
    md = (out / "report.md").read_text()
    assert "## Load average" in md and "| io-r0 | io | 6 | 6 |" in md
    with (out / "loadavg.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["run"], r["busy"]) for r in rows] == [("none-r0", "0"), ("io-r0", str(SAMPLES))]


def test_a_plug_in_kind_changes_no_campaigns_measured_settings():
    """Its default section joins every campaign's model, but not the hash that says whether runs
    already measured were measured with these settings (resume)."""
    module = parse_campaign("name: x\nmatrix: {samples: 10}\n")
    assert module.loadavg.period == 0.05  # the section is there …
    kind_registry.unregister(throwaway_kind.KIND.name)
    try:
        without = parse_campaign("name: x\nmatrix: {samples: 10}\n")
        assert not hasattr(without, "loadavg")
        assert measurement_hash(without) == measurement_hash(module)  # … and changes nothing measured
    finally:
        kind_registry.register(throwaway_kind.KIND)
    assert measurement_hash(parse_campaign(CAMPAIGN)) != measurement_hash(
        parse_campaign(CAMPAIGN.replace("period: 50ms", "period: 100ms")))  # its own campaign's settings count


def test_a_plug_in_kinds_matrix_keys_join_the_matrix_but_not_the_measured_settings():
    """A kind's own matrix keys (Kind.matrix_fields) join every campaign's matrix with their
    defaults; they count in the hash of its own campaigns only; a key another kind or every
    campaign already has is refused, naming the kind."""
    from pydantic import BaseModel

    class RateKeys(BaseModel):
        plug_rate: int = 5

    before = measurement_hash(parse_campaign("name: x\nmatrix: {samples: 10}\n"))
    kind_registry.register(kind_registry.Kind(name="plug", summary="x", matrix_fields=RateKeys))
    try:
        module = parse_campaign("name: x\nmatrix: {samples: 10}\n")
        assert module.matrix.plug_rate == 5 and measurement_hash(module) == before
        with pytest.raises(ConfigError, match="plug-run key"):
            parse_campaign("name: x\nmatrix: {samples: 10, plug_rate: 6}\n")
    finally:
        kind_registry.unregister("plug")

    class Retyped(BaseModel):
        period: str = "x"

    kind_registry.register(kind_registry.Kind(name="retyper", summary="x", matrix_fields=Retyped))
    try:
        with pytest.raises(ValueError, match="'retyper' declares matrix key 'period', which another kind has"):
            parse_campaign("name: x\nmatrix: {samples: 10}\n")
    finally:
        kind_registry.unregister("retyper")


def test_a_kind_cannot_take_a_core_name_and_comes_after_the_built_in_ones():
    from station.config import Campaign
    from station.report.model import ReportCore

    # a kind's section would replace a campaign key or a report.json envelope key
    assert set(Campaign.model_fields) | set(ReportCore.model_fields) | {"comparisons"} <= kind_registry.RESERVED
    for name in ("loads", "runs", "Bad-Name", ""):
        with pytest.raises(ValueError, match="cannot be called"):
            kind_registry.register(kind_registry.Kind(name=name, summary="x"))
    # registered before anything else asked the registry: still after the built-in kinds (the page's order)
    code = ("from station import kind_registry as r\n"
            "r.register(r.Kind(name='early', summary='x'))\n"
            "print(' '.join(r.kinds()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [*(m.rsplit(".", 1)[1] for m in kind_registry.BUILTIN), "early"]
