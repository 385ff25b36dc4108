"""bench: the target (or targets), the scope, the generator and the load hosts, and the loads a run
starts on them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from instruments.dialects import DIALECTS, GENERATORS
from station.common.units import format_voltage
from station.config.twin import TwinSettings
from station.config.types import (
    LEVEL_RANGE,
    MAX_RECORD_LENGTH,
    RESERVED_LOAD_NAMES,
    TIME_PER_DIV_RANGE,
    TIMEOUT_RANGE,
    VOLTS_PER_DIV_RANGE,
    Float,
    Host,
    Int,
    LocalPath,
    LocatedError,
    Name,
    RemotePath,
    Seconds,
    Strict,
    User,
    Volts,
    _pattern,
    _range,
    _text,
    _volts_or_auto,
)

# a labgrid coordinator: host name, IPv4 or [IPv6], and a port
COORDINATOR_PATTERN = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):[0-9]{1,5}"


class TargetSettings(Strict):
    kind: Literal["twin", "ssh", "vm", "local", "labgrid"] = Field(
        "twin",
        description="twin: the built-in emulated RTAI box; ssh: a real target; vm: Debian's kernel "
        "in QEMU, built and booted by the bench for the campaign (family mainline); local: this "
        "machine, through a throw-away OpenSSH server the bench starts on 127.0.0.1 (the same SSH "
        "path as ssh); labgrid: a labgrid place, acquired for the campaign, its NetworkService the "
        "SSH endpoint and its PyVISADevice resources the instruments (docs/lab.md)",
    )
    place: Name | None = Field(None, description="labgrid only: the place's name")
    coordinator: Annotated[str, _pattern(COORDINATOR_PATTERN, "HOST:PORT")] | None = Field(
        None, description="labgrid only: the coordinator's HOST:PORT; default: $LG_COORDINATOR, "
        "else labgrid's own default 127.0.0.1:20408")
    ssh_resource: Name | None = Field(
        None, description="labgrid only: which of the place's NetworkService resources is the "
        "target, by name (needed only when the place has several)")
    kernel: Literal["regular", "rt"] = Field(
        "regular",
        description="vm only: Debian's regular kernel or its PREEMPT_RT build "
                    "(linux-image-rt-amd64, -rt-arm64)"
    )
    arch: Literal["amd64", "arm64"] = Field(
        "amd64",
        description="vm only: the guest's architecture, by Debian's name: amd64 (QEMU's q35 PC) "
        "or arm64 (QEMU's virt board, emulated: Debian's arm64 kernel of the same version, the "
        "modules cross-built; no parallel port, so no LPT module; docs/vm.md)"
    )
    host: Host = Field("127.0.0.1",
                       description="a name or address; ~/.ssh/config's Host aliases, HostName, "
                       "User, Port, IdentityFile and ProxyJump apply as they do for ssh")
    port: Int | None = Field(None, ge=1, le=65535,
                             description="default: ~/.ssh/config's Port for this host, else 22")
    user: User | None = Field(
        None, description="default: ~/.ssh/config's User for this host, else your local user name"
    )
    identity_file: LocalPath | None = Field(None,
                                            description="private key; default: ssh-agent / ~/.ssh "
                                                        "keys")
    known_hosts: LocalPath | None = Field(
        None,
        description="known_hosts file; default ~/.ssh/known_hosts. Host keys are always checked."
    )
    connect_timeout: Seconds(TIMEOUT_RANGE) = 10.0
    reconnect_for: Seconds(TIMEOUT_RANGE) = Field(
        60.0, description="how long a run's teardown keeps reconnecting to a host that stopped "
        "answering, to unload what the station loaded and stop its loads, before it gives up and "
        "names `station cleanup`; also how long a host that failed a run may take to answer again "
        "before its other runs are given up"
    )
    family: Literal["rtai", "mainline"] = "rtai"
    module_dir: RemotePath = Field(
        "/opt/irq-station/modules", description="directory holding the .ko files on the target"
    )
    work_dir: RemotePath = Field("/tmp/irq-station", description="target directory for pid files")
    fifo: Int = Field(0, ge=0, le=63, description="RTAI FIFO number (rtai family)")
    sudo: bool = Field(
        False, description="log in as an ordinary user and run insmod, rmmod, dmesg, the stream "
        "reader and kill through `sudo -n` (needs a NOPASSWD sudoers rule; the station never types "
        "a password)",
    )
    upload_modules: LocalPath | None = Field(
        None,
        description="local directory of prebuilt .ko files to copy into module_dir before the runs "
        "(their vermagic must match the target's kernel)",
    )

    @model_validator(mode="before")
    @classmethod
    def _mainline_by_default(cls, data: object) -> object:
        # a VM or this machine runs a mainline kernel: family need not be spelled out
        if isinstance(data, dict) and data.get("kind") in ("vm", "local") and "family" not in data:
            return {**data, "family": "mainline"}
        return data

    @model_validator(mode="after")
    def _labgrid_needs_a_place(self) -> TargetSettings:
        if self.kind == "labgrid" and self.place is None:
            raise LocatedError(("place",), "a labgrid target needs the place's name")
        for name in ("place", "coordinator", "ssh_resource"):
            if self.kind != "labgrid" and getattr(self, name) is not None:
                raise LocatedError((name,), "is a labgrid target's: only for kind: labgrid")
        for name in ("host", "port", "user"):
            if self.kind == "labgrid" and name in self.model_fields_set:
                raise LocatedError((name,),
                                   f"a labgrid target's {name} is its place's NetworkService's: "
                                   "leave it out")
        return self

    @model_validator(mode="after")
    def _vm_runs_mainline(self) -> TargetSettings:
        if self.kind in ("vm", "local") and self.family != "mainline":
            raise ValueError(f"a {self.kind} target runs a mainline kernel: set family: mainline "
                             "(RTAI needs its own kernel)")
        if self.kernel != "regular" and self.kind != "vm":
            raise LocatedError(("kernel",), "chooses the VM's kernel: only for kind: vm")
        if self.arch != "amd64" and self.kind != "vm":
            raise LocatedError(("arch",), "chooses the VM's architecture: only for kind: vm (a "
                               "board's is what it runs)")
        return self


ScopeDialect = Literal[tuple(sorted(DIALECTS))]  # one list of dialects: the instruments' registry


SEGMENTED_DIALECTS = ("keysight_infiniivision", "tektronix_mso")  # FastFrame / segmented memory


class ScopeSettingsConfig(Strict):
    kind: Literal["twin", "visa", "none"] = "twin"
    resource: Annotated[str, _text(256)] | None = Field(
        None, description="VISA resource, e.g. TCPIP::10.0.0.5::4000::SOCKET; on a labgrid target, "
        "labgrid:NAME takes the place's PyVISADevice of that name (labgrid: alone: its only one)"
    )
    dialect: ScopeDialect = Field("tektronix_tds",
                                  description="the scope's command set (instruments/dialects.py)")
    timeout: Seconds(TIMEOUT_RANGE) = 10.0
    channel: Int = Field(1, ge=1, le=4)
    volts_per_div: Volts(VOLTS_PER_DIV_RANGE) = 1.0
    position_div: Float = Field(-3.0, ge=-5, le=5)
    time_per_div: Seconds(TIME_PER_DIV_RANGE) = 500e-6
    record_length: Int = Field(120000, gt=0, le=MAX_RECORD_LENGTH)
    trigger_level: Volts(LEVEL_RANGE) = 1.5
    trigger_position_pct: Float = Field(10.0, ge=0, le=100)
    threshold: Annotated[
        float | Literal["auto"],
        BeforeValidator(_volts_or_auto),
        AfterValidator(lambda v: v if v == "auto" else _range(*LEVEL_RANGE,
                                                              format_voltage).func(v)),
    ] = "auto"
    capture: Literal["waveform", "segmented", "measurement"] = Field(
        "waveform",
        description="waveform: single long records, every pulse in each; segmented: FastFrame / "
        "segmented memory, `segments` frames of record_length points a trigger each (one pulse a "
        "frame), placed by the scope's time tags; measurement: the scope's own pulse-width "
        "measurement of each acquisition, no waveform transfer (docs/capture.md)"
    )
    segments: Int = Field(1000, ge=2, le=1_000_000,
                          description="frames per acquisition when capture is segmented")
    cross_check_every: Int = Field(
        0, ge=0, le=1_000_000, description="capture measurement: transfer every Nth acquisition's "
        "record too and extract its pulses on the host, beside the scope's numbers (0: never)"
    )
    bus: Literal["model", "loopback", "gpib", "usb", "lan", "gigabit"] = Field(
        "model",
        description="the twin scope's bus, which sets how long its replies take: model: the "
        "simulated instrument's own (GPIB for the TDS, LAN for the InfiniiVision, gigabit LAN for "
        "the MSO); loopback: no delay (instruments/sim/bus.py, docs/scopes/)"
    )
    bus_rate: Float | None = Field(
        None, gt=0, le=1e10, description="the twin scope's bus rate in bytes/s, in place of the "
        "profile's (a rate you timed on your own scope)"
    )

    @model_validator(mode="after")
    def _visa_needs_resource(self) -> ScopeSettingsConfig:
        if self.kind == "visa" and not self.resource:
            raise LocatedError(
                ("resource",),
                "a visa scope needs a resource, e.g. TCPIP::192.168.1.30::4000::SOCKET"
            )
        if self.kind != "twin":
            for name, default in (("bus", "model"), ("bus_rate", None)):
                if getattr(self, name) != default:
                    raise LocatedError((name,), f"{name} sets the twin scope's bus; a {self.kind} "
                                       "scope's bus is the instrument's own: leave it out")
        if self.capture == "segmented" and self.dialect not in SEGMENTED_DIALECTS:
            raise LocatedError(
                ("capture",),
                f"segmented capture needs FastFrame or segmented memory, which {self.dialect} has "
                f"not (dialects with it: {', '.join(SEGMENTED_DIALECTS)}): use waveform"
            )
        return self


GeneratorDialect = Literal[tuple(sorted(GENERATORS))]


class GeneratorSettingsConfig(Strict):
    """The function generator that drives the stimulus of a gpio campaign (its settings are under
    gpio:)."""

    kind: Literal["twin", "visa", "none"] = Field(
        "twin",
        description="twin: the built-in simulated generator; visa: an instrument; none: the "
        "stimulus comes from elsewhere (set up by hand)"
    )
    resource: Annotated[str, _text(256)] | None = Field(
        None, description="VISA resource, e.g. TCPIP::10.0.0.6::5025::SOCKET; on a labgrid target, "
        "labgrid:NAME takes the place's PyVISADevice of that name"
    )
    dialect: GeneratorDialect = Field(  # type: ignore[valid-type]
        "keysight_33500", description="the generator's command set")
    channel: Int = Field(1, ge=1, le=2)
    timeout: Seconds(TIMEOUT_RANGE) = 10.0

    @model_validator(mode="after")
    def _visa_needs_resource(self) -> GeneratorSettingsConfig:
        if self.kind == "visa" and not self.resource:
            raise LocatedError(("resource",), "a visa generator needs a resource, e.g. "
                               "TCPIP::192.168.1.31::5025::SOCKET")
        return self


class LoadHost(Strict):
    """Another machine that runs load generators aimed at the target (e.g. the seed's hping3
    flood)."""

    host: Host
    port: Int | None = Field(None, ge=1, le=65535,
                             description="default: ~/.ssh/config's Port for this host, else 22")
    user: User | None = Field(
        None, description="default: ~/.ssh/config's User for this host, else your local user name"
    )
    identity_file: LocalPath | None = None
    known_hosts: LocalPath | None = None
    connect_timeout: Seconds(TIMEOUT_RANGE) = 10.0
    reconnect_for: Seconds(TIMEOUT_RANGE) = Field(
        60.0, description="how long a run's teardown keeps reconnecting to a host that stopped "
        "answering, to unload what the station loaded and stop its loads, before it gives up and "
        "names `station cleanup`; also how long a host that failed a run may take to answer again "
        "before its other runs are given up"
    )
    work_dir: RemotePath = "/tmp/irq-station"
    sudo: bool = Field(False,
                       description="stop loads started with `sudo -n` through `sudo -n kill`")


class LoadSpec(Strict):
    name: Name
    command: Annotated[str, Field(min_length=1), _text(10_000, allowed="\n\t")] = Field(
        description="a shell command, run as written (sh -c) on its host"
    )
    host: Name = Field("target", description="'target' or the name of a bench.load_hosts entry")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_LOAD_NAMES:
            raise ValueError(f"load name {value!r} is reserved by the station")
        return value

    @field_validator("command")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a load needs a command")
        return value


# an instrument's resource taken from the target's labgrid place: labgrid:[NAME]
PLACE_RESOURCE = "labgrid:"


class BenchSettings(Strict):
    target: TargetSettings = TargetSettings()
    targets: dict[Name, TargetSettings] = Field(
        default_factory=dict, max_length=64,
        description="instead of target: several named targets (e.g. a regular and a PREEMPT_RT "
        "build); the whole matrix runs on each, one target after the other, and run ids start with "
        "its name",
    )
    twin: TwinSettings = TwinSettings()
    scope: ScopeSettingsConfig = ScopeSettingsConfig()
    generator: GeneratorSettingsConfig = GeneratorSettingsConfig()
    load_hosts: dict[Name, LoadHost] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_way_to_name_targets(self) -> BenchSettings:
        if self.targets and "target" in self.model_fields_set:
            raise LocatedError(("targets",),
                               "give either target: (one) or targets: (several by name), not both")
        if sum(t.kind == "twin" for t in self.targets.values()) > 1:
            raise LocatedError(("targets",),
                               "at most one twin target (the twin is one emulated box)")
        if "scope_replies" in self.twin.model_fields_set and not (
                self.scope.kind == "twin" and self.scope.dialect == "tektronix_mso"):
            raise LocatedError(("twin", "scope_replies"),
                               "scope_replies are the twin MSO's (bench.scope kind: twin, "
                               f"dialect: tektronix_mso), not a {self.scope.kind} "
                               f"{self.scope.dialect}'s")
        self._miswire_on_the_twin()
        for part, settings in (("scope", self.scope), ("generator", self.generator)):
            if (settings.resource or "").startswith(PLACE_RESOURCE) and (
                settings.kind != "visa"
                or any(t.kind != "labgrid" for t in self.named_targets().values())
            ):
                raise LocatedError((part, "resource"),
                                   f"{PLACE_RESOURCE}… names a PyVISADevice of the target's "
                                   "labgrid place: only for a visa instrument on labgrid targets")
        return self

    def _miswire_on_the_twin(self) -> None:
        """The twin plays a scope fault with its own scope, a module fault with its own target."""
        for n, fault in enumerate(self.twin.miswire):
            where = ("twin", "miswire", n)
            if fault == "module_other_kernel":
                if all(t.kind != "twin" for t in self.named_targets().values()):
                    raise LocatedError(where, f"{fault} is played by the twin's target: a "
                                       "bench.target of kind twin")
            elif self.scope.kind != "twin":
                raise LocatedError(where, f"{fault} is played by the twin's scope: bench.scope "
                                   "kind twin")
            if fault == "trigger_above_pulse" and self.scope.trigger_level < 0.5:
                raise LocatedError(where, f"{fault} makes the line swing to 80 % of the trigger "
                                   f"level, which is {self.scope.trigger_level:g} V: set "
                                   "bench.scope.trigger_level to 0.5 V or more")

    def named_targets(self) -> dict[str | None, TargetSettings]:
        """The targets by name; a single bench.target has no name (its run ids carry none)."""
        return dict(self.targets) if self.targets else {None: self.target}
