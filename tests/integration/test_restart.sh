#!/usr/bin/env bash
# Stopping hpod mid-sweep ends its trials (LOST, nothing left running); the next start retries
# them and the sweep completes with every configuration run; the store passes integrity_check.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 >/dev/null
cat >"$WORK/steps.yaml" <<'YAML'
command: "for s in 1 2 3 4 5 6; do hpo report --step $s loss=$(echo \"{x} / $s\" | bc -l) || exit 1; sleep 0.3; done"
parameters:
  x: {type: int, low: 1, high: 100}
objective: {metric: loss, direction: minimize}
early_stopping: none
budget: {max_trials: 6, max_concurrent: 2}
YAML
id=$(hpo submit "$WORK/steps.yaml" | tail -n 1)
# A watcher that must survive the restart by resuming the event stream.
hpo watch "$id" --interval 0.2 >"$WORK/watch.txt" 2>"$WORK/watch.err" &
watcher=$!
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS\") -ge 2 ]" 20
hpo daemon stop >/dev/null
wait_for "[ \$(trial_processes $id) -eq 0 ]" 5
lost=$(sql "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_LOST'")
[ "$lost" -ge 1 ] || fail "no trial was marked LOST at shutdown"
hpo daemon start --cpus 2 >/dev/null
hpo wait "$id" --timeout 120 >/dev/null || fail "sweep did not complete after the restart"
wait $watcher || fail "hpo watch did not survive the restart: $(cat "$WORK/watch.err")"
grep -q "reconnecting" "$WORK/watch.err" || fail "hpo watch did not notice the restart"
grep -q "COMPLETED 6" "$WORK/watch.txt" || fail "the watcher's final table lacks the completed trials"
done=$(sql "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_COMPLETED'")
[ "$done" -eq 6 ] || fail "expected 6 completed trials, got $done"
retried=$(sql "SELECT COUNT(*) FROM trials WHERE retry_of != 0")
[ "$retried" -eq "$lost" ] || fail "$lost lost but $retried retried"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check"
pass "$lost trial(s) LOST at stop, retried after start; 6 completed"
