#!/usr/bin/env bash
# Changing a sweep after it ended, through the CLI:
#  - `hpo extend --trials +2` reopens a COMPLETED sweep; it runs two more trials and the five
#    are the five a sweep of 5 from the start (same seed) runs;
#  - what gives nothing more (fewer trials than it made, a GPU-hour budget below what it used, a
#    canceled sweep, a malformed number) is refused with a clear error and changes nothing;
#  - `hpo rm` asks first, refuses a running sweep, and removes an ended one: rows, events and
#    trial directories; another sweep is untouched.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 --gpus 2 >/dev/null
sweep_file() {  # NAME TRIALS
  cat >"$WORK/$1.yaml" <<YAML
name: $1
command: "sleep 0.2; hpo report loss={x}"
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
budget: {max_trials: $2, max_concurrent: 2, gpu_hours: 1}
resources: {gpus: 1}
seed: 7
YAML
}
sweep_file grow 3
id=$(hpo submit "$WORK/grow.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete"
hpo extend "$id" --trials +2 >"$WORK/out" || fail "extend failed: $(cat "$WORK/out")"
grep -qE "extended by the owner \([a-z0-9_-]+\): trials 5 \(5 trial\(s\) max" "$WORK/out" || fail "unclear: $(cat "$WORK/out")"
hpo wait "$id" --timeout 60 >/dev/null || fail "the extended sweep did not complete: $(hpo show "$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 5 ] ||
  fail "5 trials should have completed: $(hpo trials "$id")"
sweep_file whole 5
whole=$(hpo submit "$WORK/whole.yaml" | tail -n 1)
hpo wait "$whole" --timeout 60 >/dev/null || fail "the sweep of 5 did not complete"
[ "$(sql "SELECT group_concat(params_json, ';') FROM (SELECT params_json FROM trials WHERE sweep_id=$id ORDER BY number)")" = \
  "$(sql "SELECT group_concat(params_json, ';') FROM (SELECT params_json FROM trials WHERE sweep_id=$whole ORDER BY number)")" ] ||
  fail "the extended sweep's points differ from a sweep of 5's"
pass "extend reopened the sweep and its search went on as if it had been larger from the start"

# Refusals: each says what is wrong and changes nothing.
before=$(sql "SELECT state || budget_json FROM sweeps WHERE id=$id")
refused 1 "already made 5 trial(s); --trials 5 gives it none more" extend "$id" --trials 5
refused 1 "GPU-hours; a budget of 1e-06 gives it nothing more" extend "$id" --trials +1 --gpu-hours 0.000001
refused 1 "nothing to change" extend "$id"
refused 2 "--trials abc: give a number of trials N or +N" extend "$id" --trials abc
refused 2 "--wall-time soon: give a duration" extend "$id" --wall-time soon
refused 1 "no sweep 999" extend 999 --trials +1
[ "$(sql "SELECT state || budget_json FROM sweeps WHERE id=$id")" = "$before" ] || fail "a refused extend changed the sweep"
sweep_file stopped 50
stopped=$(hpo submit "$WORK/stopped.yaml" | tail -n 1)
hpo cancel "$stopped" >/dev/null
refused 1 "is CANCELED: only a running sweep, or one that ran out of budget" extend "$stopped" --trials +1
hpo extend --help | has -- "--gpu-hours" || fail "extend --help lacks its options"
pass "extend refuses what gives nothing more, with a clear error, and changes nothing"

# hpo fork: a changed space inherits the old sweep's compatible trials, marked, never run again.
cat >"$WORK/forked.yaml" <<'YAML'
name: forked
command: "sleep 0.2; hpo report loss={x}"
parameters:
  x: {type: float, low: 0, high: 0.6}
  width: {type: int, low: 8, high: 64, default: 32}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 2}
YAML
inside=$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$whole AND state='TRIAL_STATE_COMPLETED' AND json_extract(params_json, '$.x') <= 0.6")
forked=$(hpo fork "$whole" "$WORK/forked.yaml" | tail -n 1)
hpo wait "$forked" --timeout 60 >/dev/null || fail "the fork did not complete"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$forked AND origin='warm_start' AND json_extract(params_json, '$.width') = 32 AND backend_id = ''")" -eq "$inside" ] ||
  fail "the fork should inherit the $inside trials inside its space: $(sql "SELECT number, origin, params_json, backend_id FROM trials WHERE sweep_id=$forked")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$forked AND origin='' AND state='TRIAL_STATE_COMPLETED'")" -eq 2 ] || fail "the fork should run its own 2"
hpo trials "$forked" >"$WORK/out"
grep -q "warm_start" "$WORK/out" || fail "hpo trials does not mark inherited trials"
hpo export "$forked" --format json -o "$WORK/forked.json"
grep -q '"origin": "warm_start"' "$WORK/forked.json" || fail "the export does not mark them"
sed -i 's/  width: {type: int, low: 8, high: 64, default: 32}/  width: {type: int, low: 8, high: 64}/' "$WORK/forked.yaml"
refused 1 "parameter 'width' is new; give it a default:" fork "$whole" "$WORK/forked.yaml"
printf 'parameters: {z: [1, 2]}\nobjective: {metric: loss, direction: minimize}\ncommand: t\nalgorithm: grid\nwarm_start: {sweep: %s}\n' "$whole" >"$WORK/nothing.yaml"
refused 1 "no parameter in common (it has x; this sweep z)" submit "$WORK/nothing.yaml"
pass "fork and warm_start inherit the compatible trials, marked and not run; no common parameter is refused"

# hpo rm
sweep_file slow 2
sed -i 's/sleep 0.2/sleep 30/' "$WORK/slow.yaml"
slow=$(hpo submit "$WORK/slow.yaml" | tail -n 1)
refused 1 "only an ended sweep can be removed (hpo cancel $slow first)" rm "$slow" --yes
hpo cancel "$slow" >/dev/null
[ -d "$HPO_DATA_DIR/sweeps/$id/trials/00000" ] || fail "no trial directory to remove"
echo n | hpo rm "$id" >"$WORK/out" 2>&1 && fail "rm went on without a yes"
grep -q "not removed" "$WORK/out" || fail "unclear: $(cat "$WORK/out")"
[ "$(sql "SELECT COUNT(*) FROM sweeps WHERE id=$id")" -eq 1 ] || fail "a declined rm removed the sweep"
echo y | hpo rm "$id" >"$WORK/out" 2>&1 || fail "rm failed: $(cat "$WORK/out")"
grep -q "remove sweep $id 'grow' (COMPLETED, 5 trial(s)) and its trial directories?" "$WORK/out" || fail "no question: $(cat "$WORK/out")"
for table in "sweeps WHERE id=$id" "trials WHERE sweep_id=$id" "events WHERE sweep_id=$id" \
  "reports WHERE trial_id IN (SELECT id FROM trials WHERE sweep_id=$id)"; do
  [ "$(sql "SELECT COUNT(*) FROM $table")" -eq 0 ] || fail "rm left rows in $table"
done
[ ! -e "$HPO_DATA_DIR/sweeps/$id" ] || fail "rm left $HPO_DATA_DIR/sweeps/$id"
refused 1 "no sweep $id" show "$id"
hpo rm "$stopped" --yes >/dev/null || fail "rm --yes failed"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$whole AND state='TRIAL_STATE_COMPLETED'")" -eq 5 ] || fail "rm touched another sweep"
[ -d "$HPO_DATA_DIR/sweeps/$whole/trials/00000" ] || fail "rm removed another sweep's directories"
hpo ls | has "^$id " && fail "hpo ls still lists the removed sweep"
pass "rm asks, refuses a running sweep, and removes an ended one with its directories"

# hpo enqueue: given points run first, are marked, and a point outside the space changes nothing.
cat >"$WORK/queue.yaml" <<'YAML'
name: queue
command: "sleep 0.2; hpo report loss={x}"
parameters:
  x: {type: float, low: 0, high: 1}
  act: [relu, tanh]
objective: {metric: loss, direction: minimize}
budget: {max_trials: 3, max_concurrent: 1}
enqueue:
  - {x: 0.125, act: tanh}
YAML
q=$(hpo submit "$WORK/queue.yaml" | tail -n 1)
hpo enqueue "$q" x=0.375 act=relu >"$WORK/out" || fail "enqueue failed: $(cat "$WORK/out")"
grep -q "1 configuration(s) enqueued by the user" "$WORK/out" || fail "unclear: $(cat "$WORK/out")"
refused 1 "configuration 1: x=7 is outside the space (x is a float in [0, 1])" enqueue "$q" x=7 act=relu
refused 1 "act=gelu is not one of its choices (relu, tanh)" enqueue "$q" x=0.5 act=gelu
refused 1 "no parameter 'y' in the space" enqueue "$q" x=0.5 act=relu y=1
refused 2 "'x': give name=value" enqueue "$q" x
hpo wait "$q" --timeout 60 >/dev/null || fail "the queue sweep did not complete"
[ "$(sql "SELECT group_concat(origin || ':' || params_json, ' ') FROM (SELECT origin, params_json FROM trials WHERE sweep_id=$q ORDER BY number LIMIT 2)")" = \
  'enqueued:{"act":"tanh","x":0.125} enqueued:{"act":"relu","x":0.375}' ] ||
  fail "the given points did not run first: $(sql "SELECT number, origin, params_json FROM trials WHERE sweep_id=$q")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$q")" -eq 3 ] || fail "they should count toward max_trials"
hpo trials "$q" >"$WORK/out"
grep -q "enqueued" "$WORK/out" || fail "hpo trials does not mark them: $(hpo trials "$q")"
hpo export "$q" --format csv -o "$WORK/q.csv"
grep -q ",enqueued," "$WORK/q.csv" || fail "the export does not mark them"
pass "enqueued points run first, count toward the budget, are marked, and bad points are refused"
