#!/usr/bin/env bash
# The store as on a network file system (--store-mode exclusive: WAL without shared memory, one
# connection), and the data directory's lock across hosts: a second hpod is refused with the
# holder named, another host's hpod that beat lately keeps the directory, a silent one is taken
# over, and a clean stop frees the lock at once.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 --store-mode exclusive >/dev/null
wait_for "grep -q 'held by this hpod alone' $HPO_DATA_DIR/hpod.log" 5
cat >"$WORK/s.yaml" <<'YAML'
command: "hpo report --step 1 loss={x}"
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 4, max_concurrent: 2}
YAML
id=$(hpo submit "$WORK/s.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete on an exclusive store"
[ "$(hpo trials "$id" --state completed | tail -n +2 | wc -l)" -eq 4 ] || fail "expected 4 completed trials"
[ ! -e "$HPO_DATA_DIR/hpod.db-shm" ] || fail "an exclusive store has a shared-memory index"
# Nobody else reads the file while hpod holds it.
! sqlite3 "$HPO_DATA_DIR/hpod.db" "SELECT COUNT(*) FROM trials" >/dev/null 2>&1 || fail "the store was readable by another connection"
host=$(hostname)
set +e
said=$(hpod --data-dir "$HPO_DATA_DIR" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "a second hpod started"
echo "$said" | has "another hpod already runs for .*hpod on $host (pid" || fail "the second hpod was not told who holds it: $said"
hpo daemon stop >/dev/null
[ ! -s "$HPO_DATA_DIR/hpod.lock" ] || fail "a clean stop left the lock file naming a holder"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_COMPLETED'")" -eq 4 ] || fail "the store lost trials"

# Another host's hpod that beat 5 s ago (as when the file system does not carry flock across
# hosts): the directory stays its own.
echo "nid004 4242 777 $(($(date +%s) - 5))" >"$HPO_DATA_DIR/hpod.lock"
set +e
said=$(hpod --data-dir "$HPO_DATA_DIR" --cpus 2 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "hpod started while another host's hpod holds the directory"
echo "$said" | has "hpod on nid004 (pid 4242, Slurm job 777), last seen" || fail "the holder is not named: $said"
# Silent for a minute: taken over, and the log says from whom.
echo "nid004 4242 777 $(($(date +%s) - 60))" >"$HPO_DATA_DIR/hpod.lock"
hpo daemon start --cpus 2 >/dev/null
wait_for "grep -q 'held by hpod on nid004 (pid 4242, Slurm job 777).*taken over' $HPO_DATA_DIR/hpod.log" 5
grep -q "^$host " "$HPO_DATA_DIR/hpod.lock" || fail "the lock does not name this host"
pass "exclusive store ran a sweep with no -shm and kept others out; the lock named its holder, kept a live one's directory and took a silent one's"
