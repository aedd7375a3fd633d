#!/usr/bin/env bash
# hpo plan: what a sweep will cost before it runs, from the file's `plan:` (a trial's steps and a
# step's time) or from an earlier sweep (--like), against what the sweep then used; `hpo show`
# puts the two side by side, and the Python client plans the same. A file that does not say how
# long its trials are gets a clear error.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
# Each trial: 5 steps, 0.3 s each.
sweep() {  # sweep NAME [MORE YAML]
  cat <<YAML
name: $1
command: >-
  for s in 1 2 3 4 5; do sleep 0.3; hpo report --step \$s loss=\$(echo "{x} / \$s" | bc -l) || exit 1; done
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 6, max_concurrent: 2}
seed: 3
${2:-}
YAML
}
sweep bare >"$WORK/bare.yaml"
! hpo plan "$WORK/bare.yaml" 2>"$WORK/err" || fail "planned a sweep whose trials' length is unknown"
grep -q "how many steps a trial reports is not known: give \`plan: {steps: N}\`" "$WORK/err" \
  || fail "unclear error: $(cat "$WORK/err")"
! hpo plan "$WORK/bare.yaml" --steps 5 --step-time soon 2>"$WORK/err" || fail "took a bad step time"
grep -q "\-\-step-time: 'soon' is not a duration" "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
hpo plan "$WORK/bare.yaml" --steps 5 >"$WORK/out" || fail "hpo plan --steps: $(cat "$WORK/out")"
grep -Eq "^  steps +30$" "$WORK/out" && grep -q "cost        unknown: no step time" "$WORK/out" \
  || fail "hpo plan --steps: $(cat "$WORK/out")"

sweep declared "plan: {steps: 5, step_time: 0.3s}" >"$WORK/declared.yaml"
hpo plan "$WORK/declared.yaml" >"$WORK/plan.txt" || fail "hpo plan: $(cat "$WORK/plan.txt")"
grep -Eq "^  trials +6$" "$WORK/plan.txt" && grep -Eq "^  steps +30$" "$WORK/plan.txt" \
  && grep -Eq "^  wall time +4.5s$" "$WORK/plan.txt" \
  && grep -q "from        5 step(s) a trial (the file's plan.steps), 300ms a step (the file's plan.step_time)" "$WORK/plan.txt" \
  || fail "hpo plan: $(cat "$WORK/plan.txt")"
! grep -q "queue wait" "$WORK/plan.txt" || fail "a queue wait on the local backend"
id=$(hpo submit "$WORK/declared.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete"
hpo show "$id" | grep -Eq "^plan: trials 6, GPU-hours 0, wall time 4.5s; used: trials 6, GPU-hours 0, wall time [0-9.]+s$" \
  || fail "hpo show: $(hpo show "$id")"
# What the plan said against what the sweep used: the wall time within a factor of 2 (each step
# also pays for a report and a process start).
used=$(sql "SELECT CAST(ROUND(ended_at - created_at) AS INTEGER) FROM sweeps WHERE id=$id")
[ "$used" -ge 3 ] && [ "$used" -le 9 ] || fail "planned 4.5 s, used $used s"
pass "hpo plan from the file's plan: 6 trials, 30 steps, 4.5 s of wall time; the sweep used ${used} s, shown side by side"

hpo plan "$WORK/bare.yaml" --like "$id" >"$WORK/like.txt" || fail "hpo plan --like: $(cat "$WORK/like.txt")"
grep -Eq "^  steps +30$" "$WORK/like.txt" \
  && grep -q "5 step(s) a trial (sweep $id's completed trials)" "$WORK/like.txt" \
  && grep -q "a step (sweep $id's 6 finished trial(s), on average)" "$WORK/like.txt" \
  || fail "hpo plan --like: $(cat "$WORK/like.txt")"
! hpo plan "$WORK/bare.yaml" --like 999 2>"$WORK/err" || fail "planned like a sweep that is not there"
grep -q "sweep 999" "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
PYTHONPATH="$HPO_BIN/../python" $PY - "$WORK/bare.yaml" "$id" <<'PYEOF' || fail "the Python client's plan"
import sys, hpo
c = hpo.Client()
p = c.plan(sys.argv[1], like=int(sys.argv[2]))
assert p["trials"] == (6, 6, 6), p
assert p["steps"] == (30, 30, 30), p
assert 2 <= p["wall_seconds"][1] <= 15, p
assert c.sweep(int(sys.argv[2])).status()["plan"]["trials"] == (6, 6, 6)
try:
    c.plan(sys.argv[1])
    raise SystemExit("planned without a trial's length")
except hpo.HpoError as e:
    assert "plan: {steps: N}" in str(e), e
PYEOF
pass "hpo plan --like learns from an earlier sweep's trials; the Python client plans the same"
