#!/usr/bin/env bash
# Private files under a permissive umask (docs/operations.md, Security model): with umask 000
# in the shell that starts it, hpod's store, its trial directories and every file in them (the
# logs, params.json, the report journal, hpo-shim's records, what the trial writes itself) are
# its owner's alone; a store an older hpod left readable is made private at the next start;
# `--share-group` opens them to the group (0750/0640) and no further. An agent whose data
# directory cannot be written keeps its journal and log in a private directory of its own under
# $TMPDIR, and takes none that someone else could have made for it.
source "$(dirname "$0")/lib.sh"
umask 000
cat >"$WORK/sweep.yaml" <<'YAML'
command: "hpo report --step 1 loss={x}; echo mine > $HPO_TRIAL_DIR/written.txt; mkdir $HPO_TRIAL_DIR/ckpt"
parameters: {x: [0.5]}
algorithm: grid
objective: {metric: loss, direction: minimize}
YAML
mode() { stat -c %a "$1"; }
# expect MODE PATH...: each path has that mode.
expect() {
  local want=$1 p
  shift
  for p in "$@"; do [ "$(mode "$p")" = "$want" ] || fail "$p is $(mode "$p"), not $want"; done
}
# check_sweep DIR_MODE FILE_MODE: a sweep's trial directory and files.
check_sweep() {
  local dmode=$1 fmode=$2 id t
  id=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
  hpo wait "$id" --timeout 60 >/dev/null || fail "the sweep did not complete: $(hpo trials "$id")"
  t=$(sql "SELECT trial_dir FROM trials WHERE sweep_id=$id")
  expect "$dmode" "$HPO_DATA_DIR/sweeps" "$HPO_DATA_DIR/sweeps/$id" "$(dirname "$t")" "$t" "$t/ckpt"
  local f n=0
  for f in "$t"/* "$t"/.[!.]*; do
    [ -f "$f" ] || continue
    expect "$fmode" "$f"
    n=$((n + 1))
  done
  for f in stdout.log stderr.log params.json reports.journal hpo.pid hpo.exit written.txt; do
    [ -f "$t/$f" ] || fail "no $f in the trial directory: $(ls -la "$t")"
  done
  expect 600 "$HPO_DATA_DIR/hpod.db"
  echo "sweep $id: $n files $fmode, directories $dmode"
}

hpo daemon start --cpus 2 >/dev/null
expect 700 "$HPO_DATA_DIR" "$HPO_DATA_DIR/tls"
expect 600 "$HPO_DATA_DIR/token" "$HPO_DATA_DIR/tls/ca.key" "$HPO_DATA_DIR/tls/server.key"
check_sweep 700 600
# A store an older hpod (or a looser umask) left readable is private again at the next start.
hpo daemon stop >/dev/null
chmod 0644 "$HPO_DATA_DIR/hpod.db"
chmod 0755 "$HPO_DATA_DIR/sweeps"
hpo daemon start --cpus 2 >/dev/null
expect 600 "$HPO_DATA_DIR/hpod.db"
expect 700 "$HPO_DATA_DIR/sweeps"
hpo daemon stop >/dev/null

# --share-group: the group reads, nobody else.
HPO_DATA_DIR=$(mktemp -d /tmp/hpo-it.XXXXXX)
hpo daemon start --cpus 2 --share-group >/dev/null
check_sweep 750 640
hpo daemon stop >/dev/null
rm -rf "$HPO_DATA_DIR"

# An agent that cannot write its data directory: a private directory under $TMPDIR.
mkdir -p "$WORK/tmp"
chmod 1777 "$WORK/tmp"
# What another user could have planted there first: a directory of the right name but open to
# others, and a link of the right name. Neither is taken.
mkdir -m 0755 "$WORK/tmp/hpo-agent-4242.planted"
ln -s "$WORK" "$WORK/tmp/hpo-agent-4242.link"
run_agent() {
  HPO_AGENT_TOKEN=secret SLURM_JOB_ID=4242 HPO_ENDPOINT=127.0.0.1:1 TMPDIR=$WORK/tmp \
    hpo-agent --silence 1m --dir /proc/no-such-dir &
  local agent=$!
  wait_for "ls $WORK/tmp/hpo-agent-4242.*/4242.log" 10
  sleep 0.5
  kill "$agent"
  wait "$agent" 2>/dev/null || true
}
run_agent
mapfile -t mine < <(find "$WORK/tmp" -maxdepth 1 -name 'hpo-agent-4242.*' ! -name '*.planted' ! -name '*.link')
[ ${#mine[@]} -eq 1 ] || fail "the agent's directories: ${mine[*]}"
expect 700 "${mine[0]}"
expect 600 "${mine[0]}/4242.log"
[ -z "$(ls -A "$WORK/tmp/hpo-agent-4242.planted")" ] || fail "the agent wrote into a planted directory"
grep -q "journal and log in ${mine[0]}" "${mine[0]}/4242.log" || fail "the agent's log: $(cat "${mine[0]}/4242.log")"
# Started again in the same allocation, it takes its own directory back.
run_agent
[ "$(find "$WORK/tmp" -maxdepth 1 -name 'hpo-agent-4242.*' | wc -l)" -eq 3 ] || fail "a second private directory was made"
[ "$(grep -c "taking hpod's orders" "${mine[0]}/4242.log")" -eq 2 ] || fail "the second agent did not log beside the first"
pass "umask 000: store 0600, trial directories 0700 and their files 0600 (--share-group: 0750/0640); the agent's journal private under \$TMPDIR"
