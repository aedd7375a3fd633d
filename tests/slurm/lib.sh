# For Slurm tests: a throwaway cluster (scripts/slurm-cluster.sh) plus a real hpod on the Slurm
# backend in a fresh data dir. Skips (exit 77) without root or Slurm, except in CI.
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
if [ "$(id -u)" -ne 0 ] || [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: Slurm test cannot run in CI (root and Slurm packages needed)"; exit 1; fi
  echo "SKIP: needs root and Debian's slurm packages"; exit 77
fi
SLURM_DIR=$(mktemp -d /tmp/hpo-slurm-test.XXXXXX)
# Below the kernel's ephemeral ports (32768 and up), which any connection may hold.
SLURM_PORT=$((20000 + ($$ % 12000)))
cluster() { bash "$HPO_SRC/scripts/slurm-cluster.sh" "$@" --dir "$SLURM_DIR"; }
slurm_cleanup() {
  local rc=$?
  hpo daemon stop >/dev/null 2>&1 || true
  cluster down >/dev/null 2>&1 || true
  if [ $rc -ne 0 ]; then tail -n 20 "$SLURM_DIR"/log/slurmctld.log >&2 2>/dev/null || true; fi
  rm -rf "$SLURM_DIR"
  cleanup "$rc"
}
trap slurm_cleanup EXIT
# cluster_up NODES GPUS CPUS [more options of scripts/slurm-cluster.sh up]
cluster_up() {
  eval "$(cluster up --nodes "$1" --gpus "$2" --cpus "$3" --port "$SLURM_PORT" "${@:4}")"
  export SLURM_CONF
}
# The test's own jobs only (another cluster may run on the machine).
jobs_left() { squeue -h -o %i 2>/dev/null | wc -l; }
# hpod on the Slurm backend for this test's data dir, in the background ($HPOD_PID).
start_hpod() {
  hpod --backend slurm --data-dir "$HPO_DATA_DIR" --log-file "$HPO_DATA_DIR/hpod.log" &
  HPOD_PID=$!
  wait_for "hpo daemon status" 10
}
# kill -9 of that hpod, down for $1 seconds (default 0), then a new one.
crash_hpod() {
  kill -9 "$HPOD_PID"
  wait "$HPOD_PID" 2>/dev/null || true
  sleep "${1:-0}"
  start_hpod
}
