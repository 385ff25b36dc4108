"""The campaign file: a typed schema, YAML loading with line numbers, units. Its modules, one
concept each: types.py (field types, limits, located errors), twin.py (bench.twin), bench.py (the
target, instruments, load hosts and loads), campaign.py (the matrix, the Campaign model, the runs it
expands to), loading.py (a file read, its errors located, the files it names checked),
yaml_lines.py (bounded YAML with the line of every key). This package's face re-exports the names
the rest of the station and the kinds' settings use.

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

from station.config.bench import (
    PLACE_RESOURCE,
    GeneratorSettingsConfig,
    LoadHost,
    ScopeSettingsConfig,
    TargetSettings,
)
from station.config.campaign import (
    Campaign,
    Matrix,
    RunSpec,
    campaign_model,
    design_notes,
    expand_runs,
    measurement_hash,
    order_seed,
)
from station.config.loading import _format_errors, json_schema, load_campaign, parse_campaign
from station.config.twin import TwinInterfaceOverrides
from station.config.types import (
    MAX_RUNS,
    Float,
    Int,
    LocalPath,
    LocatedError,
    Name,
    Seconds,
    Strict,
    Volts,
    _pattern,
    explain_validation_error,
)
from station.config.yaml_lines import ConfigError

__all__ = [
    "Campaign", "ConfigError", "Float", "GeneratorSettingsConfig", "Int", "LoadHost", "LocalPath",
    "LocatedError", "MAX_RUNS", "Matrix", "Name", "PLACE_RESOURCE", "RunSpec",
    "ScopeSettingsConfig", "Seconds", "Strict", "TargetSettings", "TwinInterfaceOverrides", "Volts",
    "_format_errors", "_pattern", "campaign_model", "design_notes", "expand_runs",
    "explain_validation_error", "json_schema", "load_campaign", "measurement_hash", "order_seed",
    "parse_campaign",
]
