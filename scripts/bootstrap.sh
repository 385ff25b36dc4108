# Sourced by demo.sh and test.sh: a virtual environment in .venv with the
# station installed (editable), on a fresh Debian machine with Python 3.11.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "need root for: $*" >&2; return 1; fi; }
apt_ready=""
apt_install() {
  [ -n "$apt_ready" ] || { as_root apt-get update -qq; apt_ready=1; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
if [ ! -x "$REPO/.venv/bin/python" ]; then
  # Debian splits venv (and ensurepip) out of python3
  "$PY" -m venv "$REPO/.venv" 2>/dev/null || { apt_install python3-venv; rm -rf "$REPO/.venv"; "$PY" -m venv "$REPO/.venv"; }
fi
"$REPO/.venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$REPO/.venv/bin/python" -m pip install -q -e "$REPO${STATION_EXTRAS:-}"
# An editable install compiles none of the station's modules, and where PYTHONDONTWRITEBYTECODE is
# set (CI images, containers) no command ever writes them: every `station` command would compile
# ~200 modules from source (~0.1 s a start). Compiled once here, as pip does for an installed package.
"$REPO/.venv/bin/python" -m compileall -q -j 0 "$REPO/station" "$REPO/instruments"
# The same for numba's kernels (pairing, clock ratios, pulse extraction): compiled into numba's
# cache once here (~8 s), not in every worker of a new user's first report (~3 s each).
"$REPO/.venv/bin/station" warm-up >/dev/null
