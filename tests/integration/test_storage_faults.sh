#!/usr/bin/env bash
# Storage faults on a real hpod whose data directory is a small tmpfs:
#  - the disk fills up mid-sweep: hpod says so, refuses new sweeps with a clear error, holds its
#    trials' reports off (the reporting client retries them), and carries on once there is room;
#    every report ends up stored exactly once, no trial is failed or lost for it, and the store
#    passes SQLite's integrity check;
#  - a read-only data directory: hpod refuses to start with a clear error, and after the
#    directory is writable again starts with everything intact.
# Needs root (mount); skipped without it, except in CI.
source "$(dirname "$0")/lib.sh"
if [ "$(id -u)" -ne 0 ]; then
  if [ "${CI:-}" = true ]; then fail "CI runs as root: the storage-fault test must run"; fi
  echo "SKIP: needs root to mount a small file system"; exit 77
fi
FS=$(mktemp -d /tmp/hpo-fs.XXXXXX)
mount -t tmpfs -o size=6m,mode=0700 tmpfs "$FS" || fail "cannot mount a tmpfs as root"
storage_cleanup() {
  local rc=$?
  hpo daemon stop >/dev/null 2>&1 || true
  [ $rc -ne 0 ] && tail -n 30 "$WORK/hpod.log" >&2
  umount "$FS" 2>/dev/null || umount -l "$FS"
  rmdir "$FS"
  cleanup "$rc"
}
trap storage_cleanup EXIT
rm -rf "$HPO_DATA_DIR"
export HPO_DATA_DIR=$FS/data
start() { hpod --data-dir "$HPO_DATA_DIR" --cpus 4 --log-file "$WORK/hpod.log" "$@" & }
start
wait_for "hpo daemon status" 10

cat >"$WORK/steps.yaml" <<'YAML'
command: "for s in $(seq 1 40); do hpo report --step $s loss=$(echo \"{x} / $s\" | bc -l) || exit 1; sleep 0.1; done"
parameters:
  x: {type: int, low: 1, high: 1000}
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 8, max_concurrent: 4}
YAML
id=$(hpo submit "$WORK/steps.yaml" | tail -n 1)
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS\") -ge 40 ]" 30

# Fill the disk.
dd if=/dev/zero of="$FS/filler" bs=64k 2>/dev/null || true
wait_for "grep -q 'cannot write its data' $WORK/hpod.log" 20
if hpo submit "$WORK/steps.yaml" >"$WORK/out" 2>"$WORK/err"; then fail "a sweep was accepted on a full disk"; fi
grep -q "refuses new sweeps while it cannot write its data" "$WORK/err" || fail "unclear refusal: $(cat "$WORK/err")"
hpo show "$id" >/dev/null || fail "reading must still work on a full disk"
sleep 2
rm -f "$FS/filler"
wait_for "grep -q 'can be written again' $WORK/hpod.log" 20
hpo wait "$id" --timeout 120 >/dev/null || fail "the sweep did not complete after the disk had room again"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 8 ] \
  || fail "8 trials should complete: $(sql "SELECT id, state, message FROM trials WHERE sweep_id=$id")"
bad=$(sql "SELECT trial_id || ':' || COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS GROUP BY trial_id HAVING COUNT(*) != 40 OR COUNT(DISTINCT step) != 40")
[ -z "$bad" ] || fail "reports lost or stored twice (trial:count/distinct steps): $bad"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check after the full disk"
new=$(hpo submit "$WORK/steps.yaml" | tail -n 1) || fail "no new sweep after the disk had room again"
hpo cancel "$new" >/dev/null

# A read-only data directory.
hpo daemon stop >/dev/null
mount -o remount,ro "$FS"
if hpod --data-dir "$HPO_DATA_DIR" --log-file "$WORK/ro.log" 2>"$WORK/err"; then fail "hpod started on a read-only data directory"; fi
grep -q "Read-only file system" "$WORK/err" || fail "unclear read-only error: $(cat "$WORK/err")"
mount -o remount,rw "$FS"
start
wait_for "hpo daemon status" 10
[ "$(hpo show "$id" | grep -c COMPLETED)" -ge 1 ] || fail "the sweep is not intact after the read-only start"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check after the read-only start"
pass "disk full mid-sweep: new sweeps refused, 8 trials x 40 reports stored once, store intact; read-only data dir: clear refusal to start"
