#!/usr/bin/env bash
# Failures told apart, on the local backend. A sweep with a typo in its command is paused once
# its first 3 trials failed at once the same way, with the line the failure printed, instead of
# launching max_failed copies of the mistake; a sweep whose trials fail in different ways runs
# on. A trial that fails with a GPU's uncorrectable ECC error is the infrastructure's failure:
# LOST (node_failure) and retried, not FAILED, and not counted toward max_failed.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 >/dev/null
cat >"$WORK/typo.yaml" <<YAML
name: typo
command: "sh $WORK/trian.sh {x}"
parameters: {x: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 1, max_failed: 8}
YAML
hpo validate "$WORK/typo.yaml" | has "fail fast: paused if its first 3 trials to end all fail within 1m the same way" \
  || fail "validate does not describe fail-fast: $(hpo validate "$WORK/typo.yaml")"
id=$(hpo submit "$WORK/typo.yaml" | tail -n 1)
wait_for "[ \"\$(sql \"SELECT state FROM sweeps WHERE id=$id\")\" = SWEEP_STATE_PAUSED ]" 30
msg=$(sql "SELECT message FROM sweeps WHERE id=$id")
echo "$msg" | has "its first 3 trials all failed within 1m the same way (exit code 127): sh: 0: cannot open $WORK/trian.sh" \
  || echo "$msg" | has "its first 3 trials all failed within 1m the same way (exit code 2): sh: 0: cannot open $WORK/trian.sh" \
  || fail "unclear pause: $msg"
hpo show "$id" | has "trian.sh" || fail "hpo show does not say why: $(hpo show "$id")"
sleep 2
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 3 ] || fail "trials started after the pause"
pass "a typo pauses the sweep after 3 trials, with its error line"

cat >"$WORK/differ.yaml" <<YAML
name: differ
command: "echo 'failure {x}' >&2; exit {x}"
parameters: {x: [1, 2, 3, 4]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 1, max_failed: 8}
YAML
id=$(hpo submit "$WORK/differ.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || true
[ "$(sql "SELECT state FROM sweeps WHERE id=$id")" = SWEEP_STATE_COMPLETED ] \
  || fail "failures that differ paused or failed the sweep: $(sql "SELECT state, message FROM sweeps WHERE id=$id")"
pass "trials that fail in different ways run on"

cat >"$WORK/ecc.yaml" <<YAML
name: ecc
command: "if mkdir $WORK/ecc-once 2>/dev/null; then hpo report --step 1 loss=5; echo 'CUDA error: uncorrectable ECC error encountered' >&2; exit 1; fi; hpo report --step 1 loss={x}"
parameters: {x: [1, 2]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 1, max_failed: 1}
YAML
id=$(hpo submit "$WORK/ecc.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || true
[ "$(sql "SELECT state FROM sweeps WHERE id=$id")" = SWEEP_STATE_COMPLETED ] \
  || fail "an ECC error counted against the sweep: $(sql "SELECT state, message FROM sweeps WHERE id=$id")"
lost=$(sql "SELECT id FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_LOST' AND interruption='INTERRUPTION_NODE_FAILURE'")
[ -n "$lost" ] || fail "the ECC failure is not the infrastructure's: $(sql "SELECT state, interruption, message FROM trials WHERE sweep_id=$id")"
sql "SELECT message FROM trials WHERE id=$lost" | has "the infrastructure failed it (stderr /uncorrectable ECC error/).*: CUDA error: uncorrectable ECC error encountered" \
  || fail "unclear: $(sql "SELECT message FROM trials WHERE id=$lost")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE retry_of=$lost AND state='TRIAL_STATE_COMPLETED'")" -eq 1 ] || fail "the trial the ECC error took was not retried"
pass "an uncorrectable ECC error is the infrastructure's: LOST and retried, not FAILED"
