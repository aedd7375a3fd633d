#!/usr/bin/env bash
# hpod killed with kill -9 at seeded random instants, many times, during a steps-mode and a
# jobs-mode sweep with ASHA, with short (under a second) and longer trials, some of which ignore
# being told to stop (so hpod signals them), and a steps-mode sweep of resumable trials longer
# than its 1-minute allocations (more kills come while they move to the next allocation). Every
# trial writes a marker when each segment starts. Checks:
#  - no segment started twice (each marker once; a retried trial is a new trial), and the
#    resumable trials did continue in new segments;
#  - every trial ends in the right state: none FAILED (the trials never fail on their own), none
#    LOST, and every trial with a stop decision ends in that state (no stopped trial FAILED with
#    the stop signal's exit code);
#  - every report is stored once;
#  - step ids and node lists are recorded for every steps-mode trial, short ones included;
#  - nothing is left in squeue, and SQLite's integrity check says ok.
# CRASH_SEED replays a run (the seed is printed: it fixes the sweeps and the kill instants, the
# machine's timing still varies); CRASH_KILLS (default 6) sets how many kills;
# scripts/crash-test.sh runs long versions.
source "$(dirname "$0")/lib.sh"
SEED=${CRASH_SEED:-$(( $(date +%s%N) % 1000000 ))}
KILLS=${CRASH_KILLS:-6}
echo "crash test: seed $SEED, $KILLS kills (CRASH_SEED=$SEED CRASH_KILLS=$KILLS replays it)"
RANDOM=$SEED
cluster_up 3 4 8
start_hpod

MARKERS=$WORK/markers
: >"$MARKERS"
cat >"$WORK/trial.sh" <<'SH'
#!/bin/sh
# A trial: its start marker, then `epochs` epochs of `pause` seconds each, reporting loss after
# each. Told to stop (hpo report exits 10), it exits 0, or with `stubborn` it keeps going until
# hpod signals it (SIGTERM: exit 143).
echo "$HPO_TRIAL_ID.$HPO_SEGMENT" >>"$1"
x=$2 epochs=$3 pause=$4 stubborn=$5
s=1
while [ "$s" -le "$epochs" ]; do
  sleep "$pause"
  hpo report --step "$s" loss="$(echo "$x / $s" | bc -l)"
  rc=$?
  if [ "$rc" -eq 10 ] && [ "$stubborn" -eq 0 ]; then exit 0; fi
  s=$((s + 1))
done
SH
chmod +x "$WORK/trial.sh"
cat >"$WORK/resumable.sh" <<'SH'
#!/bin/sh
# A resumable trial: its segment's marker, then epochs of 2 s from the one after its checkpoint
# (the last epoch it finished), reporting each. Told to checkpoint (SIGUSR1, or Slurm's SIGTERM),
# it finishes the epoch, saves, and exits 0.
echo "$HPO_TRIAL_ID.$HPO_SEGMENT" >>"$1"
x=$2 epochs=$3 told=0
trap 'told=1' USR1 TERM
s=$(( $(cat "$HPO_CHECKPOINT_IN" 2>/dev/null || echo 0) + 1 ))
while [ "$s" -le "$epochs" ]; do
  sleep 2
  hpo report --step "$s" loss="$(echo "$x / $s" | bc -l)"
  [ $? -eq 10 ] && exit 0
  echo "$s" >"$HPO_CHECKPOINT_OUT"
  [ "$told" -eq 1 ] && exit 0
  s=$((s + 1))
done
SH
chmod +x "$WORK/resumable.sh"
cat >"$WORK/resumable.yaml" <<YAML
name: crash-resumable
command: "$WORK/resumable.sh $MARKERS {x} 30"
parameters:
  x: {type: float, low: 1, high: 100}
objective: {metric: loss, direction: minimize}
early_stopping: {name: asha, min_resource: 1, max_resource: 30, reduction_factor: 3}
budget: {max_trials: 6, max_concurrent: 2}
resources: {gpus: 1, cpus: 1}
checkpoint: {signal: SIGUSR1, grace: 10s}
seed: $SEED
slurm:
  time_limit: 1m
  allocation: {gpus_per_node: 2, cpus_per_node: 4, max: 1}
YAML
for mode in steps jobs; do
  cat >"$WORK/$mode.yaml" <<YAML
name: crash-$mode
command: "$WORK/trial.sh $MARKERS {x} {epochs} {pause} {stubborn}"
parameters:
  x: {type: float, low: 1, high: 100}
  epochs: [1, 3, 9]
  pause: [0.05, 0.3, 0.6]
  stubborn: [0, 0, 1]
objective: {metric: loss, direction: minimize}
early_stopping: {name: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
budget: {max_trials: $([ $mode = steps ] && echo 30 || echo 12), max_concurrent: 4}
resources: {gpus: 1, cpus: 1}
stop_grace: 2s
seed: $SEED
slurm:
  mode: $mode
  allocation: {gpus_per_node: 4, cpus_per_node: 8, max: 2}
YAML
done
steps=$(hpo submit "$WORK/steps.yaml" | tail -n 1)
jobs=$(hpo submit "$WORK/jobs.yaml" | tail -n 1)
resumable=$(hpo submit "$WORK/resumable.yaml" | tail -n 1)
for k in $(seq 1 "$KILLS"); do
  sleep "$(( RANDOM % 3 )).$(( RANDOM % 10 ))"
  down="0.$(( RANDOM % 10 ))"
  echo "kill $k of $KILLS, down ${down}s"
  crash_hpod "$down"
done
# While the first resumable segments checkpoint and move to the next allocation.
for k in 1 2 3; do
  sleep "$(( 8 + RANDOM % 10 )).$(( RANDOM % 10 ))"
  echo "late kill $k of 3"
  crash_hpod "0.$(( RANDOM % 10 ))"
done
for id in $steps $jobs $resumable; do
  hpo wait "$id" --timeout 300 >/dev/null || fail "sweep $id did not end after the kills (seed $SEED)"
done
wait_for "[ \$(jobs_left) -eq 0 ]" 30

dups=$(sort "$MARKERS" | uniq -d | paste -s -d ' ')
[ -z "$dups" ] || fail "segments started twice (seed $SEED): $dups"
[ "$(cut -d. -f1 "$MARKERS" | sort -u | wc -l)" -eq "$(sql "SELECT COUNT(*) FROM trials WHERE started_at IS NOT NULL")" ] \
  || fail "markers and started trials differ (seed $SEED)"
resumed=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$resumable AND segment > 1")
[ "$resumed" -ge 1 ] || fail "no resumable trial went on in a new segment: the test tested nothing of it (seed $SEED)"
[ "$(grep -c '^[0-9]*\.[2-9]' "$MARKERS")" -ge "$resumed" ] || fail "resumed trials without a marker of their next segment (seed $SEED)"
bad=$(sql "SELECT id || ' ' || state || ' ' || message FROM trials WHERE state IN ('TRIAL_STATE_FAILED', 'TRIAL_STATE_LOST')")
[ -z "$bad" ] || fail "trials FAILED or LOST by the kills (seed $SEED): $bad"
bad=$(sql "SELECT id || ' ' || state || ' ' || stop_state FROM trials WHERE stop_state != '' AND state != stop_state")
[ -z "$bad" ] || fail "trials that were being stopped ended otherwise (seed $SEED): $bad"
stopped=$(sql "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_STOPPED'")
[ "$stopped" -ge 1 ] || fail "ASHA stopped nothing: the test tested nothing"
dup=$(sql "SELECT trial_id || ':' || step FROM $ALL_REPORTS GROUP BY trial_id, step, metric HAVING COUNT(*) > 1" | head -n 5)
[ -z "$dup" ] || fail "reports stored twice (seed $SEED): $dup"
bad=$(sql "SELECT id || ' ' || backend_id FROM trials WHERE sweep_id IN ($steps, $resumable) AND started_at IS NOT NULL AND backend_id NOT GLOB 'slurm:job=[0-9]* step=[0-9]* nodes=n[123]*'")
[ -z "$bad" ] || fail "steps without their id or nodes recorded (seed $SEED): $bad"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check (seed $SEED)"
trials=$(sql "SELECT COUNT(*) FROM trials")
pass "crash test, seed $SEED: $KILLS + 3 kills of hpod, $trials trials ($stopped STOPPED, $resumed resumed), no segment run twice, none lost or failed, every report once, squeue empty"
