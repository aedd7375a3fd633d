#!/usr/bin/env bash
# The throwaway cluster (scripts/slurm-cluster.sh): two nodes with fake GPUs come up; two steps in
# one 4-GPU allocation get disjoint GPUs; a 2-node step sees both nodes; `down` stops everything
# it started. Skips (exit 77) without root or Slurm — except in CI, where that is a failure.
set -euo pipefail
: "${HPO_SRC:?}"
if [ "$(id -u)" -ne 0 ] || [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: Slurm test cannot run in CI (root and Slurm packages needed)"; exit 1; fi
  echo "SKIP: needs root and Debian's slurm packages"; exit 77
fi
DIR=$(mktemp -d /tmp/hpo-slurm-test.XXXXXX)
PORT=$((20000 + ($$ % 20000)))
cluster() { bash "$HPO_SRC/scripts/slurm-cluster.sh" "$@" --dir "$DIR"; }
cleanup() { cluster down >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$DIR"/log/slurmctld.log >&2 2>/dev/null || true; exit 1; }

eval "$(cluster up --nodes 2 --gpus 4 --cpus 8 --port "$PORT")"
[ "$(sinfo -h -N -o '%t' | grep -c idle)" -eq 2 ] || fail "two idle nodes expected"
jid=$(sbatch --parsable -N1 -n4 --gres=gpu:4 --wrap "sleep 120")
for _ in $(seq 100); do [ "$(squeue -h -j "$jid" -o %T)" = RUNNING ] && break; sleep 0.1; done
[ "$(squeue -h -j "$jid" -o %T)" = RUNNING ] || fail "the allocation did not start"
srun --jobid="$jid" --exact -n1 --gres=gpu:2 sh -c 'echo $CUDA_VISIBLE_DEVICES; sleep 1' >"$DIR/a" &
srun --jobid="$jid" --exact -n1 --gres=gpu:2 sh -c 'echo $CUDA_VISIBLE_DEVICES; sleep 1' >"$DIR/b"
wait
got=$(sort "$DIR/a" "$DIR/b" | tr '\n' ' ')
[ "$got" = "0,1 2,3 " ] || fail "steps got GPUs '$got', expected 0,1 and 2,3"
scancel "$jid"
nodes=$(srun -N2 -n2 sh -c 'echo $SLURMD_NODENAME' | sort | tr '\n' ' ')
[ "$nodes" = "n1 n2 " ] || fail "a 2-node step ran on '$nodes'"
pids=$(cat "$DIR"/*.pid)
cluster down >/dev/null 2>&1
for p in $pids; do kill -0 "$p" 2>/dev/null && fail "process $p survived down"; done
echo "PASS: 2 nodes up, steps got GPUs $got, 2-node step on $nodes, down stopped everything"
