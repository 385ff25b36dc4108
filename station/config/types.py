"""The campaign file's field types and limits: durations and voltages with their units and
physical bounds, names, hosts, paths and module parameters checked before they reach a shell, and
the strict base every section's model stands on."""

from __future__ import annotations

import difflib
import ipaddress
import re
import unicodedata
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

from station.common.module_names import MODULE_PARAM_NAME
from station.common.units import (
    format_duration,
    format_voltage,
    parse_duration,
    parse_voltage,
    shorten,
)

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


def _range(lo: float, hi: float, lo_text: str, hi_text: str, fmt: Callable[[float],
                                                                           str]) -> AfterValidator:
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
_NAME_WHAT = (
    "a name: letters, digits, '_', '.', '-', not starting with '.' or '-', at most 64 (it names "
    "files)"
)
Name = Annotated[str, _pattern(NAME_PATTERN, _NAME_WHAT)]


def _load_set_name(value: str) -> str:
    if not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(
            f"load set name {shorten(value)}: use letters, digits, '_', '.', '-', not starting "
            "with '.' or '-', at most 64 (it names runs)"
        )
    return value


LoadSetName = Annotated[str, AfterValidator(_load_set_name)]
# the station's own tracked reader and probes
RESERVED_LOAD_NAMES = {"record-stream", "cyclictest", "irqgap", "gpio-responder", "simavr-harness",
                       "rtla", "timerlat",
                      "trace-toggle"}

_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*\.?"
)


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
User = Annotated[str, _pattern(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}",
                               "a user name (letters, digits, '_', '.', '-')")]

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

MODULE_PARAM_VALUE = r"[A-Za-z0-9_.,:+-]{0,256}"
# parameters the station sets itself from the matrix; module_params must not change them behind its
# back
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
            f"{shorten(value)} is not a module parameter name (letters, digits, '_', not starting "
            "with a digit)"
        )
    if value in STATION_MODULE_PARAMS:
        raise ValueError(f"{value} is set by the station from {STATION_MODULE_PARAMS[value]}; set "
                         "it there")
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
            f"{shorten(value)}: a module parameter value uses letters, digits and '_.,:+-' only, "
            "at most 256"
        )
    return value


ModuleParamName = Annotated[str, AfterValidator(_module_param_name)]
ModuleParamValue = Annotated[str | int, BeforeValidator(_module_param_value)]

Interface = Literal["lpt", "pcie"]
Variant = Literal["inb", "no-inb"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --- errors located in the file --------------------------------------------------------------

_TAG_PARTS = {"str", "int", "float", "bool", "none", "list", "dict", "tuple", "[key]"}


def _is_tag(part: object) -> bool:
    return isinstance(part, str) and (
        part in _TAG_PARTS or "[" in part or part.startswith(("function-", "literal",
                                                              "constrained-"))
    )


def explain_validation_error(err: dict[str, Any],
                             root: type[BaseModel] | None = None) -> tuple[tuple, str]:
    """(location, message) of one pydantic error, with LocatedError's inner location appended
    and pydantic's own union/validator tags removed from the end; an unknown key gets the closest
    key the model at its place accepts (`root`: the model validated), if one is close."""
    loc = tuple(err["loc"])
    while loc and _is_tag(loc[-1]):
        loc = loc[:-1]
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, LocatedError):
        return (*loc, *inner.loc), inner.message
    if err["type"] == "extra_forbidden":
        keys = _keys_beside(root, loc) if root is not None else []
        close = difflib.get_close_matches(str(loc[-1]), keys, n=1, cutoff=0.75) if loc else []
        hint = f"did you mean {close[0]!r}? " if close else "check the spelling; "
        return loc, f"unknown key ({hint}`station schema` lists the keys)"
    msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return loc, msg


def _keys_beside(root: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the model that holds `loc`'s last part accepts (following the location from `root`;
    every model the step could be, where a field takes several), for a did-you-mean."""
    models: list[type[BaseModel]] = [root]
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
