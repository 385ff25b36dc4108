#!/bin/sh
# Debian's Prometheus server and promtool, which tests/test_prometheus.py starts on 127.0.0.1 to
# scrape a running `station monitor` and checks configs/prometheus/ with. The package's own
# service is kept from starting (policy-rc.d says no while it installs, and it is disabled):
# nothing here may listen beyond 127.0.0.1, and the tests start their own server.
# Debian/Ubuntu; idempotent.
set -eu
. "$(dirname "$0")/install-missing.sh"

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
made_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    made_policy=1
fi
install_missing prometheus
if [ -n "$made_policy" ]; then rm -f "$policy"; fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
prometheus --version 2>&1 | head -1
