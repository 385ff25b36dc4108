"""The cyclictest run (seed 004): a probe run. cyclictest runs on the target while the
run's loads run; its raw output (stdout with the histogram, stderr, the --json file)
is kept in the run directory byte for byte and parsed at the end (station/kinds/probe_run.py:
how a probe is started, drained and stopped on every exit path)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import numpy as np

from station.analysis.run_unit import histogram_unit
from station.kinds.base import RunContext
from station.kinds.cyclictest import analysis as ct_analysis
from station.kinds.cyclictest import on_target as ct_target
from station.kinds.probe_run import ProbeRun
from station.kinds.rtla_companion import RtlaCompanion
from station.parsers.cyclictest import CyclictestOutputError
from station.store.run_store import write_parquet
from station.target import rtla

PROBE_NAME = "cyclictest"


class CyclictestRun(ProbeRun):
    name = "cyclictest"
    probe_name = PROBE_NAME
    stdout_file = "cyclictest.out"
    stderr_file = "cyclictest.err"
    stop_grace_s = 5.0  # after SIGTERM cyclictest prints its histogram and writes its JSON
    outputs = {
        "cyclictest.out": "cyclictest's stdout: the -h histogram and summary lines (→ "
                          "cyclictest_histogram.parquet)",
        "cyclictest.err": "cyclictest's stderr",
        "cyclictest.json": "cyclictest's --json file, as written on the target (rt-tests 2.0 and "
                           "later)",
        "timerlat.out": "rtla timerlat hist's histogram and summary, after cyclictest "
                        "(cyclictest.companion)",
        "timerlat.err": "rtla's stderr",
        "timerlat_trace.txt": "the trace rtla saved when it stopped at cyclictest.timerlat_stop",
    }

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.settings = ctx.campaign.cyclictest
        m = ctx.campaign.matrix
        self.duration_s = m.duration
        self.loops = m.samples
        self.json_remote = f"{ctx.target.work_dir}/cyclictest/{ctx.spec.id}.json"
        self.installed: ct_target.Installed | None = None
        self.summary: dict[str, Any] | None = None
        self.timerlat = RtlaCompanion(ctx, "timerlat", "rtla timerlat")
        self.timerlat_trace_remote = f"{ctx.target.work_dir}/timerlat/{ctx.spec.id}.txt"
        self.timerlat_trace_fetched = False

    def planned_seconds(self) -> float:
        return self.duration_s or (self.loops or 0) * self.settings.interval

    def _args(self, json_path: str | None) -> list[str]:
        return ct_target.arguments(self.settings, duration_s=self.duration_s, loops=self.loops,
                                   json_path=json_path)

    @property
    def sliced(self) -> bool:
        return self.settings.slices > 1 and self.duration_s is not None

    def manifest(self) -> dict[str, Any]:
        args = (
            ct_target.arguments(
                self.settings, duration_s=self.duration_s / self.settings.slices, loops=None,
                json_path=None
            )
            if self.sliced
            else self._args(self.json_remote)
        )
        return {"probe": {"tool": "cyclictest", "settings": self.settings.model_dump(mode="json"),
                          "arguments": args, "slices": self.settings.slices}}

    def open_files(self, store) -> None:  # noqa: ANN001 - RunStore
        super().open_files(store)
        self.json = store.appender("cyclictest.json")
        self.json_fetched = False
        self.timerlat.open_files(store)
        self.timerlat_trace = store.appender("timerlat_trace.txt")

    async def baseline(self) -> None:
        conn = await self.ctx.target.live_connection()
        self.installed = await ct_target.installed(conn)
        if self.settings.smi:
            await ct_target.check_smi(conn)
        if self.settings.companion == "timerlat" and (why := await rtla.unavailable(conn,
                                                                                    "timerlat")):
            self.timerlat.skip(why)

    async def start(self) -> None:
        assert self.installed is not None
        target = self.ctx.target
        conn = await target.live_connection()
        json_path = self.json_remote if self.installed.has_json else None
        directory, stale = shlex.quote(self.json_remote.rsplit('/',
                                                               1)[0]), shlex.quote(self.json_remote)
        await conn.run(f"sh -c {shlex.quote(f'mkdir -p {directory} && rm -f {stale}')}",
                       privileged=True)
        if self.sliced:
            assert self.duration_s is not None
            await self.start_probe(ct_target.sliced_command(self.settings, self.duration_s))
        else:
            await self.start_probe(shlex.join(["cyclictest", *self._args(json_path)]))

    async def measure(self) -> None:
        await super().measure()
        if self.settings.companion == "timerlat" and self.timerlat.note is None:
            # the kernel's own timer latency, on the same CPUs for as long, the loads still running
            duration = self.planned_seconds()
            if self.settings.timerlat_stop is not None:  # rtla saves its trace there when it stops
                conn = await self.ctx.target.live_connection()
                trace, directory = (
                    shlex.quote(self.timerlat_trace_remote), shlex.quote(self._trace_dir())
                )
                await conn.run(f"sh -c {shlex.quote(f'mkdir -p {directory} && rm -f {trace}')}",
                               privileged=True)
            try:
                await self.timerlat.run(self._timerlat_args(), duration,
                                        collector_priority=ct_target.TIMERLAT_COLLECTOR_PRIORITY)
            finally:
                await self._fetch_timerlat_trace()

    def _trace_dir(self) -> str:
        return self.timerlat_trace_remote.rsplit("/", 1)[0]

    def _timerlat_args(self) -> list[str]:
        return ct_target.timerlat_arguments(self.settings, self.planned_seconds(),
                                            self.timerlat_trace_remote)

    async def _fetch_timerlat_trace(self) -> None:
        """The trace rtla saved at its stop threshold, into the run; never left on the target."""
        if self.settings.timerlat_stop is None or self.timerlat_trace_fetched:
            return
        conn = await self.ctx.target.live_connection()
        trace = shlex.quote(self.timerlat_trace_remote)
        got = await conn.run(f"cat {trace}", check=False, privileged=True)
        if got.exit_status == 0 and got.stdout:
            self.timerlat_trace.write(got.stdout, flush=True)
        await conn.run(f"rm -f {trace}", check=False, privileged=True)
        self.timerlat_trace_fetched = True

    def _ended_early(self) -> str | None:
        """cyclictest exits 0 on SIGTERM too: a run someone else stopped (a `station cleanup`
        elsewhere, a shutdown) must not pass for the whole measurement. Nor may a thread that
        never measured: its CPU has no figure (seen under hackbench in an emulated guest, where
        a thread, which starts as a normal task, did not get to raise its priority in 2 s)."""
        assert self.summary is not None
        idle = [t for t in self.summary["threads"] if t["cycles"] == 0]
        if idle:
            which = ", ".join(
                f"{t['thread']}" + ("" if t["cpu"] is None else f" (CPU {t['cpu']})") for t in idle
            )
            return f"cyclictest thread {which} measured nothing: no figure for that CPU"
        if self.loops is not None:
            short = [t for t in self.summary["threads"] if t["cycles"] < self.loops]
            if short and self.duration_s is None:
                return (f"cyclictest ended after {min(t['cycles'] for t in short)} of {self.loops} "
                        "loops (stopped from outside?)")
        if (
            self.duration_s is not None
            and self.started_at is not None
            and self.ended_at is not None
        ):
            ran = self.ended_at - self.started_at
            if ran < self.duration_s - max(1.0, 0.05 * self.duration_s) and (
                self.loops is None or all(t["cycles"] < self.loops for t in self.summary["threads"])
            ):
                return (
                    f"cyclictest ended after {ran:.1f} s of {self.duration_s:g} s (stopped from "
                    "outside?)"
                )
        return None

    async def after_exit(self) -> None:
        if not (self.installed and self.installed.has_json) or self.json_fetched or self.sliced:
            return
        conn = await self.ctx.target.live_connection()
        got = await conn.run(f"cat {shlex.quote(self.json_remote)}", check=False, privileged=True)
        if got.exit_status == 0 and got.stdout:
            self.json.write(got.stdout, flush=True)
            self.json_fetched = True
        await conn.run(f"rm -f {shlex.quote(self.json_remote)}", check=False, privileged=True)

    async def stop(self) -> None:
        await super().stop()
        await self.timerlat.stop()
        await self._fetch_timerlat_trace()  # unless measure() got to it
        conn = await self.ctx.target.live_connection()
        await conn.run(f"rm -f {shlex.quote(self.json_remote)}", check=False, privileged=True)

    def verdict(self, status: str, error: str | None) -> tuple[str, str | None]:
        try:
            outputs = ct_analysis.read_outputs(self.ctx.store.dir)
            self.summary = ct_analysis.summary(outputs)
            self.unit = _unit(outputs, self.ctx.campaign.matrix.until)
        except (CyclictestOutputError, ValueError) as exc:
            if status == "complete":
                return "failed", f"cyclictest output: {exc}"
            return status, error
        if (
            status == "complete"
            and self.summary["break"] is None
            and (short := self._ended_early())
        ):
            status, error = "incomplete", short
        threads, worst = self.summary["threads"], self.summary["max_us"]
        self.ctx.sink.message(f"{self.ctx.spec.id}: cyclictest max {worst} µs over {len(threads)} "
                              f"thread(s), {self.summary['samples']} samples")
        # a break trace hit ends the run early by design: a result (summary.break), not a failure
        return status, error

    def seal_extra(self) -> dict[str, Any]:
        info = self.installed
        return {**({"unit": self.unit} if getattr(self, "unit", None) else {}), "cyclictest": {
            "version": info.version if info else None,
            "json": bool(info and info.has_json),
            "exit_status": self.exit_status,
            "stopped_by_station": self.stopped_by_station,
            **(self.summary or {}),
        }, **({"timerlat": {
            "arguments": self._timerlat_args(),
            "note": self.timerlat.note, "exit_status": self.timerlat.exit_status,
        }} if self.settings.companion == "timerlat" else {})}

    @property
    def conversions(self) -> list:
        def histogram(run_dir: Path) -> dict[str, int]:
            frame = ct_analysis.histogram_table(ct_analysis.read_outputs(run_dir))
            write_parquet(frame, run_dir / "cyclictest_histogram.parquet")
            return {"histogram_buckets": len(frame),
                    "cyclictest_samples": int(frame["count"].sum())}

        return [histogram]



def _unit(outputs: ct_analysis.RunOutput, until: Any) -> dict[str, Any]:
    """The run as one unit of a stop rule: every thread's histogram pooled (1 µs buckets, each
    counted at its value), its overflows beyond the histogram's range."""
    threads = outputs.threads
    values = np.concatenate([np.empty(0), *(np.asarray(t.buckets, np.float64) * 1000.0
                                            for t in threads)])
    counts = np.concatenate([np.empty(0, np.int64), *(np.asarray(t.counts, np.int64)
                                                      for t in threads)])
    overflows = sum(int(t.overflows if t.overflows is not None
                        else outputs.overflows(t.index) or 0) for t in threads)
    levels = [until.level] if until is not None else []
    return histogram_unit(values, counts, overflows, levels,
                          "cyclictest (all threads, 1 µs buckets)")
