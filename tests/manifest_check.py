"""Every run's manifest.json against the JSON Schema the station generates for it (`station schema
--manifest`), judged by jsonschema, a validator that is not the pydantic that wrote the schema."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema


@functools.cache
def _schema() -> dict[str, Any]:
    from station import api

    schema = api.manifest_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def assert_manifests_fit(out_dir: Path) -> dict[str, str]:
    """Each run's id → its kind, once every manifest under out_dir/runs fits the schema (attempts
    kept beside a run included)."""
    kinds = {}
    for path in sorted((out_dir / "runs").glob("*/manifest.json")):
        manifest = json.loads(path.read_text())
        try:
            jsonschema.validate(manifest, _schema())
        except jsonschema.ValidationError as exc:
            raise AssertionError(f"{path}: {exc.message} at {'/'.join(map(str, exc.absolute_path))}") from None
        kinds[path.parent.name] = manifest["kind"]
    assert kinds, f"no run under {out_dir}"
    return kinds
