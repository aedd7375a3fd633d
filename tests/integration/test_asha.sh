#!/usr/bin/env bash
# ASHA on the real daemon and local backend: trials that fall behind at a rung are told to stop in
# the reply to their report, exit, and end STOPPED with their curve kept; the best trials run all
# 27 epochs.
source "$(dirname "$0")/lib.sh"
# Each report waits for hpod's answer (its trials inherit hpod's environment), so that a stop
# reaches the trainer with the report that earned it however loaded the machine is; by default a
# report waits 50 ms, and a later answer comes with the next report (test_report_partition.sh).
HPO_REPORT_WAIT=10s hpo daemon start --cpus 4 >/dev/null
id=$(hpo submit "$HPO_SRC/examples/asha.yaml" | tail -n 1)
hpo wait "$id" --timeout 240 >/dev/null || fail "the ASHA sweep did not complete"
stopped=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_STOPPED'")
completed=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")
[ "$stopped" -ge 8 ] || fail "ASHA stopped only $stopped of 24 trials"
[ "$completed" -ge 1 ] || fail "no trial ran to the end"
[ $((stopped + completed)) -eq 24 ] || fail "$stopped stopped + $completed completed != 24"
sql "SELECT message FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_STOPPED'" | has "asha: at rung" \
  || fail "stopped trials do not say why"
# Stopped trials keep their curves and stopped at a rung (1, 3 or 9).
bad=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_STOPPED' AND step NOT IN (1, 3, 9)")
[ "$bad" -eq 0 ] || fail "$bad stopped trial(s) did not stop at a rung"
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON t.id=r.trial_id WHERE t.state='TRIAL_STATE_STOPPED'")" -ge "$stopped" ] \
  || fail "stopped trials lost their curves"
epochs=$(sql "SELECT SUM(step) FROM trials WHERE sweep_id=$id")
pass "ASHA: $stopped stopped, $completed completed, $epochs epochs in all (24 x 27 = 648 without stopping)"
