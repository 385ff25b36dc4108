#!/bin/sh
# ci-deps.sh - install what the FPGA tests need without bsc (tests/test_fpga_cocotb.py):
#
#   * iverilog (Icarus Verilog 11 on bookworm) to simulate the committed
#     verilog/mkIrqEchoer.v under the cocotb testbench (cocotb itself comes from
#     PyPI with the [test] extras);
#   * verilator for `--lint-only -Wall` on that file;
#   * yosys for a generic synthesis (`synth -top mkIrqEchoer`) and its cell counts;
#   * make for `make -C fpga test` (the staleness guard);
#   * libpython3.X, the shared Python runtime cocotb's simulator plug-in loads
#     (Debian's python3 binary does not pull it in), for the python3 on PATH.
#
# Debian/Ubuntu; idempotent: installs only what is missing. Run as root.
set -eu
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "ci-deps.sh: must run as root (apt-get install)" >&2
	exit 1
fi

pylib=""
if command -v python3 >/dev/null 2>&1; then
	pylib=libpython$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
fi
. "$(dirname "$0")/../../scripts/ci/install-missing.sh"
install_missing iverilog verilator yosys make $pylib

iverilog -V 2>&1 | head -n1
verilator --version
yosys -V
