"""The avrsim kind end to end: a campaign on this machine (a real sshd, the simavr harness a real
process started through it) runs the seed's sketch on the Arduino core and the bare responder,
timer0 enabled and masked, and its report says what the harness logged it did.

Truth comes from the harness's own log (harness.log, read here line by line without the station's
parser): the edges it applied, the output changes, each timer0 handler run; and from the seed's
published figure (seed 002, shared/reference/seed-figures.yaml: 8.9485-9.1986 µs with timer0
masked). Needs the AVR toolchain, simavr and arduino-core-avr (target_modules/scripts/ci-deps.sh):
missing, these tests skip saying what is missing, except under CI, where they fail."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from station.config import ConfigError, parse_campaign
from tests.conftest import run_station
from tests.manifest_check import assert_manifests_fit
from tests.test_avr_sketch import require_sketch_tools

EDGES = 5000
CYCLE_US = 1 / 16
TIMER0_VECTOR = 16
# seed 002 (2016), a Uno with timer0 masked: every response within these, µs
SEED_MIN_US, SEED_MAX_US = 8.9485, 9.1986
CAMPAIGN = f"""\
name: avrsim-test
bench:
  target: {{kind: local}}
matrix:
  kind: avrsim
  samples: {EDGES}
  max_duration: 2min
avrsim:
  seed: 5
  cases:
    sketch-masked: {{firmware: sketch, timer0: masked}}
    sketch: {{firmware: sketch}}
    responder-masked: {{firmware: responder, timer0: masked}}
    responder: {{firmware: responder, timer0: enabled}}
"""


def refused(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_campaign(text, "a.yaml")
    return str(info.value)


@pytest.mark.parametrize("change, where, words", [
    (("kind: local", "kind: twin"), "a.yaml:3: bench.target.kind:", "runs on the station's own machine"),
    (("max_duration: 2min", "max_duration: 2min\n  duration: 10s"), "a.yaml:8: matrix.duration:",
     "not the wall clock"),
    (("seed: 5", "seed: 5\n  width: 200us\n  period: 100us"), "a.yaml:10: avrsim.width:", "does not fit"),
    (("seed: 5", "seed: 5\n  jitter: 100ns"), "a.yaml:10: avrsim.jitter:", "under 16 cycles"),
    # YAML 1.1 reads a bare `on` as true: the error says which values there are
    (("timer0: enabled", "timer0: on"), "a.yaml:14: avrsim.cases.responder.timer0:", "'enabled' or 'masked'"),
    (("samples: 5000", "duration: 1s"), "a.yaml:", "give matrix.samples"),
])
def test_nonsense_is_refused_with_its_line(change, where, words):
    message = refused(CAMPAIGN.replace(*change))
    assert message.startswith(where), message
    assert words in message, message


def test_a_load_that_starts_programs_is_refused_and_the_kind_needs_its_section():
    loaded = CAMPAIGN.replace("max_duration: 2min", "max_duration: 2min\n  loads: [busy]") + \
        "loads:\n  busy: [{name: stress, command: stress-ng --cpu 1}]\n"
    message = refused(loaded)
    assert "a.yaml:8: matrix.loads:" in message and "counts its own cycles" in message, message
    assert "an avrsim campaign needs an avrsim: section" in refused(CAMPAIGN[:CAMPAIGN.index("avrsim:\n")])
    assert parse_campaign(CAMPAIGN, "a.yaml").avrsim.cases["sketch"].timer0 == "enabled"  # the default


# --- the campaign ------------------------------------------------------------------------------


def harness_log(path: Path) -> dict:
    """What the harness logged it did, read here: edges, output changes, timer0 handler runs."""
    stims, resps, timer0 = [], [], []
    for line in path.read_text().splitlines():
        word, *rest = line.split()
        if word == "stim":
            stims.append(int(rest[0]))
        elif word == "resp":
            resps.append(int(rest[0]))
        elif word == "isr" and int(rest[0]) == TIMER0_VECTOR:
            timer0.append((int(rest[1]), int(rest[2])))
    # each edge's answer: the first output change after it, before the next edge
    delays = []
    for i, s in enumerate(stims):
        nxt = stims[i + 1] if i + 1 < len(stims) else float("inf")
        after = [r for r in resps if s < r < nxt]
        delays.append(after[0] - s if after else None)
    return {"stims": stims, "delays": delays, "timer0": timer0}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    require_sketch_tools()
    d = tmp_path_factory.mktemp("avrsim")
    (d / "avrsim.yaml").write_text(CAMPAIGN)
    res = run_station("run", str(d / "avrsim.yaml"), "--out", str(d / "out"), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return d / "out"


@pytest.fixture(scope="module")
def report(campaign) -> dict:
    return json.loads((campaign / "report.json").read_text())


@pytest.fixture(scope="module")
def logs(campaign) -> dict[str, dict]:
    return {d.name: harness_log(d / "harness.log") for d in (campaign / "runs").iterdir()}


def test_every_runs_manifest_fits_its_schema(campaign, report):
    assert set(assert_manifests_fit(campaign).values()) == {"avrsim"}
    assert len(assert_manifests_fit(campaign)) == len(report["avrsim"]["runs"])


def test_every_run_applied_its_edges_and_the_report_has_the_logged_delays(report, logs):
    runs = {r["id"]: r for r in report["avrsim"]["runs"]}
    assert set(runs) == {"sketch-masked-none-r0", "sketch-none-r0", "responder-masked-none-r0",
                         "responder-none-r0"}
    for run_id, log in logs.items():
        r, delays = runs[run_id], [d for d in logs[run_id]["delays"] if d is not None]
        assert r["status"] == "complete" and len(log["stims"]) == EDGES == r["stimuli"]
        assert r["answered"] == len(delays) and r["missed"] == EDGES - len(delays)
        assert r["delay_cycles"]["min"] == min(delays) and r["delay_cycles"]["max"] == max(delays)
        assert r["delay_us"]["max"] == pytest.approx(max(delays) * CYCLE_US, abs=1e-6)
        assert sum(r["histogram"]["counts"]) == len(delays)
        assert r["timer0_handler"]["runs"] == len(log["timer0"])
        assert (r["timer0"] == "masked") == (not log["timer0"])  # masking keeps timer0's handler from running


def test_outliers_are_the_edges_that_waited_for_timer0_and_their_rate_is_explained(report, logs):
    runs = {r["id"]: r for r in report["avrsim"]["runs"]}
    for firmware in ("sketch", "responder"):
        masked_max = max(d for d in logs[f"{firmware}-masked-none-r0"]["delays"] if d is not None)
        log, r = logs[f"{firmware}-none-r0"], runs[f"{firmware}-none-r0"]
        late = [s for s, d in zip(log["stims"], log["delays"], strict=True) if d is not None and d > masked_max]
        assert late and r["outliers"]["count"] == len(late)
        # every late edge arrived while timer0's handler ran, or in the few cycles after its RETI
        for s in late:
            assert any(entry < s <= exit_ + 8 for entry, exit_ in log["timer0"]), s
        assert r["outliers"]["explained"] == len(late) and r["outliers"]["unexplained"] == 0
        # the prediction from the log: timer0's rate × its handler's mean length
        lengths = [x - e for e, x in log["timer0"]]
        span = log["timer0"][-1][0] - log["timer0"][0][0]
        predicted = (len(lengths) - 1) / span * (sum(lengths) / len(lengths))
        assert r["outliers"]["expected_fraction"] == pytest.approx(predicted, rel=1e-9)
        lo, hi = r["outliers"]["fraction_ci"]
        assert lo <= len(late) / EDGES <= hi and r["outliers"]["as_predicted"] == (lo <= predicted <= hi)


def test_the_sketch_stands_beside_the_seeds_figure(report, logs):
    section = report["avrsim"]
    assert section["seed"]["masked_us"] == [SEED_MIN_US, SEED_MAX_US]
    found = {(f["kind"], f.get("case")): f for f in section["findings"]}
    seed = found[("seed", "sketch-masked")]
    delays = [d for d in logs["sketch-masked-none-r0"]["delays"] if d is not None]
    lo, hi = min(delays) * CYCLE_US, max(delays) * CYCLE_US
    assert seed["figure"] == f"{lo:.4f}–{hi:.4f} µs (the seed: {SEED_MIN_US:.4f}–{SEED_MAX_US:.4f} µs)"
    # the spread within one cycle of the seed's is said so; the median's distance is said with its sign
    assert ("within one cycle of the seed's" in seed["text"]) == (abs((hi - lo) - (SEED_MAX_US - SEED_MIN_US))
                                                                 <= CYCLE_US)
    assert "below its middle" in seed["text"] if hi < SEED_MIN_US else "median inside" in seed["text"]
    # the bare responder is not compared with the seed's sketch
    assert "the seed" not in found[("masked", "responder-masked")]["text"]
    by_firmware = {f["firmware"]: f for f in section["findings"] if f["kind"] == "masking"}
    worst_on = max(d for d in logs["sketch-none-r0"]["delays"] if d is not None) * CYCLE_US
    assert by_firmware["sketch"]["values"]["worst_on_us"] == pytest.approx(worst_on, abs=1e-6)
    assert by_firmware["sketch"]["values"]["masked_handler_runs"] == 0


def test_the_report_pages_csv_and_firmware_are_written(campaign, report):
    html = (campaign / "report.html").read_text()
    md = (campaign / "report.md").read_text()
    for page in (html, md):
        assert "Simulated microcontroller response per run" in page and "the seed (a Uno)" in page
    assert (campaign / "figures" / "avrsim-sketch.svg").is_file()
    assert (campaign / "figures" / "avrsim-responder.svg").is_file()
    with (campaign / "avrsim.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows] == [r["id"] for r in report["avrsim"]["runs"]]
    # the edges join the result store, one row per edge the harness applied
    from station import api
    store = api.open_results([campaign])
    store.register()
    assert store.con.sql("SELECT count(*) FROM avrsim_edges").fetchall()[0][0] == EDGES * len(rows)
    assert store.con.sql("SELECT count(*) FROM avrsim_handlers WHERE vector = 1").fetchall()[0][0] == sum(
        r["answered"] for r in report["avrsim"]["runs"])  # INT0's handler ran once per answered edge
    # the ELF each run measured stays with the results, named by its hash in the manifest
    import hashlib
    for run in report["avrsim"]["runs"]:
        manifest = json.loads((campaign / "runs" / run["id"] / "manifest.json").read_text())
        elf = campaign / manifest["firmware"]["elf"]
        assert hashlib.sha256(elf.read_bytes()).hexdigest() == manifest["firmware"]["sha256"] == run["sha256"]


def test_without_a_masked_case_the_threshold_is_the_firmwares_own_spread(campaign, logs, tmp_path):
    """A campaign of timer0-enabled runs only (the masked runs removed from a copy): outliers are
    the delays beyond the fastest + the main loop's longest wait, and still all timer0's."""
    copy = tmp_path / "copy"
    shutil.copytree(campaign, copy, ignore=shutil.ignore_patterns("*.elf", "arduino-core"))
    for run in ("sketch-masked-none-r0", "responder-masked-none-r0"):
        shutil.rmtree(copy / "runs" / run)
    res = run_station("report", str(copy))
    assert res.returncode == 0, res.stderr
    runs = {r["id"]: r for r in json.loads((copy / "report.json").read_text())["avrsim"]["runs"]}
    for firmware, slack in (("sketch", 8), ("responder", 3)):
        delays = [d for d in logs[f"{firmware}-none-r0"]["delays"] if d is not None]
        o = runs[f"{firmware}-none-r0"]["outliers"]
        assert o["threshold_cycles"] == min(delays) + slack
        assert o["count"] == sum(d > min(delays) + slack for d in delays) > 0 and o["unexplained"] == 0


def test_a_run_cut_short_is_reported_as_unreadable_and_the_others_stand(campaign, tmp_path):
    """A harness killed mid-run leaves a log without its `end` line: the report says so for that run
    (its raw log kept as it is) and reports the others whole."""
    copy = tmp_path / "cut"
    shutil.copytree(campaign, copy, ignore=shutil.ignore_patterns("*.elf", "arduino-core"))
    log = copy / "runs" / "sketch-none-r0" / "harness.log"
    kept = log.read_text().splitlines(keepends=True)[:1000]
    log.write_text("".join(kept))
    res = run_station("report", str(copy))
    assert res.returncode == 0, res.stderr
    report = json.loads((copy / "report.json").read_text())
    runs = {r["id"]: r for r in report["avrsim"]["runs"]}
    assert "delay_us" not in runs["sketch-none-r0"] or runs["sketch-none-r0"]["delay_us"] is None
    assert any("sketch-none-r0: its harness output cannot be read" in n and "end" in n for n in report["notes"])
    assert runs["sketch-masked-none-r0"]["answered"] == EDGES
    assert log.read_text() == "".join(kept)
