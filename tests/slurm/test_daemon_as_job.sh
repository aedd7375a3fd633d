#!/usr/bin/env bash
# hpod moves into a Slurm job under a running steps-mode sweep:
#  - hpod on one "host" (loopback, the test's own process) is stopped with --keep-trials while
#    two trials run; `hpo daemon start --as-job` starts it again as a Slurm job, listening on
#    another address (0.0.0.0, advertised by host name) with the same data directory;
#  - the allocation's agent and the running trials follow the endpoint file; `hpo` and the
#    Python client find the new hpod through the data directory, also where its Unix socket
#    cannot be reached (a login node: here the socket file is taken away);
#  - the sweep completes: every trial ran once, every report is stored once;
#  - `hpo daemon stop` stops the job's hpod through scancel, and its job ends; then a stray `hpo
#    ls` starts no hpod of its own (hpod.yaml says hpod runs as a job) and says so.
source "$(dirname "$0")/lib.sh"
cluster_up 1 4 8
start_hpod

cat >"$WORK/move.yaml" <<'YAML'
name: moving
command: "echo start >> $HPO_TRIAL_DIR/starts; for i in $(seq 1 12); do hpo report --step $i loss=$(( {x} + i )); sleep 0.5; done"
parameters:
  x: [1, 2, 3, 4, 5, 6]
algorithm: grid
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 6, max_concurrent: 2}
resources: {gpus: 1, cpus: 1}
slurm:
  allocation: {gpus_per_node: 2, cpus_per_node: 2, max: 1}
YAML
id=$(hpo submit "$WORK/move.yaml" | tail -n 1)
wait_for "[ \$(sql \"SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_RUNNING' AND report_count >= 2\") -eq 2 ]" 60
before=$(cat "$HPO_DATA_DIR/endpoint")
hpo daemon stop --keep-trials >/dev/null
wait "$HPOD_PID" 2>/dev/null || true

# hpod as a job of its own on the cluster, with the Slurm backend (SLURM_CONF travels with sbatch).
hpo daemon start --as-job='--cpus-per-task=1 --time=10' --backend slurm >"$WORK/out" 2>&1 ||
  fail "hpo daemon start --as-job: $(cat "$WORK/out")"
grep -q "as Slurm job [0-9]* on " "$WORK/out" || fail "unclear start: $(cat "$WORK/out")"
job=$(squeue -h -n hpod -o %i)
[ -n "$job" ] || fail "no hpod job in the queue: $(squeue)"
after=$(cat "$HPO_DATA_DIR/endpoint")
[ "$after" = "$(hostname):${after##*:}" ] || fail "the endpoint of hpod in a job is $after, not this node's name"
[ "$before" != "$after" ] || fail "hpod came back at the same address $after"
hpo daemon status | has "Slurm job $job, endpoint $after" || fail "hpo daemon status: $(hpo daemon status)"
# Its options are the data directory's configuration, which every run of the job script reads.
for line in "keep-trials-on-term: true" "listen: 0.0.0.0:0" "backend: slurm" "as-job: .*--cpus-per-task=1 --time=10"; do
  grep -qx -- "$line" "$HPO_DATA_DIR/hpod.yaml" || fail "hpod.yaml lacks '$line': $(cat "$HPO_DATA_DIR/hpod.yaml")"
done

# The allocation's agent follows the endpoint file (its log goes when the allocation ends).
wait_for "grep -q 'hpod moved: $before -> $after' '$HPO_DATA_DIR'/agents/*.log" 30 ||
  fail "the agent did not follow hpod: $(cat "$HPO_DATA_DIR"/agents/*.log)"

# A login node cannot reach a compute node's Unix socket: without it, hpo and the Python
# client find hpod at the endpoint the data directory names.
rm -f "$HPO_DATA_DIR/hpod.sock"
hpo show "$id" | has "moving" || fail "hpo did not find hpod at $after: $(hpo show "$id" 2>&1)"
PYTHONPATH="$HPO_BIN/../python" $PY -c "
import hpo
names = [s['name'] for s in hpo.Client().sweeps().to_dict('records')]
assert 'moving' in names, names
" || fail "the Python client did not find hpod at $after"

hpo wait "$id" --timeout 150 >/dev/null || fail "the sweep did not complete after hpod moved: $(hpo trials "$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 6 ] || fail "no trial should be retried: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 6 ] \
  || fail "every trial should complete: $(sql "SELECT number, state, message FROM trials WHERE sweep_id=$id")"
for t in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  [ "$(wc -l <"$t/starts")" -eq 1 ] || fail "$t ran $(wc -l <"$t/starts") times"
done
[ "$(sql "SELECT COUNT(DISTINCT r.trial_id || '/' || r.step) || ' ' || COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id")" = "72 72" ] \
  || fail "72 reports expected once each: $(sql "SELECT t.number, COUNT(*), COUNT(DISTINCT r.step) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id GROUP BY t.number")"

hpo daemon stop >/dev/null || fail "hpo daemon stop did not stop the job's hpod"
wait_for "! squeue -h -j $job -o %i | has ." 30
[ ! -s "$HPO_DATA_DIR/hpod.lock" ] || fail "the lock is still held: $(cat "$HPO_DATA_DIR/hpod.lock")"
grep -qx -- "#SBATCH --signal=B:TERM@120" "$HPO_DATA_DIR/hpod-job.sh" ||
  fail "the job script asks for no early SIGTERM: $(cat "$HPO_DATA_DIR/hpod-job.sh")"

# As a scrontab line runs it: the script under a shell of the job's, not exec'd by slurmstepd.
# hpod knows its job all the same, and is stopped through it.
sjob=$(sbatch --parsable --job-name=hpod --time=10 --cpus-per-task=1 --output="$WORK/scron.out" \
  --wrap="$HPO_DATA_DIR/hpod-job.sh")
wait_for "hpo daemon status 2>/dev/null | has 'Slurm job $sjob'" 60 ||
  fail "hpod under a shell does not know its job: $(hpo daemon status 2>&1; cat "$WORK/scron.out")"
hpo daemon stop >/dev/null || fail "hpo daemon stop did not stop the scrontab-like job's hpod"
wait_for "! squeue -h -j $sjob -o %i | has ." 30

# Its data directory belongs to hpod in a job: a stray command starts no other hpod, and says
# how to start that one.
if hpo ls >"$WORK/out" 2>&1; then fail "hpo ls started an hpod: $(cat "$WORK/out")"; fi
grep -q "runs as a Slurm job" "$WORK/out" && grep -q "hpo daemon start" "$WORK/out" || fail "hpo ls: $(cat "$WORK/out")"
[ ! -s "$HPO_DATA_DIR/hpod.lock" ] || fail "hpo ls started an hpod: $(cat "$HPO_DATA_DIR/hpod.lock")"
pass "hpod moved from $before into Slurm job $job at $after under a running sweep: agents, trials, hpo and Python followed; 6 trials ran once, 72 reports stored once; hpo daemon stop ended the job"
