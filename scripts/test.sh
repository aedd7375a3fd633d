#!/usr/bin/env bash
# Sets everything up, builds, and runs every test (unit and integration) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fuzz.sh build   # build-fuzz/: the libFuzzer targets that ctest's fuzz.* tests run
cd build
ctest --output-on-failure --timeout 600 -j2 "$@"
