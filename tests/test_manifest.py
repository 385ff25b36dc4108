"""manifest.json as a typed, versioned document (station/store/manifest.py): its one reader reads
what every station version wrote and refuses what it cannot read with the file named; the schema
generated per kind is closed (a key no model declares is refused) and docs/manifest-schema.md is
the models' own tables. That the manifests of every kind's real runs fit the schema is checked
where those runs are made (tests/manifest_check.py's callers)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station import api, kind_registry
from station.report.manifest_schema import manifest_models
from station.report.schema_doc import manifest_tables, render_doc
from station.store.manifest import MANIFEST_VERSION, Manifest, read_manifest
from station.store.run_store import RunStore
from tests.import_graph import REPO


def _written(tmp_path: Path, **extra: Any) -> Path:
    """A run directory as RunStore writes it: opened with a cell, sealed complete."""
    store = RunStore(tmp_path, "lpt-inb-r0")
    store.open({"kind": "module", "order": 3, "run": {"interface": "lpt", "variant": "inb", "load": "none",
                                                      "repetition": 0, "target": None},
                "campaign": {"name": "c"}, "period_ns": 100_000, **extra})
    store.seal("complete", {"strays": 2})
    return store.dir


def test_what_the_store_writes_reads_typed_and_fits_its_kinds_schema(tmp_path: Path) -> None:
    run_dir = _written(tmp_path)
    m = read_manifest(run_dir)
    assert (m.run_id, m.kind, m.status, m.order, m.manifest_version) == ("lpt-inb-r0", "module", "complete", 3, 1)
    assert m.run is not None and (m.run.interface, m.run.variant, m.run.repetition) == ("lpt", "inb", 0)
    assert m.extra("period_ns") == 100_000 and m.extra("strays") == 2 and m.section("losses") == {}
    raw = json.loads((run_dir / "manifest.json").read_text())
    jsonschema.validate(raw, api.manifest_json_schema())


def test_a_key_no_model_declares_is_refused_by_the_schema(tmp_path: Path) -> None:
    schema = api.manifest_json_schema()
    raw = json.loads((_written(tmp_path, perod_ns=5) / "manifest.json").read_text())  # a typo
    with pytest.raises(jsonschema.ValidationError, match="perod_ns"):
        jsonschema.validate(raw, schema)
    # and a core field of the wrong type
    raw = json.loads((_written(tmp_path / "b") / "manifest.json").read_text())
    raw["order"] = "3"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(raw, schema)


def test_a_plug_in_kind_without_a_model_keeps_its_keys_open() -> None:
    kind = kind_registry.register(kind_registry.Kind(name="throwaway_manifest", summary="a test's kind"))
    try:
        model = manifest_models()["throwaway_manifest"]
        model.model_validate({"run_id": "x", "kind": "throwaway_manifest", "status": "complete", "anything": [1]})
        with pytest.raises(ValueError):  # its kind is still fixed
            model.model_validate({"run_id": "x", "kind": "module", "status": "complete"})
    finally:
        kind_registry.unregister(kind.name)


def test_a_manifest_before_versions_reads_as_version_1_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    run_dir = _written(tmp_path)
    raw = json.loads((run_dir / "manifest.json").read_text())
    del raw["manifest_version"], raw["kind"], raw["run_id"]  # as the first stations wrote them
    (run_dir / "manifest.json").write_text(json.dumps(raw))
    m = read_manifest(run_dir)
    assert (m.manifest_version, m.kind, m.run_id) == (1, "module", "lpt-inb-r0")
    raw["manifest_version"] = MANIFEST_VERSION + 1
    (run_dir / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=rf"manifest.json: manifest version {MANIFEST_VERSION + 1}.*upgrade"):
        read_manifest(run_dir)


@pytest.mark.parametrize(("text", "words"), [
    ("{", "not JSON"), ("[1, 2]", "not a JSON object"),
    ('{"status": "finished"}', r"not a run manifest \(status"),
    ('{"status": "complete", "run": {"load": 3}}', r"not a run manifest \(run.load"),
])
def test_a_manifest_that_cannot_be_read_names_its_file_and_field(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ValueError, match=rf"{re.escape(str(tmp_path))}/manifest.json: {words}"):
        read_manifest(tmp_path)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=4), max_leaves=20)
KEYS = st.sampled_from(sorted(Manifest.model_fields) + ["period_ns", "gpio", "x"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=8) | JSON)
def test_garbage_manifests_read_or_are_refused_by_name(tmp_path_factory: pytest.TempPathFactory, data: Any) -> None:
    run_dir = tmp_path_factory.mktemp("garbage")
    (run_dir / "manifest.json").write_text(json.dumps(data))
    try:
        m = read_manifest(run_dir)
    except ValueError as exc:
        assert str(run_dir / "manifest.json") in str(exc)
        return
    assert isinstance(m, Manifest) and m.status in ("running", "abandoned", "complete", "incomplete", "failed",
                                                    "interrupted")


def test_the_docs_field_tables_are_the_models() -> None:
    doc = REPO / "docs" / "manifest-schema.md"
    text = doc.read_text(encoding="utf-8")
    assert render_doc(text, manifest_tables()) == text, (
        "docs/manifest-schema.md is stale: run python scripts/report_schema_doc.py")
    with pytest.raises(ValueError, match=r"models without a block \['GpioManifest'\]"):
        render_doc(re.sub(r"<!-- generated: GpioManifest -->.*?<!-- end generated -->", "", text, flags=re.S),
                   manifest_tables())


def test_resuming_refuses_a_run_it_cannot_read_and_passes_a_torn_one(tmp_path: Path) -> None:
    """A torn manifest (a crash mid-write) is a run to measure again; one of a newer station is
    not: measuring it again would put aside data this station cannot read."""
    from station.campaign.loop import CampaignError, completed_runs

    for name, text in (("torn", '{"run_id": "torn", "sta'), ("newer", json.dumps(
            {"run_id": "newer", "status": "complete", "manifest_version": MANIFEST_VERSION + 1}))):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "manifest.json").write_text(text)
    with pytest.raises(CampaignError, match=r"newer/manifest.json: manifest version 2.*--fresh"):
        completed_runs(tmp_path, "h")
    (tmp_path / "runs" / "newer" / "manifest.json").unlink()
    assert completed_runs(tmp_path, "h") == set()


def test_a_run_whose_manifest_cannot_be_read_is_left_out_of_the_report_with_a_note(tmp_path: Path) -> None:
    from station.analysis.campaign import analyse_campaign

    good = _written(tmp_path)
    bad = tmp_path / "runs" / "pcie-inb-r0"
    bad.mkdir()
    (bad / "manifest.json").write_text('{"run_id": "pcie-inb-r0", "order": 1}')  # no status
    report, _ = analyse_campaign(tmp_path)
    assert any(n.startswith("Run pcie-inb-r0 is left out:") and "status" in n for n in report["notes"])
    assert [r["id"] for r in report["runs"]] == [good.name]


def test_the_seal_writes_its_tables_even_for_a_manifest_its_schema_refuses(tmp_path: Path) -> None:
    """The Parquet files' identity columns are read from the manifest as written: a kind's manifest
    the typed model refuses (here a campaign without a name) loses no table at the seal."""
    import pandas as pd

    from station.store.run_store import write_parquet

    store = RunStore(tmp_path, "r0")
    store.open({"kind": "module", "campaign": {}, "run": {"load": "none", "repetition": 0}})
    store.seal("complete", {}, [lambda d: write_parquet(pd.DataFrame({"x": [1, 2]}), d / "t.parquet") or {"t": 2}])
    manifest = json.loads((store.dir / "manifest.json").read_text())
    assert "seal_error" not in manifest and manifest["counts"] == {"t": 2}
    assert pd.read_parquet(store.dir / "t.parquet")["load"].tolist() == ["none", "none"]
