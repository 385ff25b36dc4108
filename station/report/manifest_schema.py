"""manifest.json's closed schema, one model per registered kind (docs/manifest-schema.md; `station
schema --manifest`). The core's fields are station.store.manifest's; a kind's own top-level keys
come from its `Kind.manifest_model`. It sits beside report.json's schema because both are built
from the registry, which the store below them does not know."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter

from station import kind_registry
from station.store.manifest import manifest_model


def manifest_models(kinds: list[kind_registry.Kind] | None = None) -> dict[str, type[BaseModel]]:
    """Each kind's closed manifest model by kind name (default: every registered kind)."""
    chosen = kinds if kinds is not None else list(kind_registry.kinds().values())
    return {kind.name: manifest_model(kind.name, kind.load("manifest_model")) for kind in chosen}


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of manifest.json: one of the kinds' manifests, told apart by `kind`."""
    models = tuple(manifest_models().values())
    union = Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007 - a runtime tuple
    schema = TypeAdapter(union).json_schema()
    schema["title"] = "manifest.json"
    return schema
