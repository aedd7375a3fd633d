#!/usr/bin/env bash
# hpod --sweeps-dir: trial directories (logs, params.json, checkpoints) go to another file system
# than the data directory, which keeps the database, socket and token.
source "$(dirname "$0")/lib.sh"
SHARED="$WORK/shared"
hpod --data-dir "$HPO_DATA_DIR" --sweeps-dir "$SHARED" --cpus 2 --log-file "$HPO_DATA_DIR/hpod.log" &
wait_for "hpo daemon status" 10
cat >"$WORK/s.yaml" <<'YAML'
command: "echo hello {x}; hpo report loss={x}"
parameters: {x: [1, 2]}
objective: {metric: loss, direction: minimize}
algorithm: grid
YAML
id=$(hpo submit "$WORK/s.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete"
for n in 00000 00001; do
  grep -q hello "$SHARED/$id/trials/$n/stdout.log" || fail "trial $n's log is not under --sweeps-dir"
  [ -f "$SHARED/$id/trials/$n/params.json" ] || fail "trial $n's params.json is not under --sweeps-dir"
done
[ ! -e "$HPO_DATA_DIR/sweeps" ] || fail "trial directories were made in the data dir too"
[ -f "$HPO_DATA_DIR/hpod.db" ] || fail "the database left the data dir"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE trial_dir LIKE '$SHARED/%'")" -eq 2 ] || fail "the store has other trial dirs"
pass "--sweeps-dir: trial directories in $SHARED, the database in the data dir"
