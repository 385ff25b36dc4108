#!/usr/bin/env python3
"""Run the cocotb testbench (tb_echoer.py) on a Verilog echoer in Icarus Verilog.

    python fpga/test/cocotb/run.py                       # the committed fpga/verilog/mkIrqEchoer.v
    python fpga/test/cocotb/run.py --verilog copy.v --build-dir /tmp/x

No Makefile: cocotb's Python runner compiles with iverilog and runs vvp with cocotb's VPI
library. Prints one line per cocotb test and a verdict; exit status 0 only if every test
passed. Needs `iverilog`/`vvp` on PATH and the `cocotb` package (pyproject's [test] extras).
"""

from __future__ import annotations

import argparse
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
FPGA = HERE.parents[1]
TOPLEVEL = "mkIrqEchoer"
# A design clock whose period is a whole number of ps; not the 125 MHz default, so that a
# CLOCK_HZ tied to a constant instead of the clockHz parameter shows.
DEFAULT_CLOCK_HZ = 100_000_000


def results(xml_path: Path) -> tuple[list[str], list[str]]:
    """(passed, failed) cocotb test names from cocotb's JUnit results file."""
    passed, failed = [], []
    root = ET.parse(xml_path).getroot()
    for prop in root.iter("property"):
        if prop.get("name") == "random_seed":
            print(f"random seed {prop.get('value')} (--seed {prop.get('value')} repeats this run)")
    for case in root.iter("testcase"):
        bad = case.find("failure") is not None or case.find("error") is not None
        (failed if bad else passed).append(case.get("name"))
    return passed, failed


def run(verilog: Path, build_dir: Path, clock_hz: int = DEFAULT_CLOCK_HZ, seed: int | None = None,
        random_ops: int | None = None, testcase: list[str] | None = None) -> tuple[list[str],
                                                                                   list[str]]:
    from cocotb_tools.runner import get_runner

    build_dir.mkdir(parents=True, exist_ok=True)
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # the runner hands sys.path to the simulator's Python
    runner = get_runner("icarus")
    runner.build(sources=[verilog], hdl_toplevel=TOPLEVEL, build_dir=build_dir, always=True,
                 parameters={"clockHz": clock_hz}, timescale=("1ns", "1ps"),
                 log_file=build_dir / "build.log")
    env = {"ECHOER_CLOCK_HZ": str(clock_hz)}
    if random_ops is not None:
        env["ECHOER_RANDOM_OPS"] = str(random_ops)
    xml = build_dir / "results.xml"
    xml.unlink(missing_ok=True)
    # Under pytest (the variable is inherited) the runner would exit on the first failed test;
    # the verdict here comes from the results file, test by test.
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        runner.test(test_module="tb_echoer", hdl_toplevel=TOPLEVEL, build_dir=build_dir,
                    test_dir=build_dir,
                    results_xml=str(xml), extra_env=env, seed=seed, testcase=testcase,
                    log_file=build_dir / "sim.log")
    except SystemExit as exc:  # the simulator itself failed; it may still have left results
        print(f"simulator exited with {exc.code}", file=sys.stderr)
    if not xml.exists():
        raise SystemExit(f"cocotb wrote no results ({xml}); see {build_dir / 'sim.log'}")
    return results(xml)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verilog", type=Path, default=FPGA / "verilog" / f"{TOPLEVEL}.v")
    ap.add_argument("--build-dir", type=Path, default=FPGA / "build" / "cocotb")
    ap.add_argument("--clock-hz", type=int, default=DEFAULT_CLOCK_HZ)
    ap.add_argument("--seed", type=int, default=None,
                    help="random seed (default: cocotb picks and prints one)")
    ap.add_argument("--random-ops", type=int, default=None,
                    help="transfers in the random-traffic test")
    ap.add_argument("--testcase", action="append", default=None,
                    help="run only this cocotb test (repeatable)")
    args = ap.parse_args(argv)
    passed, failed = run(args.verilog.resolve(), args.build_dir.resolve(), args.clock_hz, args.seed,
                         args.random_ops, args.testcase)
    for name in passed:
        print(f"PASS {name}")
    for name in failed:
        print(f"FAIL {name}")
    verdict = "COCOTB PASS" if passed and not failed else "COCOTB FAIL"
    print(f"{verdict}: {len(passed)} passed, {len(failed)} failed ({args.verilog})")
    return 0 if verdict == "COCOTB PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
