#!/usr/bin/env bash
# The whole test suite, with everything it needs: the station and its test
# extras, headless Chromium (report tests), OpenSSH's server (this machine as a
# real target; tracefs mounted, for the detector's traces, and debugfs, for the kernel's
# scheduler facts), a Java runtime (Spark reading
# the result store), Debian's Prometheus and promtool (the monitor's metrics), Debian's kernel headers and checkpatch (kernel module tests), QEMU
# and the VM image's packages (real-kernel target tests), Icarus Verilog, Verilator and
# Yosys (the FPGA echoer's Verilog).
# Extra arguments go to pytest.
set -euo pipefail
STATION_EXTRAS="[test]" source "$(dirname "$0")/bootstrap.sh"
cd "$REPO"
as_root bash scripts/ci/browser-deps.sh
as_root bash scripts/ci/sshd-deps.sh >/dev/null
as_root sh scripts/ci/spark-deps.sh >/dev/null
as_root sh scripts/ci/prometheus-deps.sh >/dev/null
as_root sh scripts/ci/tracefs.sh
as_root sh scripts/ci/debugfs.sh
as_root bash target_modules/scripts/ci-deps.sh >/dev/null
as_root bash station/vm/ci-deps.sh >/dev/null
as_root bash fpga/scripts/ci-deps.sh >/dev/null
.venv/bin/ruff check .
# Two passes: the tests without a QEMU guest on every core (-n auto), then the guests' tests
# alone, one at a time (marker vm, tests/conftest.py). Both always run; the script fails if
# either does (pytest's 5, "nothing selected", is no failure: extra arguments may pick one side).
# -rs: every skip listed, with its reason; --durations: the slowest tests, to keep the run under 30 min.
status=0
.venv/bin/python -m pytest -q -rs --durations=10 -n auto -m "not vm" "$@" || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
.venv/bin/python -m pytest -q -rs --durations=15 -m vm "$@" || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
exit "$status"
