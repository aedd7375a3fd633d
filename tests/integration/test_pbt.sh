#!/usr/bin/env bash
# Population-based training on the real daemon and local backend (examples/pbt.yaml): 6 members,
# each trial a 4-epoch segment that continues from its parent's checkpoint ({checkpoint_in});
# bottom members exploit a top member's checkpoint and perturb its parameters.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
id=$(hpo submit "$HPO_SRC/examples/pbt.yaml" | tail -n 1)
hpo wait "$id" --timeout 240 >/dev/null || fail "the PBT sweep did not complete"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 36 ] || fail "36 segments should complete"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND parent=-1")" -eq 6 ] || fail "6 members should start from scratch"
[ "$(sql "SELECT COUNT(DISTINCT lineage) FROM trials WHERE sweep_id=$id AND parent=-1")" -eq 6 ] || fail "one start per member"
# Every later segment continues its parent's training: 4 epochs further, from its checkpoint.
bad=$(sql "SELECT COUNT(*) FROM trials t JOIN trials p ON p.sweep_id=t.sweep_id AND p.number=t.parent
           WHERE t.sweep_id=$id AND t.step != p.step + 4")
[ "$bad" -eq 0 ] || fail "$bad segment(s) did not continue 4 epochs after their parent"
for dir in "$HPO_DATA_DIR"/sweeps/"$id"/trials/*; do
  [ -f "$dir/checkpoint.npz" ] || fail "no checkpoint in $dir"
done
grep -q "continuing from .*/checkpoint at epoch 4" "$HPO_DATA_DIR"/sweeps/"$id"/trials/00006/stdout.log \
  || fail "trial 6 did not load its parent's checkpoint"
exploits=$(sql "SELECT COUNT(*) FROM trials t JOIN trials p ON p.sweep_id=t.sweep_id AND p.number=t.parent
                WHERE t.sweep_id=$id AND p.lineage != t.lineage AND t.params_json != p.params_json")
[ "$exploits" -ge 1 ] || fail "no member exploited another"
hpo export "$id" --format json >"$WORK/out" && grep -q '"lineage"' "$WORK/out" || fail "export lacks the lineage"
best=$(sql "SELECT MAX(objective) FROM trials WHERE sweep_id=$id")
pass "PBT: 36 segments over 6 members, $exploits exploit(s), every segment continued its parent's checkpoint; best val_acc $best"
