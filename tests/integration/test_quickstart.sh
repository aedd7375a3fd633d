#!/usr/bin/env bash
# The quickstart: a 20-trial random sweep, 4 at a time, with the real example program; every
# trial's params and metrics are stored and `hpo best` names the right trial.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
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
for t in trials:
    assert t["state"] == "COMPLETED", t
    assert set(t["params"]) == {"lr", "hidden", "activation", "weight_decay", "epochs"}, t["params"]
    assert set(t["metrics"]) == {"val_acc", "val_loss", "n_params"}, t["metrics"]
    assert t["objective"] == t["metrics"]["val_acc"], t
    assert t["step"] == 25 and t["report_count"] == 25, t
    assert t["backend_id"].startswith("local:pid="), t
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
print(f"20 trials completed, peak concurrency {peak}, best val_acc {best['objective']:.4f} (trial {best['trial_id']})")
PYEOF
n=$(sql "SELECT COUNT(*) FROM $ALL_REPORTS")
[ "$n" -eq 1500 ] || fail "expected 20 trials x 25 epochs x 3 metrics = 1500 report rows, found $n"
[ "$(sql 'PRAGMA integrity_check')" = ok ] || fail "integrity check"
[ "$(sql 'PRAGMA journal_mode')" = wal ] || fail "store is not in WAL mode"
pass "quickstart sweep $id: 20 trials, 1500 report rows"
