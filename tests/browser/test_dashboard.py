#!/usr/bin/python3
"""The web dashboard in a real browser (Debian's chromium, driven by python3-selenium), against a
real hpod running real sweeps, and its API and /metrics over plain HTTP.

- Log in with the one-time link `hpo dashboard` prints; the link works once.
- The sweep list, then a sweep's page: its trial table changes while the sweep runs (live, from
  the event stream), each chart drew (a canvas with pixels on it), the Pareto front of a sweep
  with two objectives, and a trial's page with its stdout tail.
- Refusals that change nothing: no session (401), another user's sweep (403), an action without
  the session's CSRF token (403: the sweep goes on).
- /metrics parses with Prometheus's own parser (python3-prometheus-client) and has the series
  the documentation promises; hpod's log in JSON has the ids as fields.
- Every answer carries the security headers (CSP, nosniff, frame-ancestors), and the page runs
  under its CSP without one violation; a viewer's page offers no actions; logout ends the session.
- A dashboard over TLS (a self-signed certificate made here, trusted by its key's hash): the page
  works in Chromium, and its session cookie is Secure and named after the hpod instance.
Screenshots go to $HPO_SHOTS (default: a temp dir); docs/dashboard.md shows them.

Skips (exit 77) without chromium, chromedriver or selenium, except in CI.
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.error
import urllib.request

BIN = os.environ["HPO_BIN"]
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    if os.environ.get("CI") == "true":
        print(f"FAIL: browser test cannot run in CI: {e}")
        sys.exit(1)
    print(f"SKIP: {e} (apt-get install python3-selenium python3-prometheus-client)")
    sys.exit(77)
if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
    if os.environ.get("CI") == "true":
        print("FAIL: browser test cannot run in CI: no /usr/bin/chromium or /usr/bin/chromedriver")
        sys.exit(1)
    print("SKIP: apt-get install chromium chromium-driver")
    sys.exit(77)


def hpo(*args, env=None, check=True):
    return subprocess.run([os.path.join(BIN, "hpo"), *args], check=check, text=True,
                          capture_output=True, env=env).stdout.strip()


def read(path):
    with open(path) as f:
        return f.read().strip()


def http(url, method="GET", headers=None, data=None):
    """(status, body) of a plain request, with no cookie unless given."""
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="hpo-dash-")
        cls.work = tempfile.mkdtemp(prefix="hpo-dash-work-")
        cls.shots = os.environ.get("HPO_SHOTS") or tempfile.mkdtemp(prefix="hpo-shots-")
        os.makedirs(cls.shots, exist_ok=True)
        os.environ["HPO_DATA_DIR"] = cls.data
        os.environ["PATH"] = BIN + os.pathsep + os.environ["PATH"]
        hpo("daemon", "start", "--cpus", "4", "--gpus", "2", "--log-format", "json",
            "--log-level", "debug")
        cls.base = read(os.path.join(cls.data, "dashboard"))
        # A sweep that runs for a while: 1-GPU trials that report every half second and print.
        with open(os.path.join(cls.work, "slow.yaml"), "w") as f:
            f.write(textwrap.dedent("""\
                name: slow
                command: "for s in 1 2 3 4 5 6; do echo epoch $s of trial {x}; hpo report --step $s loss=$(echo '{x} / '$s | bc -l) || exit 0; sleep 0.5; done"
                parameters: {x: {type: float, low: 0.1, high: 2}}
                objective: {metric: loss, direction: minimize}
                budget: {max_trials: 30, max_concurrent: 2}
                resources: {gpus: 1}
                """))
        with open(os.path.join(cls.work, "two.yaml"), "w") as f:
            f.write(textwrap.dedent("""\
                name: two-objectives
                command: "hpo report --step 1 a={x} b=$(echo '1 - sqrt({x})' | bc -l)"
                parameters: {x: {type: float, low: 0, high: 1}}
                objectives: [{metric: a, direction: minimize}, {metric: b, direction: minimize}]
                algorithm: nsga2
                budget: {max_trials: 12, max_concurrent: 4}
                """))
        cls.two = hpo("submit", os.path.join(cls.work, "two.yaml")).splitlines()[-1]
        hpo("wait", cls.two, "--timeout", "60")
        cls.slow = hpo("submit", os.path.join(cls.work, "slow.yaml")).splitlines()[-1]
        # A certificate for the TLS dashboard, trusted by Chromium through its key's hash only.
        cls.cert, cls.key = os.path.join(cls.work, "cert.pem"), os.path.join(cls.work, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", cls.key, "-out", cls.cert], check=True, capture_output=True)
        spki = subprocess.run(
            f"openssl x509 -in {cls.cert} -pubkey -noout | openssl pkey -pubin -outform der | "
            "openssl dgst -sha256 -binary | base64", shell=True, check=True, capture_output=True,
            text=True).stdout.strip()
        options = Options()
        options.add_argument(f"--ignore-certificate-errors-spki-list={spki}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--window-size=1400,1700",
                  f"--user-data-dir={tempfile.mkdtemp(prefix='hpo-chromium-')}"]:
            options.add_argument(a)
        options.binary_location = "/usr/bin/chromium"
        cls.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        hpo("daemon", "stop", check=False)
        shutil.rmtree(cls.data, ignore_errors=True)
        shutil.rmtree(cls.work, ignore_errors=True)

    def wait(self, what, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            value = what()
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what.__doc__ or what}")

    def js(self, script):
        return self.driver.execute_script(script)

    def drew(self, canvas_id):
        """Whether the canvas has pixels that are not transparent."""
        return self.js(f"""
            const c = document.getElementById("{canvas_id}");
            if (!c || !c.width || !c.height) return false;
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return true;
            return false;""")

    def test_1_login_watch_charts_trial(self):
        d = self.driver
        link = hpo("dashboard")
        self.assertTrue(link.startswith(self.base + "login?token="), link)
        d.get(link)
        self.wait(lambda: self.js("return document.querySelectorAll('#sweeps-table tbody tr').length") >= 2)
        d.save_screenshot(os.path.join(self.shots, "sweeps.png"))
        # The link worked once.
        self.assertEqual(http(link)[0], 401)

        d.get(self.base + f"#sweep/{self.slow}")
        rows = lambda: self.js("return [...document.querySelectorAll('#trial-table tbody tr')].map(r => r.innerText).join('\\n')")
        self.wait(lambda: "RUNNING" in rows())
        first = rows()
        # The table changes as the sweep runs, with no reload: trials report, end, start.
        changed = self.wait(lambda: rows() != first and rows(), 30)
        self.assertNotEqual(changed, first)
        self.wait(lambda: self.js("return document.getElementById('live').className") == "on", 10)
        # Every chart drew: curves, objective, parallel coordinates, importance, GPU timeline.
        for canvas in ["chart-curves", "chart-objective", "chart-parallel", "chart-timeline"]:
            self.wait(lambda: self.drew(canvas), 20)
        self.assertIn("GPU", self.js("return document.getElementById('chart-timeline-note').innerText"))
        self.wait(lambda: "COMPLETED" in rows(), 60)
        # What `auto` chose and why, live: TPE, and ASHA once the first trial completed (6 steps).
        search = lambda: self.js("return document.getElementById('search').innerText")
        self.wait(lambda: "rungs at steps 1, 3 of 6" in search(), 30)
        self.assertIn("algorithm auto (tpe: ", search())
        self.assertIn("(the first to complete) ran 6 steps", search())
        # Parameter importance, once five trials finished.
        self.wait(lambda: "main effects" in self.js(
            "return document.getElementById('chart-importance-note').innerText"), 60)
        self.assertTrue(self.drew("chart-importance"))
        d.save_screenshot(os.path.join(self.shots, "sweep.png"))

        # A trial's page: parameters, history, and its output, live.
        trial = self.js("return document.querySelector('#trial-table tbody tr').dataset.trial")
        d.get(self.base + f"#trial/{trial}")
        self.wait(lambda: "epoch" in self.js("return document.getElementById('log').innerText"), 20)
        self.assertIn("of trial", self.js("return document.getElementById('log').innerText"))
        self.wait(lambda: self.js("return document.querySelectorAll('#history tbody tr').length") >= 2, 20)
        self.wait(lambda: self.drew("chart-trial"), 20)
        d.save_screenshot(os.path.join(self.shots, "trial.png"))

        # A sweep with two objectives: its Pareto front drew.
        d.get(self.base + f"#sweep/{self.two}")
        self.wait(lambda: self.drew("chart-pareto"), 20)
        self.assertIn("on the front", self.js("return document.getElementById('chart-pareto-note').innerText"))
        d.save_screenshot(os.path.join(self.shots, "pareto.png"))
        # Every page above ran under the Content-Security-Policy without one violation.
        violations = [e["message"] for e in d.get_log("browser") if "Content Security Policy" in e["message"]]
        self.assertEqual(violations, [])

    def test_2_refusals_change_nothing(self):
        # No session: nothing is served, no page, no API.
        for path in ["", "api/sweeps", f"api/sweeps/{self.slow}/trials", "app.js", "metrics"]:
            self.assertEqual(http(self.base + path)[0], 401, path)
        # An action without the session's CSRF token is refused, and the sweep goes on.
        link = hpo("dashboard")
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        opener.open(link, timeout=10)
        before = json.loads(opener.open(self.base + f"api/sweeps/{self.slow}").read())
        try:
            opener.open(urllib.request.Request(self.base + f"api/sweeps/{self.slow}/cancel",
                                               method="POST", data=b"{}"), timeout=10)
            self.fail("a POST without the CSRF token was taken")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 403)
            self.assertIn("X-HPO-CSRF", e.read().decode())
        after = json.loads(opener.open(self.base + f"api/sweeps/{self.slow}").read())
        self.assertEqual(after["state"], before["state"])
        self.assertNotEqual(after["state"], "SWEEP_STATE_CANCELED")
        # A user with no role sees no sweep: the owner's are refused.
        hpo("user", "add", "bob", "--role", "none")
        env = dict(os.environ, HPO_TOKEN_FILE=os.path.join(self.data, "users", "bob.token"),
                   HPO_SERVER=read(os.path.join(self.data, "endpoint")),
                   HPO_TLS_CA=os.path.join(self.data, "tls-ca.pem"))
        bob = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        bob.open(hpo("dashboard", env=env), timeout=10)
        self.assertEqual(json.loads(bob.open(self.base + "api/sweeps").read()), [])
        try:
            bob.open(self.base + f"api/sweeps/{self.slow}", timeout=10)
            self.fail("another user's sweep was served")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 403)

    def test_3_metrics_and_json_logs(self):
        token = read(os.path.join(self.data, "token"))
        status, text = http(self.base + "metrics", headers={"Authorization": f"Bearer {token}"})
        self.assertEqual(status, 200)
        families = {f.name: f for f in text_string_to_metric_families(text)}
        for name in ["hpod_reports", "hpod_report_latency_seconds", "hpod_controller_batch_seconds",
                     "hpod_trials", "hpod_gpu_hours", "hpod_gpus"]:
            self.assertIn(name, families, sorted(families))
        self.assertEqual(families["hpod_report_latency_seconds"].type, "histogram")
        reports = [s.value for s in families["hpod_reports"].samples if s.name == "hpod_reports_total"]
        self.assertGreater(reports[0], 0)
        states = {(s.labels["sweep"], s.labels["state"]): s.value for s in families["hpod_trials"].samples}
        self.assertEqual(states.get((self.two, "COMPLETED")), 12)
        gpus = {s.labels["state"]: s.value for s in families["hpod_gpus"].samples}
        self.assertEqual(set(gpus), {"held", "idle"})
        self.assertLessEqual(gpus["held"] + gpus["idle"], 2)
        # While a 1-GPU trial runs: one hpod_trial_info series per GPU it holds.
        def running_info():
            _, t = http(self.base + "metrics", headers={"Authorization": f"Bearer {token}"})
            fams = {f.name: f for f in text_string_to_metric_families(t)}
            return [s for s in fams.get("hpod_trial_info", []).samples if s.labels["sweep"] == self.slow] \
                if "hpod_trial_info" in fams else []
        info = self.wait(running_info, 30)
        self.assertEqual(set(info[0].labels), {"sweep", "trial", "job", "step", "node", "gpu"})
        self.assertIn(info[0].labels["gpu"], {"0", "1"})
        # hpod's log in JSON: one object a line, the ids as fields.
        lines = [json.loads(l) for l in read(os.path.join(self.data, "hpod.log")).splitlines()]
        self.assertTrue(all({"time", "level", "message"} <= set(l) for l in lines))
        self.assertTrue(any(l.get("sweep") == int(self.slow) for l in lines))
        trials = [l for l in lines if re.search(r"\btrial \d+", l["message"])]
        self.assertTrue(trials)
        for l in trials:  # the ids in the message are the fields
            self.assertEqual(l["trial"], int(re.search(r"\btrial (\d+)", l["message"])[1]), l)

    def test_4_compressed_as_asked(self):
        # A browser takes "gzip, deflate, br": hpod answers gzip, the same bytes once decoded;
        # a client that takes nothing gets them as they are.
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        opener.open(hpo("dashboard"), timeout=10)
        for path in ["chart.js", "app.js", f"api/sweeps/{self.two}/trials?limit=1000"]:
            plain = opener.open(self.base + path, timeout=10)
            self.assertIsNone(plain.headers.get("Content-Encoding"), path)
            body = plain.read()
            self.assertGreater(len(body), 1024, path)  # small answers go as they are
            zipped = opener.open(urllib.request.Request(
                self.base + path, headers={"Accept-Encoding": "gzip, deflate, br"}), timeout=10)
            self.assertEqual(zipped.headers.get("Content-Encoding"), "gzip", path)
            self.assertEqual(gzip.decompress(zipped.read()), body, path)
            refused = opener.open(urllib.request.Request(
                self.base + path, headers={"Accept-Encoding": "gzip;q=0"}), timeout=10)
            self.assertIsNone(refused.headers.get("Content-Encoding"), path)

    def test_5_headers_viewer_and_logout(self):
        # Every answer, a refusal too, carries the security headers.
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(self.base + "api/sweeps", timeout=10)
        self.assertEqual(refused.exception.code, 401)
        headers = refused.exception.headers
        csp = headers["Content-Security-Policy"]
        for part in ["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"]:
            self.assertIn(part, csp)
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        self.assertEqual(headers["Referrer-Policy"], "no-referrer")
        # A viewer's page: the sweep, and no button that would change it.
        hpo("user", "add", "vic", "--role", "viewer")
        env = dict(os.environ, HPO_TOKEN_FILE=os.path.join(self.data, "users", "vic.token"),
                   HPO_SERVER=read(os.path.join(self.data, "endpoint")),
                   HPO_TLS_CA=os.path.join(self.data, "tls-ca.pem"))
        d = self.driver
        d.delete_all_cookies()
        d.get(hpo("dashboard", env=env))
        d.get(self.base + f"#sweep/{self.two}")
        self.wait(lambda: "read only" in self.js("return document.getElementById('actions')?.innerText || ''"))
        self.assertEqual(self.js("return document.querySelectorAll('#actions button').length"), 0)
        self.assertEqual(self.js("return document.getElementById('user').innerText"), "vic")
        # Logout: the page says so, and the session's cookie no longer opens anything.
        cookie = {c["name"]: c["value"] for c in d.get_cookies()}
        d.find_element("id", "logout").click()
        self.wait(lambda: "Logged out" in self.js("return document.getElementById('main').innerText"))
        header = "; ".join(f"{k}={v}" for k, v in cookie.items())
        self.assertEqual(http(self.base + "api/session", headers={"Cookie": header})[0], 401)

    def test_6_tls_dashboard(self):
        data = tempfile.mkdtemp(prefix="hpo-dash-tls-")
        env = dict(os.environ, HPO_DATA_DIR=data)
        try:
            hpo("daemon", "start", "--cpus", "1", "--tls-cert", self.cert, "--tls-key", self.key,
                env=env)
            base = read(os.path.join(data, "dashboard"))
            self.assertTrue(base.startswith("https://127.0.0.1:"), base)
            # Plain HTTP to the TLS port gets no page.
            with self.assertRaises(Exception):
                urllib.request.urlopen(base.replace("https://", "http://"), timeout=5).read()
            d = self.driver
            d.get(hpo("dashboard", env=env))
            self.wait(lambda: self.js("return document.getElementById('user')?.innerText"))
            self.assertTrue(d.current_url.startswith("https://"), d.current_url)
            instance = read(os.path.join(data, "instance"))
            cookies = [c for c in d.get_cookies() if c["name"] == f"__Secure-hpod_{instance}"]
            self.assertEqual(len(cookies), 1, d.get_cookies())
            self.assertTrue(cookies[0]["secure"])
            self.assertTrue(cookies[0]["httpOnly"])
            d.save_screenshot(os.path.join(self.shots, "tls.png"))
        finally:
            hpo("daemon", "stop", env=env, check=False)
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
