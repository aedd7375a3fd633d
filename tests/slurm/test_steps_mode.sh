#!/usr/bin/env bash
# hpod on the Slurm backend, `steps` mode (the default): trials as job steps packed into
# allocations hpod requests and releases itself, on a real 2-node cluster with 4 fake GPUs per node.
#  - 12 trials mixing 1- and 2-GPU requests in one 4-GPU allocation: no GPU is used by two trials at
#    once, and no trial waited while enough GPUs sat idle for it; the allocation is gone afterwards;
#    its GPU-hours (what is charged) cover the trials' and the utilization hpod gives is theirs
#    over its;
#  - hpod learns which GPUs Slurm gave each step (the ones its tasks see);
#  - a 2-node trial is one step over both nodes;
#  - early stopping: the reply tells a trial to stop; one that ignores it gets the sweep's
#    stop_signal (SIGUSR1) and its step ends within the grace period; both end STOPPED;
#  - exit 3 is FAILED; a step scancel'ed from outside is LOST and retried;
#  - the pool grows to allocation.max while trials wait;
#  - bad settings are refused at submit; canceling a sweep leaves nothing in squeue.
source "$(dirname "$0")/lib.sh"
cluster_up 2 4 8
start_hpod

# --- packing 1- and 2-GPU trials into one 4-GPU allocation ---
cat >"$WORK/mixed.yaml" <<'YAML'
name: steps-mixed
command: "echo \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $(date +%s.%N)\" > $HPO_TRIAL_DIR/gpu.txt; sleep {t}; date +%s.%N >> $HPO_TRIAL_DIR/gpu.txt; hpo report loss={t}"
parameters:
  g: [1, 2]
  t: {type: float, low: 1, high: 2.5}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 12, max_concurrent: 6}
resources: {gpus: "{g}", cpus: 1}
slurm:
  allocation: {gpus_per_node: 4, cpus_per_node: 8, max: 1}
YAML
id=$(hpo submit "$WORK/mixed.yaml" | tail -n 1)
hpo wait "$id" --timeout 180 >/dev/null || fail "the mixed-GPU sweep did not complete"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 12 ] || fail "12 trials should complete"
# Every trial ran as a step of the same allocation, with its step id recorded.
[ "$(sql "SELECT COUNT(DISTINCT substr(backend_id, 1, instr(backend_id, ' '))) FROM trials WHERE sweep_id=$id")" -eq 1 ] \
  || fail "the trials did not share one allocation: $(sql "SELECT backend_id FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND backend_id GLOB 'slurm:job=[0-9]* step=[0-9]* nodes=n*'")" -ge 10 ] \
  || fail "step ids not recorded: $(sql "SELECT backend_id FROM trials WHERE sweep_id=$id")"
hpo export "$id" --format csv >"$WORK/out" && grep -q "step=" "$WORK/out" || fail "export lacks the step ids"
wait_for "[ \$(jobs_left) -eq 0 ]" 10
for t in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  n=$(basename "$t")
  echo "$(sql "SELECT created_at, json_extract(params_json, '\$.g') FROM trials WHERE sweep_id=$id AND number=$((10#$n))" | tr '|' ' ') $(paste -s -d ' ' "$t/gpu.txt") $(sql "SELECT gpus FROM trials WHERE sweep_id=$id AND number=$((10#$n))")"
done >"$WORK/mixed.txt"
$PY - "$WORK/mixed.txt" <<'PYEOF'
import sys
rows = []  # created, want, node, gpus, start, end
for line in open(sys.argv[1]):
    created, want, node, gpus, start, end, stored = line.split()
    rows.append((float(created), int(want), node, gpus.split(","), float(start), float(end)))
    # hpod learned which GPUs Slurm gave the step: the ones the trial saw.
    seen = node + ":" + ",".join(sorted(gpus.split(","), key=int))
    assert stored == seen, ("the stored GPUs are not the step's", stored, seen)
assert len(rows) == 12, rows
for r in rows:
    assert len(r[3]) == r[1], ("a trial got the wrong number of GPUs", r)
# No GPU held by two trials at once.
held = [(r[2], g, r[4], r[5]) for r in rows for g in r[3]]
for i, a in enumerate(held):
    for b in held[i + 1:]:
        if a[:2] == b[:2]:
            assert a[3] <= b[2] or b[3] <= a[2], ("GPU shared", a, b)
# No trial waited while enough GPUs sat idle for it (1 s allowed for srun and process start-up).
def idle(t):
    return 4 - sum(len(r[3]) for r in rows if r[4] <= t < r[5])
worst = 0.0
for r in rows:
    t, run = r[0], 0.0
    while t < r[4] - 1.0:
        run = run + 0.05 if idle(t) >= r[1] else 0.0
        worst = max(worst, run)
        t += 0.05
assert worst <= 1.0, f"a trial waited {worst:.2f} s with enough idle GPUs"
first, last = min(r[4] for r in rows), max(r[5] for r in rows)
busy = sum(len(r[3]) * (r[5] - r[4]) for r in rows)
print(f"packing: {len(held)} GPU intervals, none shared; longest avoidable wait {worst:.2f} s; "
      f"GPU utilisation {busy / (4 * (last - first)):.0%} over {last - first:.1f} s")
PYEOF
# What the allocation cost: from its start to its release, 4 GPUs; the trials' share of it.
hpo show "$id" >"$WORK/show"
grep -q "GPU-hours .* in allocations (.* in trials: utilization .*%)" "$WORK/show" \
  || fail "hpo show lacks the allocation's GPU-hours: $(cat "$WORK/show")"
hpo export "$id" --format json -o "$WORK/mixed.json"
$PY - "$WORK/mixed.txt" "$WORK/mixed.json" <<'PYEOF'
import json, sys
rows = [line.split() for line in open(sys.argv[1])]
first, last = min(float(r[4]) for r in rows), max(float(r[5]) for r in rows)
own = sum(int(r[1]) * (float(r[5]) - float(r[4])) for r in rows)
s = json.load(open(sys.argv[2]))["sweep"]
alloc, trials = s["allocation_gpu_hours"] * 3600, s["trial_gpu_hours"] * 3600
assert s["gpu_hours"] == s["allocation_gpu_hours"], ("steps mode charges the allocation", s)
# Slurm's start time has a resolution of a second; the release follows the last trial.
assert 4 * (last - first) - 1 <= alloc <= 4 * (last - first + 20), (alloc, first, last)
assert own <= trials <= own + 12 * 2 * 1.0, ("hpod's trial GPU-seconds", trials, "their own", own)
assert abs(s["utilization"] - trials / alloc) < 1e-9 and 0 < s["utilization"] <= 1, s
print(f"allocation {alloc:.1f} GPU-s, trials {trials:.1f} GPU-s (their own clocks {own:.1f}), "
      f"utilization {s['utilization']:.0%}")
PYEOF

# --- a 2-node trial: one step over both nodes, a GPU per task, rank 0 reports ---
cat >"$WORK/multi.yaml" <<'YAML'
command: "echo \"$SLURM_PROCID $SLURMD_NODENAME $SLURM_STEP_ID $CUDA_VISIBLE_DEVICES\" >> $HPO_TRIAL_DIR/ranks.txt; if [ \"$SLURM_PROCID\" = 0 ]; then hpo report --step 1 loss=1; fi"
parameters: {x: [1]}
objective: {metric: loss, direction: minimize}
algorithm: grid
resources: {nodes: 2, tasks_per_node: 2, gpus_per_task: 1}
YAML
id=$(hpo submit "$WORK/multi.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the 2-node trial did not complete"
ranks=$(cut -d' ' -f1,2 "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt" | sort | tr '\n' ' ')
[ "$ranks" = "0 n1 1 n1 2 n2 3 n2 " ] || fail "a 2x2 trial ran as '$ranks'"
[ "$(cut -d' ' -f3 "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt" | sort -u | wc -l)" -eq 1 ] || fail "the ranks were not one step"
# Each task sees one GPU of its own: the two tasks on a node see different ones.
[ "$(awk '{print $2, $4}' "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt" | sort -u | wc -l)" -eq 4 ] \
  || fail "tasks did not get a GPU each: $(cat "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt")"
[ "$(awk '$4 ~ /,/' "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt" | wc -l)" -eq 0 ] || fail "a task saw more than one GPU"
[ "$(sql "SELECT report_count FROM trials WHERE sweep_id=$id")" -eq 1 ] || fail "rank 0 should report once"
want=$(awk '{print $2, $4}' "$HPO_DATA_DIR/sweeps/$id/trials/00000/ranks.txt" | sort -n -k2 | awk '{g[$1] = g[$1] (g[$1] ? "," : "") $2} END {for (n in g) print n ":" g[n]}' | sort | paste -s -d ' ')
[ "$(sql "SELECT gpus FROM trials WHERE sweep_id=$id")" = "$want" ] \
  || fail "stored GPUs '$(sql "SELECT gpus FROM trials WHERE sweep_id=$id")', the tasks saw '$want'"

# --- early stopping through the reply; the signal and grace period for a trial that ignores it ---
cat >"$WORK/stop.yaml" <<'YAML'
command: |
  trap 'date +%s.%N > $HPO_TRIAL_DIR/usr1; exit 0' USR1
  for s in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    hpo report --step $s loss={x}
    if [ $? -eq 10 ] && [ ! -f $HPO_TRIAL_DIR/told ]; then
      date +%s.%N > $HPO_TRIAL_DIR/told
      if [ {x} -eq 5 ]; then exit 0; fi
    fi
    sleep 0.3 & wait $!
  done
parameters: {x: [1, 2, 5, 9]}
objective: {metric: loss, direction: minimize}
algorithm: grid
early_stopping: {name: median, grace_steps: 1, min_trials: 2}
stop_signal: SIGUSR1
stop_grace: 2s
YAML
id=$(hpo submit "$WORK/stop.yaml" | tail -n 1)
hpo wait "$id" --timeout 120 >/dev/null || fail "the early-stopping sweep did not complete"
dir="$HPO_DATA_DIR/sweeps/$id/trials"
for n in 2 3; do
  [ "$(sql "SELECT state FROM trials WHERE sweep_id=$id AND number=$n")" = TRIAL_STATE_STOPPED ] || fail "trial $n should be STOPPED"
done
[ ! -f "$dir/00002/usr1" ] || fail "the trial that obeyed the reply still got the signal"
[ -f "$dir/00003/usr1" ] || fail "the trial that ignored the reply did not get SIGUSR1"
ended=$(sql "SELECT ended_at FROM trials WHERE sweep_id=$id AND number=3")
$PY - "$(cat "$dir/00003/told")" "$(cat "$dir/00003/usr1")" "$ended" <<'PYEOF'
import sys
told, signaled, ended = map(float, sys.argv[1:])
# hpod waits stop_grace (2 s) for the trial to obey, signals it, and the step ends within the
# next grace period.
assert 1.5 <= signaled - told <= 4.0, ("signal came", signaled - told, "s after the reply")
assert ended - signaled <= 2.0, ("the step took", ended - signaled, "s to end after the signal")
print(f"early stop: signal {signaled - told:.2f} s after the stop reply, step ended {ended - signaled:.2f} s later")
PYEOF

# --- FAILED, an outside scancel (LOST, retried), and the pool growing to 2 allocations ---
cat >"$WORK/fail.yaml" <<'YAML'
command: "if [ {x} -eq 1 ]; then exit 3; fi; sleep 4"
parameters: {x: [1, 2, 3, 4]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 4}
resources: {gpus: 1}
slurm:
  allocation: {gpus_per_node: 2, max: 2}
YAML
id=$(hpo submit "$WORK/fail.yaml" | tail -n 1)
wait_for "sql \"SELECT id FROM trials WHERE sweep_id=$id AND number=2\" | has ." 30
trial=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND number=2")
wait_for "sql \"SELECT backend_id FROM trials WHERE id=$trial\" | has 'step=[0-9]'" 30
step=$(sql "SELECT backend_id FROM trials WHERE id=$trial" | sed -E 's/slurm:job=([0-9]+) step=([0-9]+).*/\1.\2/')
scancel "$step"
hpo wait "$id" --timeout 90 >/dev/null || fail "the failure sweep did not complete"
[ "$(sql "SELECT state FROM trials WHERE sweep_id=$id AND number=0")" = TRIAL_STATE_FAILED ] || fail "exit 3 should be FAILED"
[ "$(sql "SELECT exit_code FROM trials WHERE sweep_id=$id AND number=0")" -eq 3 ] || fail "exit code 3 not recorded"
[ "$(sql "SELECT state FROM trials WHERE id=$trial")" = TRIAL_STATE_LOST ] || fail "a step scancel'ed outside should be LOST, not $(sql "SELECT state || ' ' || message FROM trials WHERE id=$trial")"
sql "SELECT message FROM trials WHERE id=$trial" | has "canceled outside hpod" || fail "the lost step does not say why"
[ "$(sql "SELECT interruption FROM trials WHERE id=$trial")" = INTERRUPTION_CANCELED_OUTSIDE ] \
  || fail "the outside scancel is not the step's interruption: $(sql "SELECT interruption FROM trials WHERE id=$trial")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE retry_of=$trial AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] || fail "the lost trial was not retried"
grep -q "sweep $id: requested Slurm allocation [0-9]* (2 of 2)" "$HPO_DATA_DIR/hpod.log" || fail "the pool did not grow to 2 allocations"
[ "$(sql "SELECT COUNT(DISTINCT substr(backend_id, 1, instr(backend_id, ' '))) FROM trials WHERE sweep_id=$id")" -eq 2 ] \
  || fail "the trials did not spread over 2 allocations"
wait_for "[ \$(jobs_left) -eq 0 ]" 10

# --- bad settings are refused at submit ---
cat >"$WORK/bad.yaml" <<'YAML'
command: "true"
parameters: {x: [1]}
objective: {metric: loss, direction: minimize}
algorithm: grid
resources: {gpus: 1}
slurm: {partition: nosuch}
YAML
hpo submit "$WORK/bad.yaml" 2>"$WORK/err" && fail "an unknown partition was accepted"
grep -q "Invalid partition" "$WORK/err" || fail "unclear partition error: $(cat "$WORK/err")"
sed 's/slurm: {partition: nosuch}/slurm: {allocation: {gpus_per_node: 8}}/' "$WORK/bad.yaml" >"$WORK/bad2.yaml"
hpo submit "$WORK/bad2.yaml" 2>"$WORK/err" && fail "an allocation with more GPUs than a node has was accepted"
grep -q "allocation.*not available" "$WORK/err" || fail "unclear GPU error: $(cat "$WORK/err")"
sed 's/slurm: {partition: nosuch}/slurm: {allocation: {gpus_per_node: 1}}/; s/gpus: 1/gpus: 2/' "$WORK/bad.yaml" >"$WORK/bad3.yaml"
hpo submit "$WORK/bad3.yaml" 2>"$WORK/err" && fail "a trial larger than its allocation was accepted"
grep -q "bad3.yaml.*allocation has 1 GPU" "$WORK/err" || fail "unclear allocation error: $(cat "$WORK/err")"
# Refused by slurmctld (the request of the sweep's first allocation): nothing of it is kept.
[ "$(sql "SELECT COUNT(*) FROM sweeps WHERE source LIKE '%bad%'")" -eq 0 ] \
  || fail "a refused sweep was kept: $(sql "SELECT id, source, state FROM sweeps")"

# --- cancel: nothing of the sweep stays in squeue ---
sed 's/sleep 4/sleep 300/; s/exit 3/sleep 300/' "$WORK/fail.yaml" >"$WORK/long.yaml"
id=$(hpo submit "$WORK/long.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $id --state running | tail -n +2 | wc -l) -eq 4 ]" 30
hpo cancel "$id" | has CANCELED || fail "cancel did not end CANCELED"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_CANCELED'")" -eq 4 ] || fail "4 trials should be CANCELED"
wait_for "[ \$(jobs_left) -eq 0 ]" 20
[ "$(squeue -h -s | grep -vc batch || true)" -eq 0 ] || fail "steps left: $(squeue -s)"

# --- hpod killed (-9) mid-sweep and down for 3 s: the restarted daemon re-adopts the running
# steps and their allocation, learns the outcome of steps that ended meanwhile from hpo-shim,
# and the sweep completes with no trial lost or run twice and nothing left in squeue ---
id=$(hpo submit "$WORK/mixed.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $id --state running | tail -n +2 | wc -l) -ge 2 ]" 30
crash_hpod 3
hpo wait "$id" --timeout 180 >/dev/null || fail "the sweep did not complete after the restart"
lost=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'")
[ "$lost" -eq 0 ] || fail "no trial should be LOST after the restart: $(sql "SELECT id, message FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST'")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 12 ] || fail "12 trials, none retried"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 12 ] || fail "12 trials should complete"
readopted=$(grep -c "re-adopted step\|its step ended while hpod was away" "$HPO_DATA_DIR/hpod.log" || true)
[ "$readopted" -ge 2 ] || fail "the running steps were not re-adopted ($readopted)"
# With a step still running in it, or (trials never wait for hpod, so all may have ended during
# the outage) as an allocation of a sweep that goes on: found by the first query, or by its agent
# calling the new hpod with the steps it ran.
grep -Eq "re-adopted Slurm allocation|took back Slurm allocation|the agent of Slurm allocation [0-9]+ on .* is in touch \([1-9][0-9]* step" \
  "$HPO_DATA_DIR/hpod.log" || fail "the allocation was not taken back"
if grep -q "canceling allocation .* left by an earlier run" "$HPO_DATA_DIR/hpod.log"; then fail "the allocation in use was canceled as a leftover"; fi
# Nothing ran twice: each trial's step wrote its start once.
for t in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  [ "$(wc -l <"$t/gpu.txt")" -eq 2 ] || fail "$t: $(cat "$t/gpu.txt")"
done
wait_for "[ \$(jobs_left) -eq 0 ]" 10
# ... and killed again right after a submit, before its first step started: the trials that were
# waiting for the allocation wait again, and the sweep completes with none lost.
id=$(hpo submit "$WORK/mixed.yaml" | tail -n 1)
wait_for "squeue -h -o %j | has hpo-alloc-" 10
crash_hpod
hpo wait "$id" --timeout 180 >/dev/null || fail "the sweep did not complete after the early crash"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 12 ] || fail "12 trials should complete after the early crash: $(sql "SELECT id, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 12 ] || fail "no trial should be lost or retried after the early crash"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check after the restarts"
wait_for "[ \$(jobs_left) -eq 0 ]" 10
pass "steps mode: packing, multi-node, early stop with signal and grace, FAILED/LOST/retry, pool growth, bad settings, cancel, re-adoption after kill -9 ($readopted step(s))"
