#!/usr/bin/env bash
# A throwaway Slurm cluster on this machine: munge, slurmctld and N slurmd (several "nodes" on
# one host) with fake GPUs, everything under one directory. For tests and for trying hpod on a
# workstation. Partition `debug` (the default) is preemptible: a job in partition `urgent` takes
# its nodes (PreemptMode=CANCEL after GraceTime=10 s). Needs root (fake GPU device files, daemons as root) and Debian's slurmctld, slurmd,
# slurm-client and munge packages.
#
#   scripts/slurm-cluster.sh up [--dir DIR] [--nodes N] [--gpus G] [--cpus C] [--port P]
#                               [--min-job-age SECONDS]   (how long slurmctld remembers an
#                                                          ended job; default 300)
#   scripts/slurm-cluster.sh status [--dir DIR]
#   scripts/slurm-cluster.sh down [--dir DIR]
#
# `up` prints the line to run so that Slurm commands find the cluster:
#   export SLURM_CONF=DIR/slurm.conf
# `down` stops exactly what `up` started (munged only if `up` had to start it).
set -euo pipefail

cmd=${1:-}
[ -n "$cmd" ] && shift
DIR=${HPO_SLURM_DIR:-/tmp/hpo-slurm}
NODES=1
GPUS=4
CPUS=16
PORT=6817
MIN_JOB_AGE=300
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --gpus) GPUS=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --min-job-age) MIN_JOB_AGE=$2; shift 2 ;;
    *) echo "slurm-cluster: unknown option $1" >&2; exit 2 ;;
  esac
done
CONF=$DIR/slurm.conf

die() { echo "slurm-cluster: $*" >&2; exit 1; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  [ "$(id -u)" -eq 0 ] || die "needs root (fake GPU device files, slurmd as root)"
  for p in slurmctld slurmd srun sinfo munged; do
    command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || die "$p not found: apt-get install slurmctld slurmd slurm-client munge"
  done
  if alive "$DIR/slurmctld.pid"; then die "a cluster already runs in $DIR (down it first)"; fi
  mkdir -p "$DIR"/{state,spool,log,dev}
  local host
  host=$(hostname -s)

  # munge: reuse a running one, else start one and remember that we did.
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null 2>&1 || die "munged did not start"
    cp /run/munge/munged.pid "$DIR/munged.pid"
  fi

  # Fake GPUs: character devices (regular files are rejected by slurmd).
  : >"$DIR/gres.conf"
  local nodelist=""
  for i in $(seq 1 "$NODES"); do
    local devs=()
    for g in $(seq 0 $((GPUS - 1))); do
      local dev="$DIR/dev/n${i}gpu$g"
      [ -e "$dev" ] || mknod "$dev" c 1 3
      devs+=("$dev")
    done
    if [ "$GPUS" -gt 0 ]; then
      echo "NodeName=n$i Name=gpu File=$DIR/dev/n${i}gpu[0-$((GPUS - 1))]" >>"$DIR/gres.conf"
    fi
    nodelist+="n$i,"
  done

  local gres_line=""
  [ "$GPUS" -gt 0 ] && gres_line="Gres=gpu:$GPUS"
  cat >"$CONF" <<EOF
ClusterName=hpo-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
InactiveLimit=0
KillWait=5
MinJobAge=$MIN_JOB_AGE
NodeName=n[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((PORT + 100))-$((PORT + 99 + NODES))] CPUs=$CPUS RealMemory=16000 $gres_line State=UNKNOWN
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL GraceTime=10
PartitionName=urgent Nodes=n[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF

  export SLURM_CONF=$CONF
  /usr/sbin/slurmctld -D -f "$CONF" >"$DIR/log/slurmctld.out" 2>&1 &
  echo $! >"$DIR/slurmctld.pid"
  for i in $(seq 1 "$NODES"); do
    /usr/sbin/slurmd -D -N "n$i" -f "$CONF" >"$DIR/log/slurmd.n$i.out" 2>&1 &
    echo $! >"$DIR/slurmd.n$i.pid"
  done
  # Wait until every node is idle.
  for _ in $(seq 150); do
    local idle
    idle=$(sinfo -h -N -o "%N %t" 2>/dev/null | sort -u | awk '$2 == "idle"' | wc -l)
    [ "$idle" -eq "$NODES" ] && break
    sleep 0.2
  done
  local idle
  idle=$(sinfo -h -N -o "%N %t" 2>/dev/null | sort -u | awk '$2 == "idle"' | wc -l)
  if [ "$idle" -ne "$NODES" ]; then
    sinfo -N 2>&1 >&2 || true
    tail -n 20 "$DIR/log/slurmctld.log" >&2 2>/dev/null || true
    for i in $(seq 1 "$NODES"); do
      echo "--- slurmd n$i" >&2
      tail -n 10 "$DIR/log/slurmd.n$i.out" "$DIR"/log/slurmd*n$i*.log >&2 2>/dev/null || true
    done
    down
    die "the nodes did not become idle"
  fi
  echo "slurm-cluster: $NODES node(s) with $GPUS fake GPU(s) and $CPUS CPUs each, in $DIR" >&2
  echo "export SLURM_CONF=$CONF"
}

down() {
  export SLURM_CONF=$CONF
  if [ -f "$CONF" ]; then scancel --quiet --user=root 2>/dev/null || true; fi
  local f
  for f in "$DIR"/slurmd.n*.pid "$DIR/slurmctld.pid"; do
    [ -f "$f" ] || continue
    local pid
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  if [ -f "$DIR/munged.pid" ]; then
    local mpid
    mpid=$(cat "$DIR/munged.pid")
    kill "$mpid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$DIR/munged.pid"
  fi
  echo "slurm-cluster: stopped what $DIR had started" >&2
}

status() {
  alive "$DIR/slurmctld.pid" || { echo "slurm-cluster: no cluster runs in $DIR"; return 1; }
  export SLURM_CONF=$CONF
  echo "export SLURM_CONF=$CONF"
  sinfo -N -o "%N %t %c %G"
  squeue
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
