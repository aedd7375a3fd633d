#!/usr/bin/env bash
# Sets everything up, builds, checks the formatting, and runs every test with ctest
# (tests/README.md says what each label needs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check-format.sh      # clang-format --dry-run -Werror over the tree
bash scripts/build-without-slurm.sh  # build-noslurm/: hpod without the Slurm backend
bash scripts/fuzz.sh build        # build-fuzz/: the libFuzzer targets that ctest's fuzz.* tests run
cd build
ctest --output-on-failure --timeout 600 -j2 "$@"
