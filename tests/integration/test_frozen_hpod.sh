#!/usr/bin/env bash
# hpod itself frozen (SIGSTOP: what a hung file system, a swapped-out login node or a suspended
# VM look like from inside) for longer than its trials' hang timeout, while they keep training
# and reporting into their journals. When it is continued no trial is caught as hung: the
# watchdog counts only time in which hpod could hear, and reads a silent trial's journal before
# it acts. Every trial completes in its first run and each report is stored once.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
cat >"$WORK/train.sh" <<'SH'
#!/usr/bin/env bash
for s in $(seq 1 80); do
  hpo report --step "$s" loss=$((1000 - s)) || exit 1
  sleep 0.25
done
SH
chmod +x "$WORK/train.sh"
cat >"$WORK/frozen.yaml" <<YAML
command: "$WORK/train.sh {n}"
parameters: {n: [1, 2, 3, 4]}
algorithm: grid
objective: {metric: loss, direction: minimize}
budget: {max_concurrent: 4}
health: {report_timeout: 8s}
YAML
id=$(hpo submit "$WORK/frozen.yaml" | tail -n 1)
per_trial="SELECT COUNT(*) FROM $ALL_REPORTS GROUP BY trial_id HAVING COUNT(*) >= 8"
wait_for "[ \$(sql \"$per_trial\" | wc -l) -eq 4 ]" 60
pid=$(cat "$HPO_DATA_DIR/hpod.pid")
kill -STOP "$pid"
sleep 20
kill -CONT "$pid"
hpo wait "$id" --timeout 120 >/dev/null || fail "the sweep did not complete: $(hpo trials "$id" --where)"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 4 ] \
  || fail "trials were retried: $(sql "SELECT id, state, interruption, message FROM trials WHERE sweep_id=$id")"
for tid in $(sql "SELECT id FROM trials WHERE sweep_id=$id"); do
  state=$(sql "SELECT state || ' ' || interruption || ' ' || message FROM trials WHERE id=$tid")
  [ "$(sql "SELECT state FROM trials WHERE id=$tid")" = TRIAL_STATE_COMPLETED ] || fail "trial $tid: $state"
  counts=$(sql "SELECT COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS WHERE trial_id=$tid")
  [ "$counts" = 80/80 ] || fail "trial $tid: reports stored (all/distinct steps) $counts, not 80/80"
done
grep -q "hung: no report" "$HPO_DATA_DIR/hpod.log" && fail "hpod took a trial for hung: $(grep "hung: no report" "$HPO_DATA_DIR/hpod.log")"
grep -q "hpod did not run for" "$HPO_DATA_DIR/hpod.log" || fail "hpod did not say it was away"
pass "hpod frozen for 20 s past an 8 s hang timeout caught no trial; 4 trials once, 320 reports once"
