#!/usr/bin/env bash
# Several objectives through the real CLI: examples/multi_objective.yaml (accuracy up, model size
# down, a bound on the running time hpod measures; NSGA-II with multi-objective ASHA) runs; hpo
# best prints the Pareto front, hpo trials --pareto lists it, the exports mark each trial's rank
# and front membership (checked against the definition), and the Pareto and hypervolume plots
# are drawn. Bad objectives and constraints are refused at validate with file:line.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
sed 's/max_trials: 32/max_trials: 16/' "$HPO_SRC/examples/multi_objective.yaml" >"$WORK/mo.yaml"
cp "$HPO_SRC/examples/train_spiral.py" "$WORK/"
hpo validate "$WORK/mo.yaml" >"$WORK/out"
grep -q "objectives: maximize val_acc, minimize n_params (last values; the Pareto front)" "$WORK/out" \
  || fail "validate does not summarize the objectives: $(cat "$WORK/out")"
grep -q "constraints: hpo.runtime_s <= 300" "$WORK/out" || fail "validate lacks the constraint"
id=$(hpo submit "$WORK/mo.yaml" | tail -n 1)
hpo wait "$id" --timeout 120 >/dev/null || fail "the sweep did not complete: $(hpo show "$id")"

hpo best "$id" >"$WORK/best"
grep -q "^Pareto front of sweep $id: [0-9]* trial(s) of val_acc ↑, n_params ↓ subject to hpo.runtime_s <= 300" \
  "$WORK/best" || fail "hpo best does not print the front: $(cat "$WORK/best")"
n=$(sed -n 's/^Pareto front of sweep [0-9]*: \([0-9]*\) trial.*/\1/p' "$WORK/best")
[ "$(grep -cE 'COMPLETED .* front( |$)' "$WORK/best")" -eq "$n" ] || fail "hpo best lists other trials: $(cat "$WORK/best")"
[ "$(hpo trials "$id" --pareto | grep -cE 'COMPLETED .* front( |$)')" -eq "$n" ] || fail "hpo trials --pareto differs from hpo best"
hpo ls | has "front of $n" || fail "hpo ls lacks the front: $(hpo ls)"
hpo best "$id" --json >"$WORK/best.json"
hpo export "$id" --format json -o "$WORK/all.json"
hpo export "$id" --format csv -o "$WORK/all.csv"
head -n 1 "$WORK/all.csv" | has "pareto_rank,on_front,feasible" || fail "the CSV lacks the Pareto columns"
$PY - "$WORK/all.json" "$WORK/best.json" "$WORK/all.csv" "$n" <<'PYEOF'
import csv, json, sys
exp, best = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = {int(r["trial_id"]): r for r in csv.DictReader(open(sys.argv[3]))}
n = int(sys.argv[4])
s = exp["sweep"]
assert [o["metric"] for o in s["objectives"]] == ["val_acc", "n_params"], s
assert s["constraints"] == ["hpo.runtime_s <= 300"] and s["pareto_front_size"] == n, s
done = [t for t in exp["trials"] if t["state"] == "COMPLETED"]
assert done, "no completed trial"
for t in done:  # what hpod measured is among the metrics, and the bound held
    assert 0 < t["metrics"]["hpo.runtime_s"] <= 300 and t["feasible"], t
    assert t["objective_values"] == [t["metrics"]["val_acc"], t["metrics"]["n_params"]], t
def dominates(a, b):  # val_acc up, n_params down
    x, y = (-a["metrics"]["val_acc"], a["metrics"]["n_params"]), (-b["metrics"]["val_acc"], b["metrics"]["n_params"])
    return all(p <= q for p, q in zip(x, y)) and x != y
front = {t["trial_id"] for t in done if not any(dominates(o, t) for o in done)}
assert front == {t["trial_id"] for t in best["trials"]} == {t["trial_id"] for t in exp["trials"] if t.get("on_front")}, \
    (front, [t["trial_id"] for t in best["trials"]])
for t in exp["trials"]:
    r = rows[t["trial_id"]]
    assert (r["on_front"] == "true") == (t["trial_id"] in front), r
    assert (r["pareto_rank"] == "") == (t["state"] != "COMPLETED"), r
print(f"{len(done)} completed, front of {len(front)}: {sorted(front)}")
PYEOF
hpo plot "$id" --kind pareto -o "$WORK/pareto.png" >/dev/null
hpo plot "$id" --kind hypervolume -o "$WORK/hv.png" >/dev/null
[ -s "$WORK/pareto.png" ] && [ -s "$WORK/hv.png" ] || fail "the plots were not drawn"

# One objective: no front to list.
printf 'parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: "hpo report m=1"\nalgorithm: grid\n' >"$WORK/one.yaml"
one=$(hpo submit "$WORK/one.yaml" | tail -n 1)
refused 2 "has one objective and no constraints: no Pareto front" trials "$one" --pareto
refused 1 "a Pareto plot needs a sweep with several objectives" plot "$one" --kind pareto -o "$WORK/x.png"

# Bad objectives and constraints: file:line, nothing stored.
before=$(sql "SELECT COUNT(*) FROM sweeps")
cat >"$WORK/bad.yaml" <<'YAML'
parameters: {x: [1]}
command: "true"
objectives:
  - {metric: a, direction: max}
  - {metric: hpo.flops, direction: min}
constraints: ["a < 3"]
YAML
refused 1 "bad.yaml:5:14: objectives[2] metric 'hpo.flops': names under hpo. are the metrics hpod measures" validate "$WORK/bad.yaml"
grep -q "bad.yaml:6:15: constraints\[1\] 'a < 3' must read METRIC <= NUMBER or METRIC >= NUMBER" "$WORK/out" \
  || fail "the constraint error lacks its place: $(cat "$WORK/out")"
refused 1 "bad.yaml:5:14" submit "$WORK/bad.yaml"
[ "$(sql "SELECT COUNT(*) FROM sweeps")" -eq "$before" ] || fail "a refused sweep was stored"
pass "several objectives: the front from hpo best, trials --pareto, ls and the exports, plots, and file:line errors"
