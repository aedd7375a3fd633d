#!/usr/bin/env bash
# Builds hpod, hpo and hpo-shim without the Slurm backend (-DHPO_WITH_SLURM=OFF) into
# build-noslurm/, as on a laptop without libslurm. tests/integration/test_without_slurm.sh runs
# that hpod.
set -euo pipefail
cd "$(dirname "$0")/.."
# The same compiler cache as build/ (scripts/setup.sh): the objects of both trees are alike.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build-noslurm -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DHPO_WITH_SLURM=OFF \
  -DHPO_BUILD_TESTS=OFF -DHPO_BUILD_BENCH=OFF >/dev/null
cmake --build build-noslurm -j2 --target hpod hpo hpo-shim
echo "build-without-slurm: built build-noslurm/bin/hpod"
