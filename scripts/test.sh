#!/usr/bin/env bash
# Sets everything up, builds, and runs every test (unit and integration) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
ctest --output-on-failure --timeout 600 -j2 "$@"
