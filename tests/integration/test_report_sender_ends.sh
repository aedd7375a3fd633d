#!/usr/bin/env bash
# A trial's report sender (`hpo report --deliver`) never outlives its trial by more than a moment:
# a process left in a Slurm step when its task ends keeps the step, and its GPUs, from ending.
# (1) With hpod answering, the sender ends as soon as it has delivered, while the trial still
# runs. (2) With no hpod at the trial's address (an outage), the sender keeps trying while the
# trial runs, and ends within moments of the trial's end; the report waits in the journal.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 >/dev/null

# (1) The trainer hands every report to the sender at once (HPO_REPORT_WAIT=0s), then looks at the
# sender's lock 1.5 s later: free, since the sender ended after delivering.
cat >"$WORK/answered.yaml" <<'YAML'
command: |
  HPO_REPORT_WAIT=0s hpo report --step 1 loss={x} || exit 1
  sleep 1.5
  if flock -n $HPO_TRIAL_DIR/reports.sender true; then echo ended; else echo running; fi > $HPO_TRIAL_DIR/sender_state
parameters: {x: [1, 2]}
objective: {metric: loss, direction: minimize}
algorithm: grid
YAML
# Each step that could wait is bounded and says where it is, so that a hang shows its place.
id=$(timeout 60 hpo submit "$WORK/answered.yaml" | tail -n 1)
[ -n "$id" ] || fail "hpo submit did not answer within 60 s"
timeout 90 hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete"
echo "part 1: the sweep completed"
for n in 00000 00001; do
  dir="$HPO_DATA_DIR/sweeps/$id/trials/$n"
  [ "$(cat "$dir/sender_state")" = ended ] || fail "trial $n: its sender still ran 1.5 s after its report"
  [ -f "$dir/reports.sender.log" ] || fail "trial $n: no sender was started"
done
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON t.id = r.trial_id WHERE t.sweep_id=$id")" -eq 2 ] ||
  fail "the reports were not stored"

# (2) Nothing answers at the trial's address (port 1 refuses). The trial is a process group of its
# own, as a Slurm task is; it reports, then runs 3 s more.
mkdir -p "$WORK/t"
HPO_ENDPOINT=127.0.0.1:1 HPO_TRIAL_ID=999 HPO_TRIAL_TOKEN=x HPO_TRIAL_DIR=$WORK/t \
  setsid bash -c 'hpo report --step 1 loss=1; sleep 3; touch "$HPO_TRIAL_DIR/trial-ended"' 2>"$WORK/report.err" &
# The senders of that trial: the holders of its sender lock, as the kernel lists them in
# /proc/locks (nothing here reads another process's memory: a process of another test stuck in
# a frozen file system would block that read).
senders() {
  local ino
  ino=$(stat -c %i "$WORK/t/reports.sender" 2>/dev/null) || { echo 0; return; }
  awk -v ino="$ino" '$2 == "FLOCK" && split($6, f, ":") == 3 && f[3] == ino' /proc/locks | wc -l
}
echo "part 2: the trial started"
wait_for "[ \$(senders) -eq 1 ]" 10
[ -f "$WORK/t/trial-ended" ] && fail "the trial ended before its sender could be seen (a loaded machine?)"
has ' 1 .* loss=1$' <"$WORK/t/reports.journal" || fail "the report is not in the journal"
wait_for "[ -f $WORK/t/trial-ended ]" 10
# Ended within moments (it looks 4 times a second); before, it kept trying for 10 minutes.
wait_for "[ \$(senders) -eq 0 ]" 5
has "the trial ended" <"$WORK/t/reports.sender.log" || fail "the sender did not say why it ended: $(cat "$WORK/t/reports.sender.log")"
pass "a report sender ends once it has delivered, and within moments of its trial's end when hpod is away"
