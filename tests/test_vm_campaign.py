"""configs/lpt-vs-pcie-qemu.yaml end to end: Debian's kernel in QEMU, our mainline modules on
QEMU's emulated devices, driven by the station over SSH like any bench.
Emulation stalls reach milliseconds, so the checks use medians and percentiles."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import asyncssh
import numpy as np
import pandas as pd
import pytest
import yaml

from station.kinds.module import decomposition as dec
from tests.conftest import REPO, run_station, station_cmd
from tests.conftest import free_port as _free_port


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    from station.vm import VirtualMachine, build_image

    image = build_image()
    machine = VirtualMachine(image, ssh_port=_free_port(), state_dir=tmp_path_factory.mktemp("vm-state"))
    machine.start()
    yield machine
    machine.stop()
    assert not machine.is_running(), "the VM must be shut down afterwards"


def _config(vm, tmp_path, **matrix_overrides) -> str:
    cfg = yaml.safe_load((REPO / "configs/lpt-vs-pcie-qemu.yaml").read_text())
    cfg["bench"]["target"] |= {"kind": "ssh", "host": "127.0.0.1", "user": "root",  # the fixture's VM
                               "port": vm.ssh_port, "identity_file": str(vm.image.identity_file),
                               "known_hosts": str(vm.known_hosts_file), "upload_modules": str(vm.image.modules_dir)}
    cfg["matrix"] |= matrix_overrides
    path = tmp_path / "vm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


async def _guest(vm, command: str) -> str:
    async with asyncssh.connect("127.0.0.1", vm.ssh_port, username="root", client_keys=[str(vm.image.identity_file)],
                                known_hosts=str(vm.known_hosts_file)) as conn:
        return (await conn.run(command, check=True)).stdout


async def _lsmod(vm) -> str:
    return await _guest(vm, "lsmod")


def test_vm_campaign_runs_the_real_modules_end_to_end(vm, tmp_path, record_property):
    out = tmp_path / "results"
    res = run_station("run", _config(vm, tmp_path), "--out", str(out), timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    assert {(r["interface"], r["variant"]) for r in report["runs"]} == {
        ("lpt", "inb"), ("lpt", "no-inb"), ("pcie", "inb"), ("pcie", "no-inb")}
    for run in report["runs"]:
        manifest = json.loads((out / "runs" / run["id"] / "manifest.json").read_text())
        assert run["status"] == "complete", run["error"]
        assert run["sw"]["count"] >= 5000
        # continuous sequence numbers, or gaps the module itself accounted for
        losses = manifest["losses"]
        assert losses["sw_lost"] == 0 or losses["sw_lost"] == losses["sw_dropped_by_target"], losses
        p50, p99 = run["sw"]["percentiles_ns"]["p50"], run["sw"]["percentiles_ns"]["p99"]
        # units, not speed: emulated time stretches with the host's load, so no latency bound here
        # beyond "nanoseconds, and less than a second" (a unit slip would miss by 10^3 or more)
        assert 1_000 < p50 <= p99 < 1_000_000_000, (p50, p99)
        # the real kernel said nothing alarming while the module ran
        assert manifest["kernel_log"]["trouble"] == [], manifest["kernel_log"]["trouble"]
        # and its /proc/interrupts row counted (at least) every record
        irq = manifest["interrupts"]
        assert irq["after"] - irq["before"] >= run["sw"]["count"], irq
        record_property(f"{run['id']}_p50_us", round(p50 / 1000, 2))
        record_property(f"{run['id']}_p99_us", round(p99 / 1000, 2))
        print(f"{run['id']}: median {p50 / 1000:.2f} us, p99 {p99 / 1000:.2f} us, n={run['sw']['count']}")
    assert "latency" not in asyncio.run(_lsmod(vm))
    # the result store over this real campaign (DuckDB over its Parquet files, as `station compare`
    # and a lab read it) says what the report says of each run's software samples
    from station import api

    store = api.open_results([out])
    store.register()
    got = {r[0]: r[1:] for r in store.con.sql(
        "SELECT run_id, count(*), min(latency_ns), max(latency_ns) FROM sw_own GROUP BY run_id").fetchall()}
    for run in report["runs"]:
        assert got[run["id"]] == (run["sw"]["count"], run["sw"]["min_ns"], run["sw"]["max_ns"]), (got, run["sw"])


def test_bad_module_parameter_reaches_the_user_verbatim(vm, tmp_path):
    out = tmp_path / "results"
    cfg = _config(vm, tmp_path, interfaces=["pcie"], variants=["inb"],
                  module_params={"pcie": {"profile": "bogus"}}, samples=100)
    res = run_station("run", cfg, "--out", str(out), timeout=300)
    assert res.returncode == 3, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    manifest = json.loads((out / "runs" / "pcie-inb-io-r0" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    # the kernel's refusal (insmod's words and the module's pr_err from dmesg), verbatim
    assert "insmod" in manifest["error"] and "profile=bogus invalid" in manifest["error"], manifest["error"]
    assert "latency" not in asyncio.run(_lsmod(vm))


# ---- a traced run: every event's t_SW split into stages (docs/decomposition.md) ----------------
INJECTOR = "/opt/irq-station/modules/irqgap_inject.ko"
# the injector's own names for what it runs (target_modules/linux/irqgap_inject.c): its hrtimer
# callback, and the action name of its edu IRQ handler
INJECTOR_HRTIMER = "hrtimer gap_hrtimer_tick"
INJECTOR_IRQ = " irqgap_inject"
# a period prime to the module's 1 ms: holds fall at every phase of its events; 50 µs holds leave
# the emulated CPU time for everything else (TCG)
HOLD = {"period_us": 2347, "hold_us": 50}
# the modules' test_hold_us: longer than the hrtimer holds, prime to their period
HANDLER_HOLD = {"us": 200, "every": 13}
HELD = 0x0010  # irqs_record.h: IRQS_F_HELD
OFF_CPU = 0x0020  # irqs_record.h: IRQS_F_OFF_CPU
RECORD = np.dtype([("magic", "<u4"), ("version", "<u2"), ("flags", "<u2"), ("seq", "<u8"), ("t_write_ns", "<u8"),
                   ("latency_ns", "<i8"), ("hw_width_ns", "<u4"), ("dropped", "<u4")])  # irqs_record.h


def _traced_injector(mode: str) -> str:
    """The injector as a load, its log of the holds copied out every second and once more before it
    is unloaded (a file per load process: each run of the campaign loads its own). The copies do not
    rest on the trap: the station gives a load 0.2 s after TERM, which under TCG the trap's copy did
    not always get (seen once in a CI try: a run's log missing)."""
    log = f"/tmp/traced-holds-{mode}-$$.txt"
    copy = f"cat /proc/irqgap_inject_holds > {log}.part && mv {log}.part {log}"
    return (f"insmod {INJECTOR} mode={mode} cpu=1 period_us={HOLD['period_us']} hold_us={HOLD['hold_us']} "
            f"|| exit 1; trap '{copy}; rmmod irqgap_inject; exit 0' TERM INT; while :; do sleep 1; {copy}; done")


def _traced_config(vm, tmp_path: Path, name: str, modes: list[str], threaded: bool,
                   interfaces: tuple[str, ...] = ("lpt",), handler_hold: bool = False, samples: int = 3000) -> Path:
    cfg = yaml.safe_load(Path(_config(vm, tmp_path, interfaces=list(interfaces), variants=["no-inb"], loads=modes,
                                      samples=samples, cpu=1)).read_text())
    cfg["matrix"]["module_params"]["lpt"]["threaded"] = int(threaded)
    if handler_hold:  # the modules' own test injection: every n-th handler call waits before its timestamp
        for interface in interfaces:
            cfg["matrix"]["module_params"].setdefault(interface, {}).update(
                test_hold_us=HANDLER_HOLD["us"], test_hold_every=HANDLER_HOLD["every"])
    cfg["module"] = {"trace": True, "trace_overhead": True, "trace_block": "500ms"}
    cfg["loads"] = {mode: [{"name": f"{mode}-injector", "command": _traced_injector(mode)}] for mode in modes}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _traced_campaign(vm, tmp_path: Path, name: str, modes: list[str], threaded: bool,
                     interfaces: tuple[str, ...] = ("lpt",), handler_hold: bool = False) -> tuple[Path, dict]:
    path = _traced_config(vm, tmp_path, name, modes, threaded, interfaces, handler_hold)
    out = tmp_path / name
    res = run_station("run", str(path), "--out", str(out), timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "latency" not in asyncio.run(_lsmod(vm))
    instances = asyncio.run(_guest(vm, "ls /sys/kernel/tracing/instances"))
    assert "irq-station" not in instances, instances  # the station's trace instance is gone too
    return out, json.loads((out / "report.json").read_text())


def _injected(vm, run_dir: Path, mode: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The run's own records, and the events a logged hold fell in (between the write and the
    timestamp, on the module's CPU) with the nanoseconds it took from them."""
    from tests.test_interruptions_campaign import parse_hold_log

    holds = []  # every run's injector left its own log (one per load process): all of them
    for name in asyncio.run(_guest(vm, f"ls /tmp/traced-holds-{mode}-*.txt")).split():
        log = asyncio.run(_guest(vm, f"cat {name}"))
        (run_dir / f"holds-{Path(name).stem}.txt").write_text(log)  # kept beside the run for a post-mortem
        holds += [h for h in parse_hold_log(log).holds if h.cpu == 1]
    records = np.fromfile(run_dir / "sw.raw", RECORD)
    records = records[(records["flags"] & 0x2) == 0]  # the module's own IRQs
    starts = np.array([h.start_ns for h in holds], np.int64)
    ends = np.array([h.end_ns for h in holds], np.int64)
    injected = []
    for seq, t_write, lat in zip(records["seq"].tolist(), records["t_write_ns"].tolist(),
                                 records["latency_ns"].tolist(), strict=True):
        overlap = np.minimum(ends, t_write + lat) - np.maximum(starts, t_write)
        if (overlap > 0).any():
            injected.append((seq, int(overlap[overlap > 0].sum())))
    return records, injected


def _check_traced_run(vm, out: Path, run: dict, stage: str, record_property) -> None:  # noqa: ANN001 - a VirtualMachine
    """Every event's stages sum to its record's t_SW; ≥ 95 % of the events a hold fell in have that
    hold credited, by the injector's name, in the stage it must be in."""
    mode = run["load"]
    run_dir = out / "runs" / run["id"]
    records, injected = _injected(vm, run_dir, mode)
    events = pd.read_parquet(run_dir / "decomposition.parquet").set_index("seq")
    d = run["decomposition"]
    # the guest's trace clock (mono) is the module's ktime: every checked entry lies in its window
    assert d["resolution_ns"] == 1 and d["clock_check"]["agrees"] is True, d["clock_check"]
    # every event is decomposed, or in an untraced block or a switch between blocks (trace_overhead),
    # or taken on another CPU than the traced one (at most the records the module flagged so)
    off_cpu = int(np.count_nonzero(records["flags"] & OFF_CPU))
    allowed = {dec.REASON_UNTRACED, dec.REASON_TRANSITION} | ({dec.REASON_OFF_CPU} if off_cpu else set())
    # the run's last events may end after the trace's last event (the trace is read before the
    # module stops: seen once, one event): only events after every decomposed one
    after = d["not_decomposed"].get(dec.REASON_AFTER, 0)
    assert after <= int((records["seq"] > events.index.max()).sum()), (after, events.index.max())
    allowed |= {dec.REASON_AFTER} if after else set()
    assert set(d["not_decomposed"]) <= allowed, (d["not_decomposed"], _undecomposed(run_dir, records, events, run))
    assert d["not_decomposed"].get(dec.REASON_OFF_CPU, 0) <= off_cpu
    assert d["decomposed"] >= 0.3 * len(records), d
    latency = dict(zip(records["seq"].tolist(), records["latency_ns"].tolist(), strict=True))
    assert all(latency[s] == row.t_sw_ns == row.delivery_ns + row.dispatch_ns for s, row in events.iterrows())

    injected = [(seq, ns) for seq, ns in injected if seq in events.index]
    assert len(injected) >= 10, f"{run['id']}: only {len(injected)} decomposed events had a hold in them"
    culprit = (lambda label: label == INJECTOR_HRTIMER) if mode == "hrtimer" else \
        (lambda label: label.startswith("IRQ ") and label.endswith(INJECTOR_IRQ))
    other = "dispatch" if stage == "delivery" else "delivery"
    placed = 0
    for seq, overlap in injected:
        credits = json.loads(events.loc[seq, "credits"])
        got = sum(ns for label, ns in credits[stage].items() if culprit(label))
        # the trace brackets the injector's busy-wait: at least what it logged (1 µs: two clock reads)
        placed += got >= overlap - 1_000 and not any(culprit(label) for label in credits[other])
    record_property(f"{run['id']} injected", f"{placed} of {len(injected)} placed in {stage}, by name")
    assert placed >= 0.95 * len(injected), f"{run['id']}: {placed} of {len(injected)} in {stage}"
    # the report's largest events: one a hold made (most of its t_SW) names the stage and the injector
    by_seq = dict(injected)
    for event in d["largest"]:
        if by_seq.get(event["seq"], 0) >= event["t_sw_ns"] / 2:
            assert f" in {stage} " in event["explanation"], event
            assert any(c["stage"] == stage and culprit(c["label"]) for c in event["culprits"]), event


def _undecomposed(run_dir: Path, records: np.ndarray, events: pd.DataFrame, run: dict) -> str:
    """A failure's post-mortem (the run directory is gone with CI's machine): the run's losses, and
    the own records left out whose window the trace recorded (some event in it) with no entry of
    the module's line in it: their flags, t_SW and the entries near them (ns from the write)."""
    stamps, entries = [], []
    for m in re.finditer(r"\s(\d+\.\d+): (\w+): (.*)$", (run_dir / "trace.txt").read_text(), re.M):
        ns = round(float(m.group(1)) * 1e9)
        stamps.append(ns)
        if m.group(2) == "irq_handler_entry" and "_latency" in m.group(3):
            entries.append(ns)
    stamps_a, entries_a = np.array(sorted(stamps)), np.array(sorted(entries))
    lines = [f"losses {run.get('losses')}, strays {run.get('strays')}, off_cpu {run.get('off_cpu')}"]
    for rec in records[~np.isin(records["seq"], events.index.to_numpy())]:
        tw, t_irq = int(rec["t_write_ns"]), int(rec["t_write_ns"]) + int(rec["latency_ns"])
        traced = np.searchsorted(stamps_a, t_irq, "right") > np.searchsorted(stamps_a, tw)
        if traced and np.searchsorted(entries_a, t_irq, "right") == np.searchsorted(entries_a, tw) and len(lines) < 6:
            near = entries_a[(entries_a >= tw - 3_000_000) & (entries_a <= t_irq + 3_000_000)] - tw
            lines.append(f"seq {rec['seq']} flags {rec['flags']:#x} t_sw {rec['latency_ns']} ns, entries at "
                         f"{near.tolist()}")
    return "; ".join(lines)


def _check_overhead(run_dir: Path, run: dict, record_property) -> None:  # noqa: ANN001
    """The tracing cost from the toggler's own marks and the recorded events' nanoseconds (the raw
    form, read here): events wholly inside a recorded block, and events inside an unrecorded block
    with nothing of their window recorded, counted and their medians taken by the test."""
    marks, recorded = [], []
    for line in (run_dir / "trace_raw.txt").read_text().splitlines():
        fields = line.split()
        if len(fields) == 6 and fields[3] == "#" and fields[5].startswith("irq-station:"):
            marks.append((int(fields[2]), fields[5].removeprefix("irq-station:")))
        elif len(fields) == 5 and fields[3] == "type:":
            recorded.append(int(fields[2]))
    assert [w for _, w in marks[:4]] == ["traced", "untracing", "traced", "untracing"], marks[:4]
    recorded = np.array(recorded, np.int64)
    last = int(recorded.max())
    spans = {"traced": [], "untracing": []}
    for k, (ts, word) in enumerate(marks):  # the toggler may stop with the recording off: then
        # its last unrecorded block runs to the end of the run
        end = marks[k + 1][0] if k + 1 < len(marks) else last if word == "traced" else np.iinfo(np.int64).max
        spans[word].append((ts, end))
    records = np.fromfile(run_dir / "sw.raw", RECORD)
    records = records[(records["flags"] & 0x2) == 0]
    t_write = records["t_write_ns"].astype(np.int64)
    t_irq = t_write + records["latency_ns"]
    nothing = np.searchsorted(recorded, t_write, "left") == np.searchsorted(recorded, t_irq, "right")
    got = run["decomposition"]["overhead"]
    for kind, word in (("traced", "traced"), ("untraced", "untracing")):
        inside = np.zeros(len(records), bool)
        for a, b in spans[word]:
            inside |= (t_write >= a) & (t_irq <= b)
        if kind == "untraced":
            inside &= nothing
        else:
            assert not (inside & nothing).any()  # a recorded block records every event's entry
        lat = records["latency_ns"][inside]
        assert got[kind]["count"] == len(lat) > 100, (kind, got, len(lat))
        assert got[kind]["median_ns"] == float(np.median(lat))
    record_property(f"{run['id']} tracing cost", f"median {got['median_added_ns'] / 1e3:+.1f} µs, p99 "
                    f"{got['p99_added_ns'] / 1e3:+.1f} µs ({got['traced']['count']} traced, "
                    f"{got['untraced']['count']} untraced events)")


def _check_handler_holds(out: Path, run: dict, record_property) -> None:  # noqa: ANN001
    """The module's own injection: every record it flagged HELD waited test_hold_us in its hard
    handler before its timestamp: dispatch, credited to the module's own handler."""
    run_dir = out / "runs" / run["id"]
    records = np.fromfile(run_dir / "sw.raw", RECORD)
    records = records[(records["flags"] & 0x2) == 0]
    held = records["seq"][(records["flags"] & HELD) != 0].tolist()
    assert run["test_held"] == len(held) >= 0.5 * len(records) / HANDLER_HOLD["every"], (run["test_held"], len(held))
    events = pd.read_parquet(run_dir / "decomposition.parquet").set_index("seq")
    held = [s for s in held if s in events.index]
    assert len(held) >= 10, f"{run['id']}: only {len(held)} held events decomposed"
    own = f" {run['interface']}_latency"  # the module's action name
    placed = 0
    for seq in held:
        credits = json.loads(events.loc[seq, "credits"])
        mine = sum(ns for label, ns in credits["dispatch"].items() if label.startswith("IRQ ") and label.endswith(own))
        placed += mine >= HANDLER_HOLD["us"] * 1_000
    record_property(f"{run['id']} handler holds", f"{placed} of {len(held)} placed in dispatch, own handler")
    assert placed >= 0.95 * len(held), f"{run['id']}: {placed} of {len(held)} in dispatch"
    for event in run["decomposition"]["largest"]:  # one the hold made most of names dispatch and the handler
        if event["seq"] in held and events.loc[event["seq"], "dispatch_ns"] >= event["t_sw_ns"] / 2:
            assert " in dispatch " in event["explanation"], event
            assert any(c["stage"] == "dispatch" and c["label"].endswith(own) for c in event["culprits"]), event
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert any(f"Run {run['id']}: {run['test_held']} events were held on purpose" in n for n in notes)


def test_a_killed_traced_run_leaves_nothing_once_station_cleanup_ran(vm, tmp_path):
    """SIGKILL while a traced run records (module loaded, the station's tracefs instance on, the
    tracing-cost toggler and the injector running): all of it stays on the target until
    `station cleanup`, which removes every piece."""
    path = _traced_config(vm, tmp_path, "killed", ["hrtimer"], threaded=False, samples=60_000)
    # [u]: the probe's own shell has the pattern in its command line, not a match of it
    probe = ("lsmod | grep -c '^lpt_latency' || true; ls /sys/kernel/tracing/instances; "
             "pgrep -f 'irq-station:[u]ntracing' >/dev/null && echo toggler; lsmod | grep -c '^irqgap_inject' || true")
    log = tmp_path / "station.log"
    station = subprocess.Popen(station_cmd("run", str(path), "--out", str(tmp_path / "out")),
                               stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(240):
            state = asyncio.run(_guest(vm, probe)).split()
            if state[0] == "1" and any(s.startswith("irq-station-") for s in state) and "toggler" in state \
                    and state[-1] == "1":
                break
            assert station.poll() is None, f"the run ended before it could be killed: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        else:
            raise AssertionError(f"the traced run never got going: {state}")
        time.sleep(1.0)
    finally:
        station.send_signal(signal.SIGKILL)
        station.wait(timeout=30)
    assert asyncio.run(_guest(vm, probe)).split() == state  # nothing cleaned up behind the kill's back
    res = run_station("cleanup", str(path), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    # a process holding the loop's text was still listed a moment after cleanup in 2 of 8 tries
    # (likely the killed station's SSH session shell, which started the toggler's group and waits
    # on it: it exits once the group is gone; not caught in the act). A loop still running would
    # stay: it fails below
    for _ in range(10):
        left = asyncio.run(_guest(vm, probe)).split()
        if left == ["0", "0"]:
            break
        time.sleep(0.5)
    assert left == ["0", "0"], f"left on the target: {left}\n{res.stdout}\n{res.stderr}"
