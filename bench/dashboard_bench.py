#!/usr/bin/python3
"""dashboard_bench: how fast hpod's web dashboard loads and follows a sweep of 1,000, 10,000 and
100,000 trials, in headless Chromium (Debian's chromium, driven by python3-selenium).

For each size: a fresh hpod, a sweep with `backend: external` filled through gRPC (ask, three
reports, tell: every trial COMPLETED with a curve), then in the browser:
- page load: from the start of the navigation to the sweep's page (from a blank one, the session
  cookie set) to its trial table's first rows, and to every chart drawn (curves, objective,
  parallel coordinates, importance), timed in the page; median of 3;
- update: from a new trial's tell returning to the page's header counting it (the event stream,
  then the page's fetch), median of 5;
- the API calls behind the page, median of 5 each (server time plus transfer on loopback), and
  the objective and parallel-coordinates calls asked for every trial (`max=1000000`), which is
  what those charts would carry without the server's thinning.
Prints a markdown table.

    /usr/bin/python3 bench/dashboard_bench.py [--sizes 1000 10000 100000]
(needs PYTHONPATH=build/python and build/bin on PATH, as from the build tree)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

import grpc
from hpo.v1 import hpo_pb2, hpo_pb2_grpc
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

SPEC = """name: bench
backend: external
external: {timeout: 1h}
parameters:
  lr: {type: float, low: 0.0001, high: 0.1, log: true}
  width: {type: int, low: 16, high: 512, log: true}
  act: [relu, tanh, gelu]
  drop: {type: float, low: 0, high: 0.5}
objective: {metric: loss, direction: minimize}
budget: {max_trials: %d, max_concurrent: 512}
"""


def hpo(*args):
    return subprocess.run(["hpo", *args], check=True, text=True, capture_output=True).stdout.strip()


def read(path):
    with open(path) as f:
        return f.read().strip()


class Filler:
    """Completes trials of an external sweep through gRPC: ask, three reports, tell."""

    def __init__(self, data, sweep):
        self.sweep = sweep
        endpoint = read(os.path.join(data, "endpoint"))
        with open(os.path.join(data, "tls-ca.pem"), "rb") as f:  # hpod's own CA
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        self.channel = grpc.secure_channel(endpoint, creds)
        self.hpo = hpo_pb2_grpc.HpoServiceStub(self.channel)
        self.reports = hpo_pb2_grpc.ReportServiceStub(self.channel)
        self.auth = (("authorization", "Bearer " + read(os.path.join(data, "token"))),)

    def one(self):
        asked = self.hpo.Ask(hpo_pb2.AskRequest(sweep_id=self.sweep), metadata=self.auth)
        t = asked.trial
        lr = t.params["lr"].float_value
        for step in (1, 2, 3):
            loss = abs(lr - 0.01) * 10 + t.params["drop"].float_value / step
            self.reports.Report(hpo_pb2.ReportRequest(trial_id=t.id, step=step, metrics={"loss": loss}),
                                metadata=(("authorization", "Bearer " + asked.token),))
        self.hpo.Tell(hpo_pb2.TellRequest(trial_id=t.id, state=hpo_pb2.TRIAL_STATE_COMPLETED),
                      metadata=self.auth)

    def fill(self, n, threads=8):
        left = [n]
        lock = threading.Lock()

        def work():
            while True:
                with lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                self.one()
        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def browser():
    o = Options()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--window-size=1400,1700", f"--user-data-dir={tempfile.mkdtemp(prefix='hpo-chromium-')}"]:
        o.add_argument(a)
    o.binary_location = "/usr/bin/chromium"
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": SHOWN})
    return d


DREW = """const c = document.getElementById(arguments[0]);
  if (!c || !c.width) return false;
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return true;
  return false;"""


CHARTS = ["chart-curves", "chart-objective", "chart-parallel", "chart-importance"]

# Installed in every page before its own scripts: the time from the start of the navigation to
# the trial table's first rows, and to every chart drawn (each chart writes its note once drawn).
SHOWN = """window.__shown = {};
new MutationObserver(() => {
  const s = window.__shown;
  if (!s.table && document.querySelectorAll('#trial-table tbody tr').length) s.table = performance.now();
  if (!s.charts && %s.every(id => (document.getElementById(id + '-note') || {}).textContent))
    s.charts = performance.now();
}).observe(document, {subtree: true, childList: true, characterData: true});""" % CHARTS


def wait(what, seconds=600):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if what():
            return True
        time.sleep(0.02)
    raise TimeoutError("the page did not get there")


def run(n):
    data = tempfile.mkdtemp(prefix="hpo-dash-bench-")
    os.environ["HPO_DATA_DIR"] = data
    hpo("daemon", "start", "--cpus", "2", "--no-durable")
    try:
        spec = os.path.join(data, "bench.yaml")
        with open(spec, "w") as f:
            f.write(SPEC % (n + 100))
        sweep = int(hpo("submit", spec).splitlines()[-1])
        filler = Filler(data, sweep)
        t0 = time.time()
        filler.fill(n)
        fill = time.time() - t0
        base = read(os.path.join(data, "dashboard"))
        d = browser()
        try:
            d.get(hpo("dashboard"))
            wait(lambda: d.execute_script("return typeof csrf !== 'undefined' && csrf !== ''"))
            loads = []
            for _ in range(3):
                d.get("about:blank")
                d.get(base + f"#sweep/{sweep}")
                wait(lambda: d.execute_script("return window.__shown && window.__shown.charts"))
                loads.append(d.execute_script("return window.__shown"))
                assert all(d.execute_script(DREW, c) for c in CHARTS), "a chart is blank"
            load = (statistics.median(l["table"] for l in loads) / 1000,
                    statistics.median(l["charts"] for l in loads) / 1000)
            updates = []
            for k in range(5):
                done = n + k + 1
                filler.one()
                t0 = time.time()
                wait(lambda: f"COMPLETED {done}" in d.execute_script(
                    "return document.getElementById('sweep-stats').innerText").replace("\n", " "), 60)
                updates.append(time.time() - t0)
            cookie = "; ".join(f"{c['name']}={c['value']}" for c in d.get_cookies())
        finally:
            d.quit()
        api = {}
        for name, path in [("sweeps", "api/sweeps"), ("sweep", f"api/sweeps/{sweep}"),
                           ("trials page", f"api/sweeps/{sweep}/trials?limit=50&sort=objective"),
                           ("curves", f"api/sweeps/{sweep}/curves?max=40&points=200"),
                           ("objective", f"api/sweeps/{sweep}/objective"),
                           ("parallel", f"api/sweeps/{sweep}/parallel"),
                           ("importance", f"api/sweeps/{sweep}/importance"),
                           ("timeline", f"api/sweeps/{sweep}/timeline"),
                           # What the two charts would carry without the server's thinning.
                           ("objective, every trial", f"api/sweeps/{sweep}/objective?max=1000000"),
                           ("parallel, every trial", f"api/sweeps/{sweep}/parallel?max=1000000")]:
            times = []
            for _ in range(5):
                t0 = time.time()
                with urllib.request.urlopen(urllib.request.Request(base + path, headers={"Cookie": cookie})) as r:
                    body = r.read()
                times.append(time.time() - t0)
            api[name] = (statistics.median(times), len(body))
        return fill, load, statistics.median(updates), api
    finally:
        hpo("daemon", "stop")
        shutil.rmtree(data, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    a = p.parse_args()
    rows = []
    for n in a.sizes:
        fill, load, update, api = run(n)
        rows.append((n, fill, load, update, api))
        print(f"{n} trials: filled in {fill:.0f} s; table {load[0]:.2f} s, charts {load[1]:.2f} s, "
              f"update {update:.2f} s", flush=True)
    names = list(rows[0][4])
    print("\n| trials | table shown (s) | charts drawn (s) | update (s) | " +
          " | ".join(f"{k} (ms, KB)" for k in names) + " |")
    print("|---:|---:|---:|---:|" + "---:|" * len(names))
    for n, fill, load, update, api in rows:
        print(f"| {n:,} | {load[0]:.2f} | {load[1]:.2f} | {update:.2f} | " +
              " | ".join(f"{api[k][0] * 1000:.0f}, {api[k][1] / 1024:.0f}" for k in names) + " |")


if __name__ == "__main__":
    main()
