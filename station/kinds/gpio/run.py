"""The gpio run (seed 002): a generator drives the target's input line, a responder answers on its
output line, and the scope pairs every stimulus edge it sees with the response edge that follows.

Per run, one case of the campaign's gpio.cases: its responder (gpio_responder.ko, the user-space
responder on the character device or sysfs, or nothing the station starts) and its cpufreq
governor (set for the run, the previous one put back after). The generator's output is on only
while the run measures. Each acquisition appends its stimulus edges to delays.csv as it arrives
(a missed stimulus has an empty delay), so a run cut short keeps what was measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from station.analysis.run_unit import histogram_unit
from station.kinds.base import Measurement, MeasurementFailure, RunContext
from station.kinds.gpio.responder import Responder
from station.store.run_store import read_csv_lines, write_parquet
from station.target import TargetError, governors


class InstrumentFailure(MeasurementFailure):
    """The scope or the generator failed during the run."""


class GpioRun(Measurement):
    name = "gpio"
    outputs = {
        "delays.csv": "every stimulus edge the scope saw: its acquisition, time from the trigger, "
                      "the delay to its response (empty: missed) and the host time the acquisition "
                      "was armed (→ delays.parquet)",
        "responder.log": "what the user-space responder printed (chardev and sysfs cases)",
    }

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        gpio = ctx.campaign.gpio
        assert gpio is not None
        self.gpio = gpio
        self.case_name = ctx.spec.variant
        self.case = gpio.cases[self.case_name]
        self.window_s = gpio.window_s()
        self.response_edge = gpio.response_edge_for(self.case)
        self.governors_before: dict[str, str] = {}
        self.governor_touched = False
        self.responder: Responder | None = None
        self.generator_on = False
        self.stimuli = self.missed = self.censored = self.ambiguous = self.unanswering = 0
        self.answered: list[np.ndarray] = []

    def manifest(self) -> dict[str, Any]:
        g = self.gpio
        return {
            "gpio": {
                "case": self.case_name,
                **self.case.model_dump(),
                "lines": g.lines.model_dump(),
                "period_s": g.period,
                "jitter": g.jitter,
                "width_s": g.width,
                "window_s": self.window_s,
                "stimulus_edge": g.stimulus_edge,
                "response_edge": self.response_edge,
                "stimulus_channel": self.ctx.campaign.bench.scope.channel,
                "response_channel": g.response_channel,
                "sample_interval_s": self.ctx.bench.scope.sample_interval_s
                if self.ctx.bench.scope
                else None,
            }
        }

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        self.delays_csv = store.appender("delays.csv",
                                         header="acquisition,stimulus_s,delay_s,armed_host_s\n")
        self.log = store.appender("responder.log")

    async def baseline(self) -> None:
        if self.case.governor != "keep":
            conn = await self.ctx.target.live_connection()
            self.governors_before = await governors.read_governors(conn)

    async def start(self) -> None:
        target = self.ctx.target
        conn = await target.live_connection()
        if self.governors_before:
            await governors.save_governors(conn, target.work_dir, self.governors_before)
            self.governor_touched = True
            await governors.write_governors(conn, dict.fromkeys(self.governors_before,
                                                                self.case.governor))
        self.responder = Responder(target, self.gpio, self.case, self.ctx.max_seconds,
                                   self.log)
        await self.responder.start(conn)
        if self.ctx.bench.generator is not None:
            self.generator_on = True
            await asyncio.get_running_loop().run_in_executor(None, self.ctx.bench.generator.output,
                                                             True)

    async def measure(self) -> None:
        m, progress, scope = self.ctx.campaign.matrix, self.ctx.progress, self.ctx.bench.scope
        progress.sw_target = m.samples
        # the delays are the scope's (stimulus edge to response edge): one quantity, named for it
        progress.sw_label, progress.hw_label = "response delay (scope)", None
        progress.duration_target = m.duration
        progress.phase = "measuring"
        progress.started = time.monotonic()
        loop = asyncio.get_running_loop()
        deadline = progress.started + m.max_duration
        while True:
            now = time.monotonic()
            if (m.samples and self.stimuli >= m.samples) or (
                m.duration and now - progress.started >= m.duration
            ):
                return
            if now >= deadline:
                return  # the verdict says what fell short
            if self.responder is not None and self.responder.exit_status is not None:
                raise MeasurementFailure("the responder exited with status "
                                         f"{self.responder.exit_status}: "
                                         f"{self._log_tail()}")
            armed = time.time()
            try:
                delays = await loop.run_in_executor(None, scope.acquire_delays,
                                                    self.gpio.response_channel,
                                                    self.window_s, self.gpio.stimulus_edge,
                                                    self.response_edge,
                                                    self.case.mode == "echo")
            # any instrument failure ends the run, data kept
            except Exception as exc:  # noqa: BLE001
                raise InstrumentFailure(f"scope: {exc}") from None
            n = progress.acquisitions
            self.delays_csv.write("".join(
                f"{n},{s:.12e},{'' if np.isnan(d) else f'{d:.12e}'},{armed:.6f}\n"
                for s, d in zip(delays.stimulus_s, delays.delay_s, strict=True)
            ), flush=True)
            progress.acquisitions += 1
            self.stimuli += len(delays)
            self.missed += delays.missed
            self.censored += delays.censored
            self.ambiguous += delays.ambiguous
            self.unanswering += delays.unanswering
            self.answered.append(delays.answered)
            progress.sw.add(delays.answered * 1e9)
            self.ctx.sink.update(progress)

    async def stop(self) -> None:
        """Generator off (the input goes quiet first), responder stopped, governor put back: each
        step tried whatever the others did; a lost session is raised (teardown reconnects and calls
        again)."""
        errors: list[str] = []
        if self.generator_on and self.ctx.bench.generator is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(None,
                                                                 self.ctx.bench.generator.output,
                                                                 False)
                self.generator_on = False
            except Exception as exc:  # noqa: BLE001 - the target must still be cleaned
                errors.append(f"generator output off: {exc}")
        conn = await self.ctx.target.live_connection()
        for step in (self._stop_responder, self._restore_governor):
            try:
                await step(conn)
            except TargetError as exc:
                errors.append(str(exc))
        if errors:
            raise TargetError("; ".join(errors))

    async def _stop_responder(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        if self.responder is not None:
            await self.responder.stop(conn)

    async def _restore_governor(self, conn) -> None:  # noqa: ANN001 - TargetConnection
        if self.governor_touched:
            await governors.write_governors(conn, self.governors_before)
            self.governor_touched = False
            await governors.forget_saved(conn, self.ctx.target.work_dir)

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        m = self.ctx.campaign.matrix
        if status == "complete" and not self.stimuli:
            return "incomplete", ("the scope saw no stimulus edge in "
                                  f"{self.ctx.progress.acquisitions} acquisitions: check the "
                                  "generator, the probe on channel "
                                  f"{self.ctx.campaign.bench.scope.channel} and the threshold")
        if status == "complete" and m.samples and self.stimuli < m.samples:
            return (
                "incomplete",
                f"max_duration reached with {self.stimuli} of {m.samples} stimuli seen",
            )
        if status == "complete" and self.stimuli and self.missed == self.stimuli:
            return "incomplete", (f"no response to any of {self.stimuli} stimuli: check the "
                                  f"responder, its lines ({self.gpio.lines.chip} "
                                  f"{self.gpio.lines.input}→{self.gpio.lines.output}) and the "
                                  f"probe on channel {self.gpio.response_channel}")
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        answered = np.concatenate(self.answered) if self.answered else np.empty(0)
        until = self.ctx.campaign.matrix.until
        # the run as one unit of a stop rule: its answered delays, and each stimulus with no answer
        # within the window as one beyond every value (a percentile among them has none); the
        # censored and the ambiguous are not known, and left out
        unit = histogram_unit(answered * 1e9, np.ones(len(answered), np.int64), self.missed,
                              [until.level] if until is not None else [],
                              "response delay (stimulus edge to response edge)")
        return {"unit": unit, "gpio_counts": {
            "stimuli": self.stimuli, "answered": int(len(answered)), "missed": self.missed,
            "censored": self.censored, "ambiguous": self.ambiguous,
            "unanswering_responses": self.unanswering,
            "acquisitions": self.ctx.progress.acquisitions,
        }}

    @property
    def conversions(self) -> list:
        def delays(run_dir: Path) -> dict[str, int]:
            frame = read_csv_lines(run_dir / "delays.csv")
            write_parquet(frame, run_dir / "delays.parquet")
            return {"stimuli": len(frame)}

        return [delays]

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            text = (self.ctx.store.dir / "responder.log").read_text(errors="replace").strip()
            if text:
                return text[-500:]
        return "(no message)"

