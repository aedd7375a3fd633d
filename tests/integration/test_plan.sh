#!/usr/bin/env bash
# hpo plan: what a sweep will cost before it runs, from the file's `plan:` (a trial's steps and a
# step's time) or from an earlier sweep (--like), against what the sweep then used; `hpo show`
# puts the two side by side, and the Python client plans the same. A file that does not say how
# long its trials are gets a clear error, and its pilot runs one trial to its end to learn it.
source "$(dirname "$0")/lib.sh"
# The pilot's stop after its last step reaches the trainer with that step's report however loaded
# the machine is: reports wait for hpod's answer (trials inherit hpod's environment; by default a
# report waits 50 ms and a later stop comes with the next report).
HPO_REPORT_WAIT=10s hpo daemon start --cpus 4 >/dev/null
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
hpo show "$id" | has -E "^plan: trials 6, GPU-hours 0, wall time 4.5s; used: trials 6, GPU-hours 0, wall time [0-9.]+s$" \
  || fail "hpo show: $(hpo show "$id")"
# What the plan said against what the sweep used: the wall time within a factor of 2 (each step
# also pays for a report and a process start), or, where a loaded machine made the trials
# themselves slower than their 5 x 0.3 s, within 2x of three rounds of the trials' own length.
used=$(sql "SELECT CAST(ROUND(ended_at - created_at) AS INTEGER) FROM sweeps WHERE id=$id")
trial_s=$(sql "SELECT AVG(ended_at - started_at) FROM trials WHERE sweep_id=$id")
[ "$used" -ge 3 ] && awk -v u="$used" -v t="$trial_s" 'BEGIN { exit !(u <= 9 || u <= 2 * 3 * t) }' \
  || fail "planned 4.5 s, used $used s (a trial took ${trial_s} s on average)"
pass "hpo plan from the file's plan: 6 trials, 30 steps, 4.5 s of wall time; the sweep used ${used} s, shown side by side"

hpo plan "$WORK/bare.yaml" --like "$id" >"$WORK/like.txt" || fail "hpo plan --like: $(cat "$WORK/like.txt")"
# The default early stopping may stop the last trial in some of the plan's runs, as it could in
# the sweep: the range may then reach below 30, and the median stays 30.
grep -Eq "^  steps +30( \([0-9]+ - 30\))?$" "$WORK/like.txt" \
  && grep -q "5 step(s) a trial (sweep $id's completed trials)" "$WORK/like.txt" \
  && grep -q "a step\(, [^(]*\)\? (sweep $id's 6 finished trial(s), on average)" "$WORK/like.txt" \
  || fail "hpo plan --like: $(cat "$WORK/like.txt")"
! hpo plan "$WORK/bare.yaml" --like 999 2>"$WORK/err" || fail "planned like a sweep that is not there"
grep -q "sweep 999" "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
PYTHONPATH="$HPO_BIN/../python" $PY - "$WORK/bare.yaml" "$id" <<'PYEOF' || fail "the Python client's plan"
import sys, hpo
c = hpo.Client()
p = c.plan(sys.argv[1], like=int(sys.argv[2]))
assert p["trials"] == (6, 6, 6), p
assert p["steps"][1:] == (30, 30), p
assert 2 <= p["wall_seconds"][1] <= 15, p
assert c.sweep(int(sys.argv[2])).status()["plan"]["trials"] == (6, 6, 6)
try:
    c.plan(sys.argv[1])
    raise SystemExit("planned without a trial's length")
except hpo.HpoError as e:
    assert "plan: {steps: N}" in str(e), e
PYEOF
pass "hpo plan --like learns from an earlier sweep's trials; the Python client plans the same"

# A pilot: the trainer takes 1.5 s to start, then 0.3 s a step. hpo plan --pilot runs two random
# configurations for three steps each, as a sweep of its own, and learns the step's time apart
# from the start's.
cat >"$WORK/slow.yaml" <<'YAML'
name: slow
command: >-
  sleep 1.5; for s in 1 2 3 4 5; do sleep 0.3; hpo report --step $s loss=$(echo "{x} / $s" | bc -l) || exit 1; done
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
early_stopping: {name: asha, max_resource: 5}
budget: {max_trials: 6, max_concurrent: 2}
seed: 4
plan: {steps: 5}
YAML
! hpo plan "$WORK/slow.yaml" --pilot --step-time 1s 2>"$WORK/err" || fail "a pilot with a declared step time"
grep -q "does not go with --like or --step-time" "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
# A file that does not say how long a trial is: its pilot runs one trial to its end as well.
hpo plan "$WORK/bare.yaml" --pilot --pilot-trials 1 --pilot-steps 2 >"$WORK/bare.txt" 2>"$WORK/bare.err" \
  || fail "hpo plan --pilot of a file without a trial's length: $(cat "$WORK/bare.txt" "$WORK/bare.err")"
bare=$(sed -n "s/^pilot: sweep \([0-9]*\) 'bare-pilot', 1 trial(s) of 2 step(s) and 1 to its end (a trial's length is not known), 2 at a time$/\1/p" "$WORK/bare.err")
[ -n "$bare" ] || fail "hpo plan --pilot said: $(cat "$WORK/bare.err")"
[ "$(sql "SELECT GROUP_CONCAT(state || ':' || step) FROM trials WHERE sweep_id=$bare ORDER BY number")" = "TRIAL_STATE_COMPLETED:5,TRIAL_STATE_STOPPED:2" ] \
  || fail "the pilot's trials: $(sql "SELECT number, state, step, message FROM trials WHERE sweep_id=$bare")"
grep -q "from        5 step(s) a trial (sweep $bare's completed trials), " "$WORK/bare.txt" \
  && grep -Eq "^  steps +30( \([0-9]+ - 30\))?$" "$WORK/bare.txt" || fail "the plan from the pilot: $(cat "$WORK/bare.txt")"
hpo plan "$WORK/slow.yaml" --pilot --pilot-trials 2 --pilot-steps 3 >"$WORK/pilot.txt" 2>"$WORK/pilot.err" \
  || fail "hpo plan --pilot: $(cat "$WORK/pilot.txt" "$WORK/pilot.err")"
pilot=$(sed -n "s/^pilot: sweep \([0-9]*\) 'slow-pilot', 2 trial(s) of 3 step(s), 2 at a time$/\1/p" "$WORK/pilot.err")
[ -n "$pilot" ] || fail "hpo plan --pilot said: $(cat "$WORK/pilot.err")"
[ "$(sql "SELECT GROUP_CONCAT(state || ':' || step) FROM trials WHERE sweep_id=$pilot")" = "TRIAL_STATE_STOPPED:3,TRIAL_STATE_STOPPED:3" ] \
  || fail "the pilot's trials: $(sql "SELECT state, step, message FROM trials WHERE sweep_id=$pilot")"
basis=$(sed -n 's/^  from        //p' "$WORK/pilot.txt")
seconds() { case "$1" in *ms) echo "${1%ms} / 1000" | bc -l ;; *s) echo "${1%s}" ;; esac; }
step_s=$(seconds "$(echo "$basis" | sed -n 's/.*, \([0-9.]*m\?s\) a step, .*/\1/p')")
start_s=$(seconds "$(echo "$basis" | sed -n 's/.*a step, \([0-9.]*m\?s\) to start .*/\1/p')")
[ -n "$step_s" ] && [ -n "$start_s" ] || fail "hpo plan --pilot: $(cat "$WORK/pilot.txt")"
echo "$basis" | has "(sweep $pilot's 2 finished trial(s), on average)" || fail "basis: $basis"
# A step is the sleep and a report (a process of its own); the start is the sleep before them.
awk -v s="$step_s" -v t="$start_s" 'BEGIN { exit !(s >= 0.25 && s <= 1 && t >= 1.2 && t <= 3) }' \
  || fail "the pilot measured ${step_s} s a step and ${start_s} s to start (0.3 s and 1.5 s)"
id=$(hpo submit "$WORK/slow.yaml" | tail -n 1)
hpo wait "$id" --timeout 90 >/dev/null || fail "the sweep did not complete"
planned=$(sed -n 's/^  wall time   \([0-9.]*\)s.*/\1/p' "$WORK/pilot.txt")
used=$(sql "SELECT CAST(ROUND(ended_at - created_at) AS INTEGER) FROM sweeps WHERE id=$id")
awk -v p="$planned" -v u="$used" 'BEGIN { exit !(p > 0 && u <= 2 * p && p <= 2 * u) }' \
  || fail "planned ${planned} s of wall time from the pilot, the sweep used ${used} s"
PYTHONPATH="$HPO_BIN/../python" $PY - "$WORK/slow.yaml" <<'PYEOF' || fail "the Python client's pilot"
import sys, hpo
c = hpo.Client()
p = c.plan(sys.argv[1], pilot=True, pilot_trials=2, pilot_steps=3, timeout=60)
assert c.sweep(p["pilot_sweep"]).status()["counts"] == {"STOPPED": 2}, p
assert "to start" in p["basis"] and f"sweep {p['pilot_sweep']}'s 2 finished" in p["basis"], p
PYEOF
pass "hpo plan --pilot: 2 trials of 3 steps measured $(printf %.2f "$step_s") s a step and $(printf %.2f "$start_s") s to start; planned ${planned} s, the sweep used ${used} s; the Python client runs the same pilot"
