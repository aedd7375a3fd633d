#!/usr/bin/env bash
# Whoever answers at hpod's address while hpod is away gets no token and starts nothing
# (docs/operations.md, Security model). hpod runs two sweeps whose trials report (`hpo report`
# and the Python helper); it is killed (-9) and a stranger's process binds the port it left:
#  1. hpod with its own TLS (the default): the stranger serves TLS with a certificate of its own
#     CA. The trials' reporters, an allocation's hpo-agent, `hpo` from "another host" (the lock
#     file names one, so hpo goes to the endpoint) and from HPO_SERVER, and the Python client
#     each connect and refuse it: not one byte reaches it past a TLS handshake.
#  2. hpod with --insecure-listen: the stranger serves clear text and answers every call as hpod
#     would, telling the trials to stop and ordering the agent to run `id`. It hears reports
#     and agent calls, but no trial's, agent's or owner's token; the agent runs nothing and says
#     why; no trial stops; `hpo` refuses to send the owner's token in the clear.
# Each time hpod then comes back on its port: every trial completes and every report is stored
# once.
source "$(dirname "$0")/lib.sh"
export PYTHONPATH="$HPO_BIN/../python"
STEPS=120

cat >"$WORK/train.sh" <<SH
#!/usr/bin/env bash
for s in \$(seq 1 $STEPS); do hpo report --step "\$s" loss=\$((1000 - s)) || exit 1; sleep 0.2; done
SH
chmod +x "$WORK/train.sh"
cat >"$WORK/train.py" <<PY
import time
import hpo
for s in range(1, $STEPS + 1):
    hpo.report(step=s, loss=float(1000 - s))
    time.sleep(0.2)
PY
cat >"$WORK/sweep.yaml" <<YAML
command: "if [ {way} = python ]; then exec $PY $WORK/train.py; else exec $WORK/train.sh; fi"
parameters:
  way: [report, python]
algorithm: grid
early_stopping: none
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 2}
env: {PYTHONPATH: "$HPO_BIN/../python"}
YAML

# The impostor's log, with its process.
IMPOSTOR_PID=
stop_impostor() {
  if [ -n "$IMPOSTOR_PID" ]; then kill "$IMPOSTOR_PID" 2>/dev/null || true; wait "$IMPOSTOR_PID" 2>/dev/null || true; fi
  IMPOSTOR_PID=
}
trap 'stop_impostor; cleanup' EXIT

# round MODE HPOD_FLAGS...: one round as described above.
round() {
  local mode=$1
  shift
  export HPO_DATA_DIR
  HPO_DATA_DIR=$(mktemp -d /tmp/hpo-it.XXXXXX)
  local log=$WORK/impostor-$mode.log marker=$WORK/pwned-$mode
  # Off loopback, as for a cluster: `hpo` on another host reaches it by this host's name.
  hpo daemon start --cpus 4 --listen 0.0.0.0:0 "$@" >/dev/null
  local endpoint port id owner
  endpoint=$(cat "$HPO_DATA_DIR/endpoint")
  port=${endpoint##*:}
  id=$(hpo submit "$WORK/sweep.yaml" | tail -n 1)
  wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS GROUP BY trial_id HAVING COUNT(*) >= 3\" | wc -l) -eq 2 ]" 30
  owner=$(cat "$HPO_DATA_DIR/token")
  local -a secrets=("$owner")
  mapfile -t -O 1 secrets < <(sql "SELECT token FROM trials WHERE sweep_id=$id")
  [ ${#secrets[@]} -eq 3 ] || fail "$mode: tokens ${#secrets[@]}"

  # hpod is killed; a stranger takes its port.
  local pid
  pid=$(cat "$HPO_DATA_DIR/hpod.pid")
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  $PY "$HPO_SRC/tests/integration/impostor.py" "$mode" "0.0.0.0:$port" "$log" "$marker" >"$WORK/impostor.out" 2>&1 &
  IMPOSTOR_PID=$!
  wait_for "grep -q ready '$WORK/impostor.out'" 20

  # An allocation's agent calls it (its own token; the CA it was launched with, under TLS).
  local agent_token=agentsecret$RANDOM$RANDOM
  secrets+=("$agent_token")
  mkdir -p "$WORK/agent-$mode"
  local -a agent_env=(HPO_AGENT_TOKEN="$agent_token" SLURM_JOB_ID=4242 HPO_ENDPOINT="127.0.0.1:$port")
  if [ "$mode" = tls ]; then agent_env+=(HPO_TLS_CA_DATA="$(base64 -w0 "$HPO_DATA_DIR/tls-ca.pem")"); fi
  env "${agent_env[@]}" hpo-agent --silence 1m --dir "$WORK/agent-$mode" &
  local agent=$!

  # hpo from another host: the lock file names one, whose hpod beat a moment ago.
  echo "otherhost 4242 - $(date +%s)" >"$HPO_DATA_DIR/hpod.lock"
  if hpo ls >"$WORK/out" 2>&1; then fail "$mode: hpo ls answered by the impostor: $(cat "$WORK/out")"; fi
  if [ "$mode" = clear ]; then
    grep -q "in clear text (--insecure-listen)" "$WORK/out" || fail "$mode: hpo ls: unclear: $(cat "$WORK/out")"
  fi
  local -a server_env=(HPO_SERVER="127.0.0.1:$port" HPO_TOKEN_FILE="$HPO_DATA_DIR/token")
  if [ "$mode" = tls ]; then server_env+=(HPO_TLS_CA="$HPO_DATA_DIR/tls-ca.pem"); fi
  if env "${server_env[@]}" hpo ls >"$WORK/out" 2>&1; then fail "$mode: HPO_SERVER hpo ls answered: $(cat "$WORK/out")"; fi
  if env "${server_env[@]}" $PY -c 'import hpo; print(hpo.Client().sweeps())' >"$WORK/out" 2>&1; then
    fail "$mode: the Python client was answered by the impostor: $(cat "$WORK/out")"
  fi
  sleep 4  # the reporters and the agent try again meanwhile
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  stop_impostor

  # What the stranger got.
  [ -s "$log" ] || fail "$mode: nobody called the impostor (the test tests nothing)"
  local s
  for s in "${secrets[@]}"; do
    if grep -qF "$s" "$log"; then fail "$mode: a token reached the impostor: $(grep -F "$s" "$log" | head -c 300)"; fi
  done
  [ ! -e "$marker" ] || fail "$mode: the agent ran the impostor's order: $(cat "$marker")"
  local agent_log=$WORK/agent-$mode/4242.log
  if [ "$mode" = tls ]; then
    tail -n 1 "$log" | has -E "connections [1-9][0-9]* handshakes 0 bytes 0" ||
      fail "tls: the impostor's count: $(tail -n 1 "$log")"
    grep -q "hpod does not answer" "$agent_log" || fail "tls: the agent's log: $(cat "$agent_log")"
  else
    has "/hpo.v1.ReportService/Report" <"$log" || fail "clear: no report reached the impostor"
    has "/hpo.v1.AgentService/AgentCall" <"$log" || fail "clear: no agent call reached the impostor"
    if has "/hpo.v1.HpoService/" <"$log"; then fail "clear: hpo called the impostor: $(grep HpoService "$log" | head -3)"; fi
    grep -q "answered without proof that it is hpod" "$agent_log" || fail "clear: the agent's log: $(cat "$agent_log")"
    grep -q "without proof that it is hpod" "$(sql "SELECT trial_dir FROM trials WHERE sweep_id=$id AND params_json LIKE '%report%'")/stderr.log" ||
      fail "clear: hpo report did not say why it took no answer"
  fi
  [ "$(trial_processes "$id")" -ge 2 ] || fail "$mode: a trial stopped while the impostor answered"

  # hpod comes back on its port; the trials finish, every report stored once.
  : >"$HPO_DATA_DIR/hpod.lock"
  hpo daemon start --cpus 4 --listen 0.0.0.0:0 "$@" >/dev/null
  [ "$(cat "$HPO_DATA_DIR/endpoint")" = "$endpoint" ] || fail "$mode: hpod came back elsewhere"
  hpo wait "$id" --timeout 90 >/dev/null || fail "$mode: the sweep did not complete: $(hpo trials "$id")"
  local tid counts
  for tid in $(sql "SELECT id FROM trials WHERE sweep_id=$id"); do
    [ "$(sql "SELECT state FROM trials WHERE id=$tid")" = TRIAL_STATE_COMPLETED ] ||
      fail "$mode: trial $tid: $(sql "SELECT state, message FROM trials WHERE id=$tid")"
    counts=$(sql "SELECT COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS WHERE trial_id=$tid")
    [ "$counts" = "$STEPS/$STEPS" ] || fail "$mode: trial $tid: reports $counts, not $STEPS/$STEPS"
  done
  hpo daemon stop >/dev/null
  echo "$mode: $(tail -n 1 "$log"); no token reached it, nothing ran, no trial stopped"
  rm -rf "$HPO_DATA_DIR"
}

round tls
round clear --insecure-listen
pass "an impostor at hpod's port (TLS of its own, and clear text) got no token and started nothing"
