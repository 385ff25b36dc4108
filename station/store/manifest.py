"""A run's manifest.json as a typed, versioned model, and its one reader.

RunStore writes the manifest (run_store.py): the core's header below when the run opens, the
outcome, counts and checksums when it seals. Each kind adds top-level keys of its own
(`Measurement.manifest`, `seal_extra`) and declares them as a model (`Kind.manifest_model`), so
that a run's whole manifest has a closed schema (`manifest_model`, docs/manifest-schema.md, checked
against every kind's runs in the tests). Reading stays open: a kind's keys reach the reader as
extra attributes (`Manifest.section`), and a run written by a plug-in kind without a model reads.

Version 1 is every manifest written so far (one without `manifest_version` is version 1); a reader
refuses a newer version than it knows rather than guessing what its fields mean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

MANIFEST = "manifest.json"
#: bumped on any change a reader must know of (a renamed or retyped field, a new meaning)
MANIFEST_VERSION = 1

RunState = Literal["running", "abandoned", "complete", "incomplete", "failed", "interrupted"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class RunCell(_Closed):
    """Which cell of the campaign's matrix the run measured."""

    interface: str | None = Field(None,
                                  description="the module kind's interface (`lpt`, `pcie`); null "
                                              "otherwise")
    variant: str | None = Field(None,
                                description="the module's handler variant, or a gpio/avrsim run's "
                                            "case")
    load: str = Field(description="the load set's name")
    repetition: int = Field(description="repetition index, from 0")
    target: str | None = Field(None, description="the target's name (null with a single target)")


class Spoilers(_Open):
    """What on the target spoils the figures (station/target/spoilers.py): open-ended facts."""

    cpu: int | None = Field(None, description="the measured CPU")
    flags: list[str] = Field(default_factory=list, description="the spoilers found, one word each")
    facts: dict[str, Any] = Field(default_factory=dict, description="what they were judged from")


class KernelLog(_Closed):
    """The target's kernel log during the run."""

    new_lines: list[str] = Field(default_factory=list, description="lines the run added")
    trouble: list[str] = Field(default_factory=list,
                               description="those that say something went wrong")


class CampaignRecord(_Open):
    """The campaign as validated (its schema: `station schema`); an imported run has its name and
    origin only."""

    name: str = Field(description="the campaign's name")


class Manifest(_Open):
    """manifest.json: what the run is (its cell, the campaign, the target's audit, the versions) and
    how it ended (status, counts, checksums). A kind's own keys follow at the top level."""

    manifest_version: int = Field(MANIFEST_VERSION,
                                  description="this document's version (absent: 1)")
    run_id: str = Field(description="the run's id, its directory's name")
    kind: str = Field("module", description="the run kind that measured it (absent: module)")
    status: RunState = Field(description="how the run ended (abandoned: the station was killed)")
    error: str | None = Field(None, description="why the run is incomplete or failed")
    started_utc: str | None = Field(None, description="when the run opened (ISO 8601)")
    ended_utc: str | None = Field(None, description="when it was sealed")
    order: int = Field(0, description="its place in the campaign file's order")
    config_hash: str | None = Field(None,
                                    description="hash of the settings that shape the measurement")
    run: RunCell | None = Field(None, description="the matrix cell")
    loads: list[dict[str, Any]] = Field(default_factory=list,
                                        description="the load set's loads as configured")
    campaign: CampaignRecord | None = Field(None, description="the campaign file as validated")
    audit: dict[str, str] = Field(default_factory=dict,
                                  description="the target's audit (uname, cmdline, …)")
    versions: dict[str, str] = Field(default_factory=dict,
                                     description="the station's and its libraries'")
    spoilers: Spoilers | None = Field(None,
                                      description="what spoils the figures (null: not judged)")
    kernel_log: KernelLog | None = Field(None, description="the kernel log's new lines")
    duration_s: float | None = Field(None, description="how long the measurement ran")
    counts: dict[str, int] = Field(default_factory=dict, description="rows each sealed table holds")
    checksums_sha256: dict[str, str] = Field(default_factory=dict,
                                             description="the raw files' SHA-256")
    seal_error: str | None = Field(None,
                                   description="why the seal's conversions failed (raw files kept)")
    imported: dict[str, Any] | None = Field(None,
                                            description="an imported run: its sources and warnings")

    def section(self, name: str) -> dict[str, Any]:
        """A kind's top-level key as written, {} when absent or null."""
        value = (self.model_extra or {}).get(name)
        return value if isinstance(value, dict) else {}

    def extra(self, name: str, default: Any = None) -> Any:
        """A kind's top-level key as written (any JSON value), default when absent."""
        return (self.model_extra or {}).get(name, default)


class TornManifest(ValueError):
    """manifest.json is not a JSON object: torn by a crash (or never one)."""


class ManifestError(ValueError):
    """manifest.json is JSON but not a manifest this station can read (a newer version, a field of
    the wrong type)."""


def read_manifest_json(run_dir: Path) -> dict[str, Any]:
    """A run's manifest.json as written, unchecked (what may be read of any manifest: its order, its
    identity). Raises OSError when there is none, TornManifest naming the file when it is no JSON
    object."""
    path = run_dir / MANIFEST
    text = path.read_text()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TornManifest(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TornManifest(f"{path}: not a JSON object")
    return data


def read_manifest(run_dir: Path) -> Manifest:
    """A run's manifest.json (the one reader of it). Raises OSError when there is none, TornManifest
    or ManifestError (both ValueError) naming the file when it is not a manifest this station can
    read."""
    path = run_dir / MANIFEST
    data = read_manifest_json(run_dir)
    version = data.get("manifest_version", 1)
    if isinstance(version, bool) or not isinstance(version,
                                                   int) or not 1 <= version <= MANIFEST_VERSION:
        raise ManifestError(f"{path}: manifest version {version!r}, this station reads 1 to "
                            f"{MANIFEST_VERSION}: a newer irq-station wrote it (upgrade to read "
                            "it), or it is no manifest")
    data.setdefault("run_id", run_dir.name)
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ManifestError(f"{path}: not a run manifest ({where})") from None


def manifest_model(kind: str, section: type[BaseModel] | None) -> type[BaseModel]:
    """The closed model of one kind's manifests: the core's fields, `kind` fixed, and the kind's
    own top-level keys from its model (None: the kind declares none, its keys are open)."""
    fields: dict[str, Any] = {name: (info.annotation, info)
                              for name, info in Manifest.model_fields.items()}
    kind_type = Literal[kind]  # type: ignore[valid-type]
    fields["kind"] = (kind_type, Field(description="the run kind that measured it"))
    if section is not None:
        fields |= {name: (info.annotation, info) for name, info in section.model_fields.items()}
    config = ConfigDict(extra="forbid" if section is not None else "allow")
    name = "".join(part.capitalize() for part in kind.split("_")) + "Manifest"
    return create_model(name, __config__=config, __doc__=Manifest.__doc__, __module__=__name__,
                        **fields)
