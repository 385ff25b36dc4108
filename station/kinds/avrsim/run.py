"""The avrsim run: a probe run whose probe is the simavr harness (target_modules/avr/harness),
started through the local target's SSH session like any probe (pid file, dead man's switch,
stopped on every exit path, found by `station cleanup`). Before the first run the firmware of
every case is built into the campaign's `firmware/` directory, where it stays beside the results:
the ELF measured (its SHA-256 is in each manifest) and its disassembly (.lst).

The harness's stdout (station/kinds/avrsim/simulator.py: one line per edge, output change and
handler run) is kept byte for byte in harness.log and turned into avrsim_edges.parquet and
avrsim_handlers.parquet (result-store tables) at the end."""

from __future__ import annotations

import asyncio
import hashlib
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from station.kinds.avrsim import simulator as avr_sim
from station.kinds.avrsim.settings import CLOCK_HZ, cycles
from station.kinds.base import MeasurementFailure, RunContext
from station.kinds.probe_run import ProbeRun
from station.store.run_store import write_parquet

PROBE_NAME = "simavr-harness"
FIRMWARE_DIR = "firmware"  # in the campaign directory


def firmware_path(build: avr_sim.Build, timer0: str) -> Path:
    return build.masked_elf if timer0 == "masked" else build.elf


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class AvrsimRun(ProbeRun):
    name = "avrsim"
    probe_name = PROBE_NAME
    stdout_file = "harness.log"
    stderr_file = "harness.err"
    stop_grace_s = 1.0  # the harness prints as it goes: nothing to wait for on SIGTERM
    outputs = {
        "harness.log": "the simavr harness's stdout: every edge, output change and handler run, in "
                       "CPU cycles "
        "(→ avrsim_edges.parquet, avrsim_handlers.parquet)",
        "harness.err": "the harness's stderr",
    }

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        settings = ctx.campaign.avrsim
        assert settings is not None
        self.settings = settings
        self.case_name = ctx.spec.variant
        self.case = settings.cases[self.case_name]
        # each run its own edges: the campaign's seed plus the run's place in the campaign
        cases = list(settings.cases)
        m = ctx.campaign.matrix
        self.seed = (
            settings.seed
            + (ctx.spec.repetition * len(m.loads) + m.loads.index(ctx.spec.load)) * len(cases)
            + cases.index(self.case_name)
        )
        self.build_dir = ctx.store.dir.parent.parent / FIRMWARE_DIR
        self.elf: Path | None = None
        self.harness: Path | None = None
        ctx.progress.sw_label = "edges answered"
        ctx.progress.hw_label = None

    def harness_arguments(self) -> list[str]:
        s = self.settings
        return ["-n", str(self.ctx.campaign.matrix.samples), "-p", str(cycles(s.period)), "-j",
                str(cycles(s.jitter)),
                "-w", str(cycles(s.width)), "-s", str(self.seed), "-f", str(CLOCK_HZ)]

    def planned_seconds(self) -> float:
        return 0.0  # simulated time is not wall time: the bar counts nothing

    def manifest(self) -> dict[str, Any]:
        s = self.settings
        return {"avrsim": {
            "case": self.case_name, **self.case.model_dump(), "clock_hz": CLOCK_HZ,
            "seed": self.seed,
            "period_cycles": cycles(s.period), "jitter_cycles": cycles(s.jitter),
            "width_cycles": cycles(s.width),
            "arguments": self.harness_arguments(), "firmware_dir": FIRMWARE_DIR,
        }}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        builder = avr_sim.build_sketch if self.case.firmware == "sketch" else avr_sim.build
        try:
            build = await loop.run_in_executor(None, builder, self.build_dir)
        except avr_sim.AvrSimError as exc:
            self.err.write(f"{exc}\n", flush=True)
            raise MeasurementFailure(str(exc)) from None
        self.elf, self.harness = firmware_path(build, self.case.timer0), build.harness
        self.ctx.messages.append(f"firmware {self.elf.name} (sha256 {_sha256(self.elf)[:16]}…)")
        command = shlex.join([str(self.harness), *self.harness_arguments(), str(self.elf)])
        await self.start_probe(command)

    def seal_extra(self) -> dict[str, Any]:
        if self.elf is None:
            return {}
        return {"firmware": {"elf": str(self.elf.relative_to(self.build_dir.parent)),
                             "sha256": _sha256(self.elf),
                             "harness": str(self.harness)}}

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        if status != "complete":
            return status, error
        try:
            out = avr_sim.parse((self.ctx.store.dir / self.stdout_file).read_text())
        except (OSError, avr_sim.AvrSimOutputError) as exc:
            return "failed", f"the harness's output cannot be read: {exc}"
        want = self.ctx.campaign.matrix.samples or 0
        if len(out.stims) < want:
            return "incomplete", f"the harness applied {len(out.stims)} of {want} edges"
        return status, error

    @property
    def conversions(self) -> list:
        def tables(run_dir: Path) -> dict[str, int]:
            out = avr_sim.parse((run_dir / "harness.log").read_text())
            pairs = avr_sim.pair(out)
            write_parquet(pd.DataFrame({"stim_cycle": [p.stim for p in pairs],
                                        "resp_cycle": pd.array([p.resp for p in pairs],
                                                               dtype="Int64")}),
                          run_dir / "avrsim_edges.parquet")
            write_parquet(pd.DataFrame({"vector": [r.vector for r in out.isrs],
                                        "entry_cycle": [r.entry for r in out.isrs],
                                        "exit_cycle": [r.exit for r in out.isrs]}),
                                        run_dir / "avrsim_handlers.parquet")
            return {"edges": len(pairs), "handler_runs": len(out.isrs)}

        return [tables]

