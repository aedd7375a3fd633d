# Shared by the integration tests: a real hpod in a fresh data dir, driven by the real CLI.
# Needs HPO_BIN (build/bin) and HPO_SRC (the source tree); ctest sets both.
set -euo pipefail
: "${HPO_BIN:?set HPO_BIN to the bin directory of the build}"
: "${HPO_SRC:?set HPO_SRC to the source tree}"
export PATH="$HPO_BIN:$PATH"
export HPO_DATA_DIR
HPO_DATA_DIR=$(mktemp -d /tmp/hpo-it.XXXXXX)
WORK=$(mktemp -d /tmp/hpo-work.XXXXXX)
PY=/usr/bin/python3

cleanup() {
  local rc=${1:-$?}
  hpo daemon stop >/dev/null 2>&1 || true
  if [ $rc -ne 0 ] && [ -f "$HPO_DATA_DIR/hpod.log" ]; then
    echo "--- hpod.log (last 40 lines) ---" >&2
    tail -n 40 "$HPO_DATA_DIR/hpod.log" >&2
  fi
  if [ -n "${HPO_KEEP_TEST_DIRS:-}" ]; then echo "kept $HPO_DATA_DIR $WORK" >&2; else rm -rf "$HPO_DATA_DIR" "$WORK"; fi
  exit $rc
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# has ARGS...: grep ARGS on stdin, quietly. Unlike `grep -q` it reads its input to the end, so
# the command writing into the pipe never meets a closed one (under pipefail its SIGPIPE would
# fail the whole test even though the line was there).
has() { grep "$@" >/dev/null; }
# refused WANT_RC MESSAGE ARGS...: `hpo ARGS` exits WANT_RC and says MESSAGE (output in $WORK/out).
refused() {
  local want=$1 msg=$2
  shift 2
  set +e
  hpo "$@" >"$WORK/out" 2>&1
  local rc=$?
  set -e
  [ "$rc" -eq "$want" ] || fail "hpo $* exited $rc, not $want: $(cat "$WORK/out")"
  grep -qF -- "$msg" "$WORK/out" || fail "hpo $*: unclear: $(cat "$WORK/out")"
}
pass() { echo "PASS: $*"; }
sql() { sqlite3 "$HPO_DATA_DIR/hpod.db" "$1"; }
# Every stored report, for `FROM $ALL_REPORTS`: the indexed table and the staged log that hpod
# moves into it within its flush interval (docs/architecture.md, store).
ALL_REPORTS="(SELECT trial_id, step, metric, value FROM reports UNION ALL SELECT trial_id, step, metric, value FROM report_log)"

# Polls `cmd` (a string for eval) until it succeeds, for up to $2 seconds.
wait_for() {
  local cmd=$1 limit=${2:-30} i=0
  while ! eval "$cmd" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt $((limit * 10)) ] && fail "timed out waiting for: $cmd"
    sleep 0.1
  done
}

# Number of processes of sweep $1 of this test's daemon (trials and their children): those in
# the process groups of its trials' hpo-shims (each trial's hpo.pid; hpod starts a trial in a
# session of its own). Only /proc/PID/stat is read: reading another process's environment or
# command line waits for its memory, which a process of another test stuck in a frozen file
# system holds. (Tests run in parallel, each with its own sweep 1.)
trial_processes() {
  local groups=" " f line rest n=0
  for f in "$HPO_DATA_DIR"/sweeps/"$1"/trials/*/hpo.pid; do
    [ -f "$f" ] && groups="$groups$(cat "$f" 2>/dev/null) "
  done
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null <"$f" || continue
    rest=${line##*) }  # "state ppid pgrp ...", after the command name (which may hold anything)
    set -- $rest
    [ "${1:-Z}" != Z ] && case "$groups" in *" ${3:-} "*) n=$((n + 1)) ;; esac
  done
  echo $n
}
