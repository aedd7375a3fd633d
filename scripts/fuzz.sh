#!/usr/bin/env bash
# libFuzzer targets for hostile input (tests/fuzz): the sweep YAML parser and every API request.
#
#   scripts/fuzz.sh build              build them with clang++ (ASan + UBSan) into build-fuzz/
#   scripts/fuzz.sh run TARGET [SECS]  run one (sweep_spec | rpc) for SECS (default 60) seconds
#
# `run` starts from the corpus kept in tests/fuzz/corpus/TARGET and writes what it finds to a temp
# dir (add interesting inputs to the kept corpus by hand with -merge=1). A crash leaves its input
# in build-fuzz/crashes/. The ctest tests fuzz.sweep_spec and fuzz.rpc call `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  build)
    if ! command -v clang++ >/dev/null 2>&1; then echo "fuzz: clang++ is missing (apt-get install clang)" >&2; exit 1; fi
    cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DHPO_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build build-fuzz -j2 --target fuzz_sweep_spec fuzz_rpc
    ;;
  run)
    target=${2:?usage: scripts/fuzz.sh run sweep_spec|rpc [SECS]}
    secs=${3:-60}
    bin=build-fuzz/bin/fuzz_$target
    if [ ! -x "$bin" ]; then
      if [ "${CI:-}" = true ]; then echo "FAIL: $bin is not built (scripts/fuzz.sh build)"; exit 1; fi
      echo "SKIP: $bin is not built (scripts/fuzz.sh build)"; exit 77
    fi
    work=$(mktemp -d /tmp/hpo-fuzz.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    mkdir -p build-fuzz/crashes
    # ASan's leak check is off: the rpc target keeps one daemon alive across inputs on purpose.
    # A finding exits 1: libFuzzer's own 77 would read as a skip to ctest.
    ASAN_OPTIONS=detect_leaks=0 "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -error_exitcode=1 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/ \
      "$work" "tests/fuzz/corpus/$target" 2>&1 | tail -n 25
    ;;
  *)
    sed -n '2,10p' "$0" >&2
    exit 2
    ;;
esac
