#!/usr/bin/env bash
# A node that fails every trial placed on it, on a 2-node throwaway cluster: its trials end with
# "CUDA error: uncorrectable ECC error encountered" on stderr, which the built-in failures rules
# say is the infrastructure's. In steps mode (an allocation over both nodes) and jobs mode (one
# job per trial, placed by slurmctld), those trials are LOST and retried, never FAILED (with
# max_failed: 1 the sweep would end), the node is quarantined after 2 of them, nothing more of
# the sweep runs there (steps skip it, later jobs carry --exclude), and each sweep completes on
# the other node. The quarantine shows in `hpo show`, `hpo nodes` and /metrics, and
# `hpo nodes SWEEP --allow NODE` lets the node back in. First, `hpo plan` asks slurmctld (will_run)
# when each sweep's first allocation or job would start.
source "$(dirname "$0")/lib.sh"
cluster_up 2 2 4
start_hpod
cat >"$WORK/train.sh" <<'SH'
#!/bin/sh
echo "$(date +%s.%N) $SLURMD_NODENAME $HPO_TRIAL_ID" >>"$1/runs.log"
if [ "$SLURMD_NODENAME" = n2 ]; then
  echo "step 1" >&2
  echo "RuntimeError: CUDA error: uncorrectable ECC error encountered" >&2
  exit 1
fi
for s in 1 2; do hpo report --step "$s" loss=$((10 - s)); sleep 0.5; done
SH
for mode in steps jobs; do
  mkdir -p "$WORK/$mode"
  cat >"$WORK/$mode.yaml" <<YAML
name: bad-node-$mode
command: "sh $WORK/train.sh $WORK/$mode"
parameters: {x: [1, 2, 3, 4, 5, 6, 7, 8]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: $([ $mode = steps ] && echo 2 || echo 3), max_failed: 1}
resources: {gpus: 1, cpus: 1}
failures: {quarantine_after: 2}
slurm:
  mode: $mode
  allocation: {nodes: 2, gpus_per_node: 1, cpus_per_node: 2, max: 1}
YAML
done
hpo plan "$WORK/steps.yaml" --steps 2 --step-time 0.5s >"$WORK/plan.txt" || fail "hpo plan: $(cat "$WORK/plan.txt")"
grep -Eq "^  queue wait +[0-9.]+m?s \(slurmctld's will_run for the sweep's first allocation \(2 node\(s\) with 1 GPU\(s\) and 2 CPU\(s\) each\)\)$" "$WORK/plan.txt" \
  && grep -Eq "^  GPU-hours +0.00222$" "$WORK/plan.txt" || fail "hpo plan, steps mode: $(cat "$WORK/plan.txt")"
hpo plan "$WORK/jobs.yaml" --steps 2 --step-time 0.5s | has -E "^  queue wait +[0-9.]+m?s \(slurmctld's will_run for one trial's job \(1 node\(s\), 1 GPU\(s\) each\)\)$" \
  || fail "hpo plan, jobs mode: $(hpo plan "$WORK/jobs.yaml" --steps 2 --step-time 0.5s)"
pass "hpo plan asks slurmctld when the first allocation (steps mode) or job (jobs mode) would start"
steps=$(hpo submit "$WORK/steps.yaml" | tail -n 1)
jobs=$(hpo submit "$WORK/jobs.yaml" | tail -n 1)
for id in $steps $jobs; do
  mode=$([ "$id" = "$steps" ] && echo steps || echo jobs)
  hpo wait "$id" --timeout 240 >/dev/null || fail "sweep $id ($mode) did not complete: $(hpo trials "$id" --where)"
  [ "$(sql "SELECT state FROM sweeps WHERE id=$id")" = SWEEP_STATE_COMPLETED ] \
    || fail "$mode: the sweep did not complete: $(sql "SELECT state, message FROM sweeps WHERE id=$id")"
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 8 ] \
    || fail "$mode: not every configuration completed: $(hpo trials "$id" --where)"
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_FAILED'")" -eq 0 ] \
    || fail "$mode: an infrastructure failure counted as the trial's own"
  lost=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST' AND interruption='INTERRUPTION_NODE_FAILURE' AND message LIKE '%uncorrectable ECC%'")
  on_n2=$(grep -c " n2 " "$WORK/$mode/runs.log" || true)
  [ "$lost" -eq "$on_n2" ] && [ "$lost" -ge 2 ] \
    || fail "$mode: $lost trial(s) LOST to the node, $on_n2 run on n2: $(cat "$WORK/$mode/runs.log")"
  # Once quarantined, n2 gets nothing more: only trials placed before the second failure was
  # known (at most max_concurrent - 1 more) may still have run there.
  [ "$on_n2" -le $([ $mode = steps ] && echo 3 || echo 4) ] || fail "$mode: $on_n2 trials ran on n2 after its quarantine: $(cat "$WORK/$mode/runs.log")"
  hpo show "$id" | has "quarantined nodes: n2 ($on_n2 infrastructure failure(s))" \
    || fail "$mode: hpo show does not show the quarantine: $(hpo show "$id")"
  hpo nodes "$id" | has -E "^n2 +quarantined +$on_n2 +the infrastructure failed it \(stderr /uncorrectable ECC error/\)" \
    || fail "$mode: hpo nodes: $(hpo nodes "$id")"
done
grep -q "n2 quarantined after 2 infrastructure failure(s)" "$HPO_DATA_DIR/hpod.log" || fail "no quarantine in the log"
pass "steps and jobs mode: a node that fails every trial with an ECC error is quarantined after 2, and the sweeps complete on the other node"

# /metrics, as the daemon's owner reads it; then the node is let back in.
metrics() {
  $PY - "$(cat "$HPO_DATA_DIR/dashboard")" "$(cat "$HPO_DATA_DIR/token")" <<'PYEOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "metrics", headers={"Authorization": "Bearer " + sys.argv[2]})
print(urllib.request.urlopen(req, timeout=10).read().decode())
PYEOF
}
# (Read whole into a file first: grep -q stops reading at its match, and the writer's broken
# pipe would fail the pipeline.)
metrics >"$WORK/metrics"
grep -q "^hpod_node_quarantined{node=\"n2\",sweep=\"$steps\"} 1" "$WORK/metrics" || fail "/metrics: $(grep hpod_node "$WORK/metrics")"
grep -q "^hpod_node_infrastructure_failures{node=\"n2\",sweep=\"$jobs\"} [1-9]" "$WORK/metrics" || fail "/metrics: $(grep hpod_node "$WORK/metrics")"
hpo nodes "$steps" --allow n2 >"$WORK/nodes"
grep -Eq "^n2 +in use +0 " "$WORK/nodes" || fail "hpo nodes --allow: $(hpo nodes "$steps")"
metrics >"$WORK/metrics"
! grep -q "^hpod_node_quarantined{node=\"n2\",sweep=\"$steps\"}" "$WORK/metrics" || fail "/metrics still shows n2 quarantined"
! hpo nodes "$steps" --allow n1 2>"$WORK/err" || fail "allowed a node that was never quarantined"
grep -q "node 'n1' is not quarantined in sweep $steps (quarantined: none)" "$WORK/err" || fail "unclear refusal: $(cat "$WORK/err")"
wait_for "[ \$(jobs_left) -eq 0 ]" 60
pass "/metrics shows the quarantine, and hpo nodes --allow lets the node back in"
