"""A new run kind is one new package plus registration.

`LoadavgProbe` (tests/throwaway_kind/run.py) is a complete measurement in ~60 lines: it samples the target's
/proc/loadavg while the run's loads run, appends each sample to a raw file the moment
it is read, converts it to Parquet at seal time and adds its counts to the manifest.
It is driven through the real lifecycle (Bench → station.campaign.run.execute_run) against the
twin over real SSH; the lifecycle — loads, teardown on every exit path, sealing — is
shared with the module run and not written again here."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
import throwaway_kind
from throwaway_kind.run import LoadavgProbe

from station import kind_registry, kinds
from station.bench.bench import Bench
from station.campaign.run import execute_run
from station.common.progress import QuietProgress, RunProgress
from station.config import RunSpec, parse_campaign
from station.store.run_store import RunStore, read_csv_lines
from station.target import TargetError
from station.target.ssh import SSHEndpoint, TargetConnection

WORK_DIR = "/tmp/irq-station"  # TargetSettings.work_dir's default
SAMPLES = 12


# ---- the new kind: a package of the test tree (tests/throwaway_kind), one registration line --
@pytest.fixture(scope="module", autouse=True)
def _registered():
    kind_registry.register(throwaway_kind.KIND)
    yield
    kind_registry.unregister(throwaway_kind.KIND.name)


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
    assert kinds.kind_for("loadavg") is LoadavgProbe
    outcome, run_dir = asyncio.run(_execute(_campaign(twin), tmp_path / "out"))
    assert (outcome.status, outcome.error, outcome.fatal) == ("complete", None, None)

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["kind"] == "loadavg" and manifest["status"] == "complete"
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
    assert (manifest["kind"], manifest["status"], manifest["error"]) == ("loadavg", "failed", message)
    raw = read_csv_lines(run_dir / "probe.csv")
    assert len(raw) == before and (raw["load1"] >= 1.0).all()
    assert manifest["counts"] == {"probe_samples": before}  # sealed all the same
    assert len(pd.read_parquet(run_dir / "probe.parquet")) == before
    if where == "start":
        assert seen == [f"{WORK_DIR}/probe/active"]  # the half-done start had left its marker
    _assert_clean(twin)


def test_an_unknown_kind_is_refused_by_name_with_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown run kind 'no-such-kind' \(known: .*loadavg.*module"):
        kinds.kind_for("no-such-kind")
    assert {"module", "loadavg"} <= set(kind_registry.kinds())


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
    # without needs given, a bench activates what the campaign's own kind declares
    assert Bench(campaign, Log()).needs is kind_registry.kind("module").needs
