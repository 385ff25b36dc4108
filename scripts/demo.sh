#!/usr/bin/env bash
# The main job: install the station and run the seed's experiment on the twin.
#   bash scripts/demo.sh            -> results/demo/report.html
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
cd "$REPO"
exec .venv/bin/station run configs/rtai-lpt-vs-pcie.yaml --out "${1:-results/demo}"
