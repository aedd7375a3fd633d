#!/usr/bin/env bash
# hpod built without the Slurm backend (scripts/build-without-slurm.sh, -DHPO_WITH_SLURM=OFF):
# it does not link libslurm, runs sweeps on the local backend, and `--backend slurm` says it was
# built without Slurm instead of starting.
source "$(dirname "$0")/lib.sh"
NOSLURM=$HPO_SRC/build-noslurm/bin
if [ ! -x "$NOSLURM/hpod" ]; then
  if [ "${CI:-}" = true ]; then fail "build-noslurm/ is not built (scripts/build-without-slurm.sh)"; fi
  echo "SKIP: build-noslurm/ is not built (scripts/build-without-slurm.sh)"; exit 77
fi
if ldd "$NOSLURM/hpod" | has libslurm; then fail "hpod built without Slurm links libslurm"; fi
if "$NOSLURM/hpod" --data-dir "$WORK/d" --backend slurm 2>"$WORK/err"; then
  fail "hpod without Slurm started a Slurm backend"
fi
grep -q "built without Slurm" "$WORK/err" || fail "unclear refusal: $(cat "$WORK/err")"
export PATH="$NOSLURM:$PATH"
hpo daemon start --cpus 2 >/dev/null
cat >"$WORK/s.yaml" <<'YAML'
command: "hpo report --step 1 loss={x}"
parameters: {x: [1, 2, 3]}
objective: {metric: loss, direction: minimize}
algorithm: grid
budget: {max_concurrent: 2}
YAML
id=$(hpo submit "$WORK/s.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "the local sweep did not complete"
hpo best "$id" | has 'loss = 1$' || fail "wrong best: $(hpo best "$id")"
pass "hpod without Slurm: no libslurm, local sweeps run, --backend slurm refused clearly"
