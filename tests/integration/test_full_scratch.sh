#!/usr/bin/env bash
# A full $SCRATCH under a reporting trainer (docs/sweep-spec.md, "Reporting"): the trial
# directories live on a small file system of their own (a 2 MiB tmpfs, as a quota would be), and
# each trainer fills it after its fifth report. Once its journal needs another page (about the
# 85th report) it can no longer be written, so
# `hpo report` (shell) and hpo.report (Python) keep the reports in memory and deliver them from
# a sender of their own, with a warning on stderr; neither fails the trial: both trials complete
# with all 150 reports stored. (Needs root for the mount; CI runs as root.)
source "$(dirname "$0")/lib.sh"
scratch=$WORK/scratch
mkdir -p "$scratch"
if ! mount -t tmpfs -o size=2m hpo-scratch "$scratch" 2>/dev/null; then
  [ -n "${CI:-}" ] && fail "cannot mount a tmpfs (CI runs as root)"
  echo "SKIP: mounting a tmpfs needs root"
  exit 0
fi
trap 'rc=$?; hpo daemon stop >/dev/null 2>&1 || true; [ -n "${HPO_KEEP_TEST_DIRS:-}" ] || umount -l "$scratch" 2>/dev/null || true; cleanup $rc' EXIT
hpo daemon start --cpus 2 --sweeps-dir "$scratch" >/dev/null

# Fills the trial's file system; its own messages go to $WORK (the full one takes nothing).
cat >"$WORK/fill.sh" <<'SH'
dd if=/dev/zero of="$HPO_TRIAL_DIR/fill" bs=64k 2>/dev/null || true
if echo x >>"$HPO_TRIAL_DIR/probe" 2>/dev/null; then echo "not full" >&2; exit 3; fi
SH
cat >"$WORK/shell.yaml" <<YAML
name: shell
command: >-
  sh -c 'for i in \$(seq 1 150); do
  if [ \$i -eq 6 ]; then sh $WORK/fill.sh 2>>$WORK/fill.err || exit \$?; fi;
  hpo report --step \$i loss=\$((200 - i)) 2>>$WORK/shell.err || exit 1; sleep 0.02; done'
parameters: {x: [1]}
algorithm: grid
objective: {metric: loss, direction: minimize}
early_stopping: none
YAML
cat >"$WORK/train.py" <<PY
import subprocess, sys, time
import hpo
sys.stderr = open("$WORK/python.err", "a", buffering=1)
for i in range(1, 151):
    if i == 6:
        subprocess.run(["sh", "$WORK/fill.sh"], check=True)
    hpo.report(step=i, loss=200.0 - i)
    time.sleep(0.02)
PY
cat >"$WORK/python.yaml" <<YAML
name: python
command: "env PYTHONPATH=$HPO_BIN/../python $PY $WORK/train.py"
parameters: {x: [1]}
algorithm: grid
objective: {metric: loss, direction: minimize}
early_stopping: none
YAML
shell=$(hpo submit "$WORK/shell.yaml" | tail -n 1)
hpo wait "$shell" --timeout 120 >/dev/null || fail "the shell sweep did not end"
find "$scratch" -name fill -delete  # room for the next trial's directory
python=$(hpo submit "$WORK/python.yaml" | tail -n 1)
hpo wait "$python" --timeout 120 >/dev/null || fail "the Python sweep did not end"
for id in $shell $python; do
  [ "$(sql "SELECT state FROM trials WHERE sweep_id=$id")" = TRIAL_STATE_COMPLETED ] ||
    fail "sweep $id: the trial did not complete: $(sql "SELECT state, message FROM trials WHERE sweep_id=$id"; cat "$WORK"/*.err 2>/dev/null)"
  [ "$(sql "SELECT COUNT(DISTINCT r.step) || ' ' || COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id")" = "150 150" ] ||
    fail "sweep $id: 150 reports expected once each: $(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON r.trial_id = t.id WHERE t.sweep_id=$id")"
done
grep -q "cannot be written (a full or read-only disk?); the report goes to hpod from memory" "$WORK/shell.err" ||
  fail "hpo report did not warn: $(cat "$WORK/shell.err" 2>/dev/null)"
grep -qi "journal" "$WORK/python.err" || fail "hpo.report did not warn: $(cat "$WORK/python.err" 2>/dev/null)"
pass "a full scratch file system: hpo report and hpo.report warn, keep reports in memory, and both trials complete with 150 of 150 reports"
