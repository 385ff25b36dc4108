"""The FPGA echoer on every CI run, without bsc: the committed fpga/verilog/mkIrqEchoer.v (what
Quartus compiles) under the cocotb testbench in Icarus Verilog, broken copies of it that the
testbench must reject, Verilator's lint, a Yosys generic synthesis, and the guard that says
when the Verilog is stale against the Bluespec sources.

Tools: iverilog, verilator, yosys (fpga/scripts/ci-deps.sh), cocotb (the [test] extras). Missing,
they fail the tests under CI and skip them elsewhere.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[1]
FPGA = ROOT / "fpga"
VERILOG = FPGA / "verilog" / "mkIrqEchoer.v"
RUN = FPGA / "test" / "cocotb" / "run.py"
FRESH = FPGA / "check_verilog_fresh.py"
APT = "apt-get install iverilog verilator yosys, or fpga/scripts/ci-deps.sh as root"


def need(*tools: str) -> None:
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        missing(f"{', '.join(absent)} not installed ({APT})")


def need_cocotb() -> None:
    need("iverilog", "vvp")
    try:
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        missing("cocotb not installed (pip install -e '.[test]')")


def say(capsys, text: str) -> None:
    """A line for the CI log even when the test passes (pytest captures print)."""
    with capsys.disabled():
        print(f"\n  {text}")


def run_testbench(verilog: Path, build_dir: Path, random_ops: int | None = None,
                  seed: int | None = None) -> tuple[subprocess.CompletedProcess, list[str], list[str]]:
    cmd = [sys.executable, str(RUN), "--verilog", str(verilog), "--build-dir", str(build_dir)]
    if random_ops is not None:
        cmd += ["--random-ops", str(random_ops)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=build_dir.parent)
    passed = re.findall(r"^PASS (\S+)$", proc.stdout, re.M)
    failed = re.findall(r"^FAIL (\S+)$", proc.stdout, re.M)
    return proc, passed, failed


def sim_log_errors(build_dir: Path, limit: int = 40) -> str:
    log = build_dir / "sim.log"
    if not log.exists():
        return "(no sim.log)"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if re.search(r"Error|FAIL|violation", ln)]
    return "\n".join(lines[:limit])


# --- the testbench on the committed Verilog ---------------------------------------------


def test_cocotb_testbench_passes_on_committed_verilog(tmp_path, capsys):
    need_cocotb()
    build = tmp_path / "build"
    proc, passed, failed = run_testbench(VERILOG, build)
    assert proc.returncode == 0 and "COCOTB PASS" in proc.stdout and not failed, (
        f"{proc.stdout}\n{proc.stderr[-3000:]}\n{sim_log_errors(build)}")
    assert len(passed) >= 8, passed
    traffic = re.search(r"random traffic: .*", (build / "sim.log").read_text())
    seed = re.search(r"random seed (\d+)", proc.stdout)
    say(capsys, f"cocotb on {VERILOG.relative_to(ROOT)}: {len(passed)} tests passed; "
                f"{traffic.group(0) if traffic else ''} (seed {seed.group(1) if seed else '?'})")


# --- broken copies the testbench must reject ----------------------------------------------


@dataclass(frozen=True)
class Mutation:
    name: str
    old: str  # must occur exactly once in mkIrqEchoer.v
    new: str
    caught_by: frozenset[str] = field(default_factory=frozenset)  # at least one of these cocotb tests fails
    log_says: str = ""  # and the simulation log says this (the protocol checker's finding)


def _m(name: str, old: str, new: str, *caught_by: str, log_says: str = "") -> Mutation:
    return Mutation(name, old, new, frozenset(caught_by), log_says)


VALID_TWICE = """reg mut_valid_q;
  always @(posedge CLK) mut_valid_q <= core_slave_valid;
  assign avs_readdatavalid = core_slave_valid | mut_valid_q ;"""
VALID_LATE = """reg mut_valid_q;
  always @(posedge CLK) mut_valid_q <= core_slave_valid;
  assign avs_readdatavalid = mut_valid_q ;"""
TAP_LATE = """reg mut_tap_q;
  always @(posedge CLK) mut_tap_q <= core_irqFlag;
  assign coe_irqflagtap = mut_tap_q ;"""

MUTATIONS = [
    _m("recv_does_not_clear", "assign core_irqFlag_D_IN = core_slave_accepted_wget[36] ;",
       "assign core_irqFlag_D_IN = 1'd1 ;", "event_cycle_exact", "status_read_does_not_clear"),
    _m("width_off_by_one", "assign core_width_D_IN = core_cycles[31:0] - core_tWrite ;",
       "assign core_width_D_IN = core_cycles[31:0] - core_tWrite + 32'd1 ;", "event_cycle_exact"),
    _m("readdatavalid_twice", "assign avs_readdatavalid = core_slave_valid ;", VALID_TWICE,
       "reset_values_and_identity", "event_cycle_exact", log_says="(read data without a read)"),
    _m("readdatavalid_one_cycle_late", "assign avs_readdatavalid = core_slave_valid ;", VALID_LATE,
       "reset_values_and_identity", "event_cycle_exact"),
    _m("readdatavalid_never", "assign core_slave_valid_EN = 1'd1 ;", "assign core_slave_valid_EN = 1'd0 ;",
       "reset_values_and_identity", log_says="got no readdatavalid within"),
    _m("waitrequest_never_asserted", "assign avs_waitrequest = !core_slave_ready ;",
       "assign avs_waitrequest = 1'd0 ;", "reset_values_and_identity", "reset_mid_operation",
       log_says="waitrequest low while the slave is in reset"),
    _m("status_read_clears", "core_slave_accepted_wget[35:32] == 4'h1 &&\n\t      core_irqFlag) ;",
       "(core_slave_accepted_wget[35:32] == 4'h1 ||\n\t       core_slave_accepted_wget[35:32] == 4'h2) &&\n"
       "\t      core_irqFlag) ;", "status_read_does_not_clear"),
    _m("t_write_on_every_send", "core_slave_accepted_wget[35:32] == 4'h0 &&\n\t     !core_irqFlag ;",
       "core_slave_accepted_wget[35:32] == 4'h0 ;", "back_to_back_and_pipelined"),
    _m("events_counts_every_write", "core_slave_accepted_wget[36] &&\n\t     core_slave_accepted_wget[35:32] == 4'h0 ;"
       "\n\n  // register core_irqFlag", "core_slave_accepted_wget[36] ;\n\n  // register core_irqFlag",
       "ignored_writes"),
    _m("tap_one_cycle_late", "assign coe_irqflagtap = core_irqFlag ;", TAP_LATE, "event_cycle_exact"),
    _m("cycles_hi_wrong_word", "assign core_cyclesHi_D_IN = core_cycles[63:32] ;",
       "assign core_cyclesHi_D_IN = core_cycles[31:0] ;", "timestamps_across_counter_wrap"),
    _m("counter_not_reset", "core_cycles <= `BSV_ASSIGNMENT_DELAY 64'd0;",
       "core_cycles <= `BSV_ASSIGNMENT_DELAY core_cycles;", "reset_mid_operation"),
    _m("clock_hz_constant", "4'h4: core_slave_data_D_IN = clockHz;",
       "4'h4: core_slave_data_D_IN = 32'd125000000;", "reset_values_and_identity"),
    _m("version_wrong", "4'h3: core_slave_data_D_IN = 32'h00020000;", "4'h3: core_slave_data_D_IN = 32'h00020001;",
       "reset_values_and_identity"),
]


def mutate(text: str, m: Mutation) -> str:
    n = text.count(m.old)
    if n != 1:
        pytest.fail(f"mutation {m.name}: its text occurs {n} times in {VERILOG.relative_to(ROOT)}, not once - the "
                    f"generated Verilog changed; update MUTATIONS in {Path(__file__).name}:\n{m.old}")
    return text.replace(m.old, m.new)


def test_mutations_are_distinct():
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)
    text = VERILOG.read_text()
    for m in MUTATIONS:
        assert mutate(text, m) != text


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_testbench_rejects_broken_verilog(mutation, tmp_path, capsys):
    need_cocotb()
    broken = tmp_path / "mkIrqEchoer.v"
    broken.write_text(mutate(VERILOG.read_text(), mutation))
    build = tmp_path / "build"
    proc, passed, failed = run_testbench(broken, build, random_ops=2000, seed=1)
    assert passed or failed, f"the testbench did not run on the mutant:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.returncode != 0 and failed, f"the testbench passed a broken echoer ({mutation.name})"
    assert mutation.caught_by & set(failed), (
        f"{mutation.name}: failed {failed}, expected one of {sorted(mutation.caught_by)}")
    if mutation.log_says:
        assert mutation.log_says in (build / "sim.log").read_text(), f"{mutation.name}: no {mutation.log_says!r}"
    say(capsys, f"mutation {mutation.name}: rejected by {', '.join(failed)}")


# --- lint and synthesis ---------------------------------------------------------------------


def test_verilator_lint_clean(tmp_path):
    need("verilator")
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", str(VERILOG)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


def register_bits(text: str) -> int:
    """State bits the generated Verilog declares: every `reg` except bsc's combinational *_D_IN."""
    bits = 0
    for msb, lsb, names in re.findall(r"^\s*reg\s+(?:\[(\d+)\s*:\s*(\d+)\]\s*)?([^;]+);", text, re.M):
        width = int(msb) - int(lsb) + 1 if msb else 1
        bits += width * sum(1 for n in names.split(",") if not n.strip().endswith("_D_IN"))
    return bits


def test_yosys_synthesis(tmp_path, capsys):
    need("yosys")
    stat = tmp_path / "stat.txt"
    script = f"read_verilog {VERILOG}; synth -top mkIrqEchoer; tee -q -o {stat} stat"
    proc = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = stat.read_text()
    cells = int(re.search(r"Number of cells:\s+(\d+)", text).group(1))
    kinds = {k: int(n) for k, n in re.findall(r"^\s+(\$\S+)\s+(\d+)$", text, re.M)}
    ffs = sum(n for k, n in kinds.items() if "DFF" in k)
    say(capsys, f"yosys synth -top mkIrqEchoer: {cells} cells, {ffs} flip-flops "
                f"({', '.join(f'{k} {n}' for k, n in kinds.items() if 'DFF' in k)})")
    assert cells > ffs > 0
    expected = register_bits(VERILOG.read_text())
    assert ffs == expected, f"synthesis kept {ffs} flip-flops; the Verilog's registers hold {expected} bits"


# --- staleness guard --------------------------------------------------------------------------


def test_committed_verilog_is_fresh():
    proc = subprocess.run([sys.executable, str(FRESH)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def copy_fpga(tmp_path: Path) -> Path:
    dst = tmp_path / "fpga"
    shutil.copytree(FPGA, dst, ignore=shutil.ignore_patterns("build", "__pycache__"))
    return dst


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} not found once"
    path.write_text(text.replace(old, new))


STALE_EDITS = {
    "changed_bsv": (lambda d: _edit(d / "src" / "IrqEchoer.bsv", "width <= now - tWrite;",
                                    "width <= now - tWrite + 1;"),
                    "src/IrqEchoer.bsv changed since verilog/mkIrqEchoer.v was generated"),
    "new_bsv": (lambda d: (d / "src" / "Extra.bsv").write_text("package Extra;\nendpackage\n"),
                "src/Extra.bsv is new since verilog/mkIrqEchoer.v was generated"),
    "removed_bsv": (lambda d: (d / "src" / "EchoerRegs.bsv").unlink(),
                    "src/EchoerRegs.bsv was removed since verilog/mkIrqEchoer.v was generated"),
    "hand_edited_verilog": (lambda d: _edit(d / "verilog" / "mkIrqEchoer.v", "32'hBADC0FFE;", "32'hBADC0FFF;"),
                            "verilog/mkIrqEchoer.v differs from what `make verilog` wrote"),
}


@pytest.mark.parametrize("edit", sorted(STALE_EDITS))
def test_staleness_guard_fires(edit, tmp_path):
    fpga = copy_fpga(tmp_path)
    apply, message = STALE_EDITS[edit]
    apply(fpga)
    proc = subprocess.run([sys.executable, str(fpga / "check_verilog_fresh.py")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr and "make -C fpga verilog" in proc.stderr, proc.stderr
    # what `make verilog` does after bsc: record the tree as it is; then the guard is quiet
    subprocess.run([sys.executable, str(fpga / "check_verilog_fresh.py"), "--write"], check=True, timeout=60,
                   capture_output=True)
    proc = subprocess.run([sys.executable, str(fpga / "check_verilog_fresh.py")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_make_test_fails_on_stale_verilog_without_bsc(tmp_path):
    """CI's `make -C fpga test` (no bsc): a changed BSV file fails it, with the reason."""
    need("make")
    fpga = copy_fpga(tmp_path)
    STALE_EDITS["changed_bsv"][0](fpga)
    proc = subprocess.run(["make", "-C", str(fpga), "test", "BSC=bsc-not-installed", f"PYTHON={sys.executable}"],
                          capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "src/IrqEchoer.bsv changed since verilog/mkIrqEchoer.v was generated" in out, out
    # and the unchanged tree passes the same target (the skip of the Bluesim part is not a failure)
    fresh = copy_fpga(tmp_path / "clean")
    proc = subprocess.run(["make", "-C", str(fresh), "test", "BSC=bsc-not-installed", f"PYTHON={sys.executable}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "SKIPPED" in proc.stdout, proc.stdout + proc.stderr
