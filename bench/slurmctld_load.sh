#!/usr/bin/env bash
# What running trials through hpod costs slurmctld and the host hpod runs on, next to a plain
# sbatch + srun loop doing the same trials, measured with sdiag on the throwaway cluster
# (scripts/slurm-cluster.sh; needs root and Debian's Slurm packages). Prints one table.
#
#   bench/slurmctld_load.sh [--trials 24] [--concurrency 4] [--seconds 2] [--steady 30] [--detail]
#
# The loop is what a user writes by hand: one sbatch whose script runs the trials as steps
# (`srun --exact -n1 --gres=gpu:1`), N at a time. hpod runs the same trials as a steps-mode sweep
# in one allocation of the same shape. For each:
#   RPCs per trial      slurmctld's RPC count (sdiag, all message types) from the submit until the
#                       allocation is gone, over the trials
#   steady RPC/s        with N long trials running, over --steady seconds
#   launch p50 / p99    from a trial's end to the start of the next trial in its place, from the
#                       trials' own clocks
#   procs / MiB per running trial   on hpod's host (hpod's children), with N long trials running;
#                       the loop runs inside its allocation and holds none there
# --detail adds each run's RPCs by message type (stderr).
# Build first (scripts/setup.sh); HPO_BUILD names the build directory (default build).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${HPO_BUILD:-$SRC/build}
TRIALS=24 CONC=4 SECS=2 STEADY=30 DETAIL=0
while [ $# -gt 0 ]; do
  case "$1" in
    --detail) DETAIL=1; shift ;;
    --trials) TRIALS=$2; shift 2 ;;
    --concurrency) CONC=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --steady) STEADY=$2; shift 2 ;;
    *) echo "slurmctld_load: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "slurmctld_load: needs root (the throwaway cluster)" >&2; exit 2; }
PY=/usr/bin/python3
export PATH="$BUILD/bin:$PATH"
WORK=$(mktemp -d /tmp/hpo-slurmctld-load.XXXXXX)
PORT=$((20000 + ($$ % 12000)))
cluster() { bash "$SRC/scripts/slurm-cluster.sh" "$@" --dir "$WORK/cluster"; }
HPOD=
finish() {
  [ -z "$HPOD" ] || kill "$HPOD" 2>/dev/null || true
  [ -z "$HPOD" ] || wait "$HPOD" 2>/dev/null || true
  cluster down >/dev/null 2>&1 || true
  [ -n "${HPO_BENCH_KEEP:-}" ] || rm -rf "$WORK"
}
trap finish EXIT
eval "$(cluster up --nodes 1 --gpus "$CONC" --cpus $((CONC * 2)) --port "$PORT")"
export SLURM_CONF

# slurmctld's RPC count so far (every message type).
rpcs() { sdiag | awk '/Remote Procedure Call statistics by message type/ {m = 1; next}
                      /Remote Procedure Call statistics by user/ {m = 0}
                      m && /count:/ {for (i = 1; i <= NF; i++) if ($i ~ /^count:/) {split($i, a, ":"); s += a[2]}}
                      END {print s + 0}'; }
# The same, per message type ("TYPE COUNT" lines).
rpc_types() { sdiag | awk '/Remote Procedure Call statistics by message type/ {m = 1; next}
                           /Remote Procedure Call statistics by user/ {m = 0}
                           m && /count:/ {for (i = 1; i <= NF; i++) if ($i ~ /^count:/) {split($i, a, ":"); print $1, a[2]}}'; }
# --detail: what each run asked for, by message type, to stderr.
detail() {  # detail NAME BEFORE-FILE
  [ "$DETAIL" -eq 1 ] || return 0
  rpc_types | awk -v name="$1" 'NR == FNR {was[$1] = $2; next} $2 - was[$1] > 0 {printf "%s: %s %d\n", name, $1, $2 - was[$1]}' "$2" - >&2
}
quiet() { sleep 3; }  # the cluster's own chatter settles
jobs_left() { squeue -h -o %i | wc -l; }
wait_until() {  # wait_until SECONDS 'CONDITION' (evaluated each time)
  local limit=$1; shift
  for _ in $(seq $((limit * 10))); do eval "$*" && return 0; sleep 0.1; done
  echo "slurmctld_load: timed out: $*" >&2; squeue >&2; exit 1
}
# Processes and MiB held by hpod's children (and theirs), for `running` trials.
held() {
  local pids n=0 kib=0 p
  pids=$(ps -e -o pid=,ppid= | awk -v root="$HPOD" '{parent[$1] = $2} END {
    for (p in parent) {q = parent[p]; while (q > 1) {if (q == root) {print p; break}; q = parent[q]}}}')
  for p in $pids; do
    n=$((n + 1))
    kib=$((kib + $(awk '/VmRSS/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0)))
  done
  echo "$n $kib"
}

say() { echo "slurmctld_load: $*" >&2; }

# --- the loop -------------------------------------------------------------------------------
say "the loop: $TRIALS trials, $CONC at a time"
mkdir -p "$WORK/loop"
cat >"$WORK/loop/run.sh" <<EOF
#!/bin/bash
# $TRIALS trials, $CONC at a time, each a step with one GPU.
for i in \$(seq 1 $TRIALS); do
  while [ "\$(jobs -rp | wc -l)" -ge $CONC ]; do wait -n; done
  srun --exact -n1 -c1 --gres=gpu:1 sh -c 'echo "start \$(date +%s.%N)"; sleep \$0; echo "end \$(date +%s.%N)"' "\$1" >>"$WORK/loop/times" &
done
wait
touch "$WORK/loop/done"
EOF
quiet
before=$(rpcs)
rpc_types >"$WORK/loop.types"
sbatch -Q -N1 -n $((CONC * 2)) --gres=gpu:"$CONC" -o /dev/null "$WORK/loop/run.sh" "$SECS" >/dev/null
wait_until 600 test -f "$WORK/loop/done"
wait_until 60 '[ "$(jobs_left)" -eq 0 ]'
loop_rpcs=$(( $(rpcs) - before ))
detail loop "$WORK/loop.types"
# Steady state: N long steps running in the allocation.
cat >"$WORK/loop/steady.sh" <<EOF
#!/bin/bash
for i in \$(seq 1 $CONC); do srun --exact -n1 -c1 --gres=gpu:1 sleep $((STEADY + 30)) & done
touch "$WORK/loop/steady-up"
wait
EOF
say "the loop: steady state"
sbatch -Q -N1 -n $((CONC * 2)) --gres=gpu:"$CONC" -o /dev/null "$WORK/loop/steady.sh" >/dev/null
wait_until 120 test -f "$WORK/loop/steady-up"
sleep 10
before=$(rpcs)
sleep "$STEADY"
loop_steady=$(( $(rpcs) - before ))
scancel -u root
wait_until 60 '[ "$(jobs_left)" -eq 0 ]'

# --- hpod -------------------------------------------------------------------------------------
say "hpod: the same trials"
export HPO_DATA_DIR=$WORK/hpod
hpod --backend slurm --data-dir "$HPO_DATA_DIR" --log-file "$HPO_DATA_DIR/hpod.log" &
HPOD=$!
wait_until 20 hpo daemon status
# sweep N SECONDS TIMES: N trials of SECONDS each, writing their start and end to TIMES.
sweep() {
  cat <<EOF
name: slurmctld-load
command: "echo start \$(date +%s.%N) >> $3; sleep {s}; echo end \$(date +%s.%N) >> $3; hpo report loss={i}"
parameters:
  i: [$(seq -s ', ' 1 "$1")]
  s: [$2]
algorithm: grid
objective: {metric: loss, direction: minimize}
budget: {max_trials: $1, max_concurrent: $CONC}
resources: {gpus: 1, cpus: 1}
slurm:
  allocation: {gpus_per_node: $CONC, cpus_per_node: $((CONC * 2)), max: 1, idle_timeout: 1s}
EOF
}
sweep "$TRIALS" "$SECS" "$WORK/hpod-times" >"$WORK/sweep.yaml"
quiet
before=$(rpcs)
rpc_types >"$WORK/hpod.types"
id=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
hpo wait "$id" --timeout 600 >/dev/null
wait_until 60 '[ "$(jobs_left)" -eq 0 ]'
hpod_rpcs=$(( $(rpcs) - before ))
detail hpod "$WORK/hpod.types"
sweep "$CONC" $((STEADY + 40)) /dev/null >"$WORK/steady.yaml"
say "hpod: steady state"
id=$(hpo submit "$WORK/steady.yaml" | tail -n 1)
wait_until 120 '[ "$(hpo trials "$id" --state running | tail -n +2 | wc -l)" -eq "$CONC" ]'
sleep 10
read -r procs kib < <(held)
agent_kib=$(ps -C hpo-agent -o rss= | awk '{s += $1} END {print s + 0}')
before=$(rpcs)
sleep "$STEADY"
hpod_steady=$(( $(rpcs) - before ))
hpo cancel "$id" >/dev/null

awk '{print $1, $2}' "$WORK/loop/times" >"$WORK/loop.times"
$PY - "$WORK/loop.times" "$WORK/hpod-times" "$TRIALS" "$STEADY" "$CONC" \
  "$loop_rpcs" "$loop_steady" "$hpod_rpcs" "$hpod_steady" "$procs" "$kib" "$agent_kib" <<'PYEOF'
import sys
loop_f, hpod_f, trials, steady, conc = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
loop_rpcs, loop_steady, hpod_rpcs, hpod_steady, procs, kib, agent_kib = map(int, sys.argv[6:13])

def latencies(path):
    ev = sorted((float(t), kind) for kind, t in (line.split() for line in open(path)))
    ends, out = [], []
    for t, kind in ev:
        if kind == "end":
            ends.append(t)
        elif ends:  # a trial started in the place of the last one that ended
            out.append(t - ends.pop())
    return sorted(out)

def pct(xs, q):
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")

ll, hl = latencies(loop_f), latencies(hpod_f)
print(f"{trials} trials of the same length, {conc} at a time, one allocation; steady state over {steady:.0f} s with {conc} long trials")
print(f"{'':26} {'RPCs/trial':>10} {'steady RPC/s':>12} {'launch p50':>10} {'launch p99':>10} {'procs/trial':>11} {'MiB/trial':>9}")
print(f"{'sbatch + srun loop':26} {loop_rpcs / trials:10.1f} {loop_steady / steady:12.2f} {pct(ll, .5):9.2f}s {pct(ll, .99):9.2f}s {0:11.1f} {0:9.1f}")
print(f"{'hpod (steps mode, agent)':26} {hpod_rpcs / trials:10.1f} {hpod_steady / steady:12.2f} {pct(hl, .5):9.2f}s {pct(hl, .99):9.2f}s {procs / conc:11.1f} {kib / 1024 / conc:9.1f}")
print(f"hpod / loop: RPCs per trial {hpod_rpcs / max(loop_rpcs, 1):.2f}x, launch p99 {pct(hl, .99) / pct(ll, .99):.2f}x; "
      f"the allocation's hpo-agent holds {agent_kib / 1024:.1f} MiB on its node")
PYEOF
