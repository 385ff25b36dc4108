#!/bin/sh
# Headless Chromium (and a font) for tests/test_report_browser.py, which renders
# report.html the way a reader's browser does. Debian/Ubuntu; idempotent.
set -eu

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# No recommends: the browser and one font are all a headless screenshot needs.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
chromium --version
