#!/usr/bin/env bash
# A trial of two tasks on two nodes (steps mode, srun --label) where one rank fails and the other
# then says so. When rank 1 raises (a bug in the trainer) and rank 0 prints NCCL's "remote
# process exited", the trial is FAILED, the configuration's fault: the built-in NCCL rule reads
# the output of the task srun says failed first, not every rank's; such trials count toward
# fail-fast, which pauses the sweep, and no node is blamed. When rank 1's GPU fails (an ECC
# error), the trial is LOST as the infrastructure's, and only rank 1's node counts the failure.
source "$(dirname "$0")/lib.sh"
cluster_up 2 1 2
start_hpod
cat >"$WORK/train.sh" <<'SH'
#!/bin/sh
# $1: how rank 1 fails (raises, ecc); $2: a directory both ranks see.
m="$2/$HPO_TRIAL_ID"
if [ "$SLURM_PROCID" = 1 ]; then
  if [ "$1" = raises ]; then
    echo "Traceback (most recent call last):" >&2
    echo "ValueError: learning rate must be positive" >&2
  else
    echo "RuntimeError: CUDA error: uncorrectable ECC error encountered" >&2
  fi
  touch "$m.failed"
  # Rank 0 speaks before this rank's end is known, as NCCL's watchdog does.
  for _ in $(seq 1 100); do [ -e "$m.told" ] && break; sleep 0.1; done
  exit 1
fi
for _ in $(seq 1 100); do [ -e "$m.failed" ] && break; sleep 0.1; done
echo "RuntimeError: NCCL error: remote process exited or there was a network error" >&2
touch "$m.told"
sleep 60
SH
sweep() {  # sweep HOW
  mkdir -p "$WORK/$1"
  cat <<YAML
name: rank-$1
command: "sh $WORK/train.sh $1 $WORK/$1"
parameters: {x: [1, 2, 3, 4, 5, 6]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 1, max_failed: 10}
max_retries: 0
resources: {nodes: 2, gpus: 1, cpus: 1}
failures: {quarantine_after: 5}
slurm:
  mode: steps
  allocation: {nodes: 2, gpus_per_node: 1, cpus_per_node: 2, max: 1}
YAML
}
sweep raises >"$WORK/raises.yaml"
id=$(hpo submit "$WORK/raises.yaml" | tail -n 1)
wait_for "[ \"\$(sql \"SELECT state FROM sweeps WHERE id=$id\")\" = SWEEP_STATE_PAUSED ]" 180 \
  || fail "fail-fast did not pause the sweep: $(hpo trials "$id" --where)"
sql "SELECT message FROM sweeps WHERE id=$id" | has "its first 3 trials all failed within" \
  || fail "paused, but not by fail-fast: $(sql "SELECT message FROM sweeps WHERE id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_FAILED'")" -eq 3 ] \
  || fail "not 3 FAILED trials: $(sql "SELECT id, state, interruption, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'")" -eq 0 ] \
  || fail "a rank's bug was taken for the infrastructure's: $(sql "SELECT message FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'")"
dir=$(sql "SELECT trial_dir FROM trials WHERE sweep_id=$id LIMIT 1")
grep -q "^1: ValueError" "$dir/stderr.log" || fail "the step's stderr is not labeled by task: $(cat "$dir/stderr.log")"
grep -q "^0: RuntimeError: NCCL error: remote process exited" "$dir/stderr.log" || fail "rank 0 did not speak: $(cat "$dir/stderr.log")"
grep -q "^srun: error: .*: task 1: Exited with exit code 1" "$dir/stderr.log" || fail "srun did not name the task: $(cat "$dir/stderr.log")"
hpo nodes "$id" | grep -Eq "^n[12] +(quarantined|in use) +[1-9]" && fail "a node was blamed: $(hpo nodes "$id")"
hpo cancel "$id" >/dev/null
pass "one rank raises, the other prints NCCL's remote-process error: FAILED, fail-fast pauses the sweep, no node blamed"

sweep ecc >"$WORK/ecc.yaml"
id=$(hpo submit "$WORK/ecc.yaml" | tail -n 1)
wait_for "[ \"\$(sql \"SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'\")\" -ge 2 ]" 180 \
  || fail "the ECC failures were not LOST: $(sql "SELECT id, state, message FROM trials WHERE sweep_id=$id")"
t=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST' LIMIT 1")
sql "SELECT interruption || ' ' || message FROM trials WHERE id=$t" | has "INTERRUPTION_NODE_FAILURE the infrastructure failed it (stderr /uncorrectable ECC error/)" \
  || fail "unclear cause: $(sql "SELECT interruption, message FROM trials WHERE id=$t")"
culprit=$(grep -h "task 1: Exited" "$(sql "SELECT trial_dir FROM trials WHERE id=$t")/stderr.log" | sed -E 's/^srun: error: ([^:]+): .*/\1/')
other=$([ "$culprit" = n1 ] && echo n2 || echo n1)
hpo nodes "$id" >"$WORK/nodes"
grep -Eq "^$culprit +in use +[1-9]" "$WORK/nodes" || fail "rank 1's node $culprit does not count the failure: $(cat "$WORK/nodes")"
grep -Eq "^$other +in use +0 " "$WORK/nodes" || fail "rank 0's node $other was blamed too: $(cat "$WORK/nodes")"
hpo cancel "$id" >/dev/null
wait_for "[ \$(jobs_left) -eq 0 ]" 60
pass "rank 1's GPU fails: LOST as the infrastructure's, counted against its node ($culprit) only"
