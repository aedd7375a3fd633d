#!/usr/bin/env bash
# Step launch in one allocation: hpod (steps mode) side by side with a shell loop of plain
# `srun --jobid=J --exact`, in the same allocation and the same run, alternating rounds.
#
#   bench/step_launch_bench.sh [--steps N] [--concurrency C] [--rounds R]
#
# Needs a Slurm cluster: $SLURM_CONF, or root to start the throwaway one (scripts/slurm-cluster.sh).
# Every step runs `true` with 1 CPU and no GPU. Per launcher and concurrency it prints:
#   round trip: a step's srun started -> srun exited, as the launcher saw it (hpod: started_at ->
#               ended_at in its store; the loop: $EPOCHREALTIME around srun);
#   cycle:      one step's end -> the next step's end in the same lane (concurrency 1 only): what a
#               launcher adds between steps (for hpod: reaping, the store, scheduling, fork+exec);
#   steps/s:    steps / (first start -> last end).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
BIN=${HPO_BIN:-$SRC/build/bin}
N=60 C=4 R=3
while [ $# -gt 0 ]; do
  case $1 in
    --steps) N=$2; shift 2 ;;
    --concurrency) C=$2; shift 2 ;;
    --rounds) R=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--concurrency C] [--rounds R]" >&2; exit 2 ;;
  esac
done
export PATH="$BIN:$PATH"
WORK=$(mktemp -d /tmp/hpo-launch-bench.XXXXXX)
export HPO_DATA_DIR=$WORK/data
CLUSTER=""
finish() {
  hpo daemon stop >/dev/null 2>&1 || true
  [ -n "${JOB:-}" ] && scancel "$JOB" 2>/dev/null || true
  [ -n "$CLUSTER" ] && bash "$SRC/scripts/slurm-cluster.sh" down --dir "$CLUSTER" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap finish EXIT
if [ -z "${SLURM_CONF:-}" ]; then
  CLUSTER=$WORK/cluster
  eval "$(bash "$SRC/scripts/slurm-cluster.sh" up --nodes 1 --gpus 4 --cpus 8 --dir "$CLUSTER" --port $((20000 + $$ % 12000)))"
  export SLURM_CONF
fi
mkdir -p "$HPO_DATA_DIR"
hpod --backend slurm --data-dir "$HPO_DATA_DIR" --log-file "$HPO_DATA_DIR/hpod.log" &
for _ in $(seq 100); do hpo daemon status >/dev/null 2>&1 && break; sleep 0.1; done

# The allocation both launchers use.
JOB=$(sbatch --parsable -N1 -n8 --gres=gpu:4 -o /dev/null -J launch-bench --wrap 'exec sleep infinity')
for _ in $(seq 200); do [ "$(squeue -h -j "$JOB" -o %T)" = RUNNING ] && break; sleep 0.1; done

# plain LANES STEPS OUT: LANES shell loops in parallel, STEPS steps in all; "start end" per step.
plain() {
  local lanes=$1 steps=$2 out=$3 lane pids=()
  for lane in $(seq "$lanes"); do
    (
      local i t0
      for i in $(seq $((steps / lanes))); do
        t0=$EPOCHREALTIME
        srun --jobid="$JOB" --exact --quiet -n1 -c1 --gres=none true
        echo "$lane $t0 $EPOCHREALTIME"
      done
    ) >"$out.$lane" &
    pids+=($!)
  done
  wait "${pids[@]}"  # (not hpod)
  cat "$out".* >"$out"
}

# viahpod LANES STEPS OUT: a sweep of STEPS trials, LANES at a time, in the same allocation.
viahpod() {
  local lanes=$1 steps=$2 out=$3 id
  cat >"$WORK/sweep.yaml" <<YAML
name: launch-bench
command: ["true"]
parameters: {i: {type: int, low: 1, high: 1000000}}
objective: {metric: loss, direction: minimize}
budget: {max_trials: $steps, max_concurrent: $lanes, max_failed: 0}
resources: {cpus: 1}
slurm:
  allocation: {job: $JOB, gpus_per_node: 4, cpus_per_node: 8}
YAML
  id=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
  hpo wait "$id" --timeout 600 >/dev/null
  sqlite3 "$HPO_DATA_DIR/hpod.db" \
    "SELECT 1, started_at, ended_at FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED' ORDER BY ended_at" >"$out"
  sed -i 's/|/ /g' "$out"
}

for r in $(seq "$R"); do
  for lanes in 1 "$C"; do
    plain "$lanes" "$N" "$WORK/plain-$lanes-$r"
    viahpod "$lanes" "$N" "$WORK/hpod-$lanes-$r"
  done
done

/usr/bin/python3 - "$WORK" "$N" "$C" "$R" <<'PYEOF'
import statistics, sys
work, n, c, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def load(name):
    rows = [tuple(map(float, line.split())) for line in open(f"{work}/{name}")]
    lanes = {}
    for lane, start, end in rows:
        lanes.setdefault(lane, []).append((start, end))
    return rows, lanes
results = {}
for who in ("plain", "hpod"):
    for lanes in (1, c):
        trips, cycles, rates, count = [], [], [], 0
        for r in range(1, rounds + 1):
            rows, by_lane = load(f"{who}-{lanes}-{r}")
            count += len(rows)
            trips += [(e - s) * 1000 for _, s, e in rows]
            if lanes == 1:
                ends = sorted(e for _, _, e in rows)
                cycles += [(b - a) * 1000 for a, b in zip(ends, ends[1:])]
            rates.append(len(rows) / (max(e for _, _, e in rows) - min(s for _, s, _ in rows)))
        results[(who, lanes)] = (count, statistics.median(trips), statistics.median(cycles) if cycles else None,
                                 statistics.median(rates))
print(f"\nStep launch in one allocation: {n} steps of `true` per run, {rounds} rounds, alternating\n")
print("| launcher | concurrent | steps | median round trip | median cycle | steps/s (median of rounds) |")
print("|---|---:|---:|---:|---:|---:|")
for (who, lanes), (count, trip, cycle, rate) in results.items():
    name = "plain `srun --jobid --exact` loop" if who == "plain" else "hpod (steps mode)"
    cyc = f"{cycle:.1f} ms" if cycle is not None else "-"
    print(f"| {name} | {lanes} | {count} | {trip:.1f} ms | {cyc} | {rate:.1f} |")
p1, h1 = results[("plain", 1)], results[("hpod", 1)]
pc, hc = results[("plain", c)], results[("hpod", c)]
print(f"\nhpod adds {h1[2] - p1[2]:+.1f} ms to the median cycle (target < 5 ms) and "
      f"{h1[1] - p1[1]:+.1f} ms to the median round trip;")
print(f"hpod reaches {h1[3] / p1[3]:.0%} of the plain loop's rate one at a time and "
      f"{hc[3] / pc[3]:.0%} at {c} concurrent (target >= 90%).")
PYEOF
