"""The throw-away kind's measurement: the target's /proc/loadavg, sampled while the loads run."""

from __future__ import annotations

import asyncio
import shlex
import time
from pathlib import Path
from typing import Any

from station.kinds.base import Measurement, RunContext
from station.store.run_store import RunStore, read_csv_lines


class LoadavgProbe(Measurement):
    """Samples `cat /proc/loadavg` every loadavg.period (PERIOD_S without the section) for
    matrix.samples samples (or until matrix.max_duration). A marker file on the target says a probe is active: start
    creates it, stop removes it — whether or not start got that far."""

    name = "loadavg"
    outputs = {"probe.csv": "host time and the three load averages of each sample (→ probe.parquet)"}
    PERIOD_S = 0.05

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.marker = f"{ctx.target.work_dir}/probe/active"
        settings = getattr(ctx.campaign, "loadavg", None)  # the kind's own section, when it has one
        self.period_s = settings.period if settings is not None else self.PERIOD_S
        self.samples = 0
        self.loaded = 0  # samples whose 1-minute load average read ≥ 1

    def manifest(self) -> dict[str, Any]:
        return {"probe": {"source": "/proc/loadavg", "period_s": self.period_s}}

    def open_files(self, store: RunStore) -> None:
        self.csv = store.appender("probe.csv", header="host_s,load1,load5,load15\n")

    async def start(self) -> None:
        conn = await self.ctx.target.live_connection()
        await conn.upload(f"{self.ctx.spec.id}\n".encode(), self.marker)

    async def measure(self) -> None:
        m, progress = self.ctx.campaign.matrix, self.ctx.progress
        progress.phase, progress.sw_target, progress.started = "measuring", m.samples, time.monotonic()
        deadline = time.monotonic() + m.max_duration
        while self.samples < (m.samples or 0) and time.monotonic() < deadline:
            load1, load5, load15 = await self._sample()
            self.csv.write(f"{time.time():.6f},{load1},{load5},{load15}\n", flush=True)
            self.samples += 1
            self.loaded += load1 >= 1.0
            progress.sw.count = self.samples
            self.ctx.sink.update(progress)
            await asyncio.sleep(self.period_s)

    async def _sample(self) -> tuple[float, float, float]:
        conn = await self.ctx.target.live_connection()
        fields = (await conn.run("cat /proc/loadavg")).stdout.split()
        return float(fields[0]), float(fields[1]), float(fields[2])

    async def stop(self) -> None:
        # nothing but the marker to undo; `rm -f` is harmless if start never created it
        conn = await self.ctx.target.live_connection()
        await conn.run(f"rm -f {shlex.quote(self.marker)}", check=False)

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        want = self.ctx.campaign.matrix.samples or 0
        if status == "complete" and self.samples < want:
            return "incomplete", f"max_duration reached with {self.samples} of {want} probe samples"
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        return {"probe_summary": {"samples": self.samples, "under_load": self.loaded}}

    @property
    def conversions(self) -> list:
        def probe(run_dir: Path) -> dict[str, int]:
            frame = read_csv_lines(run_dir / "probe.csv")
            frame.to_parquet(run_dir / "probe.parquet", index=False)
            return {"probe_samples": len(frame)}

        return [probe]
