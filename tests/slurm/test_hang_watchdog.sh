#!/usr/bin/env bash
# The hang watchdog and fail-fast on the throwaway cluster, in steps mode (the signal reaches the step through
# slurmctld) and jobs mode (through the job): a trainer that stops reporting after three steps
# and keeps running gets the health signal (it writes down its "stacks"), is stopped, ends LOST
# as hung, and its retry completes; its sibling, which slows down by a factor of 3, is untouched.
# Then a steps-mode sweep with a typo in its command is paused after its first 3 trials, with the
# line their stderr ends with.
source "$(dirname "$0")/lib.sh"
cluster_up 1 4 8
start_hpod
for mode in steps jobs; do
  mkdir -p "$WORK/$mode"
  cat >"$WORK/$mode.yaml" <<YAML
name: hang-$mode
command: "sh $HPO_SRC/tests/fixtures/hang_trainer.sh {kind} $WORK/$mode 0.5 1.5"
parameters: {kind: [hangs, slows]}
objective: {metric: loss, direction: minimize}
algorithm: grid
early_stopping: none
budget: {max_concurrent: 2, max_failed: 1}
resources: {gpus: 1, cpus: 1}
health: {report_timeout: auto, factor: 5, floor: 6s, signal: SIGUSR1, grace: 2s}
stop_grace: 2s
slurm:
  mode: $mode
  allocation: {gpus_per_node: 2, cpus_per_node: 4, max: 1}
YAML
done
steps=$(hpo submit "$WORK/steps.yaml" | tail -n 1)
jobs=$(hpo submit "$WORK/jobs.yaml" | tail -n 1)
for id in $steps $jobs; do
  hpo wait "$id" --timeout 180 >/dev/null || fail "sweep $id did not complete: $(hpo trials "$id" --where)"
  [ "$(sql "SELECT state FROM sweeps WHERE id=$id")" = SWEEP_STATE_COMPLETED ] \
    || fail "sweep $id did not complete: $(sql "SELECT state, message FROM sweeps WHERE id=$id")"
  hung=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST' AND interruption='INTERRUPTION_HUNG'")
  [ -n "$hung" ] || fail "sweep $id: no trial ended LOST as hung: $(sql "SELECT id, state, interruption, message FROM trials WHERE sweep_id=$id")"
  dir=$(sql "SELECT trial_dir FROM trials WHERE id=$hung")
  grep -q "stacks of" "$dir/stacks.txt" 2>/dev/null || fail "sweep $id: the hung trial did not get the health signal first"
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE retry_of=$hung AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] \
    || fail "sweep $id: the hung trial was not retried"
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND params_json LIKE '%slows%' AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] \
    || fail "sweep $id: the trainer that slowed down was caught: $(sql "SELECT state, message FROM trials WHERE sweep_id=$id AND params_json LIKE '%slows%'")"
  hpo trials "$id" | has "hung" || fail "sweep $id: hpo trials does not show the cause"
done
wait_for "[ \$(jobs_left) -eq 0 ]" 60
pass "steps and jobs mode: a hung trial gets the signal, is stopped, LOST as hung and retried; one that slowed 3x is untouched"

cat >"$WORK/typo.yaml" <<YAML
name: typo
command: "sh $WORK/trian.sh {x}"
parameters: {x: [1, 2, 3, 4, 5, 6, 7, 8]}
objective: {metric: loss, direction: minimize}
algorithm: grid
early_stopping: none
budget: {max_concurrent: 1, max_failed: 8}
resources: {gpus: 1, cpus: 1}
slurm: {allocation: {gpus_per_node: 2, cpus_per_node: 4, max: 1}}
YAML
id=$(hpo submit "$WORK/typo.yaml" | tail -n 1)
wait_for "[ \"\$(sql \"SELECT state FROM sweeps WHERE id=$id\")\" = SWEEP_STATE_PAUSED ]" 60
sql "SELECT message FROM sweeps WHERE id=$id" | has "its first 3 trials all failed within 1m the same way (exit code 2): sh: 0: cannot open $WORK/trian.sh" \
  || fail "unclear pause: $(sql "SELECT message FROM sweeps WHERE id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 3 ] || fail "trials started after the pause"
hpo cancel "$id" >/dev/null
wait_for "[ \$(jobs_left) -eq 0 ]" 60
pass "a typo pauses a steps-mode sweep after 3 trials, with its error line"
