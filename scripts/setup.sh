#!/usr/bin/env bash
# Installs what hpod needs from Debian 12's packages and builds it into build/ (-j2).
# Run as root on a fresh machine (or as a user with the packages already there).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config ccache git procps
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libre2-dev
  libeigen3-dev
  libssl-dev libsqlite3-dev sqlite3 libspdlog-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-optuna python3-grpcio python3-protobuf python3-pandas
  python3-matplotlib python3-nbclient python3-nbformat python3-ipykernel
  slurmctld slurmd slurm-client munge libslurm-dev bc bsdutils openssl util-linux bindfs
  libcpp-httplib-dev prometheus-cpp-dev libjs-chart.js
  chromium chromium-driver python3-selenium python3-prometheus-client
  clang libclang-rt-14-dev clang-format
)

# Node.js and npm for the reflection test (the machines here have them; a bare Debian 12 does not).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages (run as root to install): ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
# One compiler cache for every build tree of this checkout (build/, build-noslurm/): paths are
# hashed relative to it, so the second tree reuses the first one's objects.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
cmake --build build -j2
echo "setup: built build/bin/hpod and build/bin/hpo"
