#!/usr/bin/env bash
# The randomized crash test (tests/slurm/test_crash_random.sh) for as long as you like: runs it
# again and again with a new seed and KILLS kills of hpod each, for MINUTES, and stops at the
# first failure, whose seed replays the same kills. Needs root (a throwaway Slurm cluster) and a
# build in build/.
#
#   scripts/crash-test.sh [--minutes 60] [--kills 30]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=60 kills=30
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes 60] [--kills 30]" >&2; exit 2 ;;
  esac
done
export HPO_BIN=$PWD/build/bin HPO_SRC=$PWD
end=$(( $(date +%s) + minutes * 60 ))
runs=0 total=0
while [ "$(date +%s)" -lt "$end" ]; do
  seed=$(( $(date +%s%N) % 1000000 ))
  log=$(mktemp /tmp/hpo-crash-test.XXXXXX)
  if ! CRASH_SEED=$seed CRASH_KILLS=$kills bash tests/slurm/test_crash_random.sh >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "crash-test: FAILED with seed $seed after $runs passing run(s); log: $log" >&2
    echo "replay: CRASH_SEED=$seed CRASH_KILLS=$kills HPO_BIN=$HPO_BIN HPO_SRC=$HPO_SRC bash tests/slurm/test_crash_random.sh" >&2
    exit 1
  fi
  grep '^PASS' "$log"
  rm -f "$log"
  runs=$((runs + 1))
  total=$((total + kills))
done
echo "crash-test: $runs run(s), $total kills of hpod, no failure"
