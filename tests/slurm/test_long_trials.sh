#!/usr/bin/env bash
# Long trials on a real 4-node cluster (2 fake GPUs per node): time limits and preemption take
# no work away from resumable trials, and hpod starts no trial where it cannot finish.
#  - steps mode, 2-minute allocations: two resumable trials (40 epochs of 3 s) are told to
#    checkpoint (SIGUSR1) 15 s before their allocation's end and continue, as the same trials, in
#    the replacement allocation hpod asked for ahead, without waiting for it; their curves go on
#    from the checkpointed epoch;
#  - steps mode, a trial time limit of 1 minute in 2-minute allocations: a trial is started only
#    in an allocation with a minute left, so the fourth goes to a new allocation; each step runs
#    with that time limit;
#  - jobs mode, 2-minute jobs: Slurm's own warning (--signal) makes the trial checkpoint, and it
#    goes on as its next segment in a new job;
#  - preemption (partition `urgent` takes a `debug` node, GraceTime 10 s): in steps and jobs mode
#    the preempted trial checkpoints and goes on elsewhere, and says it was preempted.
# None of these trials is LOST, FAILED or retried, and nothing is left in squeue.
source "$(dirname "$0")/lib.sh"
cluster_up 4 2 4
start_hpod
TRAIN=$HPO_SRC/examples/train_spiral.py

# resumable NAME EPOCHS EPOCH_SECONDS GRACE SLURM: a sweep of resumable spiral trials.
resumable() {
  cat >"$WORK/$1.yaml" <<YAML
name: $1
command: [/usr/bin/python3, $TRAIN, "--lr={lr}", --hidden=16, --total-epochs=$2, --epoch-seconds=$3,
          --checkpoint-signal=USR1, "--checkpoint-in={checkpoint_in}", "--checkpoint-out={checkpoint_out}"]
parameters:
  lr: {type: float, low: 0.05, high: 0.5, log: true}
objective: {metric: val_acc, direction: maximize}
early_stopping: none
budget: {max_trials: $6, max_concurrent: $6, max_failed: 0}
resources: {gpus: 1}
max_retries: 0
checkpoint: {signal: SIGUSR1, grace: $4}
slurm: $5
YAML
  hpo submit "$WORK/$1.yaml" | tail -n 1
}
# check_resumed SWEEP WANT_INTERRUPTION EPOCHS: every trial completed after at least one
# interruption of that kind, none was retried, each epoch was computed once (the trainer
# checkpoints at the end of the epoch it was told in), the curve has every epoch once, and the
# result is that of an uninterrupted run of the same trainer.
check_resumed() {
  hpo export "$1" --format json >"$WORK/export.json"
  $PY - "$WORK/export.json" "$2" "$3" "$TRAIN" <<'PYEOF'
import datetime, json, re, subprocess, sys
data = json.load(open(sys.argv[1]))
want, epochs, train = sys.argv[2], int(sys.argv[3]), sys.argv[4]
def t(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
for tr in data["trials"]:
    name = f"trial {tr['trial_id']}"
    assert tr["state"] == "COMPLETED", (name, tr["state"], tr["message"])
    assert tr["attempt"] == 1 and tr["retry_of"] == 0, (name, "retried")
    assert tr["segment"] >= 2, (name, "never interrupted", tr)
    assert len(tr["segments"]) == tr["segment"] - 1, (name, tr["segments"])
    kinds = [s["interruption"] for s in tr["segments"]]
    assert want in kinds, (name, kinds)
    assert tr["step"] == epochs, (name, "curve ends at", tr["step"])
    assert tr["report_count"] == epochs, (name, tr["report_count"], "reports for", epochs, "epochs")
    computed = re.findall(r"^epoch (\d+) ", open(tr["trial_dir"] + "/stdout.log").read(), re.M)
    assert sorted(map(int, computed)) == list(range(1, epochs + 1)), (name, "epochs computed", computed)
    alone = subprocess.run(["/usr/bin/python3", train, "--report=none", f"--lr={tr['params']['lr']}",
                            "--hidden=16", f"--total-epochs={epochs}"],
                           capture_output=True, text=True, check=True).stdout.splitlines()[-1]
    mine = f"epoch {epochs} val_loss={tr['metrics']['val_loss']:.4f} val_acc={tr['metrics']['val_acc']:.4f}"
    assert alone == mine, (name, "resumed:", mine, "uninterrupted:", alone)
    gap = t(tr["segment_started_at"]) - t(tr["segments"][-1]["ended_at"])
    print(f"{name}: {tr['segment']} segments ({', '.join(kinds)}), last {gap:.1f} s after the one "
          f"before ended, {tr['report_count']} reports, {tr['gpu_seconds']:.0f} GPU-s")
PYEOF
}

# --- steps mode: the time limit of 2-minute allocations (120 s of work per trial) ---
steps_id=$(resumable steps-limit 40 3 15s "{time_limit: 2m, allocation: {gpus_per_node: 2, max: 1}}" 2)
# --- jobs mode: Slurm's --signal before a 2-minute job's end ---
jobs_id=$(resumable jobs-limit 40 3 20s "{mode: jobs, time_limit: 2m}" 1)
# --- steps mode, not resumable: trials of 25 s with a 1-minute time limit ---
cat >"$WORK/needs.yaml" <<'YAML'
name: needs
command: "scontrol show step $SLURM_JOB_ID.$SLURM_STEP_ID > $HPO_TRIAL_DIR/step.txt; sleep 25; hpo report loss={x}"
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 4, max_concurrent: 1}
resources: {gpus: 1, time_limit: 1m}
slurm: {time_limit: 2m, allocation: {gpus_per_node: 1, max: 1}}
YAML
needs_id=$(hpo submit "$WORK/needs.yaml" | tail -n 1)

hpo wait "$needs_id" --timeout 300 >/dev/null || fail "the needs sweep did not complete: $(hpo trials "$needs_id" --where)"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$needs_id AND state='TRIAL_STATE_COMPLETED'")" -eq 4 ] \
  || fail "4 trials should complete: $(hpo trials "$needs_id" --where)"
allocs=$(sql "SELECT substr(backend_id, 1, instr(backend_id, ' ')) FROM trials WHERE sweep_id=$needs_id ORDER BY number" | uniq | wc -l)
[ "$allocs" -eq 2 ] || fail "the fourth trial should have gone to a second allocation: $(sql "SELECT number, started_at, backend_id FROM trials WHERE sweep_id=$needs_id")"
[ "$(sql "SELECT substr(backend_id, 1, instr(backend_id, ' ')) FROM trials WHERE sweep_id=$needs_id AND number=2")" = \
  "$(sql "SELECT substr(backend_id, 1, instr(backend_id, ' ')) FROM trials WHERE sweep_id=$needs_id AND number=0")" ] \
  || fail "the third trial had the time it needed in the first allocation"
first_step=$(ls -d "$HPO_DATA_DIR"/sweeps/"$needs_id"/trials/* | head -n 1)/step.txt
grep -q "TimeLimit=00:01:00" "$first_step" || fail "the step did not get the trial's time limit: $(cat "$first_step")"
pass "a trial that needs a minute starts only in an allocation that has it (2 allocations for 4 trials), with srun --time"

hpo wait "$steps_id" --timeout 400 >/dev/null || fail "the steps sweep did not complete: $(hpo trials "$steps_id" --where)"
check_resumed "$steps_id" time_limit 40 || fail "steps mode: resumed trials"
$PY - "$WORK/export.json" <<'PYEOF' || fail "steps mode: the next segment waited for its allocation"
import datetime, json, sys
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
for tr in json.load(open(sys.argv[1]))["trials"]:
    gap = t(tr["segment_started_at"]) - t(tr["segments"][0]["ended_at"])
    assert gap < 10, (tr["trial_id"], "waited", gap, "s for the replacement allocation")
    old, new = tr["segments"][0]["backend_id"].split()[0], tr["backend_id"].split()[0]
    assert old != new, ("the next segment ran in the same allocation", old)
PYEOF
grep -q "telling it to checkpoint" "$HPO_DATA_DIR/hpod.log" || fail "hpod.log does not say it told the trials to checkpoint"
grep -q "asking for its replacement" "$HPO_DATA_DIR/hpod.log" || fail "hpod.log does not say it asked for a replacement"
for d in "$HPO_DATA_DIR"/sweeps/"$steps_id"/trials/*; do
  grep -q "checkpointed at epoch" "$d/stdout.log" && grep -q "continuing from" "$d/stdout.log" \
    || fail "$d/stdout.log lacks the checkpoint and the resume: $(tail -n 5 "$d/stdout.log")"
done
hpo trials "$steps_id" | has "seg" || fail "hpo trials shows no seg column"
pass "steps mode: trials checkpoint before their allocation's time limit and go on in its replacement"

hpo wait "$jobs_id" --timeout 500 >/dev/null || fail "the jobs sweep did not complete: $(hpo trials "$jobs_id" --where)"
check_resumed "$jobs_id" time_limit 40 || fail "jobs mode: resumed trials"
pass "jobs mode: Slurm's warning before the time limit, and the trial goes on in a new job"

# --- preemption, steps and jobs mode at once: an urgent job takes each trial's node ---
psteps_id=$(resumable preempt-steps 12 2 15s "{time_limit: 30m, allocation: {gpus_per_node: 2, max: 1}}" 1)
pjobs_id=$(resumable preempt-jobs 12 2 15s "{mode: jobs, time_limit: 30m}" 1)
for id in "$psteps_id" "$pjobs_id"; do
  wait_for "[ \"\$(sql \"SELECT MAX(step) FROM trials WHERE sweep_id=$id\")\" -ge 3 ]" 60 \
    || fail "sweep $id's trial did not get going"
  node=$(sql "SELECT backend_id FROM trials WHERE sweep_id=$id" | sed 's/.*nodes=//; s/ .*//')
  sbatch -Q -p urgent -w "$node" -N1 --gres=gpu:2 -o /dev/null --wrap "sleep 15" >/dev/null \
    || fail "cannot submit the urgent job"
done
for id in "$psteps_id" "$pjobs_id"; do
  hpo wait "$id" --timeout 240 >/dev/null || fail "sweep $id did not complete after the preemption: $(hpo trials "$id" --where)"
  check_resumed "$id" preempted 12 || fail "sweep $id: the preempted trial"
done
grep -q "is being preempted" "$HPO_DATA_DIR/hpod.log" || fail "hpod.log does not say it saw the preemption"
pass "preemption: the trial checkpoints within GraceTime and goes on elsewhere, in steps and jobs mode"

[ "$(sql "SELECT COUNT(*) FROM trials WHERE state IN ('TRIAL_STATE_LOST', 'TRIAL_STATE_FAILED')")" -eq 0 ] \
  || fail "trials were lost or failed: $(sql "SELECT id, state, message FROM trials WHERE state IN ('TRIAL_STATE_LOST', 'TRIAL_STATE_FAILED')")"
wait_for "[ \$(squeue -h -o %i -p debug 2>/dev/null | wc -l) -eq 0 ]" 30 || fail "jobs left in squeue: $(squeue)"
pass "no trial lost, failed or retried; nothing left in squeue"
