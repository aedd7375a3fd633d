#!/usr/bin/env bash
# One hpod serves local and Slurm sweeps at once, found on its own: `hpo submit` on a machine
# where Slurm is configured (SLURM_CONF, slurmctld up) starts a daemon that runs
#  - examples/slurm_steps.yaml (a slurm: section, here with gpus: 0 and fewer trials) as steps
#    in an allocation on the cluster, and `hpo show` says `backend slurm`;
#  - at the same time a sweep without a slurm: section as local processes (`backend local`);
#  - `backend: local` runs even a file with a slurm: section locally.
# The Slurm examples have a plan from their files alone. `hpo daemon start --slurm off` gives a daemon without Slurm: the Slurm sweep is refused with
# the reason at validate and at submit, and nothing runs. A typo in hpod's options is told by
# `hpo daemon start` at once, and no daemon starts.
source "$(dirname "$0")/lib.sh"
cluster_up 1 4 4

sed -e 's/gpus: "{g}"/gpus: 0/' -e 's/max_trials: 16/max_trials: 4/' -e 's/gpus_per_node: 4/gpus_per_node: 0/' \
  -e 's/^early_stopping.*//' -e 's/^plan:.*//' -e "s|train_spiral.py|$HPO_SRC/examples/train_spiral.py|" -e 's/--epochs=25/--epochs=3/' \
  "$HPO_SRC/examples/slurm_steps.yaml" >"$WORK/steps.yaml"
cat >"$WORK/local.yaml" <<'YAML'
name: here
command: "sleep 2; hpo report loss={x}"
parameters: {x: [1, 2, 3]}
objective: {metric: loss, direction: minimize}
budget: {max_concurrent: 3}
algorithm: grid
YAML
slurm_id=$(hpo submit "$WORK/steps.yaml" | tail -n 1)  # starts hpod on its own
local_id=$(hpo submit "$WORK/local.yaml" | tail -n 1)
wait_for "grep -q 'Slurm is on: $SLURM_CONF' '$HPO_DATA_DIR/hpod.log'" 5 || fail "Slurm not found: $(cat "$HPO_DATA_DIR/hpod.log")"
hpo show "$slurm_id" | has "backend *slurm" || fail "the steps sweep: $(hpo show "$slurm_id")"
hpo show "$local_id" | has "backend *local" || fail "the local sweep: $(hpo show "$local_id")"
# Both run at once: local trials while the Slurm sweep holds its allocation.
wait_for "[ \$(sql \"SELECT COUNT(*) FROM trials WHERE sweep_id=$local_id AND state='TRIAL_STATE_RUNNING'\") -ge 1 ]" 20
hpo wait "$local_id" --timeout 60 >/dev/null || fail "the local sweep did not complete"
hpo wait "$slurm_id" --timeout 180 >/dev/null || fail "the Slurm sweep did not complete: $(hpo trials "$slurm_id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$slurm_id AND backend_id GLOB 'slurm:job=* step=*'")" -eq 4 ] ||
  fail "not Slurm steps: $(sql "SELECT backend_id FROM trials WHERE sweep_id=$slurm_id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$local_id AND backend_id GLOB 'local:pid=*'")" -eq 3 ] ||
  fail "not local: $(sql "SELECT backend_id FROM trials WHERE sweep_id=$local_id")"
hpo ls | has "^$local_id  *here  *COMPLETED  *local " || fail "hpo ls lacks the backend: $(hpo ls)"
hpo ls | has "^$slurm_id  *spiral-slurm-steps  *COMPLETED  *slurm " || fail "hpo ls lacks the backend: $(hpo ls)"
# The examples that run on Slurm say how long their trials are: each has a plan from the file.
for f in slurm_steps long_trials; do
  (cd "$HPO_SRC/examples" && hpo plan $f.yaml) >"$WORK/plan" 2>&1 || fail "hpo plan $f.yaml: $(cat "$WORK/plan")"
  grep -Eq "^  trials +[0-9]" "$WORK/plan" && grep -q "the file's plan.steps" "$WORK/plan" ||
    fail "hpo plan $f.yaml: $(cat "$WORK/plan")"
done
# backend: local wins over the slurm: section.
sed -e 's/^name: .*/name: steps-here/' -e '1i backend: local' "$WORK/steps.yaml" >"$WORK/here.yaml"
here_id=$(hpo submit "$WORK/here.yaml" | tail -n 1)
hpo wait "$here_id" --timeout 120 >/dev/null || fail "backend: local did not complete"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$here_id AND backend_id GLOB 'local:pid=*'")" -eq 4 ] ||
  fail "backend: local ran elsewhere: $(sql "SELECT backend_id FROM trials WHERE sweep_id=$here_id")"
wait_for "[ \$(jobs_left) -eq 0 ]" 40
pass "one daemon ran a Slurm and a local sweep at once, found Slurm by itself, and backend: local stays local"

hpo daemon stop >/dev/null
# A typo in hpod's options: told at once, nothing started.
if hpo daemon start --slurm maybe >"$WORK/out" 2>&1; then fail "a bad hpod option started a daemon"; fi
grep -q "hpod refuses these options" "$WORK/out" && grep -q -- "--slurm" "$WORK/out" || fail "unclear: $(cat "$WORK/out")"
if hpo daemon status >/dev/null 2>&1; then fail "a daemon runs after a refused start"; fi
hpo daemon start --slurm off >/dev/null
before=$(sql "SELECT COUNT(*) FROM sweeps")
if hpo validate "$WORK/steps.yaml" >"$WORK/out" 2>&1; then fail "validated without Slurm"; fi
grep -q "backend: the sweep runs on slurm, but this hpod has no slurm backend: hpod was started with --slurm off" "$WORK/out" ||
  fail "unclear refusal: $(cat "$WORK/out")"
if hpo submit "$WORK/steps.yaml" >"$WORK/out" 2>&1; then fail "a Slurm sweep was taken without Slurm"; fi
grep -q "no slurm backend" "$WORK/out" || fail "unclear refusal: $(cat "$WORK/out")"
[ "$(sql "SELECT COUNT(*) FROM sweeps")" -eq "$before" ] || fail "a refused sweep was stored"
pass "without Slurm a Slurm sweep is refused with the reason, never run locally; a bad hpod option starts nothing"
