#!/usr/bin/env bash
# The hang watchdog (health:) on the local backend. A trainer that stops reporting after three
# steps and keeps running is caught: it gets the health signal (it writes down its "stacks"), is
# stopped a grace later, ends LOST with the interruption `hung`, and is retried, or continued from
# its checkpoint in a resumable sweep. A trainer whose pace slows by a factor of 3 is never
# caught, and a hung trial does not count toward max_failed.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
# The trainer (tests/fixtures/hang_trainer.sh): "hangs" reports 3 steps 0.3 s apart, then hangs
# on its first run (the retry or the next segment finishes); "slows" reports 6 steps 0.3 s
# apart, then 6 more 0.9 s apart.
sweep() {  # sweep NAME [EXTRA YAML]
  cat <<YAML
name: $1
command: "sh $HPO_SRC/tests/fixtures/hang_trainer.sh {kind} $WORK/$1 0.3 0.9"
parameters: {kind: [hangs, slows]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 2, max_failed: 1}
health: {report_timeout: auto, factor: 5, floor: 1s, signal: SIGUSR1, grace: 3s}
stop_grace: 1s
${2:-}
YAML
}
mkdir -p "$WORK/retried" "$WORK/resumed"
sweep retried >"$WORK/retried.yaml"
hpo validate "$WORK/retried.yaml" | has "hang watchdog: a trial silent for 5x its usual interval between reports (at least 1s) gets SIGUSR1, is stopped 3s later and is retried" \
  || fail "validate does not describe the watchdog: $(hpo validate "$WORK/retried.yaml")"
id=$(hpo submit "$WORK/retried.yaml" | tail -n 1)
hpo wait "$id" --timeout 90 >/dev/null || fail "sweep $id did not complete: $(hpo trials "$id" --where)"
[ "$(sql "SELECT state FROM sweeps WHERE id=$id")" = SWEEP_STATE_COMPLETED ] \
  || fail "the sweep did not complete (a hung trial counted toward max_failed?)"
hung=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST' AND interruption='INTERRUPTION_HUNG'")
[ -n "$hung" ] || fail "no trial ended LOST as hung: $(sql "SELECT id, state, interruption, message FROM trials WHERE sweep_id=$id")"
sql "SELECT message FROM trials WHERE id=$hung" | has "^hung: no report for" || fail "unclear cause: $(sql "SELECT message FROM trials WHERE id=$hung")"
dir=$(sql "SELECT trial_dir FROM trials WHERE id=$hung")
grep -q "stacks of" "$dir/stacks.txt" || fail "the hung trial did not get the health signal first"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE retry_of=$hung AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] || fail "the hung trial was not retried"
hpo trials "$id" --where | has "hung" || fail "hpo trials does not show the cause"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND params_json LIKE '%slows%' AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] \
  || fail "the trainer that slowed down was caught: $(sql "SELECT state, message FROM trials WHERE sweep_id=$id AND params_json LIKE '%slows%'")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND params_json LIKE '%slows%'")" -eq 1 ] || fail "the trainer that slowed down ran twice"
pass "a hung trial is signaled, stopped, LOST as hung and retried; one that slowed 3x is untouched"

sweep resumed "checkpoint: {signal: SIGUSR2, grace: 1s}" >"$WORK/resumed.yaml"
id=$(hpo submit "$WORK/resumed.yaml" | tail -n 1)
hpo wait "$id" --timeout 90 >/dev/null || fail "sweep $id did not complete: $(hpo trials "$id" --where)"
t=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND params_json LIKE '%hangs%'")
[ "$(sql "SELECT state || ' ' || segment FROM trials WHERE id=$t")" = "TRIAL_STATE_COMPLETED 2" ] \
  || fail "the hung trial did not continue as its second segment: $(sql "SELECT state, segment, message FROM trials WHERE id=$t")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 2 ] || fail "a resumable sweep retried instead of continuing"
hpo trials "$id" --where | has "hung" || fail "hpo trials does not show the interruption of segment 1"
pass "in a resumable sweep the hung trial continues from its checkpoint"
