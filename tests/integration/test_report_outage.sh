#!/usr/bin/env bash
# hpod away while trials report, one trial for each way a trainer reports (`hpo exec`, `hpo
# report`, the Python helper): hpod is killed (-9) mid-sweep and stays down for 6 s. The
# trainers keep their pace through the outage (measured from their own timestamps; the `hpo
# exec` one prints enough to fill its pipe if nothing read it), no report fails, and afterwards
# each report is stored exactly once.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
cat >"$WORK/train.sh" <<'SH'
#!/usr/bin/env bash
# $1: how it reports. 40 steps, 0.25 s apart; the time of each step goes to pace.log.
way=$1
if [ "$way" = exec ]; then exec hpo exec -- "$0" exec-inner; fi
filler=$(printf '%0.s#' $(seq 1 120))
for s in $(seq 1 40); do
  date +%s.%N >>"$HPO_TRIAL_DIR/pace.log"
  case $way in
    exec-inner)
      for _ in $(seq 1 40); do echo "$filler"; done  # about 5 KB a step
      echo "FoM: $((100 - s))" ;;
    report) hpo report --step "$s" loss=$((100 - s)) || exit 1 ;;
    python) ;;
  esac
  sleep 0.25
done
SH
chmod +x "$WORK/train.sh"
cat >"$WORK/train.py" <<'PY'
import os, time
import hpo
for s in range(1, 41):
    with open(os.path.join(os.environ["HPO_TRIAL_DIR"], "pace.log"), "a") as f:
        f.write(f"{time.time()}\n")
    hpo.report(step=s, loss=float(100 - s))
    time.sleep(0.25)
PY
cat >"$WORK/outage.yaml" <<YAML
command: "if [ {way} = python ]; then exec $PY $WORK/train.py; else exec $WORK/train.sh {way}; fi"
parameters:
  way: [exec, report, python]
algorithm: grid
objective: {metric: loss, direction: minimize}
budget: {max_trials: 3, max_concurrent: 3}
env: {PYTHONPATH: "$HPO_BIN/../python"}
YAML
id=$(hpo submit "$WORK/outage.yaml" | tail -n 1)
per_trial="SELECT COUNT(*) FROM $ALL_REPORTS GROUP BY trial_id HAVING COUNT(*) >= 5"
wait_for "[ \$(sql \"$per_trial\" | wc -l) -eq 3 ]" 30
pid=$(cat "$HPO_DATA_DIR/hpod.pid")
down=$(date +%s.%N)
kill -9 "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
sleep 6
up=$(date +%s.%N)
hpo daemon start --cpus 4 >/dev/null
hpo wait "$id" --timeout 90 >/dev/null || fail "the sweep did not complete after the outage"

for tid in $(sql "SELECT id FROM trials WHERE sweep_id=$id"); do
  way=$(sql "SELECT json_extract(params_json, '\$.way') FROM trials WHERE id=$tid" 2>/dev/null || true)
  dir=$(sql "SELECT trial_dir FROM trials WHERE id=$tid")
  state=$(sql "SELECT state FROM trials WHERE id=$tid")
  [ "$state" = TRIAL_STATE_COMPLETED ] ||
    fail "trial $tid ($way): $state $(sql "SELECT message FROM trials WHERE id=$tid"); stderr: $(tail -5 "$dir/stderr.log")"
  counts=$(sql "SELECT COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS WHERE trial_id=$tid")
  [ "$counts" = 40/40 ] || fail "trial $tid ($way): reports stored (all/distinct steps) $counts, not 40/40"
  # Its pace, from its own clock: no gap between steps of half a report call's deadline (2.5 s
  # of HPO_REPORT_TIMEOUT's 5 s: a step that waited for hpod would take that; they are 0.25 s
  # apart, and starting `hpo report` on a fully loaded machine can take a second), and
  # it trained through the outage at least at 60% of the pace it had before it (a loaded
  # machine slows every step, whoever answers).
  read -r gap during expected < <(awk -v down="$down" -v up="$up" '
    NR > 1 && $1 - prev > gap { gap = $1 - prev }
    $1 <= down { if (!first) first = $1; last = $1; before++ }
    $1 > down && $1 < up { during++ }
    { prev = $1 }
    END { rate = before > 1 ? (before - 1) / (last - first) : 4
          printf "%.2f %d %.1f\n", gap, during, rate * (up - down) }' "$dir/pace.log")
  awk -v g="$gap" 'BEGIN { exit !(g < 2.5) }' || fail "trial $tid ($way): a step took ${gap}s while hpod was away"
  awk -v d="$during" -v e="$expected" 'BEGIN { exit !(d >= 0.6 * e) }' ||
    fail "trial $tid ($way): only $during steps during the outage; its pace before it gives $expected"
  echo "trial $tid: longest gap ${gap}s, $during steps while hpod was down (pace before: $expected), reports $counts"
done
grep -q "hpod does not answer" "$(sql "SELECT trial_dir FROM trials WHERE sweep_id=$id LIMIT 1")/stderr.log" ||
  fail "hpo exec did not say hpod was away"
window=$(awk -v down="$down" -v up="$up" 'BEGIN { printf "%.1f", up - down }')
pass "3 trainers (exec, report, Python) kept their pace through a ${window} s outage; 120 reports stored once"
