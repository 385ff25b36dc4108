"""labgrid places as targets (station/target/labgrid_place.py, docs/lab.md).

A real labgrid coordinator and exporter (from the labgrid package on PyPI) on 127.0.0.1, started
here, export the standalone twin's SSH server (a NetworkService) and its SCPI scope (a
PyVISADevice) as the place `twin-bench`. What the place's state is, and who holds it, is asked of
the coordinator with labgrid's own client (labgrid-client), never of the station."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import free_port, run_station, running_twin, station_cmd

PLACE = "twin-bench"
PLACE2 = "twin-bench-2"
LOCAL_PLACE = "this-machine"
EXPORTER = "lab-exporter"
BIN = Path(sys.executable).parent


def _labgrid_bin(name: str) -> str:
    exe = BIN / name
    if not exe.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} missing: pip install 'labgrid>=24' (the test extras carry it)")
        return found
    return str(exe)


def _client(address: str, *args: str, user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, LG_COORDINATOR=address)
    if user is not None:
        env["LG_USERNAME"] = user
    res = subprocess.run([_labgrid_bin("labgrid-client"), "-x", address, *args], capture_output=True, text=True,
                         timeout=60, env=env)
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def _holder(address: str, place: str = PLACE) -> str | None:
    """Who holds the place, as the coordinator says (labgrid-client show)."""
    shown = _client(address, "-p", place, "show").stdout
    line = next(ln for ln in shown.splitlines() if ln.strip().startswith("acquired:"))
    value = line.split(":", 1)[1].strip()
    return None if value == "None" else value


def _me() -> str:
    """This client as labgrid names it (host/user), the way labgrid's client computes it."""
    return f"{os.environ.get('LG_HOSTNAME', socket.gethostname())}/{os.environ.get('LG_USERNAME', getpass.getuser())}"


def _wait_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


@pytest.fixture(scope="module")
def twin_server(tmp_path_factory):
    yield from running_twin(tmp_path_factory.mktemp("twin") / "state")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, twin_server, local):
    """A coordinator, an exporter of the twin's two endpoints and of this machine's sshd, and the
    places that match them."""
    home = tmp_path_factory.mktemp("labgrid")
    port = free_port()
    address = f"127.0.0.1:{port}"
    coordinator_log = home / "coordinator.log"
    coordinator = subprocess.Popen([_labgrid_bin("labgrid-coordinator"), "-l", address], cwd=home,
                                   stdout=coordinator_log.open("w"), stderr=subprocess.STDOUT)
    _wait_port(port, coordinator, coordinator_log)
    scope_port = int(twin_server["scope_resource"].split("::")[2])
    exported = {"twin": {
        "NetworkService": {"address": "127.0.0.1", "port": twin_server["ssh_port"], "username": "root"},
        "scope": {"cls": "PyVISADevice", "type": "TCPIP", "url": f"127.0.0.1::{scope_port}::SOCKET"}},
        # a second bench (the same twin, reached again): a campaign over two places
        "twin2": {"NetworkService": {"address": "127.0.0.1", "port": twin_server["ssh_port"], "username": "root"}},
        # this machine through OpenSSH's sshd: a real kernel behind a place
        "local": {"NetworkService": {"address": local.host, "port": local.port, "username": local.user}}}
    (home / "exporter.yaml").write_text(yaml.safe_dump(exported))
    exporter_log = home / "exporter.log"
    exporter = subprocess.Popen([_labgrid_bin("labgrid-exporter"), "-c", address, "-n", EXPORTER, "--hostname",
                                 "127.0.0.1", str(home / "exporter.yaml")], cwd=home,
                                stdout=exporter_log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while len(_client(address, "resources").stdout.split()) < 4:
        assert exporter.poll() is None, exporter_log.read_text()
        assert time.monotonic() < deadline, exporter_log.read_text()
        time.sleep(0.3)
    _client(address, "-p", PLACE, "create")
    _client(address, "-p", PLACE, "add-match", f"{EXPORTER}/twin/*")
    _client(address, "-p", PLACE2, "create")
    _client(address, "-p", PLACE2, "add-match", f"{EXPORTER}/twin2/*")
    _client(address, "-p", LOCAL_PLACE, "create")
    _client(address, "-p", LOCAL_PLACE, "add-match", f"{EXPORTER}/local/*")
    yield {"address": address, "log": coordinator_log, "twin": twin_server, "scope_port": scope_port, "local": local}
    for proc in (exporter, coordinator):
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def free_place(lab):
    """Each test starts and ends with the place free (whoever a failed test left holding it)."""
    assert _holder(lab["address"]) is None
    yield lab
    if _holder(lab["address"]) is not None:
        _client(lab["address"], "-p", PLACE, "release", "--kick", check=False)


def _campaign(tmp_path: Path, lab: dict, samples: int = 3000, scope: str = "labgrid:scope") -> Path:
    twin = lab["twin"]
    cfg = {
        "name": "on-a-place",
        "bench": {
            "target": {"kind": "labgrid", "place": PLACE, "coordinator": lab["address"], "connect_timeout": "5s",
                       "identity_file": twin["identity_file"], "known_hosts": twin["known_hosts"]},
            "scope": {"kind": "visa", "resource": scope, "timeout": "5s"},
        },
        "matrix": {"interfaces": ["lpt"], "variants": ["inb"], "loads": ["none"], "samples": samples,
                   "max_duration": "10min"},
    }
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _coordinator_said(lab: dict, place: str = PLACE) -> list[str]:
    return [ln for ln in lab["log"].read_text().splitlines() if ln.startswith(f"{place}: place ")]


def test_a_campaign_on_a_place_runs_end_to_end_and_frees_the_place(free_place, tmp_path):
    lab = free_place
    said_before = len(_coordinator_said(lab))
    out = tmp_path / "out"
    res = run_station("run", str(_campaign(tmp_path, lab)), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"labgrid place {PLACE} acquired" in res.stderr and f"labgrid place {PLACE} released" in res.stderr
    # the coordinator saw the station acquire the place, then release it; it is free now
    me = _me()
    assert _coordinator_said(lab)[said_before:] == [f"{PLACE}: place acquired by {me}", f"{PLACE}: place released"]
    assert _holder(lab["address"]) is None
    # what the campaign ran on, recorded: the place, its resources, the endpoints taken from them
    bench = json.loads((out / "campaign.json").read_text())
    place = bench["target"]["place"]
    assert place["place"] == PLACE and place["acquired_by_station"] is True and place["holder"] == me
    assert sorted(place["resources"]) == [f"{EXPORTER}/twin/NetworkService/NetworkService",
                                          f"{EXPORTER}/twin/PyVISADevice/scope"]
    assert place["ssh"] == {"address": "127.0.0.1", "port": lab["twin"]["ssh_port"], "username": "root"}
    assert bench["scope"]["resource"] == f"TCPIP::127.0.0.1::{lab['scope_port']}::SOCKET"
    report = json.loads((out / "report.json").read_text())
    [run] = report["runs"]
    assert run["status"] == "complete" and run["sw"]["count"] >= 3000 and run["hw"]["count"] > 0


def test_several_places_in_one_campaign_are_each_acquired_for_their_runs_and_released(free_place, tmp_path):
    lab = free_place
    twin = lab["twin"]
    target = {"kind": "labgrid", "coordinator": lab["address"], "connect_timeout": "5s",
              "identity_file": twin["identity_file"], "known_hosts": twin["known_hosts"]}
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({
        "name": "two-places",
        "bench": {"targets": {"a": {**target, "place": PLACE}, "b": {**target, "place": PLACE2}},
                  "scope": {"kind": "none"}},
        "matrix": {"interfaces": ["lpt"], "variants": ["inb"], "loads": ["none"], "samples": 500,
                   "max_duration": "5min"},
    }))
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    for place in (PLACE, PLACE2):
        assert _coordinator_said(lab, place)[-2:] == [f"{place}: place acquired by {_me()}", f"{place}: place released"]
        assert _holder(lab["address"], place) is None
    targets = json.loads((out / "campaign.json").read_text())["targets"]
    assert {name: t["place"]["place"] for name, t in targets.items()} == {"a": PLACE, "b": PLACE2}
    assert sorted(r["id"] for r in json.loads((out / "report.json").read_text())["runs"]) == \
        ["a-lpt-inb-none-r0", "b-lpt-inb-none-r0"]


def test_a_cyclictest_campaign_on_a_place_exporting_this_machines_sshd_runs_and_frees_it(free_place, tmp_path):
    lab = free_place
    local = lab["local"]
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump({
        "name": "on-this-machine",
        "bench": {"target": {"kind": "labgrid", "place": LOCAL_PLACE, "coordinator": lab["address"],
                             "connect_timeout": "5s", "identity_file": local.identity_file,
                             "known_hosts": local.known_hosts, "work_dir": f"/tmp/irq-station-lg-{tmp_path.name}"},
                  "scope": {"kind": "none"}},
        "matrix": {"kind": "cyclictest", "loads": ["none"], "duration": "1s", "max_duration": "2min"},
        "cyclictest": {"threads": "per-cpu", "priority": 80, "interval": "1ms"},
    }))
    out = tmp_path / "out"
    res = run_station("run", str(path), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _coordinator_said(lab, LOCAL_PLACE)[-2:] == [f"{LOCAL_PLACE}: place acquired by {_me()}",
                                                        f"{LOCAL_PLACE}: place released"]
    assert _holder(lab["address"], LOCAL_PLACE) is None
    bench = json.loads((out / "campaign.json").read_text())
    assert bench["target"]["place"]["ssh"] == {"address": local.host, "port": local.port, "username": local.user}
    # the kernel behind the place is this machine's (read here, not from the station)
    assert bench["target"]["audit"]["uname"].split()[2] == os.uname().release
    [run] = json.loads((out / "report.json").read_text())["cyclictest"]["runs"]
    assert run["status"] == "complete"


def test_a_place_held_by_someone_else_is_refused_naming_them(free_place, tmp_path):
    lab = free_place
    _client(lab["address"], "-p", PLACE, "acquire", user="alice")
    try:
        out = tmp_path / "out"
        res = run_station("run", str(_campaign(tmp_path, lab)), "--out", str(out), timeout=120)
        assert res.returncode != 0 and "Traceback" not in res.stderr
        host = _me().split("/")[0]
        assert f"place {PLACE} is acquired by {host}/alice" in res.stderr, res.stderr
        assert not list(out.glob("runs/*/sw.raw"))  # nothing measured
        assert _holder(lab["address"]) == f"{host}/alice"  # and nothing taken from alice
    finally:
        _client(lab["address"], "-p", PLACE, "release", user="alice")


def test_a_place_you_acquired_is_used_and_left_yours(free_place, tmp_path):
    lab = free_place
    _client(lab["address"], "-p", PLACE, "acquire")
    try:
        res = run_station("run", str(_campaign(tmp_path, lab, samples=500)), "--out", str(tmp_path / "out"),
                          timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        assert "already acquired by you" in res.stderr
        assert _holder(lab["address"]) == _me()
        place = json.loads((tmp_path / "out" / "campaign.json").read_text())["target"]["place"]
        assert place["acquired_by_station"] is False
    finally:
        _client(lab["address"], "-p", PLACE, "release")


def test_a_bench_that_fails_after_acquiring_releases_the_place(free_place, tmp_path):
    lab = free_place
    res = run_station("run", str(_campaign(tmp_path, lab, scope="labgrid:nosuch")), "--out", str(tmp_path / "out"),
                      timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "no PyVISADevice named 'nosuch' (it has: scope)" in res.stderr, res.stderr
    assert _holder(lab["address"]) is None
    said = _coordinator_said(lab)
    assert said[-2:] == [f"{PLACE}: place acquired by {_me()}", f"{PLACE}: place released"]


def test_a_killed_station_keeps_the_place_until_station_cleanup_releases_it(free_place, tmp_path):
    lab = free_place
    cfg = _campaign(tmp_path, lab, samples=2_000_000)
    out = tmp_path / "out"
    run = subprocess.Popen(station_cmd("run", str(cfg), "--out", str(out)), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(p.stat().st_size > 40_000 for p in out.glob("runs/*/sw.raw")):
        assert run.poll() is None, run.stderr.read()
        assert time.monotonic() < deadline, "no data streamed"
        time.sleep(0.2)
    run.send_signal(signal.SIGKILL)
    run.wait(30)
    assert _holder(lab["address"]) == _me()  # a killed process releases nothing
    res = run_station("cleanup", str(cfg), timeout=120)
    assert res.returncode == 0, res.stderr
    done = json.loads(res.stdout)["target"]
    assert done["labgrid_place"] == "released" and done["modules_unloaded"] == ["rtai_lpt_latency"]
    assert _holder(lab["address"]) is None
    again = run_station("cleanup", str(cfg), timeout=120)  # nothing left: cleanup acquires, finds, releases
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["target"]["modules_unloaded"] == []
    assert _holder(lab["address"]) is None


# ---- without a coordinator: the config and the resources' forms -------------------------------
@pytest.mark.parametrize(("target", "scope", "expected"), [
    ({"kind": "labgrid"}, None, "target.place: a labgrid target needs the place's name"),
    ({"kind": "labgrid", "place": "p", "host": "10.0.0.5"}, None, "target.host: a labgrid target's host is its place"),
    ({"kind": "labgrid", "place": "p", "port": 22}, None, "target.port: a labgrid target's port"),
    ({"kind": "ssh", "place": "p"}, None, "target.place: is a labgrid target's: only for kind: labgrid"),
    ({"kind": "labgrid", "place": "p", "coordinator": "not an address"}, None, "target.coordinator:"),
    ({"kind": "labgrid", "place": "p;rm -rf /"}, None, "target.place:"),
    ({"kind": "ssh"}, {"kind": "visa", "resource": "labgrid:scope"}, "scope.resource: labgrid:… names a PyVISADevice"),
])
def test_a_labgrid_setting_out_of_place_is_refused_where_it_stands(tmp_path, target, scope, expected):
    from station.api import load_campaign

    cfg = {"name": "c", "bench": {"target": target, "scope": scope or {"kind": "none"}},
           "matrix": {"interfaces": ["lpt"], "samples": 100}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(Exception) as err:
        load_campaign(path)
    assert "c.yaml:" in str(err.value) and expected in str(err.value), str(err.value)


def test_a_pyvisa_device_becomes_the_resource_labgrids_driver_would_open():
    from station.target.labgrid_place import visa_string

    assert visa_string({"type": "TCPIP", "url": "192.168.1.30"}) == "TCPIP::192.168.1.30::INSTR"
    assert visa_string({"type": "USB", "url": "0x0699::0x0401::C012345"}) == "USB::0x0699::0x0401::C012345::INSTR"
    # a raw socket names its own resource class: taken as it is
    assert visa_string({"type": "TCPIP", "url": "10.0.0.5::4000::SOCKET"}) == "TCPIP::10.0.0.5::4000::SOCKET"


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["type", "url", "backend", "extra"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=40), st.lists(st.integers(), max_size=3))))
def test_whatever_an_exporter_publishes_is_a_resource_string_or_a_clear_refusal(params):
    from station.target.labgrid_place import PlaceError, visa_string

    try:
        got = visa_string(params)
    except PlaceError as exc:
        assert "PyVISADevice" in str(exc)
    else:
        assert got.startswith(f"{params['type']}::{params['url']}")
