#!/usr/bin/env bash
# One configuration per data directory (DATA_DIR/hpod.yaml, docs/operations.md):
#  - the options of `hpo daemon start` are kept; after `hpo daemon stop --keep-trials`, a stray
#    `hpo ls` starts hpod again with them: the same address off loopback, the same sweeps
#    directory, the same agent silence; hpod.yaml is unchanged and the running trial finishes;
#  - a start that says otherwise than hpod.yaml is refused, naming each difference and the fix,
#    and changes nothing; --reconfigure changes it; a start may add an option hpod.yaml lacks;
#  - a broken hpod.yaml is refused with file:line.
source "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/scratch"
hpo daemon start --cpus 2 --listen 0.0.0.0:0 --sweeps-dir "$WORK/scratch" --agent-silence 20m >/dev/null
conf=$HPO_DATA_DIR/hpod.yaml
[ -f "$conf" ] || fail "no hpod.yaml after a configured start"
[ "$(stat -c %a "$conf")" = 600 ] || fail "hpod.yaml is $(stat -c %a "$conf")"
for line in "listen: 0.0.0.0:0" "sweeps-dir: $WORK/scratch" "agent-silence: 20m" "cpus: 2"; do
  grep -qxF "$line" "$conf" || fail "hpod.yaml lacks '$line': $(cat "$conf")"
done
cp "$conf" "$WORK/hpod.yaml.before"
endpoint=$(cat "$HPO_DATA_DIR/endpoint")
[ "${endpoint%:*}" = "$(hostname)" ] || fail "a configured hpod off loopback advertises $endpoint"

cat >"$WORK/sweep.yaml" <<'YAML'
command: "for i in $(seq 1 30); do hpo report --step $i loss=$i; sleep 0.2; done"
parameters: {x: [1]}
algorithm: grid
early_stopping: none
objective: {metric: loss, direction: minimize}
YAML
id=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
wait_for "[ \$(sql \"SELECT report_count FROM trials WHERE sweep_id=$id\") -ge 3 ]" 20
hpo daemon stop --keep-trials >/dev/null

# A stray command starts hpod as it was configured.
hpo ls >/dev/null || fail "hpo ls did not start hpod"
[ "$(cat "$HPO_DATA_DIR/endpoint")" = "$endpoint" ] || fail "hpod came back at $(cat "$HPO_DATA_DIR/endpoint"), not $endpoint"
cmp -s "$conf" "$WORK/hpod.yaml.before" || fail "a stray hpo ls changed hpod.yaml: $(diff "$WORK/hpod.yaml.before" "$conf")"
hpo wait "$id" --timeout 60 >/dev/null || fail "the trial did not finish after the restart: $(hpo trials "$id")"
[ "$(sql "SELECT trial_dir FROM trials WHERE sweep_id=$id")" = "$WORK/scratch/$id/trials/00000" ] ||
  fail "the trial's directory: $(sql "SELECT trial_dir FROM trials WHERE sweep_id=$id")"
[ "$(sql "SELECT COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS")" = 30/30 ] || fail "reports: $(sql "SELECT COUNT(*) FROM $ALL_REPORTS")"
id2=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
hpo wait "$id2" --timeout 60 >/dev/null
[ -d "$WORK/scratch/$id2" ] || fail "a sweep after the restart went elsewhere than the configured sweeps directory"
hpo daemon stop >/dev/null

# A start that says otherwise is refused, and changes nothing.
refused 1 "says otherwise" daemon start --listen 127.0.0.1:0 --agent-silence 20m
grep -q -- "--listen 127.0.0.1:0  (hpod.yaml: 0.0.0.0:0)" "$WORK/out" || fail "the difference is not named: $(cat "$WORK/out")"
grep -q -- "--reconfigure" "$WORK/out" || fail "the fix is not named: $(cat "$WORK/out")"
if grep -q -- "agent-silence" "$WORK/out"; then fail "an option equal to hpod.yaml's was called a difference"; fi
cmp -s "$conf" "$WORK/hpod.yaml.before" || fail "a refused start changed hpod.yaml"
if hpo daemon status >/dev/null; then fail "a refused start started hpod"; fi
set +e
hpod --data-dir "$HPO_DATA_DIR" --sweeps-dir /tmp >"$WORK/out" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--sweeps-dir /tmp  (hpod.yaml: $WORK/scratch)" "$WORK/out" || fail "hpod itself: $rc $(cat "$WORK/out")"

# --reconfigure changes what it names and keeps the rest; a start may add an option.
hpo daemon start --reconfigure --agent-silence 30m --dashboard none >/dev/null
grep -qxF "agent-silence: 30m" "$conf" && grep -qxF "listen: 0.0.0.0:0" "$conf" && grep -qxF "dashboard: none" "$conf" ||
  fail "hpod.yaml after --reconfigure: $(cat "$conf")"
hpo daemon stop >/dev/null

# A broken hpod.yaml: refused with where.
echo "lisen: 127.0.0.1:0" >>"$conf"
refused 1 "hpod.yaml:$(wc -l <"$conf"):1: 'lisen' is not one of hpod's kept options" daemon start
pass "hpod.yaml keeps hpod's options: a stray hpo ls restarts it as configured; other options are refused unless --reconfigure"
