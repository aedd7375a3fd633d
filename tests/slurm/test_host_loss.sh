#!/usr/bin/env bash
# hpod's host lost under a steps-mode sweep: trials live in their allocations, not on hpod's host.
#  - while 4 trials run, hpod's host holds no process per running trial (each allocation's
#    hpo-agent starts its steps);
#  - hpod and every process it started are killed with kill -9 (what a reboot of the login node
#    does), and hpod starts again 12 s later: every trial that was running finishes in its first
#    run (those that ended during the outage too), each report is stored once, none is LOST,
#    retried or run twice;
#  - a trial that fails during the outage ends FAILED with its exit code, not LOST.
source "$(dirname "$0")/lib.sh"
cluster_up 1 4 8
start_hpod

# Each trial reports 16 steps, {w} s apart, and writes down each start: those with w=0.5 and 0.55
# end during the outage (w=0.55 fails with exit 3), the others after it.
cat >"$WORK/long.yaml" <<'YAML'
name: host-loss
command: "echo start >> $HPO_TRIAL_DIR/starts; for i in $(seq 1 16); do hpo report --step $i loss=$i; sleep {w}; done; [ {w} != 0.55 ] || exit 3"
parameters:
  w: [0.5, 0.55, 1.4, 1.5]
algorithm: grid
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 4, max_concurrent: 4}
resources: {gpus: 1, cpus: 1}
slurm:
  allocation: {gpus_per_node: 4, cpus_per_node: 8, max: 1}
YAML
id=$(hpo submit "$WORK/long.yaml" | tail -n 1)
wait_for "[ \$(sql \"SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_RUNNING' AND report_count >= 2\") -eq 4 ]" 60

# No process of hpod's is a trial's: hpod has no children at all while they run.
children=$( (ps -o pid= --ppid "$HPOD_PID" || true) | wc -l)
[ "$children" -eq 0 ] || fail "hpod's host holds $children process(es) for 4 running trials: $(ps -o pid,args --ppid "$HPOD_PID")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND backend_id LIKE '% agent'")" -eq 4 ] \
  || fail "the steps were not started by the allocation's agent: $(sql "SELECT backend_id FROM trials WHERE sweep_id=$id")"

# Host lost: hpod and every process it started, kill -9, down 12 s.
victims=$( (ps -o pid= --ppid "$HPOD_PID" || true) | tr '\n' ' ')
kill -9 "$HPOD_PID" $victims
wait "$HPOD_PID" 2>/dev/null || true
sleep 12
start_hpod
hpo wait "$id" --timeout 120 >/dev/null || fail "the sweep did not complete after hpod's host came back"

[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 4 ] || fail "no trial should be retried: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 3 ] \
  || fail "three trials should complete in their first run: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT state || ' ' || exit_code FROM trials WHERE sweep_id=$id AND json_extract(params_json, '\$.w') = 0.55")" = "TRIAL_STATE_FAILED 3" ] \
  || fail "the trial that exited 3 during the outage: $(sql "SELECT number, state, exit_code, message FROM trials WHERE sweep_id=$id")"
for t in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  [ "$(wc -l <"$t/starts")" -eq 1 ] || fail "$t ran $(wc -l <"$t/starts") times"
done
# Each report stored once: 16 steps per trial, no step twice.
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id")" -eq 64 ] \
  || fail "64 reports expected: $(sql "SELECT t.number, COUNT(*), COUNT(DISTINCT r.step) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id GROUP BY t.number")"
[ "$(sql "SELECT COUNT(DISTINCT r.trial_id || '/' || r.step) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id")" -eq 64 ] \
  || fail "a step was stored twice"
grep -q "re-adopted step .* (run by allocation [0-9]*'s agent)\|its step ended while hpod was away" "$HPO_DATA_DIR/hpod.log" \
  || fail "the restarted hpod did not take back the agent's steps"
wait_for "[ \$(jobs_left) -eq 0 ]" 30
pass "hpod's host lost under 4 running steps: no process of hpod's per trial; each trial ended in its first run with its true outcome (3 COMPLETED, 1 FAILED with exit 3), 64/64 reports stored once"
