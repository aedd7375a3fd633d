#!/usr/bin/env bash
# Canceling mid-sweep: running trials get SIGTERM, those that ignore it SIGKILL after the
# grace period; every trial ends CANCELED and no process of the sweep is left.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
cat >"$WORK/long.yaml" <<'YAML'
name: long
command: "if [ {n} -eq 1 ]; then trap '' TERM; fi; sleep 300 & sleep 300; wait"
parameters:
  n: [0, 1, 2]
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 3}
stop_grace: 1s
YAML
id=$(hpo submit "$WORK/long.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $id --state running | tail -n +2 | wc -l) -eq 3 ]" 20
# Each trial is a shell with two sleeps; under load they may take a moment to appear.
wait_for "[ \$(trial_processes $id) -ge 9 ]" 10
start=$(date +%s.%N)
hpo cancel "$id" | has CANCELED || fail "cancel did not end CANCELED"
took=$(echo "$(date +%s.%N) - $start" | bc)
n=$(hpo trials "$id" --state canceled | tail -n +2 | wc -l)
[ "$n" -eq 3 ] || fail "expected 3 CANCELED trials, got $n"
wait_for "[ \$(trial_processes $id) -eq 0 ]" 2
left=$(trial_processes "$id")
[ "$left" -eq 0 ] || fail "$left process(es) of the sweep are left"
hpo cancel "$id" 2>"$WORK/err" && fail "canceling an ended sweep should fail"
grep -q "already ended" "$WORK/err" || fail "no clear error for a second cancel"
pass "canceled in ${took}s; 3 trials CANCELED; no process left"
