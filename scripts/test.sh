#!/usr/bin/env bash
# The whole test suite, with everything it needs: the station and its test
# extras, headless Chromium (report tests), OpenSSH's server (this machine as a
# real target; tracefs mounted, for the detector's traces), Debian's kernel headers and
# checkpatch (kernel module tests), QEMU and the VM image's packages (real-kernel
# target tests), Icarus Verilog, Verilator and Yosys (the FPGA echoer's Verilog).
# Extra arguments go to pytest.
set -euo pipefail
STATION_EXTRAS="[test]" source "$(dirname "$0")/bootstrap.sh"
cd "$REPO"
as_root bash scripts/ci/browser-deps.sh
as_root bash scripts/ci/sshd-deps.sh >/dev/null
as_root sh scripts/ci/tracefs.sh
as_root bash target_modules/scripts/ci-deps.sh >/dev/null
as_root bash station/vm/ci-deps.sh >/dev/null
as_root bash fpga/scripts/ci-deps.sh >/dev/null
.venv/bin/ruff check .
# -rs: every skip listed, with its reason; -n auto: a worker per core (the guests on one: conftest.py)
exec .venv/bin/python -m pytest -q -rs -n auto --dist loadgroup "$@"
