#!/usr/bin/env bash
# The quickstart: a 20-trial sweep, 4 at a time, with the real example program and hpod's
# defaults (algorithm and early stopping auto); every trial's params and metrics are stored,
# `hpo show` says what auto chose, and `hpo best` names the right trial.
source "$(dirname "$0")/lib.sh"
# Each report waits for hpod's answer (HPO_REPORT_WAIT, through hpod's environment): a stop then
# reaches its trial with the report at the rung even on a loaded machine, not with the next one.
HPO_REPORT_WAIT=10s hpo daemon start --cpus 4 >/dev/null
id=$(hpo submit "$HPO_SRC/examples/quickstart.yaml" | tail -n 1)
[[ "$id" =~ ^[0-9]+$ ]] || fail "submit did not print a sweep id last: '$id'"
hpo wait "$id" --timeout 240 || fail "sweep $id did not complete (wait exit $?)"
hpo export "$id" --format json -o "$WORK/export.json"
hpo export "$id" --format csv -o "$WORK/export.csv"
hpo best "$id" --json >"$WORK/best.json"
$PY - "$WORK" <<'PYEOF'
import csv, json, sys
from datetime import datetime
work = sys.argv[1]
exp = json.load(open(f"{work}/export.json"))
trials = exp["trials"]
assert len(trials) == 20, len(trials)
reports = 0
for t in trials:
    # auto's ASHA (rungs 1, 3, 9 of 25, learned from the first trial to complete) stops a trial
    # only at a rung whose values predict the end, and says so.
    assert t["state"] in ("COMPLETED", "STOPPED"), t
    if t["state"] == "STOPPED":
        assert "rank correlation with step 25" in t["message"], t
        assert t["step"] in (1, 3, 9), t
    else:
        assert t["step"] == 25, t
    assert t["report_count"] == t["step"], t
    reports += t["report_count"]
    assert set(t["params"]) == {"lr", "hidden", "activation", "weight_decay", "epochs"}, t["params"]
    assert set(t["metrics"]) == {"val_acc", "val_loss", "n_params"}, t["metrics"]
    assert t["objective"] == t["metrics"]["val_acc"], t
    assert t["backend_id"].startswith("local:pid="), t
assert sum(t["state"] == "COMPLETED" for t in trials) >= 5, "rungs act after 5 ran to the end"
open(f"{work}/reports", "w").write(str(reports))
best = max(trials, key=lambda t: t["objective"])
got = json.load(open(f"{work}/best.json"))["trials"][0]
assert got["trial_id"] == best["trial_id"], (got, best)
assert exp["sweep"]["best_trial_id"] == best["trial_id"]
# Concurrency: never more than 4 trials at once, and more than 1 at some point.
def ts(s): return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
edges = sorted([(ts(t["started_at"]), 1) for t in trials] + [(ts(t["ended_at"]), -1) for t in trials],
               key=lambda e: (e[0], e[1]))
running = peak = 0
for _, d in edges:
    running += d
    peak = max(peak, running)
assert 1 < peak <= 4, peak
rows = list(csv.DictReader(open(f"{work}/export.csv")))
assert len(rows) == 20 and "param.lr" in rows[0] and "metric.val_acc" in rows[0], rows[0].keys()
stopped = sum(t["state"] == "STOPPED" for t in trials)
print(f"20 trials ({stopped} stopped early), peak concurrency {peak}, best val_acc {best['objective']:.4f} (trial {best['trial_id']})")
PYEOF
n=$(sql "SELECT COUNT(*) FROM $ALL_REPORTS")
want=$(($(cat "$WORK/reports") * 3))
[ "$n" -eq "$want" ] || fail "expected the trials' reports x 3 metrics = $want report rows, found $n"
hpo show "$id" >"$WORK/show"
grep -q "^algorithm auto: tpe: modelling the trials that reported; chosen because TPE" "$WORK/show" ||
  fail "hpo show does not say what auto chose: $(cat "$WORK/show")"
grep -q "^early stopping auto: asha, rungs at steps 1, 3, 9 of 25 (trial #" "$WORK/show" ||
  fail "hpo show does not say what auto stops by: $(cat "$WORK/show")"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check"
[ "$(sql 'PRAGMA journal_mode')" = wal ] || fail "store is not in WAL mode"
pass "quickstart sweep $id: 20 trials, $n report rows; $(grep '^early stopping auto' "$WORK/show" | cut -c1-60)..."
