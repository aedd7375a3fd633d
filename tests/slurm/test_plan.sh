#!/usr/bin/env bash
# hpo plan --pilot on the throwaway cluster, steps mode: the pilot is a sweep of its own whose
# trials run as steps in an allocation through its agent, 2 random configurations stopped at
# their third report; the plan learns a step's time and a trainer's start from them and adds
# slurmctld's queue wait. The sweep then runs, and the trials' GPU-hours and the sweep's wall
# time are set against the plan.
source "$(dirname "$0")/lib.sh"
cluster_up 1 2 4
start_hpod
# Each report waits for hpod's answer (HPO_REPORT_WAIT), so that the pilot's stop reaches its
# trials with their third report even on a loaded machine, not with the fourth.
cat >"$WORK/train.sh" <<'SH'
#!/bin/sh
sleep 1
for s in 1 2 3 4 5 6; do sleep 0.4; HPO_REPORT_WAIT=10s hpo report --step "$s" loss=$(echo "$1 / $s" | bc -l) || exit 1; done
SH
cat >"$WORK/sweep.yaml" <<YAML
name: planned
command: "sh $WORK/train.sh {x}"
parameters: {x: {type: float, low: 0, high: 1}}
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 6, max_concurrent: 2}
resources: {gpus: 1, cpus: 1}
plan: {steps: 6}
slurm:
  allocation: {gpus_per_node: 2, cpus_per_node: 2, max: 1}
YAML
hpo plan "$WORK/sweep.yaml" --pilot --pilot-trials 2 --pilot-steps 3 >"$WORK/plan.txt" 2>"$WORK/pilot.err" \
  || fail "hpo plan --pilot: $(cat "$WORK/plan.txt" "$WORK/pilot.err")"
pilot=$(sed -n "s/^pilot: sweep \([0-9]*\) 'planned-pilot', 2 trial(s) of 3 step(s), 2 at a time$/\1/p" "$WORK/pilot.err")
[ -n "$pilot" ] || fail "hpo plan --pilot said: $(cat "$WORK/pilot.err")"
[ "$(sql "SELECT GROUP_CONCAT(state || ':' || step) FROM trials WHERE sweep_id=$pilot")" = "TRIAL_STATE_STOPPED:3,TRIAL_STATE_STOPPED:3" ] \
  || fail "the pilot's trials: $(sql "SELECT state, step, message, backend_id FROM trials WHERE sweep_id=$pilot")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$pilot AND backend_id LIKE '% agent'")" = 2 ] \
  || fail "the pilot's trials did not run through the allocation's agent"
# Right after the pilot its node may still be cleaned: slurmctld then finds no start time.
grep -Eq "^  queue wait +([0-9.]+m?s \(slurmctld's will_run|unknown: slurmctld finds no start time) for the sweep's first allocation" "$WORK/plan.txt" \
  || fail "no queue wait: $(cat "$WORK/plan.txt")"
grep -q "to start (sweep $pilot's 2 finished trial(s), on average)" "$WORK/plan.txt" \
  || fail "the plan's basis: $(cat "$WORK/plan.txt")"
planned_gpu=$(sed -n 's/^  GPU-hours   \([0-9.]*\).*/\1/p' "$WORK/plan.txt")
planned_wall=$(sed -n 's/^  wall time   \([0-9.]*\)s.*/\1/p' "$WORK/plan.txt")
id=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
hpo wait "$id" --timeout 180 >/dev/null || fail "the sweep did not complete: $(hpo trials "$id")"
used_gpu=$(sql "SELECT SUM(gpu_seconds) / 3600.0 FROM trials WHERE sweep_id=$id")
used_wall=$(sql "SELECT ended_at - created_at FROM sweeps WHERE id=$id")
# The trials' GPU-hours within 35% of the plan; the wall time also holds the allocation's start.
awk -v p="$planned_gpu" -v u="$used_gpu" 'BEGIN { exit !(p > 0 && u > 0 && p / u > 0.65 && p / u < 1.35) }' \
  || fail "planned ${planned_gpu} GPU-hours, the trials used ${used_gpu}"
awk -v p="$planned_wall" -v u="$used_wall" 'BEGIN { exit !(p > 0 && u < 2 * p + 30 && p < 2 * u) }' \
  || fail "planned ${planned_wall} s of wall time, the sweep took ${used_wall} s"
pass "hpo plan --pilot on Slurm: the pilot's 2 trials ran as steps through the agent; planned $(printf %.4f "$planned_gpu") GPU-hours and ${planned_wall} s, the trials used $(printf %.4f "$used_gpu") and the sweep ${used_wall%.*} s"
