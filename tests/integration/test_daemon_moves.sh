#!/usr/bin/env bash
# hpod comes back at another address (as when it moves to another node): its trials, started
# with the old address in HPO_ENDPOINT, find the new one in the data directory's endpoint file
# (HPO_ENDPOINT_FILE) and their reports go on; `hpo report` and the Python helper both follow,
# and every report is stored once.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 >/dev/null
# Each trainer reports 40 steps 0.2 s apart, holding before step 11 while $WORK/hold exists (so
# the trials still run when hpod is back, however long its restart takes on a loaded machine)
# and before step 21 while $WORK/hold2 exists (so that they still run while the test looks for
# their reports at the new address).
touch "$WORK/hold" "$WORK/hold2"
cat >"$WORK/train.py" <<PY
import os
import time
import hpo
for s in range(1, 41):
    while (s == 11 and os.path.exists("$WORK/hold")) or (s == 21 and os.path.exists("$WORK/hold2")):
        time.sleep(0.1)
    hpo.report(step=s, loss=float(100 - s))
    time.sleep(0.2)
PY
cat >"$WORK/moves.yaml" <<YAML
command: >-
  if [ {way} = python ]; then exec $PY $WORK/train.py; fi;
  for s in \$(seq 1 40); do
  while [ \$s -eq 11 -a -e $WORK/hold ] || [ \$s -eq 21 -a -e $WORK/hold2 ]; do sleep 0.1; done;
  hpo report --step \$s loss=\$((100 - s)) || exit 1; sleep 0.2; done
parameters:
  way: [report, python]
algorithm: grid
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 2}
env: {PYTHONPATH: "$HPO_BIN/../python"}
YAML
id=$(hpo submit "$WORK/moves.yaml" | tail -n 1)
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS\") -ge 8 ]" 30
before=$(cat "$HPO_DATA_DIR/endpoint")
hpo daemon stop --keep-trials >/dev/null
rm -f "$HPO_DATA_DIR/tcp_port"  # the next start takes another port
hpo daemon start --cpus 2 >/dev/null
after=$(cat "$HPO_DATA_DIR/endpoint")
[ "$before" != "$after" ] || fail "hpod came back at the same address $after"
rm "$WORK/hold"
# Reports reach the new address while the trials still run (they hold before step 21), not only
# from their journals at their end.
live_before=$(sql "SELECT COUNT(*) FROM $ALL_REPORTS")
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS\") -ge $((live_before + 4)) ]" 60
[ "$(trial_processes "$id")" -gt 0 ] || fail "the trials ended while held before step 21"
rm "$WORK/hold2"
hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete after hpod moved"
bad=$(sql "SELECT trial_id || ':' || COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS GROUP BY trial_id HAVING COUNT(*) != 40 OR COUNT(DISTINCT step) != 40")
[ -z "$bad" ] || fail "reports missing or stored twice (trial:count/distinct steps): $bad"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_COMPLETED'")" -eq 2 ] || fail "not both trials completed"
pass "hpod moved from $before to $after; hpo report and Python followed it, 80 reports stored once"
