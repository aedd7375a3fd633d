#!/usr/bin/env bash
# hpod away for longer than slurmctld remembers an ended job (MinJobAge, 2 s on this cluster; its
# purge runs once a minute), in both modes, with trials that end while it is away: each gets its
# true outcome (exit 0 COMPLETED, exit 3 FAILED with its code), none is LOST, retried or run twice.
# Steps mode: from the allocation's agent; jobs mode: from the exit record hpo-shim wrote into
# the trial directory.
source "$(dirname "$0")/lib.sh"
cluster_up 1 4 8 --min-job-age 2
start_hpod

for mode in steps jobs; do
  cat >"$WORK/$mode.yaml" <<YAML
name: away-$mode
command: "echo start >> \$HPO_TRIAL_DIR/starts; hpo report --step 1 loss={x}; sleep 6; hpo report --step 2 loss={x}; exit {x}"
parameters:
  x: [0, 3]
algorithm: grid
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 2}
resources: {gpus: 1, cpus: 1}
slurm:
  mode: $mode
  allocation: {gpus_per_node: 2, cpus_per_node: 4, max: 1}
YAML
done
steps=$(hpo submit "$WORK/steps.yaml" | tail -n 1)
jobs=$(hpo submit "$WORK/jobs.yaml" | tail -n 1)
wait_for "[ \$(sql \"SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_RUNNING' AND report_count >= 1\") -eq 4 ]" 60
job_ids=$(sql "SELECT backend_id FROM trials WHERE sweep_id=$jobs" | sed 's/slurm:job=\([0-9]*\).*/\1/' | paste -s -d ' ')
kill -9 "$HPOD_PID"
wait "$HPOD_PID" 2>/dev/null || true
# Away until slurmctld has forgotten the trials' jobs.
gone() { for j in $job_ids; do scontrol show job "$j" >/dev/null 2>&1 && return 1; done; return 0; }
wait_for gone 150
echo "slurmctld forgot jobs $job_ids"
start_hpod
for id in $steps $jobs; do
  hpo wait "$id" --timeout 120 >/dev/null || true
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 2 ] \
    || fail "sweep $id: no trial should be retried: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
  got=$(sql "SELECT json_extract(params_json, '\$.x') || ' ' || state || ' ' || exit_code FROM trials WHERE sweep_id=$id ORDER BY number" | paste -s -d ',')
  [ "$got" = "0 TRIAL_STATE_COMPLETED 0,3 TRIAL_STATE_FAILED 3" ] \
    || fail "sweep $id: outcomes after hpod was away past MinJobAge: $got ($(sql "SELECT number, message FROM trials WHERE sweep_id=$id"))"
done
for t in "$HPO_DATA_DIR"/sweeps/*/trials/*; do
  [ "$(wc -l <"$t/starts")" -eq 1 ] || fail "$t ran $(wc -l <"$t/starts") times"
done
grep -q "no longer known; its exit record says" "$HPO_DATA_DIR/hpod.log" || fail "the jobs-mode outcomes did not come from the exit records"
pass "hpod away past MinJobAge: steps and jobs mode trials that ended meanwhile got their true outcomes (COMPLETED, FAILED exit 3), none lost or run twice"
