#!/usr/bin/env bash
# budget.gpu_hours on the local backend: 1-GPU trials of about a second, 2 at a time, and a budget
# of 0.002 GPU-hours (7.2 GPU-seconds). Once the trials used it no trial starts, the running ones
# complete, and the sweep ends COMPLETED saying why; hpo show, hpo ls and the export show the
# GPU-hours, and hpod's count agrees with the trials' own clocks. Node-hours (each 1-node trial's
# running time) are shown too, and a node-hour budget below what was used is refused.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 --gpus 2 >/dev/null
cat >"$WORK/budget.yaml" <<'YAML'
name: gpu-budget
command: "date +%s.%N > $HPO_TRIAL_DIR/start; sleep 1.5; hpo report loss={x}; date +%s.%N > $HPO_TRIAL_DIR/end"
parameters:
  x: {type: float, low: 0, high: 1}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 40, max_concurrent: 2, gpu_hours: 0.002}
resources: {gpus: 1}
YAML
id=$(hpo submit "$WORK/budget.yaml" | tail -n 1)
wait_for "hpo show $id | has 'GPU-hours .* of 0.002 (.*%), [12] GPU(s) held: the budget lasts about'" 20
hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete: $(hpo show "$id")"
hpo show "$id" >"$WORK/show"
grep -q "budget.gpu_hours (0.002) was reached" "$WORK/show" || fail "the sweep does not say the budget ended it: $(cat "$WORK/show")"
hpo ls >"$WORK/ls"
grep -q "GPU-hours" "$WORK/ls" && grep -q "/0.002" "$WORK/ls" || fail "hpo ls lacks GPU-hours: $(cat "$WORK/ls")"
hpo export "$id" --format json -o "$WORK/export.json"
$PY - "$WORK/export.json" "$HPO_DATA_DIR/sweeps/$id/trials" <<'PYEOF'
import json, os, sys
exp = json.load(open(sys.argv[1]))
sweep, trials = exp["sweep"], exp["trials"]
assert sweep["gpu_hours_budget"] == 0.002, sweep
ran = [t for t in trials if t["state"] == "COMPLETED"]
assert 4 <= len(ran) < 40, ("the budget should end the sweep after a few trials", len(ran))
assert all(t["state"] in ("COMPLETED", "CANCELED") for t in trials), [t["state"] for t in trials]
used = sum(t["gpu_seconds"] for t in trials)
assert abs(sweep["gpu_hours"] * 3600 - used) < 1e-6, (sweep["gpu_hours"], used)
assert used >= 7.2, ("stopped before the budget was used", used)
# The trials' own clocks: hpod's count is their run time, give or take its start-up and tick.
own = 0.0
for t in ran:
    d = t["trial_dir"]
    own += float(open(d + "/end").read()) - float(open(d + "/start").read())
assert own <= used <= own + 0.5 * len(ran), ("hpod's GPU-seconds", used, "the trials'", own)
# 1-GPU, 1-node trials: as many node-seconds as GPU-seconds; no allocation outside Slurm.
assert abs(sweep["node_hours"] - sweep["gpu_hours"]) < 1e-9, sweep
assert sweep["allocation_gpu_hours"] == 0 and sweep["utilization"] is None, sweep
assert sweep["node_hours_budget"] is None and sweep["budget_seconds_left"] is None, sweep
print(f"{len(ran)} trials ran, {used:.2f} GPU-s counted by hpod, {own:.2f} s by the trials")
PYEOF
grep -q "^node-hours [0-9.e-]*$" "$WORK/show" || fail "hpo show lacks the node-hours: $(cat "$WORK/show")"
before=$(hpo show "$id")
hpo extend "$id" --node-hours 0.0001 >"$WORK/out" 2>&1 && fail "a node-hour budget below the used one was taken"
grep -q "already used .* node-hours; a budget of 0.0001 gives it nothing more" "$WORK/out" \
  || fail "unclear refusal: $(cat "$WORK/out")"
rc=0; hpo extend "$id" --node-hours x >"$WORK/out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--node-hours x is not a usage error (exit $rc)"
grep -q "give node-hours X or +X" "$WORK/out" || fail "unclear usage error: $(cat "$WORK/out")"
[ "$(hpo show "$id")" = "$before" ] || fail "a refused extend changed the sweep"

# An operator adds GPU-hours only up to the cap the owner gave them; each extend names who did it.
hpo user add opal --role operator --max-extend-gpu-hours 0.01 >/dev/null 2>&1
hpo user ls | has -P "^opal\toperator\tmax_extend_gpu_hours=0.01$" || fail "hpo user ls: $(hpo user ls)"
as_opal() { HPO_SERVER=$(cat "$HPO_DATA_DIR/endpoint") HPO_TLS_CA=$HPO_DATA_DIR/tls-ca.pem HPO_TOKEN_FILE=$HPO_DATA_DIR/users/opal.token "$@"; }
as_opal hpo extend "$id" --gpu-hours +0.008 --trials +2 >/dev/null || fail "opal's extend within the cap was refused"
before=$(sql "SELECT budget_json FROM sweeps WHERE id=$id")
if as_opal hpo extend "$id" --gpu-hours +0.004 >"$WORK/out" 2>&1; then fail "opal extended past the cap"; fi
grep -q "opal may add at most 0.01 GPU-hours to a sweep's budget" "$WORK/out" || fail "unclear: $(cat "$WORK/out")"
[ "$(sql "SELECT budget_json FROM sweeps WHERE id=$id")" = "$before" ] || fail "a refused extend changed the budget"
PYTHONPATH="$HPO_BIN/../python" $PY - "$HPO_DATA_DIR/hpod.db" "$id" <<'PYEOF' || fail "the sweep's events do not name who extended it"
import sqlite3, sys
from hpo.v1 import hpo_pb2
db, sweep = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
said = set()
for (payload,) in db.execute("SELECT payload FROM events WHERE sweep_id=? AND trial_id=0", (sweep,)):
    e = hpo_pb2.Event()
    e.ParseFromString(payload)
    said.add(e.sweep.message)
assert any(m.startswith("extended by opal: ") for m in said), said
PYEOF
pass "a GPU-hour budget stops new trials, lets the running ones finish, and is shown; an operator's extends stop at the owner's cap"
