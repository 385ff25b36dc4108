"""The campaign file: a typed schema, YAML loading with line numbers, units.

A campaign names the bench (target, scope, load hosts), the run matrix
(interfaces × variants × loads × repetitions) and how much to measure. Errors
name the file, the line and the field; unknown keys are errors.

Hardening, because a campaign file drives a root shell on the target:

* Loading is bounded before any Python object is built: at most 1 MiB of
  UTF-8 text, 32 levels of nesting, 100 alias uses, no recursive alias, and
  100000 values once aliases are expanded (billion laughs). Every failure,
  whatever its cause, is a ConfigError "<source>:<line or ?>: <field>: ...".
* Quantities are finite and physical; durations and voltages written in a
  file carry their unit (a Python caller may still pass plain floats).
* Every value that reaches a remote shell is checked here: module parameter
  names and values, remote paths, host and user names, load and load-set names.
  Load commands are shell commands by design; only NUL and control characters
  (other than newline and tab) are refused in them.
* load_campaign() also checks, for ssh targets and load hosts, that the key
  files named exist and are readable and that upload_modules is a directory.
"""

from __future__ import annotations

import difflib
import hashlib
import ipaddress
import itertools
import json
import os
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from instruments.dialects import DIALECTS, GENERATORS
from station import kind_registry
from station.common.units import format_duration, format_voltage, parse_duration, parse_voltage, shorten
from station.config.yaml_lines import MAX_FILE_BYTES, ConfigError, clip, line_at, load_yaml

# --- limits -------------------------------------------------------------------------------------

MAX_REPETITIONS = 10_000
MAX_RUNS = 100_000  # interfaces × variants × loads × repetitions
MAX_ERRORS = 20  # messages listed; the rest are counted

# Physical bounds, chosen so that no real bench is refused and no typo is accepted.
PERIOD_RANGE = (10e-6, 1.0, "10 us", "1 s")
DURATION_RANGE = (1e-3, 7 * 86400.0, "1 ms", "7 days (168h)")
MAX_DURATION_RANGE = (1.0, 7 * 86400.0, "1 s", "7 days (168h)")
TIMEOUT_RANGE = (0.1, 3600.0, "100 ms", "1 h")
TIME_PER_DIV_RANGE = (1e-9, 1000.0, "1 ns", "1000 s")
VOLTS_PER_DIV_RANGE = (1e-4, 1000.0, "100 uV", "1 kV")
LEVEL_RANGE = (-1000.0, 1000.0, "-1 kV", "+1 kV")
MAX_SAMPLES = 100_000_000_000  # 1e11: 7 days at 10 us is 6e10
MAX_PULSES = 1_000_000_000
MAX_RECORD_LENGTH = 100_000_000  # deepest scope memories are 62.5M-250M points; 1e8 per acquisition
TWIN_MAX_NS = 1e9  # every twin model time is below 1 s
TWIN_CLOCK_HZ = (1e3, 1e10)  # a board clock, or 0 for none


class LocatedError(ValueError):
    """A validation problem below the place pydantic reports it: `loc` is relative to the
    model (or field) whose validator raised it. parse_campaign() turns it into a line."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(f"{'.'.join(str(p) for p in loc)}: {message}" if loc else message)
        self.loc = loc
        self.message = message


# --- field types ----------------------------------------------------------------------------


def _from_file(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("from_file"))


def _seconds(value: object, info: ValidationInfo) -> float:
    return parse_duration(value, require_unit=_from_file(info))  # type: ignore[arg-type]


def _volts(value: object, info: ValidationInfo) -> float:
    return parse_voltage(value, require_unit=_from_file(info))  # type: ignore[arg-type]


def _volts_or_auto(value: object, info: ValidationInfo) -> float | str:
    return value if value == "auto" else _volts(value, info)  # type: ignore[return-value]


def _range(lo: float, hi: float, lo_text: str, hi_text: str, fmt: Callable[[float], str]) -> AfterValidator:
    def check(value: float) -> float:
        if value < lo:
            raise ValueError(f"{fmt(value)} is too small: at least {lo_text}")
        if value > hi:
            raise ValueError(f"{fmt(value)} is too large: at most {hi_text}")
        return value

    return AfterValidator(check)


def Seconds(bounds: tuple[float, float, str, str]) -> Any:  # noqa: N802 - reads as a type
    return Annotated[
        float,
        BeforeValidator(_seconds),
        _range(*bounds, format_duration),
        Field(json_schema_extra={"examples": ["100us", "14min"]}),
    ]


def Volts(bounds: tuple[float, float, str, str]) -> Any:  # noqa: N802
    return Annotated[
        float,
        BeforeValidator(_volts),
        _range(*bounds, format_voltage),
        Field(json_schema_extra={"examples": ["2.5V", "500mV"]}),
    ]


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]
Float = Annotated[float, BeforeValidator(_not_bool)]


def _control_chars(text: str, allowed: str = "") -> int | None:
    for i, ch in enumerate(text):
        if ch not in allowed and unicodedata.category(ch) in ("Cc", "Cs"):
            return i
    return None


def _text(max_len: int, allowed: str = "") -> AfterValidator:
    def check(value: str) -> str:
        if len(value) > max_len:
            raise ValueError(f"too long ({len(value)} characters; at most {max_len})")
        i = _control_chars(value, allowed)
        if i is not None:
            raise ValueError(f"character {i} is a control character (U+{ord(value[i]):04X})")
        return value

    return AfterValidator(check)


def _pattern(regex: str, what: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{shorten(value)} is not {what}")
        return value

    return AfterValidator(check)


NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
_NAME_WHAT = "a name: letters, digits, '_', '.', '-', not starting with '.' or '-', at most 64 (it names files)"
Name = Annotated[str, _pattern(NAME_PATTERN, _NAME_WHAT)]


def _load_set_name(value: str) -> str:
    if not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(
            f"load set name {shorten(value)}: use letters, digits, '_', '.', '-', not starting with '.' or '-', "
            "at most 64 (it names runs)"
        )
    return value


LoadSetName = Annotated[str, AfterValidator(_load_set_name)]
# the station's own tracked reader and probes
RESERVED_LOAD_NAMES = {"record-stream", "cyclictest", "irqgap", "gpio-responder", "simavr-harness", "rtla", "timerlat",
                      "trace-toggle"}

_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*\.?")


def _host(value: str) -> str:
    if ":" in value:
        try:
            ipaddress.IPv6Address(value)
            return value
        except ValueError:
            pass
    elif _HOSTNAME.fullmatch(value):
        return value
    raise ValueError(f"{shorten(value)} is not a host name or IP address")


Host = Annotated[str, AfterValidator(_host)]
User = Annotated[str, _pattern(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}", "a user name (letters, digits, '_', '.', '-')")]

_REMOTE_PATH = re.compile(r"(?:/[A-Za-z0-9_.+,@=-]+)+/?")


def _remote_path(value: str) -> str:
    if len(value) > 1024 or not _REMOTE_PATH.fullmatch(value):
        raise ValueError(
            f"{shorten(value)} is not an absolute path of safe characters "
            "(letters, digits, '/', '_', '.', '+', ',', '@', '=', '-'; it goes into shell commands)"
        )
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError(f"{shorten(value)}: '.' and '..' are not allowed in a target path")
    return value


RemotePath = Annotated[str, AfterValidator(_remote_path)]
LocalPath = Annotated[str, Field(min_length=1), _text(4096)]

MODULE_PARAM_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
MODULE_PARAM_VALUE = r"[A-Za-z0-9_.,:+-]{0,256}"
# parameters the station sets itself from the matrix; module_params must not change them behind its back
STATION_MODULE_PARAMS = {
    "period_us": "matrix.period",
    "check": "matrix.variants",
    "cpu": "matrix.cpu",
    "format": "matrix.format",
    "base": "matrix.lpt_base",
    "irq": "matrix.lpt_irq",
    "fifo": "bench.target.fifo",
}


def _module_param_name(value: str) -> str:
    if not re.fullmatch(MODULE_PARAM_NAME, value):
        raise ValueError(
            f"{shorten(value)} is not a module parameter name (letters, digits, '_', not starting with a digit)"
        )
    if value in STATION_MODULE_PARAMS:
        raise ValueError(f"{value} is set by the station from {STATION_MODULE_PARAMS[value]}; set it there")
    return value


def _module_param_value(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a word or an integer, got {shorten(value)}")
    if isinstance(value, int):
        if abs(value) >= 2**64:
            raise ValueError("integer out of range (64 bits)")
        return value
    if not re.fullmatch(MODULE_PARAM_VALUE, value):
        raise ValueError(
            f"{shorten(value)}: a module parameter value uses letters, digits and '_.,:+-' only, at most 256"
        )
    return value


ModuleParamName = Annotated[str, AfterValidator(_module_param_name)]
ModuleParamValue = Annotated[str | int, BeforeValidator(_module_param_value)]

Interface = Literal["lpt", "pcie"]
Variant = Literal["inb", "no-inb"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --- the schema -----------------------------------------------------------------------------


def _twin_ns(lo_open: bool = False) -> Any:
    def check(value: float) -> float:
        if value < 0 or (lo_open and value == 0):
            raise ValueError(f"{value:g} ns: must be {'positive' if lo_open else 'zero or positive'}")
        if value > TWIN_MAX_NS:
            raise ValueError(f"{value:g} ns is too large: at most {TWIN_MAX_NS:g} ns (1 s)")
        return value

    return Annotated[float, BeforeValidator(_not_bool), AfterValidator(check)]


def _fraction(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{value:g}: a fraction is between 0 and 1")
    return value


def _spread(value: float) -> float:
    if not 0.0 < value <= 10.0:
        raise ValueError(f"{value:g}: idle_spread scales the loaded spread; between 0 (excluded) and 10")
    return value


def _scale(value: float) -> float:
    if not 0.01 <= value <= 100.0:
        raise ValueError(f"{value:g}: phase_cycle_scale is between 0.01 and 100")
    return value


def _jitter(value: float) -> float:
    if not 0.0 <= value <= 2.0:
        raise ValueError(f"{value:g}: phase_jitter (a log-std) is between 0 and 2")
    return value


def _positive_ms(value: float) -> float:
    if not 0.001 <= value <= 60_000:
        raise ValueError(f"{value:g} ms: between 0.001 and 60000")
    return value


def _positive_s(value: float) -> float:
    if not 1.0 <= value <= 1e7:
        raise ValueError(f"{value:g} s: between 1 and 1e7")
    return value


def _clock(value: float) -> float:
    lo, hi = TWIN_CLOCK_HZ
    if value != 0 and not (lo <= value <= hi and value == int(value)):
        raise ValueError(f"{value:g} Hz: 0 (no board clock) or a whole number of Hz from {lo:g} to {hi:g}")
    return value


class TwinInterfaceOverrides(Strict):
    """The twin model's parameters (station/twin/model.py InterfaceParams), times in ns.
    A parameter left out keeps the preset's value (the None defaults are never validated,
    so an explicit null in the file is refused)."""

    t_rw: _twin_ns() = None
    t_rw_jitter: _twin_ns() = None
    sw_min: _twin_ns(lo_open=True) = None
    sw_mean: _twin_ns(lo_open=True) = None
    sw_std: _twin_ns(lo_open=True) = None
    idle_spread: Annotated[Float, AfterValidator(_spread)] = None
    tail_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    tail_scale: _twin_ns() = None
    outlier_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    outlier_delay: tuple[_twin_ns(), _twin_ns()] = None
    timer_jitter: _twin_ns() = None
    clock_hz: Annotated[Float, AfterValidator(_clock)] = None
    irq_delay_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    irq_delay: tuple[_twin_ns(), _twin_ns()] = None
    bus_stretch_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    bus_stretch: tuple[_twin_ns(), _twin_ns()] = None
    stray_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    phase_shift_std: _twin_ns() = None
    phase_cycle_scale: Annotated[Float, AfterValidator(_scale)] = None
    phase_jitter: Annotated[Float, AfterValidator(_jitter)] = None
    carryover_std: _twin_ns() = None
    carryover_ms: Annotated[Float, AfterValidator(_positive_ms)] = None
    run_offset_std: _twin_ns() = None
    drift_std: _twin_ns() = None
    drift_period_s: Annotated[Float, AfterValidator(_positive_s)] = None
    restart_every: Int | None = Field(None, ge=0, le=10**12, description="a fault: the twin's module numbers its "
                                      "records from 0 again every this many numbers (a module reloaded mid-run); "
                                      "0: never")

    @model_validator(mode="after")
    def _delay_interval(self) -> TwinInterfaceOverrides:
        for name in ("outlier_delay", "irq_delay", "bus_stretch"):
            delay = getattr(self, name)
            if delay is not None and delay[0] > delay[1]:
                raise LocatedError((name,), "[low, high] with low <= high")
        return self


_TWIN_OVERRIDES = TypeAdapter(dict[Interface, TwinInterfaceOverrides])


def _ppm(value: float) -> float:
    if abs(value) > 1000:
        raise ValueError(f"{value:g} ppm: a clock that far off is broken (at most ±1000 ppm)")
    return value


Ppm = Annotated[Float, AfterValidator(_ppm)]


class TwinSlew(Strict):
    """A while during which the target's clock is steered (NTP slewing its frequency)."""

    at: Seconds(DURATION_RANGE) = Field(description="when it starts, from the twin's start")
    ppm: Ppm = Field(description="how much faster (negative: slower) the clock runs meanwhile")
    duration: Seconds(DURATION_RANGE) = Field(description="how long it lasts")


class TwinClocks(Strict):
    """The twin's clocks against the host's (docs/twin.md): the target's crystal and its slews, the
    scope's timebase. The defaults are realistic assumptions, so every twin campaign drifts."""

    target_drift_ppm: Ppm = 35.0
    target_slews: list[TwinSlew] = Field(default_factory=list, max_length=100)
    scope_timebase_ppm: Ppm = 10.0
    scope_trigger_error_ns: Float = Field(
        0.5, ge=0.0, le=1e6, allow_inf_nan=False,
        description="rms error of where the scope puts its time zero against the true crossing (ns)")


class TwinScopeReplies(Strict):
    """How the twin's MSO (tektronix_mso) frames what its vendor leaves undocumented
    (docs/scopes/tektronix-mso.md): each variant the driver must take, for a campaign to run on."""

    frame_separator: Literal["none", "semicolon"] = Field(
        "none", description="between a FastFrame CURVe? reply's frame blocks: nothing, or ';'")
    time_stamps: Literal["numbered", "numbered-semicolons", "numbered-quoted", "dpo"] = Field(
        "numbered", description="HORizontal:FASTframe:TIMEStamp:ALL?'s form: the 4/5/6 manual's 'frame #: "
        "stamp' list, with ';' between stamps, each stamp quoted, or the older DPO family's quoted stamps")


class TwinSettings(Strict):
    """The built-in twin: an emulated target (SSH) and scope (SCPI) on 127.0.0.1."""

    preset: str = "seed-2015"
    seed: Int = Field(2015, ge=0, lt=2**64)
    ground_truth: bool = True
    independent: bool = Field(
        False, description="every event an independent draw: no load phases, carry-over, run offset or drift "
        "(the twin before issue 46; docs/twin.md)")
    clocks: TwinClocks = Field(default_factory=TwinClocks)
    scope_replies: TwinScopeReplies = Field(default_factory=TwinScopeReplies)
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-interface model parameters replacing the preset's, e.g. {pcie: {outlier_fraction: 5e-5}}; "
        "times in ns, fractions within [0, 1]",
    )

    @field_validator("preset")
    @classmethod
    def _preset_exists(cls, value: str) -> str:
        from station.twin.model import load_preset

        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
            raise ValueError(f"{shorten(value)} is not a preset name (letters, digits, '_', '-')")
        load_preset(value)  # raises with the names it knows
        return value

    @field_validator("overrides", mode="before")
    @classmethod
    def _overrides_in_range(cls, value: object) -> dict[str, dict[str, Any]]:
        try:
            parsed = _TWIN_OVERRIDES.validate_python(value)
        except ValidationError as exc:
            loc, message = explain_validation_error(exc.errors()[0])
            raise LocatedError(loc, message) from None
        return {iface: o.model_dump(exclude_unset=True) for iface, o in parsed.items()}

    @model_validator(mode="after")
    def _model_can_be_calibrated(self) -> TwinSettings:
        if not self.overrides:  # a shipped preset as it is: tests/test_twin_model.py calibrates each (and
            return self  # config's own default would otherwise import scipy for every command)
        from station.twin.model import latency_shape, load_preset

        preset = load_preset(self.preset).with_overrides(self.overrides)
        preset = preset.independent() if self.independent else preset
        for iface, p in preset.interfaces.items():
            where = ("overrides", iface) if iface in self.overrides else ("preset",)
            name = "" if iface in self.overrides else f"{iface}: "
            if not p.sw_min < p.sw_mean:
                raise LocatedError(where, f"{name}sw_mean ({p.sw_mean:g}) must exceed sw_min ({p.sw_min:g})")
            if p.t_rw > p.sw_min:
                raise LocatedError(
                    where, f"{name}t_rw ({p.t_rw:g}) exceeds sw_min ({p.sw_min:g}); t_SW includes one bus access"
                )
            try:
                for spread in (1.0, p.idle_spread):
                    latency_shape(p, preset.calibration_samples, spread)
            except Exception as exc:  # noqa: BLE001 - scipy's solver says little; say what to change
                raise LocatedError(
                    where,
                    f"{name}the latency model cannot be calibrated to sw_min/sw_mean/sw_std = "
                    f"{p.sw_min:g}/{p.sw_mean:g}/{p.sw_std:g} ns ({type(exc).__name__})",
                ) from None
        return self


# a labgrid coordinator: host name, IPv4 or [IPv6], and a port
COORDINATOR_PATTERN = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):[0-9]{1,5}"


class TargetSettings(Strict):
    kind: Literal["twin", "ssh", "vm", "local", "labgrid"] = Field(
        "twin", description="twin: the built-in emulated RTAI box; ssh: a real target; vm: Debian's kernel "
        "in QEMU, built and booted by the bench for the campaign (family mainline); local: this machine, "
        "through a throw-away OpenSSH server the bench starts on 127.0.0.1 (the same SSH path as ssh); "
        "labgrid: a labgrid place, acquired for the campaign, its NetworkService the SSH endpoint and its "
        "PyVISADevice resources the instruments (docs/lab.md)",
    )
    place: Name | None = Field(None, description="labgrid only: the place's name")
    coordinator: Annotated[str, _pattern(COORDINATOR_PATTERN, "HOST:PORT")] | None = Field(
        None, description="labgrid only: the coordinator's HOST:PORT; default: $LG_COORDINATOR, else labgrid's "
        "own default 127.0.0.1:20408")
    ssh_resource: Name | None = Field(
        None, description="labgrid only: which of the place's NetworkService resources is the target, by name "
        "(needed only when the place has several)")
    kernel: Literal["regular", "rt"] = Field(
        "regular", description="vm only: Debian's regular kernel or its PREEMPT_RT build (linux-image-rt-amd64)"
    )
    host: Host = Field("127.0.0.1", description="a name or address; ~/.ssh/config's Host aliases, HostName, "
                       "User, Port, IdentityFile and ProxyJump apply as they do for ssh")
    port: Int | None = Field(None, ge=1, le=65535, description="default: ~/.ssh/config's Port for this host, else 22")
    user: User | None = Field(
        None, description="default: ~/.ssh/config's User for this host, else your local user name"
    )
    identity_file: LocalPath | None = Field(None, description="private key; default: ssh-agent / ~/.ssh keys")
    known_hosts: LocalPath | None = Field(
        None, description="known_hosts file; default ~/.ssh/known_hosts. Host keys are always checked."
    )
    connect_timeout: Seconds(TIMEOUT_RANGE) = 10.0
    reconnect_for: Seconds(TIMEOUT_RANGE) = Field(
        60.0, description="how long a run's teardown keeps reconnecting to a host that stopped answering, to "
        "unload what the station loaded and stop its loads, before it gives up and names `station cleanup`; "
        "also how long a host that failed a run may take to answer again before its other runs are given up"
    )
    family: Literal["rtai", "mainline"] = "rtai"
    module_dir: RemotePath = Field(
        "/opt/irq-station/modules", description="directory holding the .ko files on the target"
    )
    work_dir: RemotePath = Field("/tmp/irq-station", description="target directory for pid files")
    fifo: Int = Field(0, ge=0, le=63, description="RTAI FIFO number (rtai family)")
    sudo: bool = Field(
        False, description="log in as an ordinary user and run insmod, rmmod, dmesg, the stream reader and "
        "kill through `sudo -n` (needs a NOPASSWD sudoers rule; the station never types a password)",
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
                raise LocatedError((name,), f"a labgrid target's {name} is its place's NetworkService's: leave it out")
        return self

    @model_validator(mode="after")
    def _vm_runs_mainline(self) -> TargetSettings:
        if self.kind in ("vm", "local") and self.family != "mainline":
            raise ValueError(f"a {self.kind} target runs a mainline kernel: set family: mainline "
                             "(RTAI needs its own kernel)")
        if self.kernel != "regular" and self.kind != "vm":
            raise LocatedError(("kernel",), "chooses the VM's kernel: only for kind: vm")
        return self


ScopeDialect = Literal[tuple(sorted(DIALECTS))]  # one list of dialects: the instruments' registry


SEGMENTED_DIALECTS = ("keysight_infiniivision", "tektronix_mso")  # FastFrame / segmented memory


class ScopeSettingsConfig(Strict):
    kind: Literal["twin", "visa", "none"] = "twin"
    resource: Annotated[str, _text(256)] | None = Field(
        None, description="VISA resource, e.g. TCPIP::10.0.0.5::4000::SOCKET; on a labgrid target, labgrid:NAME "
        "takes the place's PyVISADevice of that name (labgrid: alone: its only one)"
    )
    dialect: ScopeDialect = Field("tektronix_tds", description="the scope's command set (instruments/dialects.py)")
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
        AfterValidator(lambda v: v if v == "auto" else _range(*LEVEL_RANGE, format_voltage).func(v)),
    ] = "auto"
    capture: Literal["waveform", "segmented", "measurement"] = Field(
        "waveform", description="waveform: single long records, every pulse in each; segmented: FastFrame / "
        "segmented memory, `segments` frames of record_length points a trigger each (one pulse a frame), placed "
        "by the scope's time tags; measurement: the scope's own pulse-width measurement of each acquisition, "
        "no waveform transfer (docs/capture.md)"
    )
    segments: Int = Field(1000, ge=2, le=1_000_000, description="frames per acquisition when capture is segmented")
    cross_check_every: Int = Field(
        0, ge=0, le=1_000_000, description="capture measurement: transfer every Nth acquisition's record too and "
        "extract its pulses on the host, beside the scope's numbers (0: never)"
    )
    bus: Literal["model", "loopback", "gpib", "usb", "lan", "gigabit"] = Field(
        "model", description="the twin scope's bus, which sets how long its replies take: model: the simulated "
        "instrument's own (GPIB for the TDS, LAN for the InfiniiVision, gigabit LAN for the MSO); loopback: no "
        "delay (instruments/sim/bus.py, docs/scopes/)"
    )
    bus_rate: Float | None = Field(
        None, gt=0, le=1e10, description="the twin scope's bus rate in bytes/s, in place of the profile's (a rate "
        "you timed on your own scope)"
    )

    @model_validator(mode="after")
    def _visa_needs_resource(self) -> ScopeSettingsConfig:
        if self.kind == "visa" and not self.resource:
            raise LocatedError(
                ("resource",), "a visa scope needs a resource, e.g. TCPIP::192.168.1.30::4000::SOCKET"
            )
        if self.kind != "twin":
            for name, default in (("bus", "model"), ("bus_rate", None)):
                if getattr(self, name) != default:
                    raise LocatedError((name,), f"{name} sets the twin scope's bus; a {self.kind} scope's bus is "
                                       "the instrument's own: leave it out")
        if self.capture == "segmented" and self.dialect not in SEGMENTED_DIALECTS:
            raise LocatedError(
                ("capture",), f"segmented capture needs FastFrame or segmented memory, which {self.dialect} has "
                f"not (dialects with it: {', '.join(SEGMENTED_DIALECTS)}): use waveform"
            )
        return self


GeneratorDialect = Literal[tuple(sorted(GENERATORS))]


class GeneratorSettingsConfig(Strict):
    """The function generator that drives the stimulus of a gpio campaign (its settings are under gpio:)."""

    kind: Literal["twin", "visa", "none"] = Field(
        "twin", description="twin: the built-in simulated generator; visa: an instrument; none: the stimulus "
        "comes from elsewhere (set up by hand)"
    )
    resource: Annotated[str, _text(256)] | None = Field(
        None, description="VISA resource, e.g. TCPIP::10.0.0.6::5025::SOCKET; on a labgrid target, labgrid:NAME "
        "takes the place's PyVISADevice of that name"
    )
    dialect: GeneratorDialect = Field("keysight_33500", description="the generator's command set")  # type: ignore[valid-type]
    channel: Int = Field(1, ge=1, le=2)
    timeout: Seconds(TIMEOUT_RANGE) = 10.0

    @model_validator(mode="after")
    def _visa_needs_resource(self) -> GeneratorSettingsConfig:
        if self.kind == "visa" and not self.resource:
            raise LocatedError(("resource",), "a visa generator needs a resource, e.g. "
                               "TCPIP::192.168.1.31::5025::SOCKET")
        return self


class LoadHost(Strict):
    """Another machine that runs load generators aimed at the target (e.g. the seed's hping3 flood)."""

    host: Host
    port: Int | None = Field(None, ge=1, le=65535, description="default: ~/.ssh/config's Port for this host, else 22")
    user: User | None = Field(
        None, description="default: ~/.ssh/config's User for this host, else your local user name"
    )
    identity_file: LocalPath | None = None
    known_hosts: LocalPath | None = None
    connect_timeout: Seconds(TIMEOUT_RANGE) = 10.0
    reconnect_for: Seconds(TIMEOUT_RANGE) = Field(
        60.0, description="how long a run's teardown keeps reconnecting to a host that stopped answering, to "
        "unload what the station loaded and stop its loads, before it gives up and names `station cleanup`; "
        "also how long a host that failed a run may take to answer again before its other runs are given up"
    )
    work_dir: RemotePath = "/tmp/irq-station"
    sudo: bool = Field(False, description="stop loads started with `sudo -n` through `sudo -n kill`")


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


PLACE_RESOURCE = "labgrid:"  # an instrument's resource taken from the target's labgrid place: labgrid:[NAME]


class BenchSettings(Strict):
    target: TargetSettings = TargetSettings()
    targets: dict[Name, TargetSettings] = Field(
        default_factory=dict, max_length=64,
        description="instead of target: several named targets (e.g. a regular and a PREEMPT_RT build); "
        "the whole matrix runs on each, one target after the other, and run ids start with its name",
    )
    twin: TwinSettings = TwinSettings()
    scope: ScopeSettingsConfig = ScopeSettingsConfig()
    generator: GeneratorSettingsConfig = GeneratorSettingsConfig()
    load_hosts: dict[Name, LoadHost] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_way_to_name_targets(self) -> BenchSettings:
        if self.targets and "target" in self.model_fields_set:
            raise LocatedError(("targets",), "give either target: (one) or targets: (several by name), not both")
        if sum(t.kind == "twin" for t in self.targets.values()) > 1:
            raise LocatedError(("targets",), "at most one twin target (the twin is one emulated box)")
        if "scope_replies" in self.twin.model_fields_set and not (
                self.scope.kind == "twin" and self.scope.dialect == "tektronix_mso"):
            raise LocatedError(("twin", "scope_replies"), "scope_replies are the twin MSO's (bench.scope kind: "
                               f"twin, dialect: tektronix_mso), not a {self.scope.kind} {self.scope.dialect}'s")
        for part, settings in (("scope", self.scope), ("generator", self.generator)):
            if (settings.resource or "").startswith(PLACE_RESOURCE) and (
                    settings.kind != "visa" or any(t.kind != "labgrid" for t in self.named_targets().values())):
                raise LocatedError((part, "resource"), f"{PLACE_RESOURCE}… names a PyVISADevice of the target's "
                                   "labgrid place: only for a visa instrument on labgrid targets")
        return self

    def named_targets(self) -> dict[str | None, TargetSettings]:
        """The targets by name; a single bench.target has no name (its run ids carry none)."""
        return dict(self.targets) if self.targets else {None: self.target}


def _period(value: float) -> float:
    period_us = value * 1e6
    if abs(period_us - round(period_us)) > 1e-6:
        raise ValueError(f"period {period_us:g} us: the modules take whole microseconds, at least 10 us")
    return value


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class Matrix(Strict):
    kind: str = Field(
        "module", description="what each run measures: a run kind (station/kinds/; `station schema` lists them "
        "with what each measures); its options go under the campaign key of its name",
    )
    # the module kind's keys (station/kinds/module declares them its own: another kind refuses them)
    interfaces: list[Interface] = Field(default_factory=lambda: ["lpt", "pcie"], min_length=1)
    variants: list[Variant] = Field(default_factory=lambda: ["inb", "no-inb"], min_length=1)
    loads: list[Annotated[str, Field(max_length=64)]] = Field(
        default_factory=lambda: ["none"], min_length=1, max_length=1000, description="names of load sets (loads:)"
    )
    repetitions: Int = Field(1, ge=1, le=MAX_REPETITIONS)
    period: Annotated[Seconds(PERIOD_RANGE), AfterValidator(_period)] = 100e-6
    samples: Int | None = Field(
        None, gt=0, le=MAX_SAMPLES, description="stop a run after this many software samples"
    )
    duration: Seconds(DURATION_RANGE) | None = Field(None, description="stop a run after this long")
    pulses: Int = Field(0, ge=0, le=MAX_PULSES, description="at least this many scope pulses per run (0: no minimum)")
    max_duration: Seconds(MAX_DURATION_RANGE) = Field(
        3600.0, description="hard limit per run, whatever else is unmet"
    )
    format: Literal["v1", "legacy"] = "v1"
    cpu: Int = Field(-1, ge=-1, le=4095, description="CPU the module's task and IRQ run on (-1: any)")
    lpt_base: Int = Field(0x378, ge=0, le=0xFFFF, description="I/O port base of the parallel port")
    lpt_irq: Int = Field(7, ge=0, le=255)
    module_params: dict[Interface, dict[ModuleParamName, ModuleParamValue]] = Field(
        default_factory=dict,
        description="extra module parameters per interface, e.g. {pcie: {profile: edu}} (emulation modes)",
    )
    order: Literal["interleaved", "as-written"] = Field(
        "interleaved", description="the runs' order on each target: `interleaved` measures every condition once "
        "per repetition, in a seeded random order each round (so a machine's slow drift is not lined up with "
        "one condition); `as-written` the file's order, repetition after repetition"
    )
    order_seed: Int | None = Field(
        None, ge=0, le=2**63 - 1, description="the interleaved order's seed (default: from the campaign's name); "
        "campaign.json records the order used"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Matrix:
        if self.samples is None and self.duration is None:
            raise ValueError("give samples or duration (or both) to say when a run ends")
        if len(set(self.loads)) != len(self.loads):
            raise LocatedError(("loads",), f"loads lists a value twice: {self.loads}")
        return self


DEADLINE_RANGE = (100e-9, 10.0, "100 ns", "10 s")


class ReportSettings(Strict):
    """What the report estimates beyond the measured figures."""

    deadline: Seconds(DEADLINE_RANGE) | None = Field(
        None, description="a latency the system must meet (seed 004: 125us): the report gives the probability "
        "per event of exceeding it, from the tail fit where it lies in the tail"
    )
    exceedance: Float = Field(
        1e-9, gt=0.0, lt=0.01, description="the worst case is the latency exceeded with this probability per event"
    )



class Campaign(Strict):
    """A campaign's settings common to every kind. The model that reads a file is `campaign_model()`:
    this one with each registered kind's own section beside (station/kind_registry.py)."""

    name: Annotated[str, Field(min_length=1), _text(200)]
    description: Annotated[str, _text(100_000, allowed="\n\t")] = ""
    bench: BenchSettings = BenchSettings()
    matrix: Matrix
    report: ReportSettings = ReportSettings()
    loads: dict[LoadSetName, list[LoadSpec]] = Field(default_factory=lambda: {"none": []})

    @model_validator(mode="after")
    def _kind_fits(self) -> Campaign:
        """What every kind's declaration says of a campaign (kind_registry.Kind), then the kind's own checks."""
        m, known = self.matrix, kind_registry.kinds()
        if m.kind not in known:  # the base model (campaign_model() lists the kinds in its schema)
            raise LocatedError(("matrix", "kind"), f"unknown run kind {m.kind!r} (known: {', '.join(sorted(known))})")
        kind = known[m.kind]
        for other in known.values():  # another kind's keys are a mistake, not something to ignore
            if other.name == kind.name:
                continue
            for key in other.matrix_keys:
                if key in m.model_fields_set and key not in kind.matrix_keys:
                    raise LocatedError(("matrix", key), f"is {article(other.name)} {other.name}-run key; "
                                       f"{article(kind.name)} {kind.name} campaign does not use it")
            if other.settings is not None and other.name in self.model_fields_set:
                raise LocatedError((other.name,), f"{other.name} options are for matrix.kind: {other.name}")
        if kind.settings_required and getattr(self, kind.name, None) is None:
            raise LocatedError((kind.name,), f"{article(kind.name)} {kind.name} campaign needs {article(kind.name)} "
                               f"{kind.name}: section")
        players = [k.name for k in known.values() if k.needs.stimulus is not None]
        if kind.needs.stimulus is None and "generator" in self.bench.model_fields_set:
            which = " or ".join(players) or "no"
            raise LocatedError(("bench", "generator"), f"drives the stimulus of {article(which)} {which} campaign "
                               f"(matrix.kind: {which})")
        if not kind.needs.scope and "scope" in self.bench.model_fields_set and self.bench.scope.kind != "none":
            raise LocatedError(("bench", "scope", "kind"), f"{article(kind.name)} {kind.name} campaign uses no "
                               "scope: set none or leave bench.scope out")
        runs = run_count(self)
        if runs > MAX_RUNS:
            raise LocatedError(("matrix", "repetitions"), f"{run_count_text(self)} = {runs} runs; at most {MAX_RUNS}")
        if kind.check is not None:  # first: a kind's own word on its targets is the more precise
            kind.check(self)
        if not kind.needs.twin_target:
            for name, t in self.bench.named_targets().items():
                if t.kind == "twin":
                    where = ("bench", "targets", name, "kind") if name else ("bench", "target", "kind")
                    raise LocatedError(where, f"{article(kind.name)} {kind.name} run measures a real kernel: use "
                                       "kind local, vm or ssh (the twin only plays the latency modules and GPIO lines)")
        return self

    @model_validator(mode="after")
    def _references_resolve(self) -> Campaign:
        for i, name in enumerate(self.matrix.loads):
            if name not in self.loads:
                known = ", ".join(sorted(self.loads)) or "none defined"
                close = difflib.get_close_matches(name, list(self.loads), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise LocatedError(
                    ("matrix", "loads", i), f"names {name!r}, which is not under loads: ({known}){hint}"
                )
        hosts = self.bench.load_hosts
        for set_name, specs in self.loads.items():
            seen: set[str] = set()
            for j, spec in enumerate(specs):
                if spec.name in seen:
                    raise LocatedError(
                        ("loads", set_name, j, "name"),
                        f"load set {set_name!r} uses a load name twice: {[s.name for s in specs]}",
                    )
                seen.add(spec.name)
                if spec.host != "target" and spec.host not in hosts:
                    have = ", ".join(sorted(hosts)) or "none defined"
                    raise LocatedError(
                        ("loads", set_name, j, "host"),
                        f"load {set_name}/{spec.name} runs on {spec.host!r}, not a bench.load_hosts entry ({have})",
                    )
        return self


_MODELS: dict[int, type[Campaign]] = {}


def campaign_model() -> type[Campaign]:
    """The campaign schema: Campaign with each registered kind's section (under its name) and
    matrix.kind one of their names. Rebuilt when a kind registers (a plug-in's, a test's)."""
    generation = kind_registry.generation()
    if generation not in _MODELS:
        known = kind_registry.kinds()
        summary = "; ".join(f"{k.name}: {k.summary}" for k in known.values())
        matrix = create_model("Matrix", __base__=Matrix, __module__=__name__, kind=(
            Literal[tuple(known)], Field("module", description=f"what each run measures ({summary})")))
        sections: dict[str, Any] = {}
        for k in known.values():
            if k.settings is not None:
                sections[k.name] = (k.settings | None, None) if k.settings_required else (k.settings, k.settings())
        _MODELS.clear()
        _MODELS[generation] = create_model("Campaign", __base__=Campaign, __module__=__name__,
                                           matrix=(matrix, ...), **sections)
    return _MODELS[generation]


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix: what a single run measures."""

    interface: str
    variant: str
    load: str
    repetition: int
    kind: str = "module"  # the run kind (station/kinds/) that measures it
    target: str | None = None  # the name under bench.targets; None for a single bench.target

    @property
    def id(self) -> str:
        where = f"{self.target}-" if self.target else ""
        return where + kind_registry.kind(self.kind).run_id(self)

    @property
    def check(self) -> bool:
        return self.variant == "inb"


def measurement_hash(campaign: Campaign) -> str:
    """What a run's numbers depend on. Name, description and the number of repetitions
    are left out: changing those does not invalidate runs already measured."""
    data = campaign.model_dump(mode="json")
    for key in ("name", "description"):
        data.pop(key)
    # a plug-in's (or a test's) kind adds its default section to every campaign: it is not the
    # campaign's settings, and installing one must not make measured runs look changed
    for name in set(data) - set(Campaign.model_fields) - kind_registry.builtin_names() - {campaign.matrix.kind}:
        data.pop(name)
    for key in ("repetitions", "order", "order_seed"):  # when a run is measured is not what it measures
        data["matrix"].pop(key)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def run_count(campaign: Campaign) -> int:
    """Runs of the matrix: targets × the kind's cells × loads × repetitions."""
    m = campaign.matrix
    cells = kind_registry.kind(m.kind).cells(campaign)
    return len(campaign.bench.named_targets()) * len(cells) * len(m.loads) * m.repetitions


def run_count_text(campaign: Campaign) -> str:
    """The product run_count computes, factor by factor (the kind words its own cells)."""
    m, kind = campaign.matrix, kind_registry.kind(campaign.matrix.kind)
    targets = len(campaign.bench.named_targets())
    factors = [f"{targets} targets"] if targets > 1 else []
    if kind.describe_cells is not None:
        factors.append(kind.describe_cells(campaign))
    return " × ".join([*factors, f"{len(m.loads)} loads", f"{m.repetitions} repetitions"])


def design_notes(campaign: Campaign) -> list[str]:
    """What the campaign's design cannot answer (issue 46): its comparisons between conditions are
    judged against the spread between runs of each, which one run per condition does not give; and
    runs measured in the file's order line a machine's slow drift up with the conditions."""
    m = campaign.matrix
    conditions = run_count(campaign) // m.repetitions
    notes = []
    if conditions > 1 and m.repetitions < 2:
        notes.append(f"one run per condition: a difference between two of the {conditions} conditions cannot be "
                     "told from run-to-run variation (every run meets its own machine state) unless the report can "
                     "pool runs that measure the same quantity (a module's two variants' t_SW); repetitions: 2 or "
                     "more (3 or more to find a difference of a few per cent)")
    if conditions > 1 and m.repetitions > 1 and m.order == "as-written":
        notes.append("order: as-written measures each condition at the same place of every round: a machine "
                     "that drifts over the campaign drifts with the matrix order; order: interleaved (the default) "
                     "randomises each round")
    return notes


def expand_runs(campaign: Campaign, as_written: bool = False) -> list[RunSpec]:
    """Every run of the matrix in the order it is measured: target after target (each target's
    bench, a VM boot say, is set up once), repetition after repetition, and inside a repetition
    the conditions in the file's order or, `interleaved`, in a random order of their own
    (order_of); `as_written` the file's order whatever `order` says (a report lists its runs so).
    Validation caps the count at MAX_RUNS; a Campaign changed with model_copy()
    bypasses validation, so the cap is checked again."""
    m = campaign.matrix
    if run_count(campaign) > MAX_RUNS:
        raise ConfigError(f"matrix: {run_count(campaign)} runs; at most {MAX_RUNS}")
    cells = kind_registry.kind(m.kind).cells(campaign)
    runs = []
    for t in campaign.bench.named_targets():
        for r in range(m.repetitions):
            written = [RunSpec(i, v, load, r, kind=m.kind, target=t)
                       for load, (i, v) in itertools.product(m.loads, cells)]
            runs += written if as_written or m.order == "as-written" else order_of(written, order_seed(campaign))
    return runs


def order_seed(campaign: Campaign) -> int:
    """The interleaved order's seed: the file's, else one from the campaign's name (stable, so a
    resumed campaign continues in the same order)."""
    if campaign.matrix.order_seed is not None:
        return campaign.matrix.order_seed
    return int.from_bytes(hashlib.sha256(f"order/{campaign.name}".encode()).digest()[:8], "little") >> 1


def order_of(runs: list[RunSpec], seed: int) -> list[RunSpec]:
    """A seeded random order of one round's runs: each run sorted by a keyed hash of its id (a uniform
    permutation that no library version changes)."""
    return sorted(runs, key=lambda s: hashlib.sha256(f"{seed}/{s.target}/{s.id}".encode()).digest())


# --- errors with lines ------------------------------------------------------------------------

_TAG_PARTS = {"str", "int", "float", "bool", "none", "list", "dict", "tuple", "[key]"}


def _is_tag(part: object) -> bool:
    return isinstance(part, str) and (
        part in _TAG_PARTS or "[" in part or part.startswith(("function-", "literal", "constrained-"))
    )


def explain_validation_error(err: dict[str, Any]) -> tuple[tuple, str]:
    """(location, message) of one pydantic error, with LocatedError's inner location appended
    and pydantic's own union/validator tags removed from the end."""
    loc = tuple(err["loc"])
    while loc and _is_tag(loc[-1]):
        loc = loc[:-1]
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, LocatedError):
        return (*loc, *inner.loc), inner.message
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), _keys_beside(loc), n=1, cutoff=0.75) if loc else []
        hint = f"did you mean {close[0]!r}? " if close else "check the spelling; "
        return loc, f"unknown key ({hint}`station schema` lists the keys)"
    msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return loc, msg


def _keys_beside(loc: tuple) -> list[str]:
    """The keys the model that holds `loc`'s last part accepts (following the location from
    Campaign; every model the step could be, where a field takes several), for a did-you-mean."""
    models: list[type[BaseModel]] = [Campaign]
    for part in loc[:-1]:
        if not isinstance(part, str):
            continue  # a list index
        nxt: list[type[BaseModel]] = []
        for m in models:
            field = m.model_fields.get(part)
            if field is None:  # a mapping's own key (a load's name): the same models one level on
                nxt.append(m)
                continue
            nxt += _models_in(field.annotation)
        models = nxt or models
    return sorted({name for m in models for name in m.model_fields})


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field annotation can hold (through Optional, lists, dicts, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) or () for m in _models_in(arg)]


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


_PLAIN_PART = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _field(loc: tuple) -> str:
    parts = [str(p) if isinstance(p, int) or _PLAIN_PART.fullmatch(str(p)) else shorten(str(p)) for p in loc]
    return ".".join(parts) or "(top level)"


def _format_errors(errors: list[tuple[tuple, str]], source: str, lines: dict[tuple, int]) -> str:
    out = []
    for loc, message in errors[:MAX_ERRORS]:
        out.append(f"{source}:{_line_for(loc, lines) or '?'}: {_field(loc)}: {clip(message)}")
    if len(errors) > MAX_ERRORS:
        out.append(f"{source}:?: (top level): ... and {len(errors) - MAX_ERRORS} more errors")
    return "\n".join(out)


# --- files named by the campaign --------------------------------------------------------------


def _local_file_problem(value: str, want_dir: bool) -> str | None:
    path = Path(os.path.expanduser(value))
    hint = "" if path.is_absolute() else f" (relative to the current directory {Path.cwd()})"
    try:
        if not path.exists():
            return f"{path} does not exist{hint}"
        if want_dir and not path.is_dir():
            return f"{path} is not a directory"
        if not want_dir and not path.is_file():
            return f"{path} is not a file"
        if not os.access(path, os.R_OK | (os.X_OK if want_dir else 0)):
            return f"{path} is not readable"
    except (OSError, ValueError) as exc:
        return f"{path}: {exc}"
    return None


def _key_file_problem(value: str, field: str) -> str | None:
    """What SSH will make of the file: a private key (an encrypted one is the agent's business),
    or known_hosts lines."""
    import asyncssh

    path = os.path.expanduser(value)
    try:
        if field == "identity_file":
            asyncssh.read_private_key(path)
        else:
            asyncssh.read_known_hosts(path)
    except asyncssh.KeyEncryptionError:
        return None
    except (asyncssh.KeyImportError, ValueError, OSError) as exc:
        if "passphrase" in str(exc).lower():
            return None
        what = "a private key" if field == "identity_file" else "a known_hosts file"
        return f"{path} is not {what} SSH can read: {clip(str(exc), 120)}"
    return None


def _check_files(campaign: Campaign) -> list[tuple[tuple, str]]:
    """Key files, known_hosts files and the module directory of every ssh endpoint exist."""
    problems: list[tuple[tuple, str]] = []
    endpoints: list[tuple[tuple, TargetSettings | LoadHost]] = []
    for name, target in campaign.bench.named_targets().items():
        if target.kind == "ssh":
            endpoints.append((("bench", "targets", name) if name else ("bench", "target"), target))
    endpoints += [(("bench", "load_hosts", name), host) for name, host in campaign.bench.load_hosts.items()]
    for loc, settings in endpoints:
        for field in ("identity_file", "known_hosts"):
            value = getattr(settings, field)
            if value and (problem := _local_file_problem(value, want_dir=False) or _key_file_problem(value, field)):
                problems.append(((*loc, field), problem))
        upload = settings.upload_modules if isinstance(settings, TargetSettings) else None
        if upload and (problem := _local_file_problem(upload, want_dir=True)):
            problems.append(((*loc, "upload_modules"), problem))
    return problems


# --- entry points -----------------------------------------------------------------------------


def load_campaign(path: str | Path, *, check_files: bool = True) -> Campaign:
    """Read, parse and validate a campaign file. With check_files (the default, as for
    `station validate` and `station run`), the key files and module directory it names
    must exist on this machine."""
    path = Path(path)
    source = str(path)
    try:
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise ConfigError(f"{source}: cannot read: {what}")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}: too large (more than {MAX_FILE_BYTES} bytes; a campaign file is at most 1 MiB)")
    return parse_campaign(data, source, check_files=check_files)


def parse_campaign(text: str | bytes, source: str = "<string>", *, check_files: bool = False) -> Campaign:
    """Parse and validate campaign YAML (text, or bytes that must be UTF-8). Durations and
    voltages must carry units, as in a file. check_files as for load_campaign()."""
    if isinstance(text, bytes):
        if len(text) > MAX_FILE_BYTES:
            raise ConfigError(f"{source}:?: too large ({len(text)} bytes; a campaign file is at most 1 MiB)")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            valid = text[: exc.start].decode("utf-8")
            line = line_at(valid, len(valid))
            raise ConfigError(f"{source}:{line}: not a text file (byte {exc.start} is not UTF-8)") from None
    data, lines = load_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: (top level): a campaign file is a mapping with at least name: and matrix:")
    try:
        campaign = campaign_model().model_validate(data, context={"from_file": True})
    except ValidationError as exc:
        raise ConfigError(_format_errors([explain_validation_error(e) for e in exc.errors()], source, lines)) from None
    except (RecursionError, MemoryError, TypeError, ArithmeticError, LookupError, AttributeError) as exc:
        # a validator that failed in a way it should not; still one clean message, never a traceback
        raise ConfigError(
            f"{source}:?: (top level): internal error while validating (please report): "
            f"{type(exc).__name__}: {clip(str(exc), 80)}"
        ) from None
    if check_files and (problems := _check_files(campaign)):
        raise ConfigError(_format_errors(problems, source, lines))
    return campaign


def json_schema() -> str:
    return json.dumps(campaign_model().model_json_schema(), indent=2)
