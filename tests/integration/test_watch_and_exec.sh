#!/usr/bin/env bash
# `hpo exec` parses FoM lines and reports them; `hpo watch` renders a live table in place on a
# terminal and plain lines otherwise, and ends with the sweep.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 2 >/dev/null
id=$(hpo submit "$HPO_SRC/examples/fom.yaml" | tail -n 1)
# A terminal (through script(1)) gets the table redrawn in place.
script -q -e -c "COLUMNS=120 LINES=30 hpo watch $id --interval 0.2" "$WORK/tty.txt" >/dev/null
grep -q $'\033\[H\033\[2J' "$WORK/tty.txt" || fail "watch on a TTY did not redraw in place"
grep -q "val_acc" "$WORK/tty.txt" || fail "watch on a TTY shows no table"
[ "$(grep -c $'\033\[H\033\[2J' "$WORK/tty.txt")" -ge 2 ] || fail "watch redrew fewer than twice"
# A pipe gets plain lines and the final table.
hpo watch "$id" >"$WORK/plain.txt"
grep -q $'\033' "$WORK/plain.txt" && fail "watch into a pipe printed escape codes"
grep -q "COMPLETED" "$WORK/plain.txt" || fail "final table missing"
hpo wait "$id" >/dev/null || fail "fom sweep did not complete"
done=$(hpo trials "$id" --state completed | tail -n +2 | wc -l)
[ "$done" -eq 6 ] || fail "expected 6 completed trials, got $done"
n=$(sql "SELECT COUNT(*) FROM $ALL_REPORTS WHERE metric='val_acc'")
[ "$n" -eq 90 ] || fail "expected 6 trials x 15 FoM reports, found $n"
hpo logs "$(sql 'SELECT id FROM trials LIMIT 1')" | has "FoM:" || fail "logs do not show the trial's output"
pass "exec reported $n FoM lines; watch rendered on a TTY and a pipe"
