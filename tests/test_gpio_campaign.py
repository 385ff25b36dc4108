"""gpio campaigns (seed 002) end to end on the twin: the station SSHes into the twin board, loads or
starts each responder, sets the governor, switches the twin generator on and pairs what the twin
scope sees. The truth is what the twin board logged it did with each stimulus edge the scope
recorded (twin-truth.parquet: the edge, its answer, the periodic handler it waited behind), each
measured stimulus found there by identity (its acquisition and time on the twin's clock), never
the board model's constants; the seed's findings must come out of it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from station.config import ConfigError, parse_campaign
from tests.conftest import run_station
from tests.manifest_check import assert_manifests_fit

SCOPE = {"kind": "twin", "dialect": "tektronix_mso", "channel": 1, "volts_per_div": "1V", "position_div": -3,
         "time_per_div": "5ms", "record_length": 1_000_000, "trigger_level": "1.65V", "trigger_position_pct": 5}


def _campaign(tmp_path: Path, name: str, cases: dict, loads: list[str], samples: int, period: str = "500us",
              width: str = "200us") -> Path:
    doc = {
        "name": name,
        "bench": {"target": {"kind": "twin"}, "scope": SCOPE, "generator": {"kind": "twin"}},
        "matrix": {"kind": "gpio", "loads": loads, "samples": samples, "max_duration": "1min"},
        "gpio": {"lines": {"chip": "pinctrl-bcm2835", "input": 17, "output": 27}, "period": period,
                 "jitter": 0.25, "width": width, "response_channel": 2, "cases": cases},
        "loads": {"idle": [], "loaded": [{"name": "cpu-hog", "command": "stress-ng --cpu 1 --timeout 1h"}]},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _truth(out: Path, run_id: str) -> pd.DataFrame:
    """Each stimulus the run measured (delays.parquet) beside what the twin board logged it did with
    that edge: the scope's acquisitions in the run are the board log's, in order, and a stimulus's
    time in its record plus where the scope put that record's trigger on the twin's clock is the
    edge's time (edges are hundreds of µs apart: the nearest is the one). Adds offset_ns (how far
    from that edge), truth_ns (its answer's delay; NaN: none), wait_ns, irq_name, handler_start_ns,
    handler_ns (the periodic handler it waited behind), edge_ns and record_end_ns."""
    run_dir = out / "runs" / run_id
    truth = pd.read_parquet(run_dir / "twin-truth.parquet")
    measured = pd.read_parquet(run_dir / "delays.parquet")
    assert sorted(measured["acquisition"].unique()) == sorted(truth["acquisition"].unique()), run_id
    parts = []
    for acq, rows in measured.groupby("acquisition"):
        edges = truth[(truth["acquisition"] == acq) & truth["rising"]].sort_values("edge_ns")
        at = float(edges["trigger_ns"].iloc[0]) + rows["stimulus_s"].to_numpy() * 1e9
        e = edges["edge_ns"].to_numpy()
        i = np.clip(np.searchsorted(e, at), 1, len(e) - 1)
        i = np.where(np.abs(e[i - 1] - at) < np.abs(e[i] - at), i - 1, i)
        picked = edges.iloc[i]
        parts.append(rows.assign(offset_ns=at - e[i], truth_ns=picked["answer_ns"].to_numpy() - e[i],
                                 **{c: picked[c].to_numpy() for c in ("edge_ns", "wait_ns", "irq_name",
                                                                      "handler_start_ns", "handler_ns",
                                                                      "record_end_ns")}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def seed_campaign(tmp_path_factory) -> tuple[Path, dict, object]:
    tmp = tmp_path_factory.mktemp("gpio")
    cases = {
        "kernel": {"responder": "kernel", "governor": "performance"},
        "sysfs": {"responder": "sysfs", "mode": "toggle", "governor": "ondemand"},
        "sysfs-mmap": {"responder": "sysfs-mmap", "mode": "toggle", "governor": "ondemand"},
        "nothing": {"responder": "external"},  # nothing answers: every stimulus missed
    }
    out = tmp / "out"
    proc = run_station("run", str(_campaign(tmp, "seed-002-short", cases, ["idle", "loaded"], 300)),
                       "--out", str(out), timeout=600)
    report = json.loads((out / "report.json").read_text())
    return out, report, proc


def test_every_runs_manifest_fits_its_schema(seed_campaign):
    out, report, _ = seed_campaign
    assert set(assert_manifests_fit(out).values()) == {"gpio"}
    assert len(assert_manifests_fit(out)) == len(report["gpio"]["runs"])


def _manifest(out: Path, run_id: str) -> dict:
    return json.loads((out / "runs" / run_id / "manifest.json").read_text())


def _run(report: dict, run_id: str) -> dict:
    return next(r for r in report["gpio"]["runs"] if r["id"] == run_id)


@pytest.mark.parametrize("case", ["kernel", "sysfs", "sysfs-mmap"])
@pytest.mark.parametrize("load", ["idle", "loaded"])
def test_delays_match_the_boards_truth(seed_campaign, case, load):
    """Stimulus by stimulus: each measured delay is the delay the board logged for that edge, within
    two of the scope's sample intervals (where an edge may fall between samples); a stimulus is
    unanswered exactly when the board answered it after the window or past the record's end; the
    run's counts and figures are those stimuli's."""
    out, report, _ = seed_campaign
    run = _run(report, f"{case}-{load}-r0")
    assert run["status"] == "complete", run["error"]
    r = _truth(out, run["id"])
    res = run["resolution_ns"]
    assert (r["offset_ns"].abs() <= 2 * res).all(), r["offset_ns"].abs().max()  # each one's edge, found
    window_ns = _manifest(out, run["id"])["gpio"]["window_s"] * 1e9
    measured = r["delay_s"].to_numpy() * 1e9
    truth = r["truth_ns"].to_numpy()
    answered = ~np.isnan(measured)
    close = np.abs(measured[answered] - truth[answered])
    assert (close <= 2 * res).all(), (close.max(), res)
    # unanswered: the board did not answer, or after the window, or after the record ended (censored)
    with np.errstate(invalid="ignore"):  # NaN (no answer) compares False: never "in time"
        in_time = (truth <= window_ns - 2 * res) & (r["edge_ns"].to_numpy() + truth
                                                    <= r["record_end_ns"].to_numpy() - 2 * res)
    assert not (~answered & in_time).any(), r[~answered & in_time][["stimulus_s", "truth_ns"]].head()
    assert run["stimuli"] == len(r) >= 300 and run["answered"] == int(answered.sum())
    d = run["delay_us"]
    t_us = truth[answered] / 1e3
    assert abs(d["mean"] - t_us.mean()) <= 2 * res / 1e3, (d["mean"], t_us.mean())
    assert abs(d["p50"] - np.median(t_us)) <= 2 * res / 1e3 + 1e-9, (d["p50"], np.median(t_us))
    assert abs(d["min"] - t_us.min()) <= 2 * res / 1e3, (d["min"], t_us.min())


def test_the_seeds_pi_findings(seed_campaign):
    out, report, _ = seed_campaign
    mean = {r["id"]: r["delay_us"]["mean"] for r in report["gpio"]["runs"] if r["delay_us"]}
    # the premise, from what the board logged for the stimuli measured: the seed's findings hold there
    truth = {rid: float(np.nanmean(_truth(out, rid)["truth_ns"])) for rid in mean}
    assert truth["sysfs-idle-r0"] > 2 * truth["sysfs-mmap-idle-r0"]
    assert truth["sysfs-loaded-r0"] < truth["sysfs-idle-r0"]
    # sysfs more than twice as slow as the mmap'd output, as the seed found
    assert mean["sysfs-idle-r0"] > 2 * mean["sysfs-mmap-idle-r0"]
    # ondemand: the loaded CPU answers faster than the idle one
    assert mean["sysfs-loaded-r0"] < mean["sysfs-idle-r0"]
    texts = [f["text"] for f in report["gpio"]["findings"]]
    assert any(t.startswith("idle: sysfs (sysfs, ondemand governor) is") and "slower on average than sysfs-mmap"
               in t for t in texts), texts
    assert any(t.startswith("sysfs: faster under load") and "ondemand governor lowers an idle CPU's clock" in t
               for t in texts), texts
    ranking = next(f["text"] for f in report["gpio"]["findings"] if f["kind"] == "ranking" and f["load"] == "idle")
    assert ranking.index("kernel") < ranking.index("sysfs-mmap") < ranking.index("sysfs ")


def test_the_twin_board_is_a_raspberry_pi_throughout(seed_campaign):
    """What the report records of the target is the Pi the twin plays (the seed's board), never the
    2015 RTAI PC: its kernel, architecture, command line (no idle=poll: its idle exit is modelled),
    interrupts and modules; and its user-space responder was built there, as on a real Pi."""
    out, report, _ = seed_campaign
    audit = report["campaign"]["target"]["audit"]
    # the board the response model is: a Pi Zero (one ARM1176 core, BCM2835), its USB controller
    # being the 125 µs interrupt the model charges
    assert "armv6l" in audit["uname"] and "rtai" not in audit["uname"] and audit["nproc"] == "1"
    assert "idle=poll" not in audit["cmdline"] and "root=" in audit["cmdline"]
    assert "dwc_otg" in audit["interrupts"] and not any(w in audit["interrupts"]
                                                      for w in ("parport0", "de4_echoer", "IO-APIC"))
    assert "rtai" not in audit["lsmod"] and audit["rtai"].startswith("unavailable")
    html = (out / "report.html").read_text()
    assert "3.4.55" not in html and "x86_64" not in html


def test_the_live_progress_names_the_scopes_delays_as_such(seed_campaign):
    """A gpio run's delays are measured by the scope: the progress must not call them software
    t_SW, nor show an empty scope t_HW beside them."""
    _, _, proc = seed_campaign
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[") and "measuring" in ln or "teardown" in ln]
    assert any("response delay (scope)" in ln for ln in lines), proc.stderr[-2000:]
    assert not any("sw " in ln or "pulses" in ln for ln in lines), lines


def test_a_case_nothing_answers_is_incomplete_and_counted(seed_campaign):
    out, report, proc = seed_campaign
    assert proc.returncode != 0 and "nothing-idle-r0 (incomplete)" in proc.stderr
    run = _run(report, "nothing-idle-r0")
    assert run["status"] == "incomplete" and "no response to any of" in run["error"]
    assert run["missed"] == run["stimuli"] >= 300 and run["delay_us"] is None
    manifest = _manifest(out, "nothing-idle-r0")
    assert manifest["gpio_counts"]["missed"] == run["missed"]


def test_every_stimulus_row_is_kept(seed_campaign):
    out, report, _ = seed_campaign
    import pandas as pd

    frame = pd.read_parquet(out / "runs" / "sysfs-idle-r0" / "delays.parquet")
    assert list(frame.columns[:4]) == ["acquisition", "stimulus_s", "delay_s", "armed_host_s"]
    assert set(frame.columns[4:]) >= {"campaign", "run_id", "kind"}  # the store's identity columns
    assert len(frame) == _run(report, "sysfs-idle-r0")["stimuli"]
    assert frame["acquisition"].nunique() >= 2


def test_outliers_are_traced_to_the_periodic_interrupt(tmp_path):
    """A fast stimulus on the kernel responder: the outliers are the stimuli that waited behind a
    periodic handler (by identity, from the board's log), their period is the period of the handler
    the board logged them waiting behind (the spacing of its starts), the collision window its
    logged length, and the largest excess the largest logged delay's over the median."""
    cases = {"kernel": {"responder": "kernel", "governor": "performance"}}
    out = tmp_path / "out"
    proc = run_station("run", str(_campaign(tmp_path, "collisions", cases, ["idle"], 3000, period="100us",
                                            width="20us")), "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "report.json").read_text())["gpio"]["runs"][0]
    o = run["outliers"]
    r = _truth(out, run["id"])
    res_us = run["resolution_ns"] / 1000.0
    measured_us = r["delay_s"].to_numpy() * 1e6
    outlier = measured_us > o["threshold_us"]
    assert outlier.sum() == o["count"] > 0
    assert (r["wait_ns"].to_numpy()[outlier] > 0).all(), "an outlier the board did not make wait"
    main = r[r["irq_name"] == r.loc[outlier, "irq_name"].mode()[0]]  # the handler most of them waited behind
    starts = np.unique(main["handler_start_ns"].to_numpy().astype(np.int64))
    period_ns = int(np.gcd.reduce(np.diff(starts)))  # its starts are whole periods apart
    assert o["period_us"] == pytest.approx(period_ns / 1000.0, rel=0.01), (o, period_ns)
    assert o["window_us"] == pytest.approx(float(np.median(main["handler_ns"])) / 1000.0, rel=0.4), o
    answered = ~np.isnan(measured_us)
    excess_truth = np.nanmax(r["truth_ns"].to_numpy()[answered]) / 1000.0 - np.median(measured_us[answered])
    assert abs(o["excess_max_us"] - excess_truth) <= 2 * res_us, (o["excess_max_us"], excess_truth)


BASE = {"name": "g", "bench": {"target": {"kind": "twin"}, "scope": {"kind": "twin"}},
        "matrix": {"kind": "gpio", "loads": ["none"], "samples": 100},
        "gpio": {"cases": {"k": {"responder": "kernel"}}}}


def _refused(doc: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_campaign(yaml.safe_dump(doc, sort_keys=False), "g.yaml")
    return str(info.value)


def _with(path: str, value: object) -> dict:
    doc = json.loads(json.dumps(BASE))
    node = doc
    *parents, last = path.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return doc


@pytest.mark.parametrize("path, value, field, words", [
    ("gpio.response_channel", 1, "gpio.response_channel", "stimulus and the response need a channel each"),
    ("gpio.window", "900us", "gpio.window", "shorter than the shortest time between stimulus edges"),
    ("gpio.width", "900us", "gpio.width", "does not fit in the shortest period"),
    ("gpio.cases", {"k": {"responder": "sysfs", "threaded": True}}, "gpio.cases.k.threaded", "kernel responder"),
    ("gpio.cases", {"k": {"responder": "kernel", "priority": 50}}, "gpio.cases.k.priority", "user-space"),
    ("gpio.cases", {"k": {"responder": "kernel", "governor": "turbo"}}, "gpio.cases.k.governor", ""),
    ("gpio.lines", {"input": 4, "output": 4}, "gpio.lines.output", "input line too"),
    ("bench.target", {"kind": "vm"}, "bench.target.kind", "no GPIO lines a scope can probe"),
    ("bench.scope", {"kind": "none"}, "bench.scope.kind", "measures with the scope"),
    ("bench.scope", {"kind": "visa", "resource": "TCPIP::10.0.0.5::4000::SOCKET"}, "bench.target.kind",
     "bench.scope must be twin"),
])
def test_a_gpio_campaign_that_cannot_work_is_refused_with_its_field(path, value, field, words):
    message = _refused(_with(path, value))
    assert f": {field}: " in message and words in message, message


def test_twin_only_responders_and_the_generator_outside_gpio_are_refused():
    doc = _with("bench.target", {"kind": "ssh", "host": "pi.local"})
    doc["bench"]["scope"] = {"kind": "visa", "resource": "TCPIP::10.0.0.5::4000::SOCKET"}
    doc["bench"]["generator"] = {"kind": "visa", "resource": "TCPIP::10.0.0.6::5025::SOCKET"}
    doc["gpio"]["cases"] = {"seed": {"responder": "python-mmap"}}
    assert "gpio.cases.seed.responder: python-mmap is the seed's own program, modelled on the twin only" in \
        _refused(doc)
    module = {"name": "m", "matrix": {"samples": 10}, "bench": {"generator": {"kind": "twin"}}}
    assert "bench.generator: drives the stimulus of a gpio campaign" in _refused(module)
    assert "gpio: a gpio campaign needs a gpio: section" in _refused({k: v for k, v in BASE.items() if k != "gpio"})


def test_runs_are_named_by_case_and_each_case_runs_under_each_load():
    from station.config import expand_runs

    doc = json.loads(json.dumps(BASE))
    doc["gpio"]["cases"] = {"a": {"responder": "kernel"}, "b": {"responder": "chardev"}}
    doc["matrix"]["loads"] = ["none", "busy"]
    doc["loads"] = {"none": [], "busy": [{"name": "hog", "command": "stress-ng --cpu 1"}]}
    campaign = parse_campaign(yaml.safe_dump(doc))
    written = [r.id for r in expand_runs(campaign, as_written=True)]
    assert written == ["a-none-r0", "b-none-r0", "a-busy-r0", "b-busy-r0"]
    assert sorted(r.id for r in expand_runs(campaign)) == ["a-busy-r0", "a-none-r0", "b-busy-r0", "b-none-r0"]


def test_a_run_that_sees_no_stimulus_is_incomplete(tmp_path):
    """A threshold above the stimulus's high level: the scope sees no edge; the run must not pass."""
    path = _campaign(tmp_path, "blind", {"k": {"responder": "kernel"}}, ["idle"], 100)
    doc = yaml.safe_load(path.read_text())
    doc["matrix"] = {"kind": "gpio", "loads": ["idle"], "duration": "1s", "max_duration": "1min"}
    doc["bench"]["scope"]["threshold"] = "4.5V"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = run_station("run", str(path), "--out", str(tmp_path / "out"), timeout=300)
    assert proc.returncode != 0
    manifest = json.loads((tmp_path / "out" / "runs" / "k-idle-r0" / "manifest.json").read_text())
    assert manifest["status"] == "incomplete" and "saw no stimulus edge" in manifest["error"]


def test_the_governor_is_put_back_even_when_the_responder_will_not_unload(tmp_path, monkeypatch):
    import asyncio

    import station.twin.runner as runner
    from station.api import run_campaign_async
    from station.config import load_campaign
    from station.target import TargetError, modules
    from station.target.hosts import Host

    twins = []
    original = runner.Twin.__init__

    def keep(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - the twin the bench starts
        original(self, *args, **kwargs)
        twins.append(self)

    async def refuse(conn, stem, attempts=10):  # noqa: ANN001 - rmmod as a sudoers rule without it
        raise TargetError(f"`rmmod {stem}` failed: Operation not permitted")

    cleanup = Host.cleanup

    async def brief_cleanup(self, within_s: float = 60.0):  # noqa: ANN001, ANN202 - give up sooner
        return await cleanup(self, within_s=min(within_s, 2.0))

    monkeypatch.setattr(runner.Twin, "__init__", keep)
    monkeypatch.setattr(modules, "rmmod", refuse)
    monkeypatch.setattr(Host, "cleanup", brief_cleanup)
    path = _campaign(tmp_path, "stuck", {"k": {"responder": "kernel", "governor": "performance"}}, ["idle"], 100)
    asyncio.run(run_campaign_async(load_campaign(path), tmp_path / "out"))
    board = twins[0].target.board
    assert board.governor == "ondemand"  # the board's own, read before the run
    assert "performance" in [s[1] for s in board.log.states]  # and the run did set its own
    assert board.module is not None  # it never unloaded: the run says so
    manifest = json.loads((tmp_path / "out" / "runs" / "k-idle-r0" / "manifest.json").read_text())
    assert manifest["status"] != "complete" and "Operation not permitted" in (manifest["error"] or ""), manifest


def test_a_crashed_runs_governor_is_put_back_by_cleanup(tmp_path):
    """A run killed after it set the governor (no teardown at all): the next preflight, or
    `station cleanup`, finds what the run saved on the target and puts it back."""
    import asyncio

    from station.config import TargetSettings
    from station.target import governors as gpio_target
    from station.target.hosts import Target
    from station.target.ssh import SSHEndpoint, TargetConnection
    from station.twin.runner import Twin

    twin = Twin(state_dir=tmp_path / "twin", with_scope=False,
                board={"stimulus_channel": 1, "response_channel": 2, "generator_channel": 1})
    e = twin.start_in_thread()
    endpoint = SSHEndpoint(e.ssh_host, e.ssh_port, e.user, e.identity_file, e.known_hosts, 5)
    work_dir = "/tmp/irq-station"

    async def crash_then_cleanup() -> dict:
        conn = await TargetConnection.open(endpoint)
        before = await gpio_target.read_governors(conn)
        await gpio_target.save_governors(conn, work_dir, before)
        await gpio_target.write_governors(conn, dict.fromkeys(before, "performance"))
        conn.abort()  # the crash
        target = Target(endpoint, TargetSettings(kind="ssh", work_dir=work_dir))
        await target.activate()
        try:
            return await target.cleanup()
        finally:
            await target.deactivate()

    try:
        done = asyncio.run(crash_then_cleanup())
        assert twin.target.board.governor == "ondemand"
        assert "performance" in [s[1] for s in twin.target.board.log.states]
        assert any("governor ondemand put back" in s for s in done["loads_stopped"]), done
        assert f"{work_dir}/governors.saved" not in twin.target.files
    finally:
        twin.stop_thread()


@pytest.mark.parametrize("run_id", ["kernel-idle-r0", "sysfs-loaded-r0", "nothing-idle-r0"])
def test_each_run_is_a_stop_rule_unit_of_the_delays_the_board_made(seed_campaign, run_id):
    """A gpio run is one unit of a stop rule (matrix.until): its manifest's percentiles are those of
    the delays the twin board logged for the stimuli the run measured, a stimulus with no answer in
    the window counted beyond every value (a percentile among them has none), within two of the
    scope's sample intervals (where an edge may fall between samples)."""
    out, report, _ = seed_campaign
    run = _run(report, run_id)
    manifest = _manifest(out, run_id)
    counts, unit = manifest["gpio_counts"], manifest["unit"]["latency_ns"]
    assert counts["ambiguous"] == 0  # so every unanswered stimulus of delays.parquet is a miss
    r = _truth(out, run_id)
    answered = ~np.isnan(r["delay_s"].to_numpy())
    assert unit["count"] == len(r) and unit["overflows"] == int((~answered).sum()) == counts["missed"]
    truth = np.where(answered, r["truth_ns"].to_numpy(), np.inf)  # the board's delay; no answer: beyond
    res = run["resolution_ns"]
    for level, value in unit["percentiles"].items():
        q = float(level) * 100
        k = np.sort(truth)[int(np.floor(q / 100 * (len(truth) - 1))):][:2]  # the order statistics used
        assert np.isfinite(k).all()  # the unit gives no percentile that falls among the misses
        assert abs(value - np.percentile(truth, q)) <= 2 * res + 1e-6, (level, value, np.percentile(truth, q))
    if run_id.startswith("nothing"):
        assert unit["percentiles"] == {} and unit["overflows"] == len(r)
    else:
        assert "0.5" in unit["percentiles"]


def test_a_gpio_campaign_may_stop_on_a_rule_with_room_to_answer(tmp_path):
    """The gpio kind's runs carry units, so a stop rule over its cases is accepted, and one whose
    repetitions leave no round at which an interval has both ends is refused at that line."""
    from station.config import ConfigError, load_campaign

    path = _campaign(tmp_path, "stop", {"kernel": {"responder": "kernel"}, "sysfs": {"responder": "sysfs"}},
                     ["idle"], 300)
    doc = yaml.safe_load(path.read_text())
    doc["matrix"] |= {"repetitions": 12, "until": {"deadline": "100us", "miss_below": 0.01}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert load_campaign(path).matrix.until.level == pytest.approx(0.99)
    doc["matrix"]["repetitions"] = 5
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError, match="repetitions.*no interval has both ends"):
        load_campaign(path)


def test_a_gpio_campaign_stops_once_each_case_meets_or_misses_its_deadline(tmp_path):
    """A deadline rule over two cases the twin board answers an order of magnitude apart (the
    kernel responder in microseconds, sysfs in over a hundred): each case's runs are units of
    the delays the board logged, the rule says the kernel case meets 50 µs and sysfs misses it,
    and the campaign stops after the round that settles both (no later run is started)."""
    path = _campaign(tmp_path, "stop-deadline",
                     {"kernel": {"responder": "kernel"}, "sysfs": {"responder": "sysfs"}}, ["idle"], 300)
    doc = yaml.safe_load(path.read_text())
    cap = 12
    doc["matrix"] |= {"repetitions": cap, "until": {"deadline": "50us", "miss_below": 0.01, "t_opt": 10}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    proc = run_station("run", str(path), "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stopping = json.loads((out / "campaign.json").read_text())["stopping"]
    assert stopping["verdict"] == "answered"
    rounds = stopping["rounds"]
    assert rounds < cap
    runs = sorted(p.parent.name for p in (out / "runs").glob("*/manifest.json"))
    assert runs == sorted(f"{case}-idle-r{r}" for case in ("kernel", "sysfs") for r in range(rounds))
    # the truth of each run: the p99 of the delays the board logged for the stimuli measured
    truth_p99 = {run: float(np.nanpercentile(_truth(out, run)["truth_ns"], 99)) for run in runs}
    assert max(v for run, v in truth_p99.items() if run.startswith("kernel")) < 25_000
    assert min(v for run, v in truth_p99.items() if run.startswith("sysfs")) > 100_000
    groups = stopping["groups"]
    assert groups["kernel idle"]["state"].startswith("meets 50us"), groups
    assert groups["sysfs idle"]["state"].startswith("misses 50us")
    assert groups["kernel idle"]["interval_ns"][1] <= 50_000 < groups["sysfs idle"]["interval_ns"][0]
    assert f"campaign stopped after round {rounds}" in proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["stopping"]["verdict"] == "answered" and report["findings"][0]["kind"] == "stopping"
