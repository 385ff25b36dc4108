"""A campaign file read: parsed and validated, every error located by file, line and field, and
the files it names checked on this machine."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import (
    ValidationError,
)

from station.common.units import shorten
from station.config.bench import LoadHost, TargetSettings
from station.config.campaign import Campaign, campaign_model
from station.config.types import MAX_ERRORS, explain_validation_error
from station.config.yaml_lines import MAX_FILE_BYTES, ConfigError, clip, line_at, load_yaml

# --- errors with lines ------------------------------------------------------------------------

def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


_PLAIN_PART = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _field(loc: tuple) -> str:
    parts = [
        str(p) if isinstance(p, int) or _PLAIN_PART.fullmatch(str(p)) else shorten(str(p))
        for p in loc
    ]
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
    endpoints += [(("bench", "load_hosts", name), host)
                  for name, host in campaign.bench.load_hosts.items()]
    for loc, settings in endpoints:
        for field in ("identity_file", "known_hosts"):
            value = getattr(settings, field)
            if value and (
                problem := _local_file_problem(value, want_dir=False)
                or _key_file_problem(value, field)
            ):
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
        raise ConfigError(f"{source}: too large (more than {MAX_FILE_BYTES} bytes; a campaign file "
                          "is at most 1 MiB)")
    return parse_campaign(data, source, check_files=check_files)


def parse_campaign(text: str | bytes, source: str = "<string>", *,
                   check_files: bool = False) -> Campaign:
    """Parse and validate campaign YAML (text, or bytes that must be UTF-8). Durations and
    voltages must carry units, as in a file. check_files as for load_campaign()."""
    if isinstance(text, bytes):
        if len(text) > MAX_FILE_BYTES:
            raise ConfigError(f"{source}:?: too large ({len(text)} bytes; a campaign file is at "
                              "most 1 MiB)")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            valid = text[: exc.start].decode("utf-8")
            line = line_at(valid, len(valid))
            raise ConfigError(
                f"{source}:{line}: not a text file (byte {exc.start} is not UTF-8)"
            ) from None
    data, lines = load_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: (top level): a campaign file is a mapping with at least "
                          "name: and matrix:")
    try:
        campaign = campaign_model().model_validate(data, context={"from_file": True})
    except ValidationError as exc:
        problems = [explain_validation_error(e, Campaign) for e in exc.errors()]
        raise ConfigError(_format_errors(problems, source, lines)) from None
    except (RecursionError, MemoryError, TypeError, ArithmeticError, LookupError,
            AttributeError) as exc:
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
