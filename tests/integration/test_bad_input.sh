#!/usr/bin/env bash
# Bad input gets a clear error naming what and where, and changes nothing.
source "$(dirname "$0")/lib.sh"
hpo daemon start >/dev/null
printf 'name: broken\nparameters:\n  lr: {type: float, low: 0.1, high: [1\nobjective: {metric: m, direction: max}\n' >"$WORK/bad.yaml"
hpo validate "$WORK/bad.yaml" 2>"$WORK/err" && fail "validate accepted a malformed file"
grep -qE "bad.yaml:[0-9]+:[0-9]+: YAML syntax error" "$WORK/err" || fail "no file:line:col error: $(cat "$WORK/err")"
hpo submit "$WORK/bad.yaml" 2>"$WORK/err" && fail "submit accepted a malformed file"
printf 'parameters:\n  lr: {type: float, low: 1, high: 0}\nobjective: {metric: m, direction: max}\ncommand: x\nbudget: {max_trials: 2, max_concurent: 2}\n' >"$WORK/bad2.yaml"
hpo submit "$WORK/bad2.yaml" 2>"$WORK/err" && fail "submit accepted an impossible space"
grep -q "bad2.yaml:2:7: parameter 'lr': low must not exceed high" "$WORK/err" || fail "bad bounds: $(cat "$WORK/err")"
grep -q "bad2.yaml:5:25: unknown key 'max_concurent' in budget (did you mean 'max_concurrent'?)" "$WORK/err" || fail "typo: $(cat "$WORK/err")"
[ "$(sql 'SELECT COUNT(*) FROM sweeps')" -eq 0 ] || fail "an invalid sweep was stored"

# Reports: a wrong token stores nothing; NaN is refused clearly.
cat >"$WORK/report.yaml" <<'YAML'
command: "hpo report loss=nan; echo nan-exit=$?; hpo report --step 1 loss=0.5; echo ok-exit=$?; sleep 300"
parameters: {x: [1]}
objective: {metric: loss, direction: minimize}
algorithm: grid
YAML
id=$(hpo submit "$WORK/report.yaml" | tail -n 1)
trial=$(sql "SELECT id FROM trials WHERE sweep_id=$id")
wait_for "grep -q ok-exit $HPO_DATA_DIR/sweeps/$id/trials/00000/stdout.log" 20
out=$HPO_DATA_DIR/sweeps/$id/trials/00000
grep -q "nan-exit=1" "$out/stdout.log" || fail "a NaN report did not fail"
grep -q "only finite values" "$out/stderr.log" || fail "NaN error unclear: $(cat "$out/stderr.log")"
grep -q "ok-exit=0" "$out/stdout.log" || fail "a good report failed"
# The good report may have gone by the trial's sender, after `hpo report` returned.
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS WHERE trial_id=$trial\") -eq 1 ]" 20
endpoint=$(cat "$HPO_DATA_DIR/endpoint")
# A reporter with a wrong token cannot tell hpod's refusal from a stranger's (hpod's answer proves
# itself with the trial's token): the report waits in its journal, and hpo report says why (it
# looks for hpod's answer long enough to hear it on a loaded machine).
mkdir -p "$WORK/wrong"
HPO_REPORT_WAIT=10s HPO_ENDPOINT=$endpoint HPO_TLS_CA=$HPO_DATA_DIR/tls-ca.pem HPO_TRIAL_DIR=$WORK/wrong HPO_TRIAL_ID=$trial \
  HPO_TRIAL_TOKEN=not-the-token hpo report --step 2 loss=0.1 2>"$WORK/err" || fail "a wrong token failed the trial"
grep -q "the token is not this trial's" "$WORK/err" && grep -q "without proof that it is hpod" "$WORK/err" ||
  fail "wrong-token error unclear: $(cat "$WORK/err")"
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS WHERE trial_id=$trial")" -eq 1 ] || fail "refused reports were stored"
# The user API refuses a wrong user token too.
cp "$HPO_DATA_DIR/token" "$WORK/token"
echo wrong >"$HPO_DATA_DIR/token"
hpo ls 2>"$WORK/err" && fail "a wrong user token was accepted"
grep -q "token" "$WORK/err" || fail "user-token error unclear"
cp "$WORK/token" "$HPO_DATA_DIR/token"
hpo cancel "$id" >/dev/null
pass "malformed YAML, impossible space, typo, NaN and wrong tokens all refused with clear errors"
