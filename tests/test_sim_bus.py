"""The twin's buses: each simulated scope holds its replies back for the time its bus would take
(instruments/sim/bus.py), so capture ratios on the twin are those of the instrument's interface.

No test bounds how fast this machine is: the checks are the replies' sizes the bus was charged
for, lower bounds on elapsed time (a sleep is never shorter than asked), and an upper bound on
the capture ratio that the bus alone implies (a slow host can only lower it further).
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from instruments.scope import open_scope
from instruments.sim import SimScopeServer, run_in_thread
from instruments.sim.bus import BUSES, BusProfile, bus_profile
from instruments.sim.server import DIALECTS, send_over
from station.bench.scope_session import bus_text, twin_bus
from station.config import ConfigError, parse_campaign
from tests.conftest import REPO, run_station, station_cmd
from tests.scope_helpers import pulse_source, settings


class RecordingBus(BusProfile):
    """A bus that remembers the size of every reply it was asked to time."""

    def __init__(self, profile: BusProfile) -> None:
        super().__init__(profile.name, profile.overhead_s, profile.bytes_per_s)
        object.__setattr__(self, "sizes", [])

    def reply_s(self, size: int) -> float:
        self.sizes.append(size)  # type: ignore[attr-defined]
        return super().reply_s(size)


@given(overhead=st.floats(0, 1), rate=st.floats(1, 1e12), a=st.integers(0, 10**9), b=st.integers(0, 10**9))
def test_a_reply_costs_the_overhead_plus_its_bytes_at_the_rate(overhead, rate, a, b):
    bus = BusProfile("x", overhead, rate)
    assert bus.reply_s(a) == pytest.approx(overhead + a / rate, rel=1e-12, abs=1e-15)
    if a <= b:
        assert bus.reply_s(a) <= bus.reply_s(b)  # more bytes never arrive sooner


@pytest.mark.parametrize("overhead, rate", [(-1e-3, 1e6), (math.nan, 1e6), (math.inf, 1e6), (0, 0), (0, -5),
                                            (0, math.nan)])
def test_an_impossible_bus_is_refused(overhead, rate):
    with pytest.raises(ValueError, match="bus"):
        BusProfile("bad", overhead, rate)


def test_each_model_speaks_over_its_own_interface():
    # the seed's TDS 460A has only GPIB; the InfiniiVision a LAN port; the MSO 5 gigabit LAN
    assert {d: m.default_bus for d, m in DIALECTS.items()} == {
        "tektronix_tds": "gpib", "keysight_infiniivision": "lan", "tektronix_mso": "gigabit"}
    # GPIB is the slowest of them and the loopback has no delay at all
    assert BUSES["gpib"].bytes_per_s < BUSES["lan"].bytes_per_s < BUSES["gigabit"].bytes_per_s
    assert BUSES["loopback"].reply_s(10**9) == 0
    with pytest.raises(ValueError, match="unknown bus 'hpib'"):
        bus_profile("hpib")


def test_the_gpib_twin_holds_a_record_back_for_its_bytes():
    bus = RecordingBus(BUSES["gpib"])
    sim = SimScopeServer(pulse_source(), seed=3, dialect="tektronix_tds", bus=bus)
    with run_in_thread(sim), open_scope(sim.resource, dialect="tektronix_tds", timeout_s=10) as scope:
        scope.reset()
        applied = scope.configure(settings(record_length=15_000, time_per_div=50e-6))
        scope.acquire_single()
        bus.sizes.clear()  # type: ignore[attr-defined]
        start = time.monotonic()
        wf = scope.fetch()
        elapsed = time.monotonic() - start
    assert len(wf) == applied.record_length == 15_000
    sizes = bus.sizes  # type: ignore[attr-defined]
    # the block: "#5" + five digits + one byte a point, then the terminator
    assert 15_000 + 8 in sizes
    charged = sum(BUSES["gpib"].reply_s(n) for n in sizes)
    assert charged >= 15_000 / 115e3
    assert elapsed >= charged  # the replies really were held back that long


class ClockedWriter:
    """A stream writer that notes the loop's time of every write (what left, and when)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.writes = loop, []

    def write(self, data: bytes) -> None:
        self.writes.append((self.loop.time(), bytes(data)))

    async def drain(self) -> None:
        pass


@pytest.mark.parametrize("size", [10, 70_000])
def test_a_reply_leaves_a_slice_at_a_time_none_before_the_bus_could_carry_it(size):
    # 1 MB/s: a 70 kB reply takes 70 ms, sent as slices the host can parse while the rest
    # is on the wire; a short one in one piece. Only lower bounds: a sleep can be late.
    bus = BusProfile("slow", 2e-3, 1e6)
    reply = bytes(range(256)) * (size // 256) + b"x" * (size % 256)

    async def scenario() -> tuple[float, ClockedWriter]:
        loop = asyncio.get_running_loop()
        writer = ClockedWriter(loop)
        begun = loop.time()
        await send_over(writer, reply, bus)  # type: ignore[arg-type]
        return begun, writer

    begun, writer = asyncio.run(scenario())
    assert b"".join(data for _, data in writer.writes) == reply + b"\n"
    assert (len(writer.writes) > 2) == (size > 4096)
    sent = 0
    for at, data in writer.writes:
        sent += len(data)
        # the bytes up to this slice's last one had crossed the bus (the terminator counts)
        assert at >= begun + bus.overhead_s + (bus.reply_s(len(reply) + 1) - bus.overhead_s) * sent / (
            len(reply) + 1) - 1e-6
    assert writer.writes[-1][0] >= begun + bus.reply_s(len(reply) + 1) - 1e-6


def test_a_loopback_twin_charges_nothing():
    bus = RecordingBus(BUSES["loopback"])
    sim = SimScopeServer(pulse_source(), seed=3, dialect="tektronix_tds", bus=bus)
    with run_in_thread(sim), open_scope(sim.resource, dialect="tektronix_tds", timeout_s=10) as scope:
        scope.identify()
    sizes = list(bus.sizes)  # type: ignore[attr-defined]
    assert sizes and all(BUSES["loopback"].reply_s(n) == 0 for n in sizes)


def _campaign(**scope: object) -> str:
    fields = ", ".join(f"{k}: {v}" for k, v in scope.items())
    return f"name: b\nbench:\n  scope: {{{fields}}}\nmatrix: {{samples: 10}}\n"


def test_the_campaign_names_the_twin_bus_and_its_rate():
    c = parse_campaign(_campaign(kind="twin", dialect="tektronix_tds"))
    assert twin_bus(c.bench.scope) == BUSES["gpib"]  # bus: model is the default
    c = parse_campaign(_campaign(kind="twin", dialect="tektronix_tds", bus="lan", bus_rate=2e6))
    assert twin_bus(c.bench.scope).bytes_per_s == 2e6
    assert twin_bus(c.bench.scope).overhead_s == BUSES["lan"].overhead_s
    assert bus_text(c.bench.scope).endswith("+ 2000 kB/s")
    c = parse_campaign(_campaign(kind="visa", resource="GPIB0::1::INSTR"))
    assert bus_text(c.bench.scope) == "GPIB INSTR"


@pytest.mark.parametrize("fields, where", [
    ({"kind": "visa", "resource": "GPIB0::1::INSTR", "bus": "gpib"}, "bench.scope.bus"),
    ({"kind": "visa", "resource": "GPIB0::1::INSTR", "bus_rate": 1e5}, "bench.scope.bus_rate"),
    ({"kind": "twin", "bus": "hpib"}, "bench.scope.bus"),
    ({"kind": "twin", "bus_rate": -1}, "bench.scope.bus_rate"),
    ({"kind": "twin", "bus_rate": "fast"}, "bench.scope.bus_rate"),
])
def test_a_bad_bus_is_refused_with_its_field(fields, where):
    with pytest.raises(ConfigError) as err:
        parse_campaign(_campaign(**fields))
    assert where in str(err.value)


@pytest.mark.parametrize("text, where", [
    ("  scope: {kind: twin, dialect: tektronix_mso}\n  twin: {scope_replies: {time_stamps: iso}}\n",
     "bench.twin.scope_replies.time_stamps"),
    ("  scope: {kind: twin, dialect: tektronix_mso}\n  twin: {scope_replies: {frame_separator: comma}}\n",
     "bench.twin.scope_replies.frame_separator"),
    ("  scope: {kind: twin, dialect: tektronix_tds}\n  twin: {scope_replies: {time_stamps: dpo}}\n",
     "bench.twin.scope_replies"),
])
def test_the_twin_mso_reply_forms_are_checked_and_only_the_msos(text: str, where: str):
    with pytest.raises(ConfigError) as err:
        parse_campaign(f"name: b\nbench:\n{text}matrix: {{samples: 10}}\n")
    assert where in str(err.value) and ":" in str(err.value).split(where)[0], str(err.value)
    ok = parse_campaign("name: b\nbench:\n  scope: {kind: twin, dialect: tektronix_mso}\n"
                        "  twin: {scope_replies: {time_stamps: dpo}}\nmatrix: {samples: 10}\n")
    assert ok.bench.twin.scope_replies.time_stamps == "dpo"


def test_a_tds_campaign_over_gpib_sees_no_more_than_the_bus_allows(tmp_path: Path):
    """The seed's scope on its own bus: each 15 000-point record (5 ms of signal) costs at least
    its transfer over GPIB, so the capture ratio cannot exceed D / (D + transfer); over the
    loopback the same campaign sees several times more (tests/test_demo_campaign.py)."""
    cfg = yaml.safe_load((REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text())
    cfg["bench"]["scope"] |= {"bus": "model", "record_length": 15_000}
    cfg["matrix"] |= {"interfaces": ["lpt"], "variants": ["inb"], "samples": 20_000, "pulses": 100,
                      "max_duration": "1min"}
    path = tmp_path / "gpib.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = run_station("run", str(path), "--out", str(tmp_path / "out"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    (manifest,) = [json.loads(p.read_text()) for p in (tmp_path / "out/runs").glob("*/manifest.json")]
    capture = manifest["capture"]
    record_s = 10 * 500e-6
    transfer_s = BUSES["gpib"].reply_s(15_000 + 8)
    assert capture["bus"].startswith("twin, gpib")
    assert capture["acquisitions_counted"] >= 2 and capture["events_emitted"] > 0
    # an acquisition holds at most the record's events and one more; the events are counted from the
    # stream's sequence numbers at the window's ends, interpolated (2 % slack for that)
    assert capture["capture_ratio"] <= 1.02 * (record_s + 100e-6) / (record_s + transfer_s)
    assert capture["dead_time_per_acquisition_s"] >= transfer_s
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["runs"][0]["capture"]["bus"] == capture["bus"]


def test_the_standalone_twin_plays_the_model_and_bus_asked_for(tmp_path: Path):
    state = tmp_path / "twin"
    proc = subprocess.Popen(station_cmd("twin", "--state-dir", str(state), "--dialect", "keysight_infiniivision",
                                        "--bus", "gpib"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (state / "twin.json").exists():
            assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the twin did not start"
            time.sleep(0.1)
        resource = json.loads((state / "twin.json").read_text())["scope_resource"]
        with open_scope(resource, dialect="keysight_infiniivision", timeout_s=10) as scope:
            assert "KEYSIGHT" in scope.identify().upper()
            start = time.monotonic()
            scope.identify()
            assert time.monotonic() - start >= BUSES["gpib"].overhead_s  # held back as GPIB would
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)


@pytest.mark.parametrize("option, value", [("--dialect", "rigol"), ("--bus", "hpib")])
def test_the_standalone_twin_refuses_an_unknown_model_or_bus(option: str, value: str, tmp_path: Path):
    res = run_station("twin", "--state-dir", str(tmp_path / "t"), option, value, timeout=60)
    assert res.returncode == 2 and option in res.stderr and value in res.stderr
