"""One register map for hardware, kernel modules and twin (fpga/registers.yaml).

Runs in CI without bsc: the generated files are current, the C header compiles and its
values are the YAML's, the BSV constants are the YAML's, the Qsys component names the
ports the generated Verilog has, and the Python model behaves as the Bluesim testbench
(fpga/test/TbIrqEchoer.bsv) requires of the hardware, sequence by sequence.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from station.twin.echoer import (
    Echoer,
    cycle_at,
    cycles_to_ns,
    load_register_map,
    registers_yaml_path,
    width_cycles,
)
from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[1]
FPGA = ROOT / "fpga"
YAML = yaml.safe_load((FPGA / "registers.yaml").read_text())
REGS = {r["name"]: r for r in YAML["registers"]}
CONSTS = {c["name"]: c["value"] for c in YAML["constants"]}
VERSION = (YAML["version"]["major"] << 16) | YAML["version"]["minor"]

# What other helpers code against: these names and offsets must not move.
AGREED = {
    "SEND": 0x00,
    "RECV": 0x04,
    "STATUS": 0x08,
    "VERSION": 0x0C,
    "CLOCK_HZ": 0x10,
    "CYCLES_LO": 0x14,
    "CYCLES_HI": 0x18,
    "T_WRITE": 0x1C,
    "T_CLEAR": 0x20,
    "WIDTH": 0x24,
    "EVENTS": 0x28,
}


def off(name: str) -> int:
    return REGS[name]["offset"]


# --- the map and its generated artefacts -------------------------------------------


def test_agreed_offsets_and_constants() -> None:
    assert {n: r["offset"] for n, r in REGS.items()} == AGREED
    assert CONSTS == {"OTHER_VALUE": 0xBADC0FFE, "VERSION_MAJOR_TIMESTAMPS": 2}
    assert YAML["version"]["major"] >= CONSTS["VERSION_MAJOR_TIMESTAMPS"]
    assert (1 << YAML["address_width"]) * 4 > max(AGREED.values())


def test_generated_files_are_current() -> None:
    proc = subprocess.run([sys.executable, str(FPGA / "regmap.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_twin_copy_is_byte_identical() -> None:
    copy = ROOT / "station" / "twin" / "echoer_registers.yaml"
    assert copy.read_bytes() == (FPGA / "registers.yaml").read_bytes()
    assert registers_yaml_path().read_bytes() == copy.read_bytes()


def test_c_header_compiles_and_matches(tmp_path: Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        missing("gcc not installed (apt-get install gcc)")
    expected = {f"ECHOER_REG_{n}": r["offset"] for n, r in REGS.items()}
    expected |= {f"ECHOER_{n}": v for n, v in CONSTS.items()}
    expected |= {
        "ECHOER_STATUS_IRQ": 1 << REGS["STATUS"]["fields"][0]["bits"][1],
        "ECHOER_VERSION": VERSION,
        "ECHOER_BAR": YAML["bar"],
        "ECHOER_REG_SPAN": (1 << YAML["address_width"]) * 4,
        "ECHOER_CLOCK_HZ_DEFAULT": YAML["clock_hz_default"],
        "ECHOER_VERSION_MAJOR(ECHOER_VERSION)": YAML["version"]["major"],
        "ECHOER_VERSION_MINOR(ECHOER_VERSION)": YAML["version"]["minor"],
    }
    body = "\n".join(f'\tprintf("%s %llu\\n", "{m}", (unsigned long long)({m}));' for m in expected)
    src = tmp_path / "regs.c"
    src.write_text(f'#include <stdio.h>\n#include "echoer_regs.h"\nint main(void)\n{{\n{body}\n\treturn 0;\n}}\n')
    exe = tmp_path / "regs"
    include = ROOT / "target_modules" / "include"
    subprocess.run(
        [gcc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{include}", str(src), "-o", str(exe)],
        check=True,
    )
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.splitlines()}
    assert got == expected


def test_bsv_constants_match() -> None:
    text = (FPGA / "src" / "EchoerRegs.bsv").read_text()
    values = {m.group(1): int(m.group(2), 16) for m in re.finditer(r"^\w+ (\w+) = 'h([0-9A-Fa-f]+);", text, re.M)}
    ints = {m.group(1): int(m.group(2)) for m in re.finditer(r"^Integer (\w+) = (\d+);", text, re.M)}
    for name, r in REGS.items():
        camel = "echoerReg" + "".join(w.capitalize() for w in name.lower().split("_"))
        assert values[camel] == r["offset"] // 4, name  # word address
    assert values["echoerOtherValue"] == CONSTS["OTHER_VALUE"]
    assert values["echoerVersionMajorTimestamps"] == CONSTS["VERSION_MAJOR_TIMESTAMPS"]
    assert values["echoerVersion"] == VERSION
    assert ints["echoerClockHzDefault"] == YAML["clock_hz_default"]
    assert ints["echoerStatusIrqBit"] == REGS["STATUS"]["fields"][0]["bits"][1]
    assert re.search(rf"^typedef {YAML['address_width']} EchoerAddrWidth;", text, re.M)
    assert re.search(rf"^typedef {YAML['data_width']} EchoerDataWidth;", text, re.M)


def _hw_tcl_ports() -> dict[str, tuple[str, int]]:
    text = (FPGA / "irq_echoer_hw.tcl").read_text()
    return {
        m.group(1): (m.group(2).lower(), int(m.group(3)))
        for m in re.finditer(r"^add_interface_port \S+ (\S+) \S+ (Input|Output) (\d+)", text, re.M)
    }


def test_hw_tcl_ports_fit_register_map() -> None:
    ports = _hw_tcl_ports()
    assert ports["avs_address"] == ("input", YAML["address_width"])
    assert ports["avs_writedata"] == ("input", YAML["data_width"])
    assert ports["avs_readdata"] == ("output", YAML["data_width"])
    assert {"ins_irq", "coe_irqflagtap", "CLK", "RST_N"} <= set(ports)


def test_hw_tcl_ports_match_generated_verilog() -> None:
    verilog = FPGA / "verilog" / "mkIrqEchoer.v"
    # committed, so that no test needs the Bluespec compiler: its absence is a broken checkout
    assert verilog.exists(), "fpga/verilog/mkIrqEchoer.v is missing: it is committed (make -C fpga verilog makes it)"
    text = verilog.read_text()
    found: dict[str, tuple[str, int]] = {}
    for m in re.finditer(r"^\s*(input|output)\s+(?:\[(\d+)\s*:\s*0\]\s*)?(\w+);", text, re.M):
        found[m.group(3)] = (m.group(1), int(m.group(2)) + 1 if m.group(2) else 1)
    assert found == _hw_tcl_ports()
    assert re.search(r"parameter \[31\s*:\s*0\] clockHz", text)


# --- the Python model, the same sequences as the Bluesim testbench ------------------

OTHER = CONSTS["OTHER_VALUE"]


def test_loader_reads_the_yaml() -> None:
    rm = load_register_map()
    assert rm.offsets == AGREED
    assert rm.other_value == OTHER and rm.version == VERSION and rm.status_irq == 1
    assert rm.span == 64 and rm.clock_hz_default == YAML["clock_hz_default"]


def test_reset_state() -> None:
    e = Echoer()
    assert not e.irq
    assert e.read(off("STATUS"), 5) == 0
    assert e.read(off("RECV"), 6) == 0
    assert e.read(off("VERSION"), 7) == VERSION
    assert e.read(off("CLOCK_HZ"), 8) == YAML["clock_hz_default"]
    for name in ("T_WRITE", "T_CLEAR", "WIDTH", "EVENTS"):
        assert e.read(off(name), 9) == 0, name
    assert Echoer(clock_hz=100_000_000).read(off("CLOCK_HZ"), 0) == 100_000_000


def test_other_reads_return_the_constant() -> None:
    e = Echoer()
    for offset in (off("SEND"), 0x2C, 0x3C):
        assert e.read(offset, 1) == OTHER
    with pytest.raises(ValueError):
        e.read(0x02, 1)


def test_cycle_counter_and_hi_latch() -> None:
    e = Echoer()
    c = (7 << 32) | 0x1234
    assert e.read(off("CYCLES_LO"), c) == 0x1234
    assert e.read(off("CYCLES_HI"), c + (1 << 32)) == 7  # latched at the LO read


def test_one_event() -> None:
    e = Echoer()
    e.write(off("SEND"), 0x12345678, 100)
    assert e.irq
    assert e.read(off("STATUS"), 102) == 1
    assert e.read(off("STATUS"), 104) == 1  # no side effect
    assert e.read(off("T_WRITE"), 106) == 100
    assert e.read(off("EVENTS"), 108) == 1
    assert e.read(off("RECV"), 150) == 0x12345678
    assert not e.irq
    assert e.read(off("T_CLEAR"), 152) == 150
    assert e.read(off("WIDTH"), 154) == 50
    assert e.read(off("STATUS"), 156) == 0


def test_recv_with_none_pending_and_ignored_writes() -> None:
    e = Echoer()
    e.write(off("SEND"), 0xAB, 10)
    e.read(off("RECV"), 30)
    assert e.read(off("RECV"), 40) == 0xAB  # value again
    assert (e.read(off("T_CLEAR"), 41), e.read(off("WIDTH"), 42)) == (30, 20)  # untouched
    for name in ("VERSION", "WIDTH", "RECV"):
        e.write(off(name), 0xFFFF, 50)
    e.write(0x3C, 1, 51)
    assert not e.irq
    assert e.read(off("VERSION"), 60) == VERSION
    assert e.read(off("WIDTH"), 61) == 20
    assert e.read(off("RECV"), 62) == 0xAB
    assert e.read(off("EVENTS"), 63) == 1


def test_back_to_back_sends() -> None:
    e = Echoer()
    e.write(off("SEND"), 0xAAAA0001, 200)
    e.write(off("SEND"), 0xBBBB0002, 201)
    assert e.irq
    assert e.read(off("T_WRITE"), 203) == 200  # the rising edge
    assert e.read(off("EVENTS"), 205) == 2
    assert e.read(off("RECV"), 210) == 0xBBBB0002  # the later value
    assert not e.irq
    assert e.read(off("WIDTH"), 212) == 10


def test_send_right_after_clear_and_reset() -> None:
    e = Echoer()
    e.write(off("SEND"), 5, 300)
    assert e.read(off("RECV"), 301) == 5
    e.write(off("SEND"), 6, 302)
    assert e.irq and e.read(off("WIDTH"), 303) == 1
    e.reset()
    assert not e.irq and e.read(off("RECV"), 0) == 0 and e.read(off("EVENTS"), 1) == 0


def test_width_across_the_32_bit_wrap() -> None:
    e = Echoer()
    w, c = 0xFFFF_FFF5, 0x1_0000_0006
    e.write(off("SEND"), 1, w)
    e.read(off("RECV"), c)
    assert e.read(off("T_WRITE"), c) == 0xFFFF_FFF5
    assert e.read(off("T_CLEAR"), c) == 0x6
    assert e.read(off("WIDTH"), c) == c - w == 17


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["send", "recv", "status", "idle"]), st.integers(1, 50)), max_size=40),
    st.integers(0, 2**64 - 2**20),
)
def test_width_is_the_time_the_tap_was_high(ops: list[tuple[str, int]], start: int) -> None:
    """Any access sequence: WIDTH equals the cycles irq stayed high, as the scope sees."""
    e = Echoer()
    cycle, rose = start, None
    for op, gap in ops:
        cycle += gap
        if op == "send":
            if not e.irq:
                rose = cycle
            e.write(off("SEND"), gap, cycle)
        elif op == "recv":
            was = e.irq
            e.read(off("RECV"), cycle)
            if was:
                assert rose is not None
                assert e.read(off("WIDTH"), cycle) == (cycle - rose) & 0xFFFF_FFFF
        elif op == "status":
            assert e.read(off("STATUS"), cycle) == int(e.irq)
    assert e.read(off("EVENTS"), cycle) == sum(op == "send" for op, _ in ops)


def test_width_cycles_from_nanoseconds() -> None:
    hz = 125_000_000  # 8 ns per cycle
    assert cycle_at(0, hz) == 0 and cycle_at(7, hz) == 0 and cycle_at(8, hz) == 1
    assert width_cycles(1000, 7400, hz) == 925 - 125
    assert width_cycles(1007, 1008, hz) == 1  # a counter edge between them
    # Past the 32-bit wrap (34.4 s at 125 MHz) the difference stays right.
    t0 = 34_359_738_000
    assert width_cycles(t0, t0 + 6400, hz) == 800
    assert cycles_to_ns(800, hz) == 6400
    assert cycles_to_ns(3, 100_000_000 * 3) == 10  # floor, as the kernel module divides


def test_width_cycles_vectorised_matches_scalar_and_model() -> None:
    rng = np.random.default_rng(4)
    hz = 125_000_000
    t_w = rng.integers(0, 10**13, 1000, dtype=np.int64)  # up to ~3 h of uptime
    t_c = t_w + rng.integers(0, 100_000, 1000, dtype=np.int64)
    vec = width_cycles(t_w, t_c, hz)
    assert vec.dtype == np.int64
    e = Echoer()
    for i in range(0, 1000, 97):
        scalar = width_cycles(int(t_w[i]), int(t_c[i]), hz)
        assert vec[i] == scalar
        e.write(off("SEND"), i, cycle_at(int(t_w[i]), hz))
        e.read(off("RECV"), cycle_at(int(t_c[i]), hz))
        assert e.read(off("WIDTH"), 0) == scalar


def test_model_replays_the_bluesim_trace() -> None:
    """The hardware's own answers, access by access, must be the model's (needs bsc)."""
    if shutil.which("bsc") is None:
        # not missing(): CI cannot install it either (no package registry carries the Bluespec
        # compiler: neither Debian nor PyPI), so the committed Verilog stands in for it elsewhere
        pytest.skip("bsc (the Bluespec compiler) not on PATH: no package registry carries it "
                    "(build it from its sources to replay the Bluesim trace)")
    proc = subprocess.run(["make", "-C", str(FPGA), "test"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    models = {"main": Echoer(), "wrap": Echoer()}
    replayed = 0
    for line in (FPGA / "build" / "bsim" / "tb.log").read_text().splitlines():
        parts = line.split()
        if not parts or parts[0] != "TRACE":
            continue
        model = models[parts[1]]
        if parts[2] == "RESET":
            model.reset()
            continue
        kind, cycle, word, data = parts[2], int(parts[3]), int(parts[4]), int(parts[5])
        if kind == "W":
            model.write(word * 4, data, cycle)
        else:
            assert model.read(word * 4, cycle) == data, line
        replayed += 1
    assert replayed > 50
