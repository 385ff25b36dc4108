"""The contract between the run lifecycle and a run kind."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from station.bench.bench import Bench
from station.common.progress import ProgressSink, RunProgress
from station.store.run_store import Conversion, RunStore

if TYPE_CHECKING:
    from station.config import Campaign, RunSpec


class MeasurementFailure(Exception):
    """An instrument or probe of the run failed (the scope, say); the message says how."""


@dataclass
class RunContext:
    """What one run works with: the active bench, its cell of the matrix, its store."""

    bench: Bench
    campaign: Campaign
    spec: RunSpec
    store: RunStore
    progress: RunProgress
    sink: ProgressSink
    max_seconds: int  # the dead man's switch on every process a run starts on a host
    messages: list[str] = field(default_factory=list)
    spoilers: dict[str, Any] | None = None  # station/target/spoilers.py, read after the baseline

    @property
    def target(self):  # noqa: ANN201 - station.target.Target
        assert self.bench.target is not None
        return self.bench.target


class Measurement(ABC):
    """One run's measurement. The lifecycle calls, in order: `manifest` and `open_files`
    (store open), `baseline` (before loads), `start` (after loads), `measure` (until the
    run's end criteria are met), then — on every exit path, even if `start` failed
    half-way — `stop`, `verdict` and `seal_extra`."""

    name: ClassVar[str]
    # file name in the run directory -> what it holds (docs/architecture.md lists them)
    outputs: ClassVar[dict[str, str]] = {}

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def manifest(self) -> dict[str, Any]:
        """What this kind adds to manifest.json when the run opens."""
        return {}

    def open_files(self, store: RunStore) -> None:  # noqa: B027 - optional
        """Create the raw files this kind appends to while it measures."""

    async def baseline(self) -> None:  # noqa: B027 - optional
        """Before the loads start: counters to compare with at the end."""

    async def prepare(self) -> None:  # noqa: B027 - optional
        """Before the loads start: set-up that must not race them (switching tracepoints on patches
        kernel text on every CPU). Undone by `after_loads`, which runs whatever happened."""

    async def after_loads(self) -> None:  # noqa: B027 - optional
        """After `stop` and the loads' end: undo `prepare` (raise TargetError if the target could
        not be reached: the lifecycle then reconnects and cleans up)."""

    @abstractmethod
    async def start(self) -> None:
        """Set up what measures on the target (a module, a probe)."""

    @abstractmethod
    async def measure(self) -> None:
        """Measure until the run's end criteria; raise to fail the run."""

    @abstractmethod
    async def stop(self) -> None:
        """Undo `start` for sure (it may have stopped half-way); raise TargetError if the
        target could not be reached (the lifecycle then reconnects and cleans up)."""

    def measured_cpu(self) -> int | None:
        """The CPU this run measures (its spoilers are checked), None if not one CPU."""
        return None

    def device_row(self) -> int | str | None:
        """The /proc/interrupts row of the device under test, if the run has one."""
        return None

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        """A complete run that fell short of its targets is incomplete; say why."""
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        return {}

    @property
    def conversions(self) -> list[Conversion]:
        return []
