#!/usr/bin/env bash
# Reports never wait, whatever the network does. In a network namespace of the test's own, hpod
# listens on an address that the test then routes into a tun device nothing reads: hpod's host
# drops every packet, as a partition or a dead switch does (not a refused connection, which
# costs nothing). Two trainers report every 0.2 s throughout, one with `hpo report`, one with
# the Python helper, each timing its own calls. No call stalls (the longest is printed; before,
# each retry waited out HPO_REPORT_TIMEOUT, 5 s), the hang watchdog (20 s) catches neither trial
# (their journals show them reporting), both complete in their first run, and every report is
# stored once. HPO_PARTITION_SECONDS (default 60) sets how long hpod's host drops packets.
if [ -z "${HPO_IN_NETNS:-}" ]; then
  if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    exec env HPO_IN_NETNS=1 unshare -n bash "$0" "$@"
  fi
  if [ "${CI:-}" = true ]; then echo "FAIL: CI must run this test: it needs root and unshare -n"; exit 1; fi
  echo "SKIP: needs root and unshare -n (a network namespace)"
  exit 77
fi
source "$(dirname "$0")/lib.sh"
P=${HPO_PARTITION_SECONDS:-60}
ADDR=10.200.0.1
ip link set lo up
ip tuntap add dev hpo0 mode tun || fail "cannot make a tun device"
ip link set hpo0 up
ip addr add "$ADDR/24" dev hpo0
hpo daemon start --cpus 4 --listen "$ADDR:0" >/dev/null
steps=$(((P + 25) * 5))
cat >"$WORK/train.sh" <<SH
#!/usr/bin/env bash
for s in \$(seq 1 $steps); do
  t0=\$(date +%s.%N)
  hpo report --step "\$s" loss=\$((100000 - s)) || exit 1
  echo "\$t0 \$(date +%s.%N)" >>"\$HPO_TRIAL_DIR/calls.log"
  sleep 0.2
done
SH
cat >"$WORK/train.py" <<PY
import os, time
import hpo
with open(os.path.join(os.environ["HPO_TRIAL_DIR"], "calls.log"), "a") as log:
    for s in range(1, $steps + 1):
        t0 = time.time()
        hpo.report(step=s, loss=float(100000 - s))
        log.write(f"{t0} {time.time()}\n")
        log.flush()
        time.sleep(0.2)
PY
chmod +x "$WORK/train.sh"
cat >"$WORK/partition.yaml" <<YAML
command: "if [ {way} = python ]; then exec $PY $WORK/train.py; else exec $WORK/train.sh; fi"
parameters: {way: [report, python]}
algorithm: grid
objective: {metric: loss, direction: minimize}
budget: {max_concurrent: 2}
health: {report_timeout: 20s}
env: {PYTHONPATH: "$HPO_BIN/../python"}
YAML
id=$(hpo submit "$WORK/partition.yaml" | tail -n 1)
per_trial="SELECT COUNT(*) FROM $ALL_REPORTS GROUP BY trial_id HAVING COUNT(*) >= 10"
wait_for "[ \$(sql \"$per_trial\" | wc -l) -eq 2 ]" 60
grep -q "$ADDR" <<<"$(sql "SELECT COUNT(*) FROM trials")$(cat "$HPO_DATA_DIR/endpoint")" || fail "hpod does not listen on $ADDR"
down=$(date +%s.%N)
ip addr del "$ADDR/24" dev hpo0
ip route add "${ADDR%.*}.0/24" dev hpo0
sleep "$P"
ip route del "${ADDR%.*}.0/24" dev hpo0
ip addr add "$ADDR/24" dev hpo0
up=$(date +%s.%N)
hpo wait "$id" --timeout 180 >/dev/null || fail "the sweep did not complete: $(hpo trials "$id" --where)"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id")" -eq 2 ] \
  || fail "a trial was retried: $(sql "SELECT id, state, interruption, message FROM trials WHERE sweep_id=$id")"
for tid in $(sql "SELECT id FROM trials WHERE sweep_id=$id"); do
  way=$(sql "SELECT json_extract(params_json, '\$.way') FROM trials WHERE id=$tid")
  dir=$(sql "SELECT trial_dir FROM trials WHERE id=$tid")
  [ "$(sql "SELECT state FROM trials WHERE id=$tid")" = TRIAL_STATE_COMPLETED ] \
    || fail "trial $tid ($way): $(sql "SELECT state, interruption, message FROM trials WHERE id=$tid")"
  counts=$(sql "SELECT COUNT(*) || '/' || COUNT(DISTINCT step) FROM $ALL_REPORTS WHERE trial_id=$tid")
  [ "$counts" = "$steps/$steps" ] || fail "trial $tid ($way): reports stored (all/distinct steps) $counts, not $steps/$steps"
  # Its calls, timed by itself: the longest, and the longest while hpod's host dropped packets.
  read -r worst during n < <(awk -v down="$down" -v up="$up" '
    { d = $2 - $1; if (d > worst) worst = d; if ($1 > down && $1 < up) { n++; if (d > dw) dw = d } }
    END { printf "%.3f %.3f %d\n", worst, dw, n }' "$dir/calls.log")
  [ "$n" -ge "$P" ] || fail "trial $tid ($way): only $n calls while hpod's host dropped packets for ${P}s"
  awk -v w="$worst" 'BEGIN { exit !(w < 1.0) }' || fail "trial $tid ($way): a report call took ${worst}s"
  echo "trial $tid ($way): longest call ${worst}s overall, ${during}s during the ${P}s partition ($n calls); reports $counts"
done
grep -q "hung: no report" "$HPO_DATA_DIR/hpod.log" && fail "the watchdog took a reporting trial for hung"
pass "hpod's host dropped packets for ${P}s: no report call stalled, no trial caught, $((2 * steps)) reports stored once"
