#!/usr/bin/env bash
# The trust model on a real hpod (server/auth/auth.h, docs/operations.md), probed as a user would:
#  - only the owner runs commands: a viewer's and an operator's submit, fork and warm start are
#    PERMISSION_DENIED saying why, and none of their calls (every HpoService call, enqueue with
#    a shell payload) starts a process whose command they chose;
#  - roles: a viewer reads, an operator also changes, each only where it was given;
#  - /metrics: a metrics token reads every series and nothing else; a user's session reads only
#    the series of the sweeps it may see;
#  - the dashboard: two hpods on one host keep their sessions apart (one cookie jar per host, as
#    a browser has), a POST without a session is refused before its body is read, logout,
#    `hpo user rm` and `hpo user rotate` end sessions and unused login links at once;
#  - TLS is the default on any address; --insecure-listen (clear text) and a certificate do not
#    go together. (test_impostor.sh: what a stranger at hpod's address gets.)
source "$(dirname "$0")/lib.sh"

# --- TLS unless told otherwise (flags only; nothing listens) ---
# Any address may be listened on: TCP is TLS with hpod's own CA unless --insecure-listen says
# clear text, which does not go with a certificate.
for flag in "--listen 0.0.0.0:0" "--dashboard 0.0.0.0:0" "--listen [::]:0" "--listen 0.0.0.0:0 --insecure-listen"; do
  hpod $flag --check-flags || fail "hpod $flag was refused"
done
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
hpod --listen 0.0.0.0:0 --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" --check-flags \
  || fail "a site certificate was refused"
set +e
hpod --listen 0.0.0.0:0 --insecure-listen --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" --check-flags >"$WORK/out" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "does not go with --tls-cert" "$WORK/out" || fail "--insecure-listen with a certificate: $rc $(cat "$WORK/out")"

hpo daemon start --cpus 4 >/dev/null
endpoint=$(cat "$HPO_DATA_DIR/endpoint")
cat >"$WORK/long.yaml" <<'YAML'
command: "hpo report --step 1 loss={x}; sleep 60"
parameters: {x: {type: float, low: 0, high: 1}, k: [a, b]}
objective: {metric: loss, direction: minimize}
budget: {max_trials: 2, max_concurrent: 1}
YAML
a=$(hpo submit "$WORK/long.yaml" | tail -n 1)
b=$(hpo submit "$WORK/long.yaml" | tail -n 1)
hpo user add vic --role viewer >/dev/null 2>&1
hpo user add opal --role operator --sweeps "$a" >/dev/null 2>&1
hpo user add prom --role metrics >/dev/null 2>&1
hpo user add nobody --role none >/dev/null 2>&1
hpo share "$b" nobody viewer >/dev/null
[ "$(hpo user ls | tr '\t\n' ' |')" = "nobody none $b:viewer|opal none $a:operator|prom metrics|vic viewer|" ] \
  || fail "hpo user ls: $(hpo user ls)"
refused 2 "unknown role 'root'" user add eve --role root
refused 1 "no user ghost" share "$a" ghost viewer
wait_for "[ \$(sql \"SELECT COUNT(*) FROM $ALL_REPORTS\") -ge 2 ]" 30
export HPO_TLS_CA=$HPO_DATA_DIR/tls-ca.pem
as() { local who=$1; shift; HPO_SERVER=$endpoint HPO_TOKEN_FILE=$HPO_DATA_DIR/users/$who.token "$@"; }

# --- only the owner runs commands ---
cat >"$WORK/pwn.yaml" <<YAML
command: "touch $WORK/pwned"
parameters: {x: {type: float, low: 0, high: 1}, k: [a, b]}
objective: {metric: loss, direction: minimize}
YAML
for who in vic opal; do
  if as $who hpo submit "$WORK/pwn.yaml" >"$WORK/out" 2>&1; then fail "$who submitted a sweep"; fi
  grep -q "only the daemon's owner submits" "$WORK/out" || fail "$who's submit: $(cat "$WORK/out")"
  if as $who hpo fork "$a" "$WORK/pwn.yaml" >"$WORK/out" 2>&1; then fail "$who forked a sweep"; fi
  grep -q "only the daemon's owner" "$WORK/out" || fail "$who's fork: $(cat "$WORK/out")"
done
# Every call of HpoService, with each role's token and the exact codes.
PYTHONPATH="$HPO_BIN/../python" $PY - "$endpoint" "$HPO_DATA_DIR" "$a" "$b" "$WORK" <<'PYEOF' || fail "the role probes"
import sys, grpc
from hpo.v1 import hpo_pb2 as pb, hpo_pb2_grpc as rpc
endpoint, data, a, b, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ca = open(f"{data}/tls-ca.pem", "rb").read()
stub = rpc.HpoServiceStub(grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(root_certificates=ca)))
token = {w: open(f"{data}/users/{w}.token").read().strip() for w in ("vic", "opal", "prom", "nobody")}
pwn = open(f"{work}/pwn.yaml").read()
DENIED, OK = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.OK

def call(who, method, req):
    try:
        r = getattr(stub, method)(req, metadata=(("authorization", "Bearer " + token[who]),), timeout=10)
        if method == "WatchSweep":
            next(iter(r))
        return OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()

trial_a = None
def expect(who, method, req, want, says=""):
    got, msg = call(who, method, req)
    assert got == want, f"{who} {method}: {got} {msg!r}, not {want}"
    assert says in msg, f"{who} {method}: {msg!r} does not say {says!r}"

submit = pb.SubmitSweepRequest(spec_yaml=pwn, source="pwn.yaml", base_dir=work)
fork = pb.SubmitSweepRequest(spec_yaml=pwn, source="pwn.yaml", base_dir=work, warm_start_sweep=a)
warm = pb.SubmitSweepRequest(spec_yaml=pwn + f"warm_start: {{sweep: {a}}}\n", source="w.yaml", base_dir=work)
for who in ("vic", "opal", "nobody"):
    for req in (submit, fork, warm):
        expect(who, "SubmitSweep", req, DENIED, "only the daemon's owner submits")
    expect(who, "RemoveSweep", pb.RemoveSweepRequest(sweep_id=a), DENIED, "only the daemon's owner")
for req in (submit, pb.ListSweepsRequest(), pb.GetSweepRequest(sweep_id=a)):
    method = {"SubmitSweepRequest": "SubmitSweep", "ListSweepsRequest": "ListSweeps",
              "GetSweepRequest": "GetSweep"}[type(req).__name__]
    expect("prom", method, req, DENIED, "a metrics token reads /metrics and nothing else")
expect("prom", "DashboardLogin", pb.DashboardLoginRequest(), DENIED, "metrics")
expect("prom", "PlanSweep", pb.PlanSweepRequest(spec_yaml="x: 1"), DENIED, "metrics")

# Reads: vic everywhere, opal on sweep a only, nobody on b only.
for who, sweep, want in (("vic", a, OK), ("vic", b, OK), ("opal", a, OK), ("opal", b, DENIED),
                         ("nobody", a, DENIED), ("nobody", b, OK)):
    for method, req in (("GetSweep", pb.GetSweepRequest(sweep_id=sweep)),
                        ("ListTrials", pb.ListTrialsRequest(sweep_id=sweep)),
                        ("WatchSweep", pb.WatchSweepRequest(sweep_id=sweep, since_seq=0))):
        expect(who, method, req, want)
trial_of = {s: stub.ListTrials(pb.ListTrialsRequest(sweep_id=s), metadata=(("authorization", "Bearer " + token["vic"]),)).trials[0].id for s in (a, b)}
expect("opal", "TailTrialLog", pb.TailTrialLogRequest(trial_id=trial_of[a]), OK)
expect("opal", "TailTrialLog", pb.TailTrialLogRequest(trial_id=trial_of[b]), DENIED)
listed = {w: sorted(s.id for s in stub.ListSweeps(pb.ListSweepsRequest(), metadata=(("authorization", "Bearer " + token[w]),)).sweeps) for w in ("vic", "opal", "nobody")}
assert listed == {"vic": [a, b], "opal": [a], "nobody": [b]}, listed

# Changes: a viewer may not; an operator may, where it was given.
for who, sweep in (("vic", a), ("nobody", b), ("opal", b)):
    expect(who, "PauseSweep", pb.PauseSweepRequest(sweep_id=sweep), DENIED)
    expect(who, "ExtendSweep", pb.ExtendSweepRequest(sweep_id=sweep, add_trials=1), DENIED)
    expect(who, "CancelSweep", pb.CancelSweepRequest(sweep_id=sweep), DENIED)
expect("vic", "PauseSweep", pb.PauseSweepRequest(sweep_id=a), DENIED, "a viewer's role only reads it")
expect("opal", "PauseSweep", pb.PauseSweepRequest(sweep_id=a), OK)
expect("opal", "ResumeSweep", pb.ResumeSweepRequest(sweep_id=a), OK)
expect("vic", "AllowNode", pb.AllowNodeRequest(sweep_id=a, node="n1"), DENIED, "a viewer's role only reads it")
expect("opal", "ExtendSweep", pb.ExtendSweepRequest(sweep_id=a, add_trials=1, request_id="probe-1"), OK)
expect("opal", "ExtendSweep", pb.ExtendSweepRequest(sweep_id=a, add_trials=1, request_id="probe-1"), OK)
# An operator's values go through the owner's space: a shell payload is no value of it.
for values in ({"k": f"$(touch {work}/pwned)", "x": "0.5"}, {"k": "a", "x": f"1; touch {work}/pwned"}):
    req = pb.EnqueueRequest(sweep_id=a)
    req.points.add().values.update(values)
    expect("opal", "Enqueue", req, grpc.StatusCode.INVALID_ARGUMENT)
ok = pb.EnqueueRequest(sweep_id=a, request_id="probe-2")
ok.points.add().values.update({"k": "b", "x": "0.5"})
expect("opal", "Enqueue", ok, OK)
expect("opal", "Enqueue", ok, OK)
s = stub.GetSweep(pb.GetSweepRequest(sweep_id=a), metadata=(("authorization", "Bearer " + token["vic"]),)).sweep
assert s.max_trials == 3, f"extend +1, sent twice with one key: 3 trials, not {s.max_trials}"
expect("vic", "Ask", pb.AskRequest(sweep_id=a), DENIED)
expect("vic", "Tell", pb.TellRequest(trial_id=trial_of[a]), DENIED)
expect("opal", "Tell", pb.TellRequest(trial_id=trial_of[b]), DENIED)
print("roles: every call of each role answered as its role says")
PYEOF
sleep 1
[ ! -e "$WORK/pwned" ] || fail "a call of a viewer or operator ran a command they chose"
as opal hpo pause "$a" >/dev/null || fail "opal could not pause her shared sweep"
as opal hpo resume "$a" >/dev/null || fail "opal could not resume her shared sweep"
if as opal hpo cancel "$b" >"$WORK/out" 2>&1; then fail "opal canceled a sweep not shared with her"; fi
grep -q "not shared with this user" "$WORK/out" || fail "opal's cancel: $(cat "$WORK/out")"
[ "$(sql "SELECT state FROM sweeps WHERE id=$b")" = SWEEP_STATE_RUNNING ] || fail "a refusal changed sweep $b"

# --- /metrics and the dashboard ---
dash=$(cat "$HPO_DATA_DIR/dashboard")
login() { as "$1" hpo dashboard 2>/dev/null; }
hpo_token=$(cat "$HPO_DATA_DIR/token")
second=$(mktemp -d /tmp/hpo-it2.XXXXXX)
HPO_DATA_DIR=$second hpo daemon start --cpus 1 >/dev/null
trap 'rc=$?; HPO_DATA_DIR=$second hpo daemon stop >/dev/null 2>&1; rm -rf "$second"; cleanup $rc' EXIT
PYTHONPATH="$HPO_BIN/../python" $PY - "$dash" "$HPO_DATA_DIR" "$a" "$b" "$(login vic)" "$(login nobody)" \
  "$(HPO_DATA_DIR=$second hpo dashboard 2>/dev/null)" "$(hpo dashboard 2>/dev/null)" <<'PYEOF' || fail "the dashboard probes"
import http.client, socket, sys, time, urllib.parse
from prometheus_client.parser import text_string_to_metric_families
dash, data, a, b, vic_link, nobody_link, second_link, owner_link = sys.argv[1:9]
a, b = int(a), int(b)
jar = {}  # one browser's cookies for 127.0.0.1: cookies are kept per host, not per port

def request(url, method="GET", body=None, headers=None, bearer=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    h = dict(headers or {})
    if jar and not bearer:
        h["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
    if bearer:
        h["Authorization"] = "Bearer " + bearer
    c.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=h)
    r = c.getresponse()
    for name, value in r.getheaders():
        if name.lower() == "set-cookie":
            k, v = value.split(";")[0].split("=", 1)
            if "Max-Age=0" in value: jar.pop(k, None)
            else: jar[k] = v
    return r.status, r.read(), dict(r.getheaders())

def log_in(link):
    status, _, headers = request(link)
    assert status == 303, (link, status)
    return headers["Set-Cookie"].split("=")[0]

def series(text):
    return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text) for s in f.samples}

def sweeps_in(text):
    return {dict(l).get("sweep") for _, l in series(text)} - {None}

# A metrics token reads every sweep's series, and nothing else of the dashboard.
token = lambda w: open(f"{data}/users/{w}.token").read().strip()
status, body, _ = request(dash + "metrics", bearer=token("prom"))
assert status == 200, status
all_sweeps = sweeps_in(body.decode())
assert {str(a), str(b)} <= all_sweeps, all_sweeps
assert any(n == "hpod_gpu_hours" and dict(l).get("user") for n, l in series(body.decode()))
for path in ("api/sweeps", f"api/sweeps/{a}", ""):
    assert request(dash + path, bearer=token("prom"))[0] == 401, path

# A user's session: only the series of the sweeps it may see; the owner's: all of them.
cookie = log_in(nobody_link)
status, body, _ = request(dash + "metrics")
assert status == 200 and sweeps_in(body.decode()) == {str(b)}, (status, sweeps_in(body.decode()))
assert not any(n.startswith("hpod_gpus") for n, _ in series(body.decode())), "daemon-wide GPUs shown"
status, body, _ = request(dash + f"api/sweeps/{a}")
assert status == 403, (status, body)
status, body, _ = request(dash + f"api/sweeps/{b}")
assert status == 200 and b'"can_operate":false' in body, body

# Two hpods on one host: each login sets a cookie of its own name, and both sessions hold.
cookie2 = log_in(second_link)
assert cookie2 != cookie, (cookie, cookie2)
second = second_link.split("login?")[0]
assert request(dash + "api/session")[0] == 200, "the first hpod's session was clobbered"
assert request(second + "api/session")[0] == 200
jar.clear()

# A POST without a session is answered before its body is read (and past 64 KiB, never read).
u = urllib.parse.urlparse(dash)
for length in (100_000_000, 1000):
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    s.sendall(f"POST /api/sweeps/{a}/extend HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode())
    t = time.time()
    head = s.recv(100).split(b"\r\n")[0]
    assert head in (b"HTTP/1.1 401 Unauthorized", b"HTTP/1.1 413 Payload Too Large"), head
    assert time.time() - t < 2, "the refusal waited for the body"
    s.close()

# Logout ends the session.
log_in(vic_link)
status, body, _ = request(dash + "api/session")
assert status == 200
import json
csrf = json.loads(body)["csrf"]
assert request(dash + "logout", "POST", b"{}", {"X-HPO-CSRF": "wrong"})[0] == 403
kept = dict(jar)
assert request(dash + "logout", "POST", b"{}", {"X-HPO-CSRF": csrf})[0] == 200
jar.update(kept)  # the old cookie, replayed
assert request(dash + "api/session")[0] == 401, "a logged-out session still works"
print("metrics scoped; sessions of two hpods kept apart; bodies refused unread; logout ends a session")
PYEOF

# `hpo user rm` and `hpo user rotate` end sessions and unused links at once.
cat >"$WORK/session.py" <<'PYEOF'
import http.client, sys, urllib.parse
def get(url, cookie=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", u.path + ("?" + u.query if u.query else ""), headers={"Cookie": cookie} if cookie else {})
    r = c.getresponse()
    return r.status, (r.getheader("Set-Cookie") or "").split(";")[0]
if sys.argv[1] == "login":
    status, cookie = get(sys.argv[2])
    print(cookie if status == 303 else f"refused {status}")
else:
    print(get(sys.argv[2] + "api/session", sys.argv[3])[0])
PYEOF
old_token=$(cat "$HPO_DATA_DIR/users/opal.token")
for who in vic opal; do
  session=$($PY "$WORK/session.py" login "$(login $who)")
  unused=$(login $who)
  [ "$($PY "$WORK/session.py" check "$dash" "$session")" = 200 ] || fail "$who's session did not work"
  if [ $who = vic ]; then hpo user rm vic; else hpo user rotate opal >/dev/null 2>&1; fi
  [ "$($PY "$WORK/session.py" check "$dash" "$session")" = 401 ] || fail "$who's session outlived the token"
  [ "$($PY "$WORK/session.py" login "$unused")" = "refused 401" ] || fail "$who's unused link outlived the token"
done
if HPO_SERVER=$endpoint HPO_TOKEN=$old_token hpo ls >/dev/null 2>&1; then fail "opal's old token still works"; fi
as opal hpo ls >/dev/null || fail "opal's new token does not work"
pass "submit/fork/warm start refused to viewer and operator, no command of theirs ran; roles per sweep; metrics scoped; dashboards apart; bodies refused unread; logout, rm and rotate end sessions; clear text refused"
