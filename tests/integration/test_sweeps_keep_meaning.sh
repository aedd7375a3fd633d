#!/usr/bin/env bash
# Sweeps keep their meaning across restarts and releases (docs/operations.md, "Upgrading"):
#  - a sweep stored by an hpod from before sweeps kept their defaults version (its store one
#    schema version older) is pinned by the migration to version 1, the defaults it ran under;
#  - a stored sweep whose file this hpod refuses (here: a key it does not know, as a later
#    release may drop one) is not failed: it runs on as stored and `hpo show` says what is
#    refused;
#  - a new sweep is stored with the defaults version and the hpod that took it.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
cat >"$WORK/slow.yaml" <<'YAML'
command: "for s in 1 2 3 4 5 6; do hpo report --step $s loss=$(( {x} + s )) || exit 1; sleep 0.5; done"
parameters: {x: [1, 2, 3]}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 3, max_concurrent: 2}
YAML
old=$(hpo submit "$WORK/slow.yaml" | tail -n 1)
refused=$(hpo submit "$WORK/slow.yaml" | tail -n 1)
wait_for "[ \$(hpo trials $old --state running | tail -n +2 | wc -l) -eq 2 ]" 20
hpo show "$old" | has "defaults: version 2 (submitted to hpod " || fail "a new sweep does not say its defaults: $(hpo show "$old")"
hpo daemon stop --keep-trials >/dev/null

# What an older hpod left: the store one schema version back, without the columns.
version=$(sql 'PRAGMA user_version')
sql "ALTER TABLE sweeps DROP COLUMN defaults_version; ALTER TABLE sweeps DROP COLUMN hpod_version;
     PRAGMA user_version=$((version - 1))"
# A file this hpod would refuse.
sql "UPDATE sweeps SET spec_yaml = spec_yaml || 'retired_option: 3' || char(10) WHERE id=$refused"
printf 'retired_option: 3\n' >>"$WORK/slow.yaml"
hpo validate "$WORK/slow.yaml" >/dev/null 2>&1 && fail "the edited file validates"

hpo daemon start --cpus 4 >/dev/null
[ "$(sql 'PRAGMA user_version')" -eq "$version" ] || fail "the store was not migrated"
show=$(hpo show "$old")
echo "$show" | has -x "defaults: version 1" || fail "the migrated sweep is not pinned to version 1: $show"
show=$(hpo show "$refused")
echo "$show" | has "runs as stored; this hpod would refuse: .*unknown key 'retired_option'" ||
  fail "the refused file is not reported: $show"
# (Under load its first trials may have ended while hpod was down; its third starts after.)
echo "$show" | head -n 1 | has -E "RUNNING|COMPLETED" || fail "the refused sweep does not run: $show"
grep -q "sweep $refused: this hpod (.*) would refuse its file" "$HPO_DATA_DIR/hpod.log" ||
  fail "the log does not say so"
for id in "$old" "$refused"; do
  hpo wait "$id" --timeout 120 >/dev/null || fail "sweep $id did not complete: $(hpo show "$id")"
done
[ "$(sql "SELECT COUNT(*) FROM trials WHERE state='TRIAL_STATE_COMPLETED'")" -eq 6 ] ||
  fail "trials: $(sql 'SELECT sweep_id, number, state, message FROM trials')"
pass "a sweep from before defaults were kept is pinned to version 1; one whose file this hpod refuses ran on as stored and said so"
