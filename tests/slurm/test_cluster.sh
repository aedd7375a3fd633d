#!/usr/bin/env bash
# The throwaway cluster (scripts/slurm-cluster.sh): two nodes with fake GPUs come up; two steps in
# one 4-GPU allocation get disjoint GPUs; a 2-node step sees both nodes; `down` stops everything
# it started. Skips (exit 77) without root or Slurm — except in CI, where that is a failure.
source "$(dirname "$0")/lib.sh"
cluster_up 2 4 8
[ "$(sinfo -h -N -p debug -o '%t' | grep -c idle)" -eq 2 ] || fail "two idle nodes expected"
jid=$(sbatch --parsable -N1 -n4 --gres=gpu:4 -o /dev/null --wrap "sleep 120")  # no slurm-N.out in the working tree
for _ in $(seq 100); do [ "$(squeue -h -j "$jid" -o %T)" = RUNNING ] && break; sleep 0.1; done
[ "$(squeue -h -j "$jid" -o %T)" = RUNNING ] || fail "the allocation did not start"
srun --jobid="$jid" --exact -n1 --gres=gpu:2 sh -c 'echo $CUDA_VISIBLE_DEVICES; sleep 1' >"$WORK/a" &
srun --jobid="$jid" --exact -n1 --gres=gpu:2 sh -c 'echo $CUDA_VISIBLE_DEVICES; sleep 1' >"$WORK/b"
wait
got=$(sort "$WORK/a" "$WORK/b" | tr '\n' ' ')
[ "$got" = "0,1 2,3 " ] || fail "steps got GPUs '$got', expected 0,1 and 2,3"
scancel "$jid"
nodes=$(srun -N2 -n2 sh -c 'echo $SLURMD_NODENAME' | sort | tr '\n' ' ')
[ "$nodes" = "n1 n2 " ] || fail "a 2-node step ran on '$nodes'"
pids=$(cat "$SLURM_DIR"/*.pid)
cluster down >/dev/null 2>&1
for p in $pids; do kill -0 "$p" 2>/dev/null && fail "process $p survived down"; done
echo "PASS: 2 nodes up, steps got GPUs $got, 2-node step on $nodes, down stopped everything"
