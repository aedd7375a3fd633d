#!/usr/bin/env bash
# Authentication and isolation on a real hpod:
#  - two users with their own tokens and roles (hpo user add, hpo share) over TCP: each sees
#    and acts on only the sweeps shared with them (PERMISSION_DENIED otherwise), a wrong or
#    revoked token gets UNAUTHENTICATED, a trial's token cannot call the user API, and refusals
#    change nothing; the daemon's owner sees all (test_security.sh probes each role's calls);
#  - the Unix socket: a connection from another uid is closed by the peer-credential check even
#    with the file modes loosened (needs root to act as another user);
#  - TCP is TLS with hpod's own CA by default (remote clients trust DATA_DIR/tls-ca.pem); a
#    site's certificate (made here by openssl) replaces it: trials report over it, plaintext
#    clients are refused, a client trusting the certificate gets through.
source "$(dirname "$0")/lib.sh"
hpo daemon start --cpus 4 >/dev/null
endpoint=$(cat "$HPO_DATA_DIR/endpoint")
cat >"$WORK/long.yaml" <<'YAML'
command: "hpo report --step 1 loss={x}; sleep 60"
parameters: {x: {type: float, low: 0, high: 1}}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 2}
YAML
aid=$(hpo submit "$WORK/long.yaml" | tail -n 1)
bid=$(hpo submit "$WORK/long.yaml" | tail -n 1)
hpo user add alice --role operator --sweeps "$aid" >"$WORK/alice" 2>/dev/null
hpo user add bob --role none >/dev/null 2>&1
hpo share "$bid" bob operator >/dev/null
[ "$(hpo user ls | cut -f1 | tr '\n' ' ')" = "alice bob " ] || fail "hpo user ls: $(hpo user ls)"
[ "$(stat -c %a "$(cat "$WORK/alice")")" = 600 ] || fail "a user's token file must be mode 0600"
[ "$(stat -c %a "$HPO_DATA_DIR/users/alice.access")" = 600 ] || fail "a user's access file must be mode 0600"
# Another user's hpo: the address, their token, and the CA hpod's certificate chains to.
export HPO_TLS_CA=$HPO_DATA_DIR/tls-ca.pem
as() { local who=$1; shift; HPO_SERVER=$endpoint HPO_TOKEN_FILE=$HPO_DATA_DIR/users/$who.token "$@"; }
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS\") -ge 4 ]" 30
as alice hpo ls >"$WORK/out"
grep -q "^$aid " "$WORK/out" || fail "alice does not see her sweep"
if grep -q "^$bid " "$WORK/out"; then fail "alice sees bob's sweep"; fi
hpo ls >"$WORK/out"
grep -q "^$aid " "$WORK/out" && grep -q "^$bid " "$WORK/out" || fail "the owner should see every sweep"
before=$(sql "SELECT COUNT(*) || ' ' || group_concat(state) FROM trials")
for verb in show trials cancel best; do
  if as bob hpo $verb "$aid" >"$WORK/out" 2>"$WORK/err"; then fail "bob could '$verb' alice's sweep"; fi
  grep -q "not shared with this user" "$WORK/err" || fail "bob's '$verb': $(cat "$WORK/err")"
done
tid=$(sql "SELECT id FROM trials WHERE sweep_id=$aid LIMIT 1")
if as bob hpo logs "$tid" >/dev/null 2>"$WORK/err"; then fail "bob read the log of alice's trial"; fi
[ "$(sql "SELECT state FROM sweeps WHERE id=$aid")" = SWEEP_STATE_RUNNING ] || fail "bob's cancel changed alice's sweep"
[ "$(sql "SELECT COUNT(*) || ' ' || group_concat(state) FROM trials")" = "$before" ] || fail "a refusal changed the trials"
if HPO_SERVER=$endpoint HPO_TOKEN=not-a-token hpo ls >/dev/null 2>"$WORK/err"; then fail "a wrong token was accepted"; fi
grep -q "wrong token" "$WORK/err" || fail "wrong token: $(cat "$WORK/err")"
trial_token=$(sql "SELECT token FROM trials WHERE sweep_id=$aid LIMIT 1")
if HPO_SERVER=$endpoint HPO_TOKEN=$trial_token hpo ls >/dev/null 2>&1; then fail "a trial token opened the user API"; fi
# The exact status codes, through the Python client.
PYTHONPATH="$HPO_BIN/../python" $PY - "$endpoint" "$HPO_DATA_DIR" "$aid" <<'PYEOF'
import sys, grpc
from hpo.client import Client, HpoError
endpoint, data, aid = sys.argv[1], sys.argv[2], int(sys.argv[3])
ca = f"{data}/tls-ca.pem"
bob = Client(endpoint, open(f"{data}/users/bob.token").read().strip(), tls_ca=ca)
import hpo.client as hc
for call in (lambda: bob.sweep(aid), lambda: bob._call("CancelSweep", hc.hpo_pb2.CancelSweepRequest(sweep_id=aid))):
    try:
        call()
        raise SystemExit("bob reached alice's sweep")
    except HpoError as e:
        assert e.code == grpc.StatusCode.PERMISSION_DENIED, e
try:
    Client(endpoint, "wrong", tls_ca=ca).sweeps()
    raise SystemExit("a wrong token was accepted")
except HpoError as e:
    assert e.code == grpc.StatusCode.UNAUTHENTICATED, e
assert list(bob.sweeps()["id"]) != [] and aid not in list(bob.sweeps()["id"])
print("status codes: PERMISSION_DENIED for another user's sweep, UNAUTHENTICATED for a wrong token")
PYEOF
bob_token=$(cat "$HPO_DATA_DIR/users/bob.token")
hpo user rm bob
if HPO_SERVER=$endpoint HPO_TOKEN=$bob_token hpo ls >/dev/null 2>&1; then fail "bob's revoked token still works"; fi
[ ! -e "$HPO_DATA_DIR/users/bob.access" ] || fail "hpo user rm left bob's access file"
as alice hpo ls >/dev/null || fail "alice lost access when bob was removed"
if as alice hpo cancel "$bid" >/dev/null 2>&1; then fail "alice canceled bob's sweep"; fi
hpo cancel "$bid" >/dev/null || fail "the owner could not cancel bob's sweep"
as alice hpo cancel "$aid" >/dev/null || fail "alice could not cancel her sweep"
users="2 users isolated"

# --- peer credentials on the Unix socket ---
peer="peer-credential check skipped (needs root to act as another uid)"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  cat >"$WORK/probe.py" <<'PYEOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
s.connect(sys.argv[1])
try:
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    data = s.recv(100)
except (BrokenPipeError, ConnectionResetError, socket.timeout):
    data = b""
print("answered" if data else "closed")
PYEOF
  chmod 0755 "$HPO_DATA_DIR" "$WORK"
  chmod 0666 "$HPO_DATA_DIR/hpod.sock"
  chmod 0644 "$WORK/probe.py"
  [ "$($PY "$WORK/probe.py" "$HPO_DATA_DIR/hpod.sock")" = answered ] || fail "the owner's own connection was not answered"
  got=$(setpriv --reuid=65534 --regid=65534 --clear-groups $PY "$WORK/probe.py" "$HPO_DATA_DIR/hpod.sock")
  chmod 0700 "$HPO_DATA_DIR"
  [ "$got" = closed ] || fail "uid 65534 got an answer on the owner's socket"
  wait_for "grep -q \"refused a connection from uid 65534\" $HPO_DATA_DIR/hpod.log" 5
  peer="a connection from uid 65534 closed by the peer-credential check"
elif [ "${CI:-}" = true ]; then
  fail "CI runs as root: the peer-credential check must be tested"
fi

# --- a site's certificate ---
hpo daemon stop >/dev/null
unset HPO_TLS_CA
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
hpo daemon start --reconfigure --cpus 2 --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" >/dev/null
endpoint=$(cat "$HPO_DATA_DIR/endpoint")
cat >"$WORK/tls.yaml" <<'YAML'
command: "for s in 1 2 3; do hpo report --step $s loss={x} || exit 1; done"
parameters: {x: {type: float, low: 0, high: 1}}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 3, max_concurrent: 3}
YAML
id=$(hpo submit "$WORK/tls.yaml" | tail -n 1)
hpo wait "$id" --timeout 60 >/dev/null || fail "trials could not report over TLS: $(hpo trials "$id")"
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON t.id=r.trial_id WHERE t.sweep_id=$id")" -eq 9 ] || fail "9 reports over TLS expected"
if HPO_INSECURE=1 HPO_SERVER=$endpoint HPO_TOKEN_FILE=$HPO_DATA_DIR/token hpo ls >/dev/null 2>&1; then fail "a plaintext client got through the TLS port"; fi
if HPO_SERVER=$endpoint HPO_TOKEN_FILE=$HPO_DATA_DIR/token hpo ls >"$WORK/out" 2>&1; then fail "hpo called without a CA"; fi
grep -q "set HPO_TLS_CA" "$WORK/out" || fail "hpo without a CA: unclear: $(cat "$WORK/out")"
HPO_SERVER=$endpoint HPO_TOKEN_FILE=$HPO_DATA_DIR/token HPO_TLS_CA=$WORK/cert.pem hpo ls >"$WORK/out" \
  || fail "a client trusting the certificate was refused"
grep -q "^$id " "$WORK/out" || fail "the TLS client does not list the sweep"
# The Python side over TLS: trials reporting with hpo.report(), a notebook client with tls_ca.
PYDIR=$(cd "$HPO_BIN/../python" && pwd)
cat >"$WORK/tls_py.yaml" <<YAML
command: ["$PY", "-c", "import hpo; [hpo.report(step=s, loss={x} / s) for s in (1, 2)]"]
env: {PYTHONPATH: "$PYDIR"}
parameters: {x: {type: float, low: 0, high: 1}}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 2}
YAML
pid=$(hpo submit "$WORK/tls_py.yaml" | tail -n 1)
hpo wait "$pid" --timeout 60 >/dev/null || fail "Python trials could not report over TLS: $(hpo logs "$(sql "SELECT id FROM trials WHERE sweep_id=$pid LIMIT 1")" --stderr)"
[ "$(sql "SELECT COUNT(*) FROM $ALL_REPORTS r JOIN trials t ON t.id=r.trial_id WHERE t.sweep_id=$pid")" -eq 4 ] || fail "4 Python reports over TLS expected"
PYTHONPATH=$PYDIR $PY - "$endpoint" "$HPO_DATA_DIR/token" "$WORK/cert.pem" "$pid" <<'PYEOF' || fail "the Python client over TLS"
import sys
from hpo.client import Client
c = Client(sys.argv[1], open(sys.argv[2]).read().strip(), tls_ca=sys.argv[3])
assert int(sys.argv[4]) in list(c.sweeps()["id"])
PYEOF
pass "$users; $peer; TLS: reports from hpo report and hpo.report(), plaintext refused, CLI and Python clients served"
