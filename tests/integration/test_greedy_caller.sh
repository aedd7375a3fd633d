#!/usr/bin/env bash
# One caller cannot take a shared hpod from the others (docs/operations.md, "Limits per caller"):
#  - a viewer's open dashboard pages (event streams, each holding one of the dashboard's threads)
#    are capped at 6: the 7th is answered 429 saying so, another user's page still opens, and a
#    closed page frees its place;
#  - its gRPC watches are capped at 32: the 33rd ends RESOURCE_EXHAUSTED saying so, and the
#    owner's watch still opens;
#  - of its unused login links, the 9th makes the oldest stop working.
# (A user's plans being computed: tests/unit/server/core/controller_plan_test.cc.)
source "$(dirname "$0")/lib.sh"

hpo daemon start --cpus 2 >/dev/null
# A sweep whose trial stays running: its events are what the pages and watches follow.
printf '%s\n' 'command: "sleep 120"' 'parameters: {x: [1]}' 'algorithm: grid' \
  'objective: {metric: loss, direction: minimize}' >"$WORK/long.yaml"
id=$(hpo submit "$WORK/long.yaml" | tail -n 1)
hpo user add vic --role viewer >/dev/null 2>&1
endpoint=$(cat "$HPO_DATA_DIR/endpoint")
as() { local who=$1; shift; HPO_SERVER=$endpoint HPO_TLS_CA=$HPO_DATA_DIR/tls-ca.pem HPO_TOKEN_FILE=$HPO_DATA_DIR/users/$who.token "$@"; }
vic_link=$(as vic hpo dashboard 2>/dev/null)
owner_link=$(hpo dashboard 2>/dev/null)
PYTHONPATH="$HPO_BIN/../python" $PY - "$(cat "$HPO_DATA_DIR/dashboard")" "$HPO_DATA_DIR" "$endpoint" "$id" \
  "$vic_link" "$owner_link" <<'PYEOF' || fail "the limits per caller"
import http.client, os, subprocess, sys, urllib.parse
import grpc
from hpo.v1 import hpo_pb2, hpo_pb2_grpc
dash, data, endpoint, sweep, vic_link, owner_link = sys.argv[1:7]
token = lambda w: open(f"{data}/{w}").read().strip()

def get(url, cookie=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", u.path + ("?" + u.query if u.query else ""), headers={"Cookie": cookie} if cookie else {})
    return c, c.getresponse()

def log_in(link):
    c, r = get(link)
    assert r.status == 303, (link, r.status)
    return r.getheader("Set-Cookie").split(";")[0]

vic_page, owner_page = log_in(vic_link), log_in(owner_link)
def open_stream(cookie):
    return get(dash + f"api/sweeps/{sweep}/events", cookie)

# Dashboard pages: 6 of vic's hold, the 7th is refused and says why.
pages = []
for i in range(6):
    c, r = open_stream(vic_page)
    assert r.status == 200, (i, r.status, r.read())
    pages.append(c)
c, r = open_stream(vic_page)
body = r.read().decode()
assert r.status == 429 and "6 dashboard pages open (event streams), the most one user" in body, (r.status, body)
c, r = open_stream(owner_page)
assert r.status == 200, ("another user's page", r.status)
c.close()
pages.pop().close()
for attempt in range(100):  # the server notices the closed page at its next write or keep-alive
    c, r = open_stream(vic_page)
    if r.status == 200:
        break
    r.read(); c.close()
    import time; time.sleep(0.2)
assert r.status == 200, "a closed page did not free its place"
print("dashboard pages: 6 per user, the 7th refused with 429; another user's opens; a closed one frees its place")

# gRPC watches: 32 of vic's hold, the 33rd ends RESOURCE_EXHAUSTED.
creds = grpc.ssl_channel_credentials(root_certificates=open(f"{data}/tls-ca.pem", "rb").read())
channel = grpc.secure_channel(endpoint, creds)
stub = hpo_pb2_grpc.HpoServiceStub(channel)
def watch(bearer):
    call = stub.WatchSweep(hpo_pb2.WatchSweepRequest(sweep_id=int(sweep), since_seq=0),
                           metadata=[("authorization", "Bearer " + bearer)])
    next(call)  # the sweep's first stored event: the watch is open
    return call
vic, owner = token("users/vic.token"), token("token")
watches = [watch(vic) for _ in range(32)]
try:
    watch(vic)
    raise AssertionError("a 33rd watch opened")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "32 open watches" in e.details(), (e.code(), e.details())
watch(owner).cancel()
for w in watches: w.cancel()
print("gRPC watches: 32 per user, the 33rd RESOURCE_EXHAUSTED; the owner's opens")

# Login links: of 9 unused ones, the oldest stopped working; the others work.
env = dict(os.environ, HPO_SERVER=endpoint, HPO_TLS_CA=f"{data}/tls-ca.pem",
           HPO_TOKEN_FILE=f"{data}/users/vic.token")
links = [subprocess.run(["hpo", "dashboard"], env=env, capture_output=True, text=True,
                        check=True).stdout.strip() for _ in range(9)]
def follow(link):
    return get(link)[1].status
assert follow(links[0]) != 303, "the oldest of 9 unused links still works"
assert follow(links[1]) == 303 and follow(links[8]) == 303
print("login links: 8 unused per user; the 9th retires the oldest")
PYEOF
hpo cancel "$id" >/dev/null
pass "dashboard pages, gRPC watches and login links are capped per user, with a clear refusal"
