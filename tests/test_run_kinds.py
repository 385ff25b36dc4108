"""A new run kind is one new module plus registration.

`LoadavgProbe` below is a complete run kind in ~60 lines: it samples the target's
/proc/loadavg while the run's loads run, appends each sample to a raw file the moment
it is read, converts it to Parquet at seal time and adds its counts to the manifest.
It is driven through the real lifecycle (Bench → station.run.execute_run) against the
twin over real SSH; the lifecycle — loads, teardown on every exit path, sealing — is
shared with the module run and not written again here."""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from station import kind_registry, kinds
from station.bench import Bench
from station.config import RunSpec, parse_campaign
from station.kinds.base import Measurement, RunContext
from station.progress import QuietProgress, RunProgress
from station.run import execute_run
from station.store import RunStore, read_csv_lines
from station.target import TargetError
from station.target.ssh import SSHEndpoint, TargetConnection

WORK_DIR = "/tmp/irq-station"  # TargetSettings.work_dir's default
SAMPLES = 12


# ---- the new kind: this is all it takes -------------------------------------------------
class LoadavgProbe(Measurement):
    """Samples `cat /proc/loadavg` every PERIOD_S for matrix.samples samples (or until
    matrix.max_duration). A marker file on the target says a probe is active: start
    creates it, stop removes it — whether or not start got that far."""

    name = "loadavg-probe"
    outputs = {"probe.csv": "host time and the three load averages of each sample (→ probe.parquet)"}
    PERIOD_S = 0.05

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.marker = f"{ctx.target.work_dir}/probe/active"
        self.samples = 0
        self.loaded = 0  # samples whose 1-minute load average read ≥ 1

    def manifest(self) -> dict[str, Any]:
        return {"probe": {"source": "/proc/loadavg", "period_s": self.PERIOD_S}}

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
            await asyncio.sleep(self.PERIOD_S)

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


# and its one registration line (a package of its own would name "module:LoadavgProbe" instead)
kind_registry.register(kind_registry.Kind(name="loadavg-probe", summary="the target's load average",
                                          measurement=LoadavgProbe))


# ---- driving it through the real lifecycle ----------------------------------------------
def _campaign(twin):
    e = twin.endpoints
    return parse_campaign(
        "name: probe\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}'}}\n"
        "  scope: {kind: none}\n"
        f"matrix: {{interfaces: [lpt], variants: [inb], loads: [io], samples: {SAMPLES}, max_duration: 10s}}\n"
        "loads:\n"
        "  io: [{name: dd, command: 'while :; do dd if=/dev/zero of=x bs=1M count=1; done'}]\n"
    )


SPEC = RunSpec("lpt", "inb", "io", 0, kind=LoadavgProbe.name)


async def _execute(campaign, out: Path):
    sink = QuietProgress()
    async with Bench(campaign, sink) as bench:
        store = RunStore(out, SPEC.id)
        outcome = await execute_run(bench, SPEC, store, RunProgress(SPEC.id, 0, 1), sink)
    return outcome, store.dir


def _endpoint(twin) -> SSHEndpoint:
    e = twin.endpoints
    return SSHEndpoint(e.ssh_host, e.ssh_port, e.user, e.identity_file, e.known_hosts, 5)


async def _state(twin) -> dict[str, str]:
    conn = await TargetConnection.open(_endpoint(twin))
    try:
        return {
            "ps": (await conn.run("ps")).stdout,
            "pids": (await conn.run(f"ls {WORK_DIR}/loads", check=False)).stdout,
            "probe": (await conn.run(f"ls {WORK_DIR}/probe", check=False)).stdout,
            "loadavg": (await conn.run("cat /proc/loadavg")).stdout,
        }
    finally:
        await conn.close()


def _assert_clean(twin) -> None:
    """The load was stopped, no pid file or probe marker is left, and the load average
    reads idle again."""
    state = asyncio.run(_state(twin))
    assert "dd" not in state["ps"] and "sh -c" not in state["ps"], state["ps"]
    assert state["pids"].strip() == "", state["pids"]
    assert state["probe"].strip() == "", state["probe"]
    assert float(state["loadavg"].split()[0]) < 1.0, state["loadavg"]


def test_a_new_kind_runs_through_the_whole_lifecycle(twin, tmp_path):
    assert kinds.kind_for("loadavg-probe") is LoadavgProbe
    outcome, run_dir = asyncio.run(_execute(_campaign(twin), tmp_path / "out"))
    assert (outcome.status, outcome.error, outcome.fatal) == ("complete", None, None)

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["kind"] == "loadavg-probe" and manifest["status"] == "complete"
    assert manifest["probe"] == {"source": "/proc/loadavg", "period_s": LoadavgProbe.PERIOD_S}
    assert manifest["counts"] == {"probe_samples": SAMPLES}
    assert manifest["probe_summary"] == {"samples": SAMPLES, "under_load": SAMPLES}
    assert set(manifest["checksums_sha256"]) == {"probe.csv"}
    assert manifest["loads"][0]["name"] == "dd"

    frame = pd.read_parquet(run_dir / "probe.parquet")
    assert len(frame) == SAMPLES
    assert (frame["load1"] >= 1.0).all(), frame  # every sample was taken while the load ran
    assert frame["host_s"].is_monotonic_increasing
    # nothing the module run writes: a kind writes only what it declares
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json", "probe.csv", "probe.parquet"]
    _assert_clean(twin)


@pytest.mark.parametrize("where", ["measure", "start"])
def test_a_fault_in_the_kind_fails_the_run_and_still_tears_down(twin, tmp_path, monkeypatch, where):
    """measure: the target is lost after 5 samples; start: right after the marker was
    created (a half-done start). Either way the run fails with that message, stop()
    and the loads' teardown still run, and what was sampled before is kept."""
    before = 5 if where == "measure" else 0
    message = f"lost the target in {where}"
    if where == "measure":
        real = LoadavgProbe._sample
        calls = 0

        async def sample_then_fail(self):
            nonlocal calls
            calls += 1
            if calls > before:
                raise TargetError(message)
            return await real(self)

        monkeypatch.setattr(LoadavgProbe, "_sample", sample_then_fail)
    else:
        real_start = LoadavgProbe.start
        seen = []

        async def start_then_fail(self):
            await real_start(self)
            conn = await self.ctx.target.live_connection()
            seen.append((await conn.run(f"ls {self.marker}", check=False)).stdout.strip())
            raise TargetError(message)

        monkeypatch.setattr(LoadavgProbe, "start", start_then_fail)

    outcome, run_dir = asyncio.run(_execute(_campaign(twin), tmp_path / "out"))
    assert (outcome.status, outcome.error) == ("failed", message)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["kind"], manifest["status"], manifest["error"]) == ("loadavg-probe", "failed", message)
    raw = read_csv_lines(run_dir / "probe.csv")
    assert len(raw) == before and (raw["load1"] >= 1.0).all()
    assert manifest["counts"] == {"probe_samples": before}  # sealed all the same
    assert len(pd.read_parquet(run_dir / "probe.parquet")) == before
    if where == "start":
        assert seen == [f"{WORK_DIR}/probe/active"]  # the half-done start had left its marker
    _assert_clean(twin)


def test_an_unknown_kind_is_refused_by_name_with_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown run kind 'no-such-kind' \(known: .*loadavg-probe.*module"):
        kinds.kind_for("no-such-kind")
    assert {"module", "loadavg-probe"} <= set(kind_registry.kinds())


def test_the_bench_activates_exactly_what_the_kind_declares(tmp_path):
    """labgrid's bindings: the same campaign (a twin target and a twin scope) opens the scope and
    uploads the modules only for a kind that declares them; the bench itself names no kind."""
    from station.kind_registry import BenchNeeds

    upload = tmp_path / "ko"
    upload.mkdir()
    for stem in ("rtai_lpt_latency", "rtai_pcie_latency"):
        (upload / f"{stem}.ko").write_bytes(b"\x7fELF twin module\0vermagic=3.4.55-rtai SMP preempt\0")
    campaign = parse_campaign(
        "name: needs\n"
        f"bench: {{target: {{kind: twin, upload_modules: '{upload}'}}}}\n"
        "matrix: {interfaces: [lpt], variants: [inb], samples: 10}\n"
    )
    asked: list[str] = []

    def lpt_only(c, t) -> set[str]:  # noqa: ANN001 - Campaign, TargetSettings
        asked.append(t.family)
        return {"rtai_lpt_latency"}

    class Log:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def message(self, text: str) -> None:
            self.lines.append(text)

    async def open_with(needs: BenchNeeds) -> tuple[bool, bool, list[str]]:
        log = Log()
        async with Bench(campaign, log, needs=needs) as bench:
            opened = bench.scope is not None, bench.twin.with_scope
        return (*opened, [line for line in log.lines if line.startswith("uploaded")])

    assert asyncio.run(open_with(BenchNeeds())) == (False, False, [])
    scope, twin_scope, uploaded = asyncio.run(open_with(BenchNeeds(scope=True, modules=lpt_only)))
    assert scope and twin_scope and uploaded == [f"uploaded rtai_lpt_latency to {campaign.bench.target.module_dir}"]
    assert asked == ["rtai"]
    assert kind_registry.kind("module").needs.scope and not kind_registry.kind(LoadavgProbe.name).needs.scope
