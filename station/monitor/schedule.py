"""The monitoring schedule file: which campaigns (phases) run, how often, into which store."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator

from station.config import (
    LocalPath,
    Name,
    Seconds,
    Strict,
    _format_errors,
    explain_validation_error,
)
from station.config.yaml_lines import MAX_FILE_BYTES, ConfigError, load_yaml

EVERY_RANGE = (1.0, 30 * 86400.0, "1 s", "30 days")
WINDOW_RANGE = (1.0, 86400.0, "1 s", "1 day")
RETRY_RANGE = (0.1, 86400.0, "100 ms", "1 day")


class Phase(Strict):
    """One campaign of every cycle, e.g. idle, then loaded (OSADL's two phases)."""

    name: Name
    campaign: LocalPath = Field(description="the campaign file (relative to the schedule file); "
                                "its matrix.duration is replaced by the schedule's window, its "
                                "repetitions by windows")
    windows: Annotated[int, Field(ge=1, le=100)] = Field(
        1,
        description="consecutive windows (runs) of the phase in each cycle: one latency maximum "
                    "each")


class Retry(Strict):
    first: Seconds(RETRY_RANGE) = Field(30.0, description="the wait before the first retry of a "
                                        "phase whose target did not answer; doubled at each retry")
    for_: Seconds(RETRY_RANGE) = Field(1800.0, alias="for",
                                       description="how long a phase is retried before its "
                                       "windows are recorded as a gap and the schedule goes on")


LISTEN = re.compile(r"(?P<host>\d{1,3}(?:\.\d{1,3}){3}|localhost)?:(?P<port>\d{1,5})")


class Prometheus(Strict):
    """The monitor's figures for Prometheus (docs/lab.md "Prometheus")."""

    listen: str | None = Field(
        None, max_length=64,
        description="serve the metrics over HTTP on host:port; ':9464' listens on 127.0.0.1 (an "
                    "address beyond this machine only when written)")
    textfile: LocalPath | None = Field(
        None, description="also write them to this file after every phase, for node_exporter's "
                          "textfile collector (relative to the schedule file)")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is None:
            return value
        match = LISTEN.fullmatch(value.strip())
        host = match.group("host") if match else None
        if (match is None or not 0 < int(match.group("port")) < 65536
                or host not in (None, "localhost") and any(int(o) > 255 for o in host.split("."))):
            raise ValueError(f"{value!r} is not host:port with an IPv4 address (e.g. "
                             "127.0.0.1:9464 or :9464)")
        return value.strip()

    def address(self) -> tuple[str, int]:
        match = LISTEN.fullmatch(self.listen or "")
        assert match is not None, "listen was validated"
        return match.group("host") or "127.0.0.1", int(match.group("port"))


class Schedule(Strict):
    name: Name
    store: LocalPath = Field(description="the lab store: every run of every cycle, the ledger, the "
                             "overview pages (relative to the schedule file)")
    every: Seconds(EVERY_RANGE) = Field(
        description="a cycle starts this often (OSADL: twice a day)"
    )
    window: Seconds(WINDOW_RANGE) = Field(300.0,
                                          description="the length of each window (run): the plots "
                                          "show each window's maximum (OSADL: 5 minutes)")
    phases: list[Phase] = Field(min_length=1, max_length=32)
    cycles: Annotated[int, Field(ge=1, le=10_000_000)] | None = Field(
        None, description="stop after this many cycles (default: run until stopped)")
    false_alarm: Annotated[float, Field(gt=0, lt=0.5)] = Field(
        0.01, description="the regression verdict's false-alarm rate (docs/lab.md)")
    min_free_mib: Annotated[int, Field(ge=0, le=10_000_000)] = Field(
        512,
        description="stop cleanly, with the message, when the store's disk has less free space "
                    "than this")
    retry: Retry = Retry()
    prometheus: Prometheus | None = Field(
        None, description="export the monitor's figures to Prometheus (docs/lab.md)")


def load_schedule(path: str | Path) -> Schedule:
    """Read and validate a schedule file; errors name file:line and the field."""
    path = Path(path)
    source = str(path)
    try:
        data = path.read_bytes()[: MAX_FILE_BYTES + 1]
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}: too large (a schedule file is at most 1 MiB)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not a UTF-8 text file") from None
    parsed, lines = load_yaml(text, source)
    if not isinstance(parsed, dict):
        raise ConfigError(f"{source}:1: (top level): a schedule file is a mapping with name, "
                          "store, every, phases")
    try:
        schedule = Schedule.model_validate(parsed, context={"from_file": True})
    except ValidationError as exc:
        problems = [explain_validation_error(e, Schedule) for e in exc.errors()]
        raise ConfigError(_format_errors(problems, source, lines)) from None
    names = [p.name for p in schedule.phases]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: phases: each phase needs its own name ({', '.join(names)})")
    base = path.parent
    for k, phase in enumerate(schedule.phases):
        if not (base / Path(phase.campaign).expanduser()).is_file():
            raise ConfigError(f"{source}:{lines.get(('phases', k, 'campaign'), '?')}: "
                              f"phases.{k}.campaign: {phase.campaign} does not exist")
    return schedule


def resolve(schedule_path: Path, relative: str) -> Path:
    return (Path(schedule_path).parent / Path(relative).expanduser()).resolve()
