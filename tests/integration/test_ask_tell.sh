#!/usr/bin/env bash
# Ask and tell (`backend: external`), through the CLI: hpo ask gives a trial's id, parameters and
# token as JSON; the trial reports with hpo report (and early stopping answers it: exit 10); hpo
# tell ends it; a trial not heard from within external.timeout ends LOST; what cannot be asked
# or told is refused with a clear error and changes nothing.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 --gpus 0 >/dev/null
cat >"$WORK/ext.yaml" <<'YAML'
name: ext
backend: external
external: {timeout: 15s}
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 6, max_concurrent: 2}
max_retries: 0
early_stopping: {name: median, min_trials: 2, grace_steps: 1}
YAML
id=$(hpo submit "$WORK/ext.yaml" | tail -n 1)
field() { $PY -c "import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
as_trial() {  # JSON CMD...: run CMD as that trial (its id, token, endpoint and CA in the environment)
  local j=$1
  shift
  HPO_TRIAL_ID=$(field "$j" trial_id) HPO_TRIAL_TOKEN=$(field "$j" token) HPO_ENDPOINT=$(field "$j" endpoint) \
    HPO_TLS_CA_DATA=$(field "$j" tls_ca_data) "$@"
}
# Two good trials reach step 3 and complete.
for i in 1 2; do
  j=$(hpo ask "$id")
  for step in 1 2 3; do as_trial "$j" hpo report --step "$step" loss=0.1 || fail "a report of a good trial was refused"; done
  [ "$(hpo tell "$(field "$j" trial_id)" --state completed)" = "trial $(field "$j" trial_id) COMPLETED" ] || fail "tell completed"
done
# A bad one is told to stop by the median rule at its report: exit 10; it ends STOPPED when told.
j=$(hpo ask "$id")
set +e
as_trial "$j" hpo report --step 2 loss=9
rc=$?
set -e
[ "$rc" -eq 10 ] || fail "early stopping did not answer the external trial (exit $rc)"
[ "$(hpo tell "$(field "$j" trial_id)" --state completed)" = "trial $(field "$j" trial_id) STOPPED" ] || fail "a stopped trial should end STOPPED"
# One that says nothing for 15 s is LOST (wide enough that a loaded machine's pauses between
# the reports above never reach it); one told failed is FAILED.
lost=$(hpo ask "$id")
failed=$(hpo ask "$id")
hpo tell "$(field "$failed" trial_id)" --state failed --message "diverged" >/dev/null
wait_for "[ \"\$(sql \"SELECT state FROM trials WHERE id=$(field "$lost" trial_id)\")\" = TRIAL_STATE_LOST ]" 40
grep -q "not heard from" <<<"$(sql "SELECT message FROM trials WHERE id=$(field "$lost" trial_id)")" || fail "unclear LOST message"
[ "$(sql "SELECT message FROM trials WHERE id=$(field "$failed" trial_id)")" = "diverged" ] || fail "the tell message was not kept"
pass "ask gives trials, reports are answered by early stopping, tell ends them, silence is LOST"

refused 1 "is STOPPED, not running: nothing to tell" tell "$(field "$j" trial_id)" --state completed
refused 2 "--state" tell 1 --state done
refused 1 "no trial 999" tell 999 --state completed
last=$(hpo ask "$id")
refused 1 "has no trial left to give out" ask "$id"
hpo tell "$(field "$last" trial_id)" --state completed >/dev/null
hpo wait "$id" --timeout 20 >/dev/null || fail "the sweep did not complete once its trials were told"
refused 1 "it gives out no trial" ask "$id"
cat >"$WORK/local.yaml" <<'YAML'
command: "hpo report loss=1"
parameters: {x: [1]}
objective: {metric: loss, direction: minimize}
algorithm: grid
YAML
other=$(hpo submit "$WORK/local.yaml" | tail -n 1)
refused 1 "ask and tell are for a sweep with backend: external" ask "$other"
hpo ask --help | has "HPO_TRIAL_TOKEN" || fail "ask --help"
pass "ask and tell refuse what they cannot do, with a clear error"
