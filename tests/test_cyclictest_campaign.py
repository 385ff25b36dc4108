"""cyclictest campaigns for real (seed 004): cyclictest, hackbench and stressapptest run
on this machine through a real OpenSSH server, driven by the station like any bench.
The station's figures are compared with cyclictest's own JSON, read here
independently; the loads and the probe are gone afterwards, even after a SIGKILL.
Latencies on a shared CI machine are never bounded here: only their bookkeeping."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import asyncssh
import pandas as pd
import pytest
import yaml

from station import api
from station.config import parse_campaign
from tests.conftest import REPO, run_station, station_cmd, this_machine_is_a_guest
from tests.manifest_check import assert_manifests_fit

PROBE_AND_LOADS = ("cyclictest", "rtla", "hackbench", "stressapptest", "stress-ng")


def seed_004(targets: dict, duration: str = "2s", memory_mb: int = 64, network: bool = True) -> dict:
    """configs/cyclictest-rt-vs-regular.yaml, shortened: seconds per case, a smaller stressapptest. Without
    network: case 5 without its network threads, whose listener binds every address (on
    this machine, nothing may listen beyond 127.0.0.1; inside a VM it may)."""
    # a smaller hackbench too (1 group of 40 tasks, not 10): cyclictest's threads start as normal
    # tasks and must get a CPU to raise their priority within the seconds a CI case lasts (in an
    # emulated guest under 400 hackbench tasks one did not, and the station rightly called that run
    # incomplete); and every command the station sends the target waits behind them (with 2 groups a
    # 2 s hackbench case took 36 s here and 61 s in the guest, most of this test's time)
    text = (REPO / "configs/cyclictest-rt-vs-regular.yaml").read_text().replace("-M 256", f"-M {memory_mb}")
    # two copy threads at most (the seed's 4 and 8): in the emulated PREEMPT_RT guest, stress-medium's four
    # left sshd without a CPU for over 60 s after the case (CI, 2026-12-06, twice), and the station rightly
    # gave the target up (light and medium then differ in name only: this test checks bookkeeping, not loads)
    text = text.replace("-m 4 ", "-m 2 ").replace("-m 8 ", "-m 2 ")
    # and 5 senders and receivers, not 20: in the emulated arm64 guests a 2 s case under 40 tasks
    # took 26-44 s, most of it cyclictest's threads waiting for a CPU to start and to stop
    text = text.replace("hackbench -s 128 -l", "hackbench -g 1 -f 5 -s 128 -l")
    cfg = yaml.safe_load(text)
    cfg["bench"]["targets"] = targets
    # the seed's sheet in its own order (no-load … stress-hard): these tests start loads by the first
    # case (the kill test) and time the emulated RT guest case after case; interleaved (the default),
    # stress-hard came before stress-medium on vm-rt and the TCG guest did not answer SSH for over 60 s
    # after it (CI, 2026-12-06). The interleaved order itself: tests/test_config.py and twin campaigns.
    cfg["matrix"] |= {"duration": duration, "max_duration": "2min", "order": "as-written"}
    if not network:
        hard = [load for load in cfg["loads"]["stress-hard"] if load["name"] != "sat-listener"]
        for load in hard:
            load["command"] = load["command"].replace(" -n 127.0.0.1", "")
        cfg["loads"]["stress-hard"] = hard
    return cfg


def _ssh_target(local, work_dir: str) -> dict:
    return {"kind": "ssh", "host": local.host, "port": local.port, "user": local.user,
            "identity_file": local.identity_file, "known_hosts": local.known_hosts, "work_dir": work_dir}


@pytest.fixture
def work_dir():
    path = f"/tmp/irq-station-test-{secrets.token_hex(4)}"
    yield path
    subprocess.run(["rm", "-rf", path], check=False)


async def _running(local, work_dir: str, names=PROBE_AND_LOADS) -> dict[str, str]:
    """pgrep over SSH: which of the probe and load programs run on the target now, started by
    the station for this test (their environment carries the station's tag naming work_dir;
    other cyclictest users on the same machine are not ours to count)."""
    async with asyncssh.connect(local.host, local.port, username=local.user, client_keys=[local.identity_file],
                                known_hosts=local.known_hosts) as conn:
        # one round trip: hackbench alone runs hundreds of processes; a zombie (ended, its reaping
        # pending) has an empty environ and is not counted
        script = (f"for p in $(pgrep -x '{'|'.join(names)}'); do "
                  f"grep -qz '^IRQ_STATION_TAG={work_dir}/' /proc/$p/environ 2>/dev/null && "
                  "echo $p $(cat /proc/$p/comm); done; true")
        listing = (await conn.run(script, check=False)).stdout
        found: dict[str, str] = {}
        for line in listing.splitlines():
            pid, comm = line.split(maxsplit=1)
            found[comm] = f"{found[comm]} {pid}" if comm in found else pid
        return found


def _overflows(out_text: str) -> list[int]:
    match = re.search(r"^# Histogram Overflows:(.*)$", out_text, re.M)
    assert match, "cyclictest printed no overflow line"
    return [int(x) for x in match.group(1).split()]


def _cyclictests_json(run_dir: Path) -> dict:
    """cyclictest's JSON, read here independently of the station's parser (a thread that never
    ran has the average "-nan" on x86-64's C library and "nan" on arm64's, neither JSON)."""
    return json.loads(re.sub(r":\s*-?nan\b", ": NaN", (run_dir / "cyclictest.json").read_text()))


def check_run_against_cyclictest(run_dir: Path, entry: dict) -> None:
    """The station's per-thread figures are cyclictest's own, and its histogram accounts
    for every cycle cyclictest counted."""
    own = _cyclictests_json(run_dir)
    threads = own["thread"]
    assert len(entry["threads"]) == len(threads) == own["num_threads"]
    hist = pd.read_parquet(run_dir / "cyclictest_histogram.parquet")
    overflows = _overflows((run_dir / "cyclictest.out").read_text())
    for t in entry["threads"]:
        theirs = threads[str(t["thread"])]
        if not theirs["cycles"]:  # a thread that never ran: cyclictest's sentinels are no figures
            assert (t["min_us"], t["avg_us"], t["max_us"], t["cycles"], t["cpu"]) == (
                None, None, None, 0, theirs["cpu"])
            continue
        assert (t["min_us"], t["avg_us"], t["max_us"], t["cycles"], t["cpu"]) == (
            theirs["min"], theirs["avg"], theirs["max"], theirs["cycles"], theirs["cpu"])
        counted = int(hist.loc[hist["thread"] == t["thread"], "count"].sum())
        assert counted == sum(int(c) for c in theirs["histogram"].values())
        assert counted + overflows[t["thread"]] == theirs["cycles"]
        assert t["overflows"] == overflows[t["thread"]]
        assert t["stats"]["count"] == theirs["cycles"]


def _threads_without_cycles(run_dir: Path) -> list[int]:
    """The threads cyclictest's own summary ('# Total: <cycles per thread>') counts no cycle for."""
    for line in (run_dir / "cyclictest.out").read_text(errors="replace").splitlines():
        if line.startswith("# Total:"):
            return [i for i, n in enumerate(line.split()[2:]) if int(n) == 0]
    return []


def timerlat_summary(text: str) -> dict[tuple[str, int], dict[str, int | None]]:
    """rtla timerlat hist's own summary, read here: (IRQ|Thr, cpu) -> its count and max as printed."""
    lines = text.splitlines()
    head = next(line.split() for line in lines if line.startswith("Index"))
    rows = {line.split(":")[0]: line.split(":")[1].split() for line in lines
            if line.split(":")[0] in ("count", "max") and not line.startswith("ALL")}
    return {(name.split("-")[0], int(name.split("-")[1])): {
        "count": int(rows["count"][i]), "max": None if rows["max"][i] == "-" else int(rows["max"][i])}
        for i, name in enumerate(head[1:])}


def check_timerlat_beside_cyclictest(out: Path, section: dict, skip: set[str] = frozenset()) -> None:
    """Where the kernel has the timerlat tracer (the PREEMPT_RT VMs, vm-rt and arm64-rt) each run's
    figures are rtla's own printed summary, and the table beside the seed's holds their maxima;
    elsewhere the run says why timerlat did not run, and stands. `skip`: runs whose load never
    started (nothing measured)."""
    table = section["timerlat_table"]["max_us"]
    for entry in section["runs"]:
        tl, target, load = entry["timerlat"], entry["target"], entry["load"]
        if entry["id"] in skip:
            continue
        if not target.endswith("-rt"):  # Debian's regular kernels and this machine's: no timerlat tracer
            assert "no timerlat tracer" in tl["note"] and not tl["cpus"], (entry["id"], tl)
            assert section["timerlat_table"]["notes"][target][load] == tl["note"]
            continue
        if tl["note"] is not None:
            # Under a load, the emulated guest can starve rtla's collector past the companion's slack
            # (its two vCPUs share one host thread, docs/vm.md: seen in CI, 2 of 5 runs under
            # stressapptest): the station then stops rtla with SIGINT and says so; what rtla printed
            # is still the truth its figures must match. Without a load it ends on its own.
            # Or rtla fails under the load (CI, 2026-12-07: `rtla timerlat exited with status 134`, an
            # abort under stress-hard's memory pressure): the note then names the status and quotes
            # what rtla printed on its stderr, read here from the run's own timerlat.err.
            assert load != "no-load", (entry["id"], tl)
            if "did not end within" not in tl["note"] and " at once " not in tl["note"]:
                assert tl["note"].startswith("rtla timerlat exited with status "), (entry["id"], tl)
                err = (out / "runs" / entry["id"] / "timerlat.err").read_text(errors="replace")
                # rtla's own lines: the wrapping shell's report of a killed child names the station's wrapper
                err = "\n".join(line for line in err.splitlines() if "IRQ_STATION_TAG=" not in line).strip()
                assert (err[-300:] if err else "(nothing on its stderr)") in tl["note"], (entry["id"], tl)
            assert section["timerlat_table"]["notes"][target][load] == tl["note"]
        printed = timerlat_summary((out / "runs" / entry["id"] / "timerlat.out").read_text())
        assert {c["cpu"] for c in tl["cpus"]} == {cpu for _, cpu in printed}
        for c in tl["cpus"]:
            for kind, col in (("irq", "IRQ"), ("thread", "Thr")):
                assert (c[kind]["count"], c[kind]["max"]) == (printed[(col, c["cpu"])]["count"],
                                                              printed[(col, c["cpu"])]["max"]), (entry["id"], c)
        # an rtla stopped before its collector printed anything (starved from the start: seen in a CI try
        # under stressapptest) leaves no summary; the run's note says why, and its cell has no figure
        assert printed or tl["note"], (entry["id"], tl)
        if entry["status"] == "complete":
            for key, col in (("thread_max_us", "Thr"), ("irq_max_us", "IRQ")):
                maxima = [v["max"] for (k, _), v in printed.items() if k == col]
                assert table[target][load][key] == (max(maxima) if maxima else None), (entry["id"], key)


# Debian builds no stressapptest for arm64: there, seed 004's cases 3-5 say so instead of a number
NOT_ON_ARM64 = ("stress-light", "stress-medium", "stress-hard")
ARM64 = ("arm64-regular", "arm64-rt")


@pytest.mark.timeout(900)  # 25 runs on five targets, four VM boots, timerlat after each cyclictest
def test_shortened_seed_004_here_and_on_both_vm_kernels(local, work_dir, tmp_path):
    """The done criterion: the seed's sheet, seconds per case, on this machine (real sshd) and
    on Debian's regular and PREEMPT_RT kernels in QEMU, x86-64 and arm64 (issue 51: seed 004's
    board is arm64); the report holds the seed's table, each target labelled with its architecture."""
    targets = {"this-machine": _ssh_target(local, work_dir), "vm-regular": {"kind": "vm", "kernel": "regular"},
               "vm-rt": {"kind": "vm", "kernel": "rt"},
               "arm64-regular": {"kind": "vm", "arch": "arm64", "kernel": "regular"},
               "arm64-rt": {"kind": "vm", "arch": "arm64", "kernel": "rt"}}
    cfg = seed_004(targets, network=False)
    cfg["cyclictest"]["companion"] = "timerlat"  # the kernel's own timer latency beside cyclictest's
    campaign = parse_campaign(yaml.safe_dump(cfg, sort_keys=False), check_files=True)
    out = tmp_path / "seed-004"
    result = asyncio.run(api.run_campaign_async(campaign, out))
    # on failure, say which target went and which runs failed how (a CI log is all there is)
    assert len(result.outcomes) == 25, (result.unavailable, [(o.run_id, o.status, o.error) for o in result.outcomes
                                                             if o.status != "complete"])
    # A virtual CPU on a loaded host can starve a measuring thread for the whole run (seen under
    # hackbench in the TCG guest with a CPU hog on the host: thread 1 made 0 cycles; and once on this
    # machine when it is itself a KVM guest, under stressapptest: CPU 1's thread made 0 cycles in
    # 10 s). cyclictest's own '# Total:' line says so; such a run must be incomplete, naming the
    # thread. Every other run completes, and every run of this machine when it is bare metal.
    starved = {o.run_id: _threads_without_cycles(out / "runs" / o.run_id) for o in result.outcomes}
    unpackaged = {f"{t}-{case}-r0" for t in ARM64 for case in NOT_ON_ARM64}
    virtual_here = this_machine_is_a_guest()
    for o in result.outcomes:
        if o.run_id in unpackaged:  # the load could not start there: the run says why
            assert o.status in ("failed", "incomplete") and "stressapptest" in o.error, (o.run_id, o.status, o.error)
        elif starved[o.run_id] and (virtual_here or not o.run_id.startswith("this-machine")):
            assert o.status == "incomplete", (o.run_id, o.status, o.error)
            assert all(f"thread {t} " in o.error and "measured nothing" in o.error for t in starved[o.run_id])
        else:
            assert o.status == "complete", (o.run_id, o.status, o.error)
    report = json.loads((out / "report.json").read_text())
    section = report["cyclictest"]
    table = section["table"]
    assert table["targets"] == list(targets)
    assert table["cases"] == cfg["matrix"]["loads"]
    assert len(section["runs"]) == 25
    for entry in section["runs"]:
        run_dir = out / "runs" / entry["id"]
        if entry["id"] in unpackaged:
            assert table["max_latency_us"][entry["target"]][entry["load"]] is None
            assert "stressapptest" in table["problems"][entry["target"]][entry["load"]]
            continue
        check_run_against_cyclictest(run_dir, entry)
        own = _cyclictests_json(run_dir)
        worst = max(t["max"] for t in own["thread"].values())
        if not starved[entry["id"]]:  # the table takes complete runs only
            assert table["max_latency_us"][entry["target"]][entry["load"]] == worst
        # the kernel cyclictest saw is the one asked for
        assert own["sysinfo"]["realtime"] == (1 if entry["target"].endswith("-rt") else own["sysinfo"]["realtime"])
    check_timerlat_beside_cyclictest(out, section, skip=unpackaged)
    facts = section["targets"]
    # each row says its architecture (uname -m), and the arm64 ones are the kernels asked for
    assert {t: facts[t]["arch"] for t in targets if t != "this-machine"} == {
        "vm-regular": "x86_64", "vm-rt": "x86_64", "arm64-regular": "aarch64", "arm64-rt": "aarch64"}
    assert facts["arm64-rt"]["preempt_rt"] and not facts["arm64-regular"]["preempt_rt"]
    assert facts["arm64-rt"]["emulated"] and facts["arm64-regular"]["emulated"]
    assert facts["arm64-rt"]["kernel_release"].endswith("-rt-arm64")
    assert facts["vm-rt"]["preempt_rt"] and not facts["vm-regular"]["preempt_rt"]
    assert facts["vm-rt"]["emulated"] and facts["vm-regular"]["emulated"] and not facts["this-machine"]["emulated"]
    assert facts["vm-rt"]["virtual_machine"] and facts["vm-regular"]["virtual_machine"]
    assert facts["this-machine"]["virtual_machine"] is this_machine_is_a_guest()  # a local target on a hypervisor
    assert any("Target this-machine is a virtual machine" in n for n in report["notes"]) is this_machine_is_a_guest()
    assert asyncio.run(_running(local, work_dir)) == {}, "a load or the probe outlived the campaign"
    html = (out / "report.html").read_text()
    assert "Maximum latency" in html and "PREEMPT_RT" in html and "aarch64" in html
    (tmp_path.parent / "seed-004-table.json").write_text(json.dumps(table, indent=1))  # for the closing note
    # `station compare` over this real campaign: seed 004's table again, one column per target
    res = run_station("compare", str(out), "--out", str(tmp_path / "compare"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    compared = json.loads((tmp_path / "compare" / "compare.json").read_text())["cyclictest"]
    assert compared["cases"] == table["cases"]
    assert [c["target"] for c in compared["columns"]] == list(targets)
    assert compared["max_latency_us"] == [[table["max_latency_us"][t][case] for t in targets]
                                          for case in table["cases"]]


def test_killed_station_then_cleanup_leaves_nothing_running(local, work_dir, tmp_path):
    cfg = seed_004({"this-machine": _ssh_target(local, work_dir)}, duration="60s", network=False)
    cfg["matrix"]["loads"] = ["hackbench", "stress-light"]
    cfg["loads"]["hackbench"].append(cfg["loads"]["stress-light"][0])  # both load kinds at once
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.Popen(station_cmd("run", str(path), "--out", str(tmp_path / "out")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while set(asyncio.run(_running(local, work_dir))) < {"cyclictest", "hackbench", "stressapptest"}:
            assert proc.poll() is None, "the station ended before its probe and loads were seen running"
            assert time.monotonic() < deadline, "cyclictest, hackbench and stressapptest never ran together"
            time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the loads write to log files on the target, not to the dead station's SSH channel: they
    # outlive it (stressapptest, which reports as it runs, would otherwise die of SIGPIPE)
    assert set(asyncio.run(_running(local, work_dir))) >= {"cyclictest", "hackbench", "stressapptest"}, \
        "a SIGKILLed station cannot stop anything itself"
    done = run_station("cleanup", str(path), timeout=120)
    assert done.returncode == 0, done.stderr
    assert asyncio.run(_running(local, work_dir)) == {}
    stopped = json.loads(done.stdout)["this-machine"]["loads_stopped"]
    assert {"cyclictest", "hackbench", "stressapptest"} <= set(stopped)


def test_ctrl_c_keeps_what_cyclictest_printed_and_leaves_nothing_running(local, work_dir, tmp_path):
    cfg = seed_004({"this-machine": _ssh_target(local, work_dir)}, duration="60s", network=False)
    cfg["matrix"]["loads"] = ["hackbench"]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    proc = subprocess.Popen(station_cmd("run", str(path), "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while set(asyncio.run(_running(local, work_dir))) < {"cyclictest", "hackbench"}:
        assert proc.poll() is None and time.monotonic() < deadline, "cyclictest and hackbench never ran together"
        time.sleep(0.5)
    time.sleep(2)  # some cycles to report
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, output
    assert asyncio.run(_running(local, work_dir)) == {}, output
    run_dir = out / "runs" / "this-machine-hackbench-r0"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["cyclictest"]["stopped_by_station"] is True
    text = (run_dir / "cyclictest.out").read_text()
    assert "# Max Latencies:" in text, "the histogram cyclictest printed on SIGTERM was lost"
    own = _cyclictests_json(run_dir)
    assert all(t["cycles"] > 0 for t in own["thread"].values())
    assert manifest["cyclictest"]["samples"] == sum(t["cycles"] for t in own["thread"].values())


def _histogram_sums(text: str) -> dict[tuple[int, int], int]:
    """(thread, bucket) → count summed over every '# Histogram' block of a stdout, read here."""
    sums: dict[tuple[int, int], int] = {}
    for block in text.split("# Histogram\n")[1:]:
        for line in block.splitlines():
            if line.startswith("#") or not line.strip():
                break
            bucket, *counts = (int(tok) for tok in line.split())
            for thread, count in enumerate(counts):
                if count:
                    sums[(thread, bucket)] = sums.get((thread, bucket), 0) + count
    return sums


def test_a_sliced_run_is_one_cyclictest_a_slice_and_its_percentiles_get_their_intervals(local, work_dir, tmp_path):
    """cyclictest.slices: 10 slices of 1 s here, no load. cyclictest ran ten times one after the
    other (ten marks, ten histograms in its stdout), the run's histogram is their sum (added up
    here from the raw stdout), and the report gives the percentiles intervals taken from the
    slices (or says why not); then a sliced run stopped by Ctrl-C keeps the slices printed and
    leaves neither cyclictest nor the loop running."""
    cfg = seed_004({"this-machine": _ssh_target(local, work_dir)}, duration="10s", network=False)
    cfg["matrix"]["loads"] = ["no-load"]
    cfg["cyclictest"] |= {"slices": 10}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert assert_manifests_fit(out) == {"this-machine-no-load-r0": "cyclictest"}
    run_dir = out / "runs" / "this-machine-no-load-r0"
    text = (run_dir / "cyclictest.out").read_text()
    assert [int(m) for m in re.findall(r"^# irq-station slice (\d+) of 10$", text, re.M)] == list(range(1, 11))
    assert text.count("# Histogram\n") == 10
    table = pd.read_parquet(run_dir / "cyclictest_histogram.parquet")
    assert {(int(r.thread), int(r.latency_us)): int(r.count) for r in table.itertuples()} == _histogram_sums(text)
    [entry] = json.loads((out / "report.json").read_text())["cyclictest"]["runs"]
    assert entry["slices"] == 10
    for stats in [entry["combined"], *(t["stats"] for t in entry["threads"])]:
        p50 = stats["percentile_ci95_ns"].get("p50")
        if p50 is not None:  # an interval: it brackets the percentile, from the slices
            assert p50[0] <= stats["percentiles_ns"]["p50"] <= p50[1]
            assert stats["percentile_ci_method"]["p50"].startswith("10 slices: ")
        else:  # none: the reason names the slices
            assert "slices" in stats["percentile_ci_withheld"], stats
    # stopped by Ctrl-C in its third slice or so: the printed slices stay, nothing keeps running
    cfg["matrix"] |= {"duration": "60s"}
    cfg["cyclictest"] |= {"slices": 30}
    path.write_text(yaml.safe_dump(cfg))
    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(station_cmd("run", str(path), "--out", str(stopped)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while "cyclictest" not in asyncio.run(_running(local, work_dir)):
        assert proc.poll() is None and time.monotonic() < deadline, "cyclictest never ran"
        time.sleep(0.5)
    time.sleep(5)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, output
    assert asyncio.run(_running(local, work_dir, ("cyclictest", "sh"))) == {}, output
    kept = (stopped / "runs" / "this-machine-no-load-r0" / "cyclictest.out").read_text()
    assert kept.count("# Histogram\n") >= 2 and kept.count("# irq-station slice") >= kept.count("# Histogram\n")
