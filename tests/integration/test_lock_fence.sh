#!/usr/bin/env bash
# One writer, fenced (common/daemon_lock.h, docs/operations.md), where the file system carries no
# lock from host to host. The data directory is seen through two FUSE mounts of one directory
# (bindfs): as two hosts see a shared file system whose flock does not reach across them (Lustre
# without its flock option), each mount's locks are its own. hpod "A" runs as host-a (a UTS
# namespace of its own) through one mount, "B" as host-b through the other, each with
# --lock-stale 4s and the store held alone (as on NFS):
#  - started at the same moment on a fresh directory, one serves and the other refuses;
#  - A runs a sweep and is frozen (SIGSTOP) past the stale time; B takes the directory over
#    (its log names A), takes the trials back and runs the sweep on; A is continued (SIGCONT):
#    it finds itself no longer named and exits (75) at once, committing nothing more. The
#    store passes SQLite's integrity check, every trial ran once, every report is stored once.
source "$(dirname "$0")/lib.sh"
if ! command -v bindfs >/dev/null || ! command -v unshare >/dev/null || [ "$(id -u)" -ne 0 ]; then
  [ "${CI:-}" = true ] && fail "CI must run this test: it needs root, bindfs and unshare"
  echo "SKIP: needs root, bindfs (Debian's bindfs) and unshare"
  exit 77
fi
REAL=$WORK/real
mkdir -p "$REAL" "$WORK/a" "$WORK/b"
bindfs "$REAL" "$WORK/a"
bindfs "$REAL" "$WORK/b"
A_PID= B_PID=
finish() {
  local rc=$?
  for p in $A_PID $B_PID; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  pkill -9 -f "$WORK/[ab]/hpo" 2>/dev/null || true
  sleep 0.2
  umount "$WORK/a" 2>/dev/null || umount -l "$WORK/a" 2>/dev/null || true
  umount "$WORK/b" 2>/dev/null || umount -l "$WORK/b" 2>/dev/null || true
  cleanup "$rc"
}
trap finish EXIT

# as HOST CMD...: CMD on its own host (a UTS namespace named HOST), with that host's view of the
# data directory.
exec_as() {
  local host=$1
  shift
  HPO_DATA_DIR=$WORK/${host#host-}/hpo exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}
as() { (exec_as "$@"); }
# start HOST: hpod of that host in the background; its pid in $PID_OF (the subshell execs it).
start() {
  (exec_as "$1" hpod --data-dir "$WORK/${1#host-}/hpo" --log-file "$WORK/${1#host-}.log" --cpus 4 \
    --store-mode exclusive --lock-stale 4s --dashboard none >>"$WORK/${1#host-}.err" 2>&1) &
  PID_OF=$!
}
alive() { kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ]; }
mkdir -p "$REAL/hpo"
chmod 700 "$REAL/hpo"

# --- two hpods at the same moment, one directory: one serves ---
start host-a
A_PID=$PID_OF
start host-b
B_PID=$PID_OF
wait_for "grep -qh 'ready' '$WORK/a.log' '$WORK/b.log' 2>/dev/null" 20
sleep 2
n=0
for p in $A_PID $B_PID; do alive "$p" && n=$((n + 1)); done
[ "$n" -eq 1 ] || fail "$n hpods serve one data directory: $(cat "$WORK/a.err" "$WORK/b.err")"
cat "$WORK/a.err" "$WORK/b.err" | has "another hpod" || fail "the loser did not say why: $(cat "$WORK/a.err" "$WORK/b.err")"
for p in $A_PID $B_PID; do
  if alive "$p"; then kill "$p"; wait "$p" 2>/dev/null || true; fi
done
[ ! -e "$REAL/hpo/hpod.lock" ] || fail "a clean stop left the lock: $(cat "$REAL/hpo/hpod.lock")"
echo "race: one of two hpods served"
: >"$WORK/a.log"
: >"$WORK/b.log"

# --- A frozen past the stale time; B takes over; A wakes and writes nothing ---
start host-a
A_PID=$PID_OF
wait_for "grep -q ready '$WORK/a.log'" 20
cat >"$WORK/sweep.yaml" <<YAML
command: "echo {x} >> $WORK/runs.log; for s in \$(seq 1 40); do hpo report --step \$s loss=\$s; sleep 0.25; done"
parameters: {x: [1, 2, 3]}
algorithm: grid
early_stopping: none
objective: {metric: loss, direction: minimize}
budget: {max_concurrent: 3}
YAML
id=$(as host-a hpo submit "$WORK/sweep.yaml" | tail -n 1)
wait_for "[ \$(as host-a hpo trials $id --state running | tail -n +2 | wc -l) -eq 3 ]" 20
sleep 1
kill -STOP "$A_PID"
sleep 5
start host-b
B_PID=$PID_OF
wait_for "grep -q 'held by hpod on host-a .*taken over' '$WORK/b.log'" 20
wait_for "grep -q ready '$WORK/b.log'" 20
sleep 2  # B takes reports
kill -CONT "$A_PID"
set +e
for _ in $(seq 1 150); do alive "$A_PID" || break; sleep 0.1; done
alive "$A_PID" && fail "A still runs 15 s after it was continued: $(tail -5 "$WORK/a.log")"
wait "$A_PID"
rc=$?
set -e
[ $rc -eq 75 ] || fail "A exited $rc, not 75: $(tail -5 "$WORK/a.err")"
grep -q "no longer holds" "$WORK/a.log" || fail "A did not say why it stopped: $(tail -5 "$WORK/a.log")"
alive "$B_PID" || fail "B stopped: $(tail -20 "$WORK/b.log")"
as host-b hpo wait "$id" --timeout 90 >/dev/null || fail "the sweep did not complete under B: $(as host-b hpo trials "$id")"
kill "$B_PID"
wait "$B_PID" 2>/dev/null || true
DB=$REAL/hpo/hpod.db
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity check: $(sqlite3 "$DB" 'PRAGMA integrity_check')"
[ "$(wc -l <"$WORK/runs.log")" -eq 3 ] || fail "trials started $(wc -l <"$WORK/runs.log") times: $(cat "$WORK/runs.log")"
[ "$(sqlite3 "$DB" "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_COMPLETED'")" -eq 3 ] ||
  fail "trials: $(sqlite3 "$DB" "SELECT id, state, message FROM trials")"
bad=$(sqlite3 "$DB" "SELECT trial_id || ':' || COUNT(*) || '/' || COUNT(DISTINCT step) FROM (SELECT trial_id, step FROM reports UNION ALL SELECT trial_id, step FROM report_log) GROUP BY trial_id HAVING COUNT(*) != 40 OR COUNT(DISTINCT step) != 40")
[ -z "$bad" ] || fail "reports missing or stored twice (trial:count/distinct): $bad"
pass "no two writers: of two starts one served; a frozen holder taken over woke, wrote nothing and exited; 3 trials once, 120 reports once"
