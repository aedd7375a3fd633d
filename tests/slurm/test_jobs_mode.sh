#!/usr/bin/env bash
# hpod on the Slurm backend, `jobs` mode (one batch job per trial), on a real 2-node cluster with
# 4 fake GPUs per node: trials get their own GPUs and report; a trial that exits non-zero is
# FAILED; a job scancel'ed from outside is LOST and retried; bad Slurm settings are refused at
# submit with Slurm's reason; canceling a sweep leaves nothing in squeue.
source "$(dirname "$0")/lib.sh"
cluster_up 2 4 8
start_hpod

cat >"$WORK/gpus.yaml" <<'YAML'
name: slurm-gpus
command: "echo \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $(date +%s.%N)\" > $HPO_TRIAL_DIR/gpu.txt; for s in 1 2 3; do hpo report --step $s loss=$(echo \"{x} / $s\" | bc -l) || exit 1; sleep 0.5; done; date +%s.%N >> $HPO_TRIAL_DIR/gpu.txt"
parameters:
  x: {type: int, low: 1, high: 100}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 8, max_concurrent: 4}
resources: {gpus: 2}
slurm: {mode: jobs, time_limit: 10m}
YAML
id=$(hpo submit "$WORK/gpus.yaml" | tail -n 1)
hpo wait "$id" --timeout 120 >/dev/null || fail "the GPU sweep did not complete"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 8 ] || fail "8 trials should complete"
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON t.id=r.trial_id WHERE t.sweep_id=$id")" -eq 24 ] || fail "24 reports expected"
hpo export "$id" --format csv >"$WORK/out" && grep -q "slurm:job=" "$WORK/out" || fail "export lacks the Slurm job ids"
hpo trials "$id" --where >"$WORK/out" && grep -q "slurm:job=[0-9]* nodes=n" "$WORK/out" || fail "hpo trials --where lacks job ids and nodes"
# No GPU of a node was held by two trials at once.
cat "$HPO_DATA_DIR"/sweeps/"$id"/trials/*/gpu.txt | paste - - >"$WORK/intervals"
$PY - "$WORK/intervals" <<'PYEOF'
import sys
rows = []
for line in open(sys.argv[1]):
    node, gpus, start, end = line.split()
    for g in gpus.split(","):
        rows.append((node, g, float(start), float(end)))
assert len(rows) == 16, rows
for i, a in enumerate(rows):
    for b in rows[i + 1:]:
        if a[0] == b[0] and a[1] == b[1]:
            assert a[3] <= b[2] or b[3] <= a[2], (a, b)
print("no GPU shared:", len(rows), "GPU intervals")
PYEOF

cat >"$WORK/fail.yaml" <<'YAML'
command: "if [ {x} -eq 1 ]; then exit 3; fi; sleep 4"
parameters: {x: [1, 2, 3]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 3}
slurm: {mode: jobs}
YAML
id=$(hpo submit "$WORK/fail.yaml" | tail -n 1)
wait_for "sql \"SELECT id FROM trials WHERE sweep_id=$id AND number=2\" | has ." 30
trial=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND number=2")
wait_for "squeue -h -n hpo-$id-$trial -o %i | has ." 20
scancel "$(squeue -h -n "hpo-$id-$trial" -o %i)"
hpo wait "$id" --timeout 90 >/dev/null || fail "the failure sweep did not complete"
[ "$(sql "SELECT state FROM trials WHERE sweep_id=$id AND number=0")" = TRIAL_STATE_FAILED ] || fail "exit 3 should be FAILED"
[ "$(sql "SELECT exit_code FROM trials WHERE sweep_id=$id AND number=0")" -eq 3 ] || fail "exit code 3 not recorded"
[ "$(sql "SELECT state FROM trials WHERE id=$trial")" = TRIAL_STATE_LOST ] || fail "a job scancel'ed outside should be LOST"
[ "$(sql "SELECT interruption FROM trials WHERE id=$trial")" = INTERRUPTION_CANCELED_OUTSIDE ] \
  || fail "the outside scancel is not the trial's interruption: $(sql "SELECT interruption FROM trials WHERE id=$trial")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE retry_of=$trial AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] || fail "the lost trial was not retried"

sed 's/slurm: {mode: jobs}/slurm: {mode: jobs, partition: nosuch}/' "$WORK/fail.yaml" >"$WORK/badpart.yaml"
hpo submit "$WORK/badpart.yaml" 2>"$WORK/err" && fail "an unknown partition was accepted"
grep -q "Invalid partition" "$WORK/err" || fail "unclear partition error: $(cat "$WORK/err")"
sed 's/resources: {gpus: 2}/resources: {gpus: 5}/' "$WORK/gpus.yaml" >"$WORK/badgpu.yaml"
hpo submit "$WORK/badgpu.yaml" 2>"$WORK/err" && fail "more GPUs than a node has was accepted"
grep -q "not available" "$WORK/err" || fail "unclear GPU error: $(cat "$WORK/err")"

# A 2-node trial with 2 tasks per node is one step over both nodes; rank 0 reports.
cat >"$WORK/multi.yaml" <<'YAML'
command: "echo \"$SLURM_PROCID $SLURMD_NODENAME\" >> $HPO_TRIAL_DIR/ranks.txt; if [ \"$SLURM_PROCID\" = 0 ]; then hpo report --step 1 loss=1; fi"
parameters: {x: [1]}
objective: {metric: loss, direction: minimize}
algorithm: grid
resources: {nodes: 2, tasks_per_node: 2, gpus: 1}
slurm: {mode: jobs}
YAML
id=$(hpo submit "$WORK/multi.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the 2-node trial did not complete"
ranks=$(sort "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt" | tr '\n' ' ')
[ "$ranks" = "0 n1 1 n1 2 n2 3 n2 " ] || fail "a 2x2 trial ran as '$ranks'"
[ "$(sql "SELECT report_count FROM trials WHERE sweep_id=$id")" -eq 1 ] || fail "rank 0 should report once"
hpo trials "$id" --where >"$WORK/out" && grep -q "nodes=n\[1-2\]" "$WORK/out" || fail "the trial's node list is not recorded"

sed 's/sleep 4/sleep 300/; s/exit 3/sleep 300/' "$WORK/fail.yaml" >"$WORK/long.yaml"
id=$(hpo submit "$WORK/long.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $id --state running | tail -n +2 | wc -l) -eq 3 ]" 30
hpo cancel "$id" | has CANCELED || fail "cancel did not end CANCELED"
wait_for "[ \$(jobs_left) -eq 0 ]" 20
# hpod killed (-9) while jobs run and others wait in Slurm's queue, and down for 2 s: the
# restarted daemon finds every job again (by id, or by name for those not started), takes the
# outcome of jobs that ended meanwhile from slurmctld, and nothing is lost or run twice.
cat >"$WORK/crash.yaml" <<'YAML'
command: "echo run >> $HPO_TRIAL_DIR/runs.txt; for s in 1 2 3; do hpo report --step $s loss={x} || exit 1; sleep 0.5; done; [ {x} -ne 2 ] || exit 3"
parameters: {x: [1, 2, 3, 4, 5, 6]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 6}
resources: {gpus: 4}
slurm: {mode: jobs}
YAML
id=$(hpo submit "$WORK/crash.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $id --state running | tail -n +2 | wc -l) -ge 2 ]" 30
crash_hpod 2
hpo wait "$id" --timeout 120 >/dev/null
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 6 ] || fail "6 trials, none retried: $(sql "SELECT id, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 5 ] || fail "5 trials should complete: $(sql "SELECT id, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT state || ' ' || exit_code FROM trials WHERE sweep_id=$id AND number=1")" = "TRIAL_STATE_FAILED 3" ] || fail "x=2 should fail with exit code 3"
adopted=$(grep -c "re-adopted Slurm job" "$HPO_DATA_DIR/hpod.log" || true)
[ "$adopted" -ge 4 ] || fail "expected the running and queued jobs to be re-adopted, got $adopted"
for t in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  [ "$(wc -l <"$t/runs.txt")" -eq 1 ] || fail "$t ran $(wc -l <"$t/runs.txt") times"
done
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON t.id=r.trial_id WHERE t.sweep_id=$id")" -eq 18 ] || fail "18 reports expected, each once"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check after the restart"
wait_for "[ \$(jobs_left) -eq 0 ]" 20

# A node that goes DOWN under a running trial: its job ends NODE_FAIL, the trial is LOST as an
# infrastructure failure (not FAILED), and its retry runs on the node that is left.
cat >"$WORK/down.yaml" <<'YAML'
command: "echo $SLURMD_NODENAME >> $HPO_TRIAL_DIR/node.txt; sleep 4; hpo report loss={x}"
parameters: {x: [1, 2]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 2}
resources: {gpus: 4}
max_retries: 2
slurm: {mode: jobs}
YAML
id=$(hpo submit "$WORK/down.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $id --state running | tail -n +2 | wc -l) -eq 2 ]" 30
scontrol update NodeName=n2 State=DOWN Reason=hpo-test
hpo wait "$id" --timeout 90 >/dev/null || fail "the sweep did not complete after a node went down"
scontrol update NodeName=n2 State=RESUME 2>/dev/null || true  # (it may be back already)
lost=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST' AND infra_failure=1")
[ "$lost" -eq 1 ] || fail "the trial on the DOWN node should be LOST (infrastructure): $(sql "SELECT id, state, infra_failure, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_FAILED'")" -eq 0 ] || fail "a node failure must not count as a failed configuration"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED' AND retry_of != 0")" -eq 1 ] || fail "the lost trial was not retried to completion"
why=$(sql "SELECT message FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'")
cause=$(sql "SELECT interruption FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'")
[ "$cause" = INTERRUPTION_NODE_FAILURE ] || fail "the DOWN node is not the trial's interruption: $cause ($why)"
hpo export "$id" --format csv | has ",node_failure," || fail "the export lacks the interruption"
wait_for "[ \$(jobs_left) -eq 0 ]" 20
pass "jobs mode: GPUs disjoint, FAILED/LOST/retry right, bad settings refused, cancel leaves squeue empty, $adopted job(s) re-adopted after kill -9, node DOWN -> LOST ($why) and retried"
