"""The campaign file: a typed schema, YAML loading with line numbers, units.

A campaign names the bench (target, scope, load hosts), the run matrix
(interfaces × variants × loads × repetitions) and how much to measure. Errors
name the file, the line and the field; unknown keys are errors.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from station.units import parse_duration, parse_voltage

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(json_schema_extra={"examples": ["100us", "14min"]})]
Volts = Annotated[float, BeforeValidator(parse_voltage), Field(json_schema_extra={"examples": ["2.5V", "500mV"]})]

Interface = Literal["lpt", "pcie"]
Variant = Literal["inb", "no-inb"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TwinSettings(Strict):
    """The built-in twin: an emulated target (SSH) and scope (SCPI) on 127.0.0.1."""

    preset: str = "seed-2015"
    seed: int = 2015
    ground_truth: bool = True
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-interface model parameters replacing the preset's, e.g. {pcie: {outlier_fraction: 5e-5}}",
    )

    @model_validator(mode="after")
    def _preset_and_overrides_exist(self) -> TwinSettings:
        from station.twin.model import load_preset

        load_preset(self.preset).with_overrides(self.overrides)  # raises with the names it knows
        return self


class TargetSettings(Strict):
    kind: Literal["twin", "ssh"] = "twin"
    host: str = "127.0.0.1"
    port: int = Field(22, ge=1, le=65535)
    user: str = "root"
    identity_file: str | None = Field(None, description="private key; default: ssh-agent / ~/.ssh keys")
    known_hosts: str | None = Field(
        None, description="known_hosts file; default ~/.ssh/known_hosts. Host keys are always checked."
    )
    connect_timeout: Seconds = 10.0
    family: Literal["rtai", "mainline"] = "rtai"
    module_dir: str = Field("/opt/irq-station/modules", description="directory holding the .ko files on the target")
    work_dir: str = Field("/tmp/irq-station", description="target directory for pid files")
    fifo: int = Field(0, ge=0, le=63, description="RTAI FIFO number (rtai family)")
    upload_modules: str | None = Field(
        None,
        description="local directory of prebuilt .ko files to copy into module_dir before the runs "
        "(their vermagic must match the target's kernel)",
    )

    @model_validator(mode="after")
    def _ssh_needs_host(self) -> TargetSettings:
        if self.kind == "ssh" and not self.host:
            raise ValueError("an ssh target needs a host")
        return self


class ScopeSettingsConfig(Strict):
    kind: Literal["twin", "visa", "none"] = "twin"
    resource: str | None = Field(None, description="VISA resource, e.g. TCPIP::10.0.0.5::4000::SOCKET")
    dialect: Literal["tektronix_tds", "tektronix_mso", "keysight_infiniivision"] = "tektronix_tds"
    timeout: Seconds = 10.0
    channel: int = Field(1, ge=1, le=4)
    volts_per_div: Volts = 1.0
    position_div: float = Field(-3.0, ge=-5, le=5)
    time_per_div: Seconds = 500e-6
    record_length: int = Field(120000, gt=0)
    trigger_level: Volts = 1.5
    trigger_position_pct: float = Field(10.0, ge=0, le=100)
    threshold: Volts | Literal["auto"] = "auto"

    @model_validator(mode="after")
    def _visa_needs_resource(self) -> ScopeSettingsConfig:
        if self.kind == "visa" and not self.resource:
            raise ValueError("a visa scope needs a resource, e.g. TCPIP::192.168.1.30::4000::SOCKET")
        return self


class LoadHost(Strict):
    """Another machine that runs load generators aimed at the target (e.g. the seed's hping3 flood)."""

    host: str
    port: int = Field(22, ge=1, le=65535)
    user: str = "root"
    identity_file: str | None = None
    known_hosts: str | None = None
    connect_timeout: Seconds = 10.0
    work_dir: str = "/tmp/irq-station"


NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
RESERVED_LOAD_NAMES = {"record-stream"}  # the station's own tracked reader


class LoadSpec(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    command: str
    host: str = Field("target", description="'target' or the name of a bench.load_hosts entry")

    @model_validator(mode="after")
    def _not_reserved(self) -> LoadSpec:
        if self.name in RESERVED_LOAD_NAMES:
            raise ValueError(f"load name {self.name!r} is reserved by the station")
        return self


class Bench(Strict):
    target: TargetSettings = TargetSettings()
    twin: TwinSettings = TwinSettings()
    scope: ScopeSettingsConfig = ScopeSettingsConfig()
    load_hosts: dict[str, LoadHost] = Field(default_factory=dict)


class Matrix(Strict):
    interfaces: list[Interface] = Field(default_factory=lambda: ["lpt", "pcie"], min_length=1)
    variants: list[Variant] = Field(default_factory=lambda: ["inb", "no-inb"], min_length=1)
    loads: list[str] = Field(default_factory=lambda: ["none"], min_length=1)
    repetitions: int = Field(1, ge=1)
    period: Seconds = 100e-6
    samples: int | None = Field(None, gt=0, description="stop a run after this many software samples")
    duration: Seconds | None = Field(None, gt=0, description="stop a run after this long")
    pulses: int = Field(0, ge=0, description="at least this many scope pulses per run (0: no minimum)")
    max_duration: Seconds = Field(3600.0, gt=0, description="hard limit per run, whatever else is unmet")
    format: Literal["v1", "legacy"] = "v1"
    cpu: int = Field(-1, ge=-1)
    lpt_base: int = 0x378
    lpt_irq: int = 7
    module_params: dict[Interface, dict[str, str | int]] = Field(
        default_factory=dict,
        description="extra module parameters per interface, e.g. {pcie: {profile: edu}} (emulation modes)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Matrix:
        if self.samples is None and self.duration is None:
            raise ValueError("give samples or duration (or both) to say when a run ends")
        period_us = self.period * 1e6
        if period_us < 10 or abs(period_us - round(period_us)) > 1e-6:
            raise ValueError(f"period {period_us:g} us: the modules take whole microseconds, at least 10 us")
        for name, values in (("interfaces", self.interfaces), ("variants", self.variants), ("loads", self.loads)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists a value twice: {values}")
        needed = max(self.duration or 0.0, (self.samples or 0) * self.period)
        if needed > self.max_duration:
            raise ValueError(
                f"a run needs at least {needed:g} s (samples × period, or duration) but max_duration is "
                f"{self.max_duration:g} s: every run would end incomplete"
            )
        return self


class Campaign(Strict):
    name: str
    description: str = ""
    bench: Bench = Bench()
    matrix: Matrix
    loads: dict[str, list[LoadSpec]] = Field(default_factory=lambda: {"none": []})

    @model_validator(mode="after")
    def _references_resolve(self) -> Campaign:
        for name in self.matrix.loads:
            if name not in self.loads:
                known = ", ".join(sorted(self.loads)) or "none defined"
                raise ValueError(f"matrix.loads names {name!r}, which is not under loads: ({known})")
        for set_name, specs in self.loads.items():
            if not re.match(NAME_PATTERN, set_name):
                raise ValueError(f"load set name {set_name!r}: use letters, digits, '_', '.', '-' (it names runs)")
            names = [s.name for s in specs]
            if len(set(names)) != len(names):
                raise ValueError(f"load set {set_name!r} uses a load name twice: {names}")
            for spec in specs:
                if spec.host != "target" and spec.host not in self.bench.load_hosts:
                    raise ValueError(
                        f"load {set_name}/{spec.name} runs on {spec.host!r}, not a bench.load_hosts entry"
                    )
        if self.matrix.pulses and self.bench.scope.kind == "none":
            raise ValueError("matrix.pulses asks for scope pulses but bench.scope.kind is none")
        return self


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix: what a single run measures."""

    interface: str
    variant: str
    load: str
    repetition: int
    kind: str = "module"  # the run kind (station/kinds/) that measures it

    @property
    def id(self) -> str:
        return f"{self.interface}-{self.variant}-{self.load}-r{self.repetition}"

    @property
    def check(self) -> bool:
        return self.variant == "inb"


def measurement_hash(campaign: Campaign) -> str:
    """What a run's numbers depend on. Name, description and the number of repetitions
    are left out: changing those does not invalidate runs already measured."""
    data = campaign.model_dump(mode="json")
    for key in ("name", "description"):
        data.pop(key)
    data["matrix"].pop("repetitions")
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def expand_runs(campaign: Campaign) -> list[RunSpec]:
    m = campaign.matrix
    return [
        RunSpec(i, v, load, r)
        for r, load, i, v in itertools.product(range(m.repetitions), m.loads, m.interfaces, m.variants)
    ]


class ConfigError(Exception):
    """A campaign file that cannot be used; the message names file, line and field."""


class _LineLoader(yaml.SafeLoader):
    """Safe YAML loader that remembers the line of every mapping key and item."""


def _compose_lines(node: yaml.Node, path: tuple, lines: dict[tuple, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[(*path, key)] = key_node.start_mark.line + 1
            _compose_lines(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _compose_lines(item, (*path, i), lines)


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    # pydantic locations may carry extra parts (union branches, validator names);
    # walk back to the deepest path that exists in the document.
    parts = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
    for n in range(len(parts), -1, -1):
        if parts[:n] in lines:
            return lines[parts[:n]]
    return None


def load_campaign(path: str | Path) -> Campaign:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_campaign(text, str(path))


def parse_campaign(text: str, source: str = "<string>") -> Campaign:
    try:
        node = yaml.compose(text, Loader=_LineLoader)
        data = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: a campaign file is a mapping with at least name: and matrix:")
    lines: dict[tuple, int] = {}
    _compose_lines(node, (), lines)
    try:
        return Campaign.model_validate(data)
    except ValidationError as exc:
        messages = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = _line_for(loc, lines)
            field = ".".join(str(p) for p in loc) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key (check the spelling; `station schema` lists the keys)"
            messages.append(f"{source}:{line or '?'}: {field}: {msg}")
        raise ConfigError("\n".join(messages)) from None


def json_schema() -> str:
    return json.dumps(Campaign.model_json_schema(), indent=2)
