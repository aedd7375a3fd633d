#!/usr/bin/env bash
# hpod as a job reaches its time limit mid-sweep and hands over (docs/operations.md, "hpod as a
# Slurm job"):
#  - hpod runs as a job from the start (`hpo daemon start --as-job`) with a two-minute limit
#    and SIGTERM asked for a minute before it (the test's stand-in for the script's two
#    minutes before a longer limit);
#  - a steps-mode sweep runs longer than that job; at the SIGTERM hpod stops leaving the trials
#    running and queues the next job itself (singleton), which starts once the first ended,
#    takes the trials and the allocation back, and runs the sweep to its end;
#  - every trial ran once, every report is stored once.
source "$(dirname "$0")/lib.sh"
cluster_up 1 4 8

hpo daemon start --as-job='--cpus-per-task=1 --time=2 --signal=B:TERM@60' --backend slurm \
  >"$WORK/out" 2>&1 || fail "hpo daemon start --as-job: $(cat "$WORK/out")"
first=$(squeue -h -n hpod -o %i)
[ -n "$first" ] || fail "no hpod job in the queue: $(squeue)"
cat >"$WORK/long.yaml" <<'YAML'
name: long
command: "echo start >> $HPO_TRIAL_DIR/starts; for i in $(seq 1 50); do hpo report --step $i loss=$(( {x} + i )); sleep 1; done"
parameters:
  x: [1, 2, 3, 4]
algorithm: grid
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 4, max_concurrent: 2}
resources: {gpus: 1, cpus: 1}
slurm:
  allocation: {gpus_per_node: 2, cpus_per_node: 2, max: 1}
YAML
id=$(hpo submit "$WORK/long.yaml" | tail -n 1)
# The time limit's SIGTERM: hpod leaves the trials and queues its successor.
wait_for "grep -q 'handed over to job' '$HPO_DATA_DIR/hpod.log'" 240 ||
  fail "hpod did not hand over: $(tail -20 "$HPO_DATA_DIR/hpod.log"; squeue)"
second=$(grep -o 'handed over to job [0-9]*' "$HPO_DATA_DIR/hpod.log" | head -n 1 | awk '{print $NF}')
[ "$second" != "$first" ] || fail "the next job is the same job"
grep -q "signal 15: shutting down, leaving the trials running" "$HPO_DATA_DIR/hpod.log" ||
  fail "the SIGTERM did not leave the trials running: $(tail -20 "$HPO_DATA_DIR/hpod.log")"
wait_for "hpo daemon status 2>/dev/null | has 'Slurm job $second'" 180 ||
  fail "the next job does not serve: $(hpo daemon status 2>&1; squeue; tail -20 "$HPO_DATA_DIR/hpod.log")"
hpo wait "$id" --timeout 300 >/dev/null || fail "the sweep did not complete: $(hpo trials "$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 4 ] ||
  fail "no trial should be retried: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 4 ] ||
  fail "every trial should complete: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
for t in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  [ "$(wc -l <"$t/starts")" -eq 1 ] || fail "$t ran $(wc -l <"$t/starts") times"
done
[ "$(sql "SELECT COUNT(DISTINCT r.trial_id || '/' || r.step) || ' ' || COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id")" = "200 200" ] ||
  fail "200 reports expected once each: $(sql "SELECT t.number, COUNT(*), COUNT(DISTINCT r.step) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id GROUP BY t.number")"
hpo daemon stop >/dev/null || fail "hpo daemon stop did not stop the next job's hpod"
wait_for "[ -z \"\$(squeue -h -n hpod -o %i)\" ]" 60 || fail "hpod jobs left: $(squeue)"
pass "hpod's job reached its time limit mid-sweep and handed over to job $second; 4 trials ran once, 200 reports stored once"
