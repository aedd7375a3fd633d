"""The Python client against a real hpod (local backend) in a temp data dir.

Run by ctest as: /usr/bin/python3 -m unittest tests/python/test_client.py
with PYTHONPATH=<build>/python and HPO_BIN=<build>/bin.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import hpo

BIN = os.environ["HPO_BIN"]


def _state_name(state):
    return hpo.client._state("trial", state)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="hpo-py-")
        os.environ["HPO_DATA_DIR"] = cls.data
        os.environ["PATH"] = BIN + os.pathsep + os.environ["PATH"]
        subprocess.run([os.path.join(BIN, "hpo"), "daemon", "start", "--cpus", "4"], check=True,
                       stdout=subprocess.DEVNULL)
        cls.client = hpo.Client()
        cls.work = tempfile.mkdtemp(prefix="hpo-py-work-")
        # A trial that reports through the Python helper: loss = (x - 3)^2 / step.
        cls.trainer = os.path.join(cls.work, "trainer.py")
        with open(cls.trainer, "w") as f:
            f.write(textwrap.dedent("""
                import sys, hpo
                x = float(sys.argv[1])
                for step in range(1, 4):
                    if not hpo.report(step=step, loss=(x - 3) ** 2 / step, other=step):
                        sys.exit(0)
            """))

    @classmethod
    def tearDownClass(cls):
        subprocess.run([os.path.join(BIN, "hpo"), "daemon", "stop"], stdout=subprocess.DEVNULL)
        shutil.rmtree(cls.data, ignore_errors=True)
        shutil.rmtree(cls.work, ignore_errors=True)

    def spec(self, trials=6, command=None):
        return {
            "name": "py",
            "command": command or [sys.executable, self.trainer, "{x}"],
            "parameters": {"x": {"type": "float", "low": 0, "high": 6}, "k": ["a", "b"]},
            "objective": {"metric": "loss", "direction": "minimize"},
            "budget": {"max_trials": trials, "max_concurrent": 3},
            "seed": 5,
        }

    def test_validate_reports_errors_with_lines(self):
        ok, errors, _ = self.client.validate("parameters:\n  x: {type: float, low: 2, high: 1}\n"
                                             "objective: {metric: m, direction: max}\ncommand: t\n"
                                             "budget: {max_trials: 1}\n")
        self.assertFalse(ok)
        self.assertIn("<string>:2:", errors[0])
        self.assertIn("low must not exceed high", errors[0])
        ok, errors, summary = self.client.validate(self.spec())
        self.assertTrue(ok, errors)
        self.assertIn("trials: 6", summary)
        with self.assertRaises(hpo.HpoError) as cm:
            self.client.submit({"parameters": {"x": [1]}})
        self.assertEqual(cm.exception.code.name, "INVALID_ARGUMENT")

    def test_sweep_end_to_end(self):
        s = self.client.submit(self.spec())
        st = s.wait(timeout=120)
        self.assertEqual(st["state"], "COMPLETED")
        self.assertEqual(st["counts"], {"COMPLETED": 6})
        df = s.trials()
        self.assertEqual(len(df), 6)
        for col in ("trial_id", "state", "x", "k", "loss", "other", "objective", "runtime_s",
                    "segment", "gpu_seconds", "interruptions", "interruption"):
            self.assertIn(col, df.columns)
        self.assertTrue((df["state"] == "COMPLETED").all())
        self.assertTrue((df["segment"] == 1).all())  # nothing interrupted them
        self.assertTrue((df["interruptions"] == "").all())
        self.assertTrue((df["objective"] == df["loss"]).all())
        # What it used: local trials of no GPU, each on one node while it ran.
        self.assertEqual((st["gpu_hours"], st["trial_gpu_hours"], st["allocation_gpu_hours"]),
                         (0, 0, 0))
        self.assertIsNone(st["utilization"])
        self.assertAlmostEqual(st["node_hours"] * 3600, df["runtime_s"].sum(), delta=0.5)
        self.assertIsNone(st["node_hours_budget"])
        best = s.best()
        self.assertEqual(best["trial_id"], int(df.loc[df["objective"].idxmin(), "trial_id"]))
        self.assertEqual(set(best["params"]), {"x", "k"})
        curves = s.curves()
        self.assertEqual(len(curves), 6 * 3 * 2)  # 6 trials x 3 steps x 2 metrics
        self.assertEqual(sorted(curves["step"].unique()), [1, 2, 3])
        events = list(s.events())
        self.assertEqual(events[-1]["kind"], "SWEEP_STATE")
        self.assertEqual(events[-1]["sweep"]["state"], "COMPLETED")
        later = list(s.events(since_seq=events[2]["seq"]))
        self.assertEqual(len(later), len(events) - 3)
        self.assertIn(s.id, list(self.client.sweeps()["id"]))

    def test_enqueue_and_extend(self):
        s = self.client.submit(self.spec(trials=2))
        # Once both of the sweep's trials have started, an enqueued point is a third (before,
        # it would take the second's place within the 2).
        deadline = time.monotonic() + 60
        while len(s._trials()) < 2:
            self.assertLess(time.monotonic(), deadline, "the sweep's 2 trials did not start")
            time.sleep(0.05)
        s.enqueue(x=1.5, k="b")
        with self.assertRaises(hpo.HpoError) as cm:
            s.enqueue({"x": 9, "k": "a"})
        self.assertEqual(cm.exception.code.name, "INVALID_ARGUMENT")
        self.assertIn("x=9 is outside the space", str(cm.exception))
        st = s.wait(timeout=120)
        self.assertEqual((st["state"], st["max_trials"]), ("COMPLETED", 3))
        st = s.extend(add_trials=2, node_hours=5)
        self.assertEqual((st["state"], st["max_trials"], st["node_hours_budget"]),
                         ("RUNNING", 5, 5))
        self.assertEqual(s.wait(timeout=120)["counts"], {"COMPLETED": 5})
        df = s.trials()
        self.assertEqual(sorted(df["origin"]), ["enqueued"] + ["sampled"] * 4)
        self.assertEqual(df.loc[df["origin"] == "enqueued", "x"].tolist(), [1.5])
        # A local sweep has no node to quarantine: none listed, and none to let back in.
        self.assertEqual(s.status()["quarantined_nodes"], [])
        self.assertEqual(list(s.nodes().columns), ["node", "failures", "quarantined", "last_failure"])
        with self.assertRaisesRegex(Exception, "not quarantined"):
            s.allow_node("n1")

    def test_pareto_front(self):
        # Two objectives: loss down and `other` (the step reached: 3 for every trial) down, so
        # the front is the trials of the lowest loss; plus each trial's rank and feasibility.
        spec = self.spec(trials=6)
        del spec["objective"]
        spec["objectives"] = [{"metric": "loss", "direction": "minimize"},
                              {"metric": "other", "direction": "minimize"}]
        spec["constraints"] = ["loss <= 1"]
        spec["algorithm"] = "nsga2"
        s = self.client.submit(spec)
        st = s.wait(timeout=120)
        self.assertEqual(st["objectives"], [("loss", "minimize"), ("other", "minimize")])
        self.assertEqual(st["constraints"], ["loss <= 1"])
        df = s.trials()
        for col in ("pareto_rank", "on_front", "feasible"):
            self.assertIn(col, df.columns)
        front = s.pareto()
        feasible = df[df["feasible"]]
        self.assertEqual(len(front), st["pareto_front_size"])
        self.assertEqual(set(front["trial_id"]),
                         set(feasible[feasible["loss"] == feasible["loss"].min()]["trial_id"]))
        self.assertTrue(0 < (~df["feasible"]).sum() < len(df))
        self.assertTrue((df.loc[~df["feasible"], "pareto_rank"] > 0).all())
        fig = s.plot("pareto")
        self.assertEqual(len(fig.axes), 1)

    def test_ask_and_tell(self):
        s = self.client.submit({
            "name": "ext", "backend": "external", "external": {"timeout": "60s"},
            "parameters": {"x": {"type": "float", "low": 0, "high": 6}},
            "objective": {"metric": "loss", "direction": "minimize"},
            "budget": {"max_trials": 3, "max_concurrent": 2}, "seed": 2})
        told = []
        for _ in range(3):
            t = s.ask()
            self.assertTrue(0 <= t.params["x"] <= 6)
            for step in (1, 2):
                self.assertTrue(t.report(step=step, loss=(t.params["x"] - 3) ** 2 / step))
            told.append(t.tell("completed" if t.number < 2 else "failed"))
        self.assertEqual(told, ["COMPLETED", "COMPLETED", "FAILED"])
        st = s.wait(timeout=30)
        self.assertEqual(st["state"], "COMPLETED")
        self.assertEqual(st["backend"], "external")
        with self.assertRaises(hpo.HpoError) as cm:
            s.ask()
        self.assertEqual(cm.exception.code.name, "FAILED_PRECONDITION")
        df = s.trials()
        self.assertEqual(list(df["step"]), [2, 2, 2])

    def test_watch_in_a_terminal_and_plots(self):
        import contextlib, io
        s = self.client.submit(self.spec(trials=4))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            st = s.watch(interval=0.1)
        self.assertEqual(st["state"], "COMPLETED")
        self.assertIn("COMPLETED 4", out.getvalue().splitlines()[-1])
        self.assertIn("best loss", out.getvalue())
        for kind in ("curves", "objective", "parallel"):
            png = os.path.join(self.work, f"{kind}.png")
            r = subprocess.run([os.path.join(BIN, "hpo"), "plot", str(s.id), "--kind", kind, "-o", png],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_cancel(self):
        s = self.client.submit(self.spec(trials=3, command=["sleep", "300"]))
        st = s.cancel(wait=True, timeout=60)
        self.assertEqual(st["state"], "CANCELED")

    def test_a_retried_report_is_stored_once(self):
        # The trial's first report is stored but its reply is lost (hpod went away just then):
        # it waits in the trial's journal, the trial goes on, and the next delivery sends it
        # again with the same report id; hpod answers it without storing it again, though it
        # has no step to tell it by.
        flaky = os.path.join(self.work, "flaky.py")
        with open(flaky, "w") as f:
            f.write(textwrap.dedent("""
                import grpc
                from hpo import reporting

                class LostReply(grpc.RpcError):
                    def code(self):
                        return grpc.StatusCode.UNAVAILABLE
                    def details(self):
                        return "the reply was lost"

                ids = []
                class Flaky:
                    def __init__(self, real):
                        self.real = real
                    def Report(self, req, **kw):
                        reply = self.real.Report(req, **kw)
                        ids.append(req.report_id)
                        if len(ids) == 1:
                            raise LostReply()
                        return reply
                    def ReportStream(self, reqs, **kw):  # a backlog goes in one stream
                        reqs = list(reqs)
                        ids.extend(r.report_id for r in reqs)
                        return self.real.ReportStream(iter(reqs), **kw)

                class FlakyReporter(reporting.Reporter):
                    def _connect(self):  # each connection, the first and those after a miss
                        super()._connect()
                        self.stub = Flaky(self.stub)

                reporter = FlakyReporter()
                reporter._record(None, {"loss": 2.0})
                stop, missed = reporter.deliver()  # no reply: it waits
                assert missed is not None and len(ids) == 1 and len(reporter.pending) == 1, ids
                reporter._record(None, {"loss": 1.0})
                reporter.deliver()  # within the wait after a miss: not sent
                assert len(ids) == 1 and len(reporter.pending) == 2, ids
                stop, missed = reporter.deliver(now=True)
                assert not stop and missed is None and not reporter.pending
                assert len(ids) == 3 and ids[0] == ids[1] != 0, ids
            """))
        s = self.client.submit(self.spec(trials=1, command=[sys.executable, flaky]))
        st = s.wait(timeout=60)
        self.assertEqual(st["state"], "COMPLETED")
        (t,) = s._trials()
        self.assertEqual(_state_name(t.state), "COMPLETED", t.message)
        self.assertEqual(t.report_count, 2)  # the retry stored nothing
        self.assertEqual(t.step, 2)

    def test_report_outside_a_trial_is_a_clear_error(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HPO_TRIAL")}
        r = subprocess.run([sys.executable, "-c", "import hpo; hpo.report(step=1, loss=1)"], env=env,
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not inside an hpod trial", r.stderr)


if __name__ == "__main__":
    unittest.main()
