"""Client, Sweep and report(): thin, typed wrappers over the hpo.v1 gRPC API."""
import base64
import os
import secrets
import socket
import time

import grpc

from hpo.reporting import HpoError, Reporter, report  # noqa: F401 (report: the package's)
from hpo.reporting import channel as _channel
from hpo.reporting import tls_ca_from_environment as _tls_ca_from_environment
from hpo.v1 import hpo_pb2, hpo_pb2_grpc

_STATE_PREFIX = {"trial": "TRIAL_STATE_", "sweep": "SWEEP_STATE_"}
_FINAL_SWEEP = {"COMPLETED", "GOAL_REACHED", "CANCELED", "FAILED", "TIMED_OUT"}


def _data_dir():
    d = os.environ.get("HPO_DATA_DIR")
    return os.path.abspath(d) if d else os.path.join(os.path.expanduser("~"), ".hpo")


def _lock_holder_host(d):
    """The host of the hpod that holds data directory ``d`` while it beats (hpod.lock:
    "HOST PID JOB UNIX_SECONDS MARK", written again every 10 s), else None."""
    try:
        with open(os.path.join(d, "hpod.lock")) as f:
            fields = f.read().split()
        if len(fields) in (4, 5) and int(fields[3]) + 45 > time.time():
            return fields[0]
    except (OSError, ValueError):
        pass
    return None


def _local_endpoint(d):
    """Where the hpod of data directory ``d`` answers, and the CA file to trust there: its Unix
    socket on this host, else the TCP endpoint it wrote (hpod run as a Slurm job elsewhere)."""
    sock = os.path.join(d, "hpod.sock")
    host = _lock_holder_host(d)
    if host is None or host == socket.gethostname():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            try:
                s.connect(sock)
                return "unix:" + sock, None
            except OSError:
                pass
    try:
        with open(os.path.join(d, "endpoint")) as f:
            endpoint = f.read().strip()
    except OSError:
        endpoint = ""
    ep_host = endpoint.rsplit(":", 1)[0]
    loopback = ep_host.startswith("127.") or ep_host in ("localhost", "[::1]", "::1")
    if not endpoint or endpoint.startswith("unix:") or loopback:
        return "unix:" + sock, None
    ca = _tls_ca_from_environment()
    if ca is None:
        try:
            with open(os.path.join(d, "tls-ca.pem"), "rb") as f:
                ca = f.read()
        except OSError:
            pass
    return endpoint, ca


def _interruption(value):
    """What the infrastructure did to a LOST trial ("time_limit", "preempted", ...), or ""."""
    if value == 0:
        return ""
    return hpo_pb2.Interruption.Name(value)[len("INTERRUPTION_"):].lower()


def _state(kind, value):
    enum = hpo_pb2.TrialState if kind == "trial" else hpo_pb2.SweepState
    return enum.Name(value)[len(_STATE_PREFIX[kind]):]


def _value(v):
    kind = v.WhichOneof("kind")
    return getattr(v, kind) if kind else None


def _estimate(e):
    """A SweepEstimate as a dict: each figure a (low, expected, high) tuple."""
    r = lambda x: (x.low, x.expected, x.high)
    out = {"trials": r(e.trials), "steps": r(e.steps), "basis": e.basis}
    if e.has_cost:
        out.update({"gpu_hours": r(e.gpu_hours), "node_hours": r(e.node_hours),
                    "wall_seconds": r(e.wall_seconds)})
    if e.has_queue_wait:
        out["queue_wait_seconds"] = e.queue_wait_seconds
    if e.queue_wait_basis:
        out["queue_wait_basis"] = e.queue_wait_basis
    return out


def _ts(t):
    if t.seconds == 0 and t.nanos == 0:
        return None
    import pandas as pd
    return pd.Timestamp(t.seconds * 1_000_000_000 + t.nanos, unit="ns", tz="UTC")


class Client:
    """A connection to hpod.

    ``Client()`` uses the daemon ``$HPO_SERVER`` names (host:port, with ``$HPO_TOKEN`` or
    ``$HPO_TOKEN_FILE`` and, for TLS, ``$HPO_TLS_CA``) or else the local daemon of
    ``$HPO_DATA_DIR`` (default ``~/.hpo``): its Unix socket, or from another host the address
    hpod wrote to its ``endpoint`` file (hpod run as a Slurm job), and the user token in its
    ``token`` file. ``Client(endpoint, token, tls_ca=PEM_FILE)`` connects elsewhere.

    Over TCP the token goes only to a server that a CA vouches for (TLS): hpod's own, which it
    keeps in ``DATA_DIR/tls-ca.pem``, or a site's. To an hpod started with
    ``--insecure-listen`` (clear text) it goes only with ``HPO_INSECURE=1``.
    """

    def __init__(self, endpoint=None, token=None, timeout=60.0, tls_ca=None):
        ca_pem = None
        if tls_ca is not None:
            with open(tls_ca, "rb") as f:
                ca_pem = f.read()
        if endpoint is None and os.environ.get("HPO_SERVER"):
            endpoint = os.environ["HPO_SERVER"]
            if token is None:
                token = os.environ.get("HPO_TOKEN")
            if token is None and os.environ.get("HPO_TOKEN_FILE"):
                with open(os.environ["HPO_TOKEN_FILE"]) as f:
                    token = f.read().strip()
            if ca_pem is None:
                ca_pem = _tls_ca_from_environment()
        if endpoint is None:
            d = _data_dir()
            endpoint, found_ca = _local_endpoint(d)
            ca_pem = ca_pem or found_ca
            if token is None:
                try:
                    with open(os.path.join(d, "token")) as f:
                        token = f.read().strip()
                except OSError as e:
                    raise HpoError(grpc.StatusCode.FAILED_PRECONDITION,
                                   f"no token in {d} (is hpod running? `hpo daemon start`)") from e
        if not ca_pem and not endpoint.startswith("unix:") and os.environ.get("HPO_INSECURE") != "1":
            raise HpoError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"{endpoint}: the token goes over TCP only to a server a CA vouches for: "
                           "give tls_ca= (or $HPO_TLS_CA) the hpod's DATA_DIR/tls-ca.pem; for an "
                           "hpod started with --insecure-listen, HPO_INSECURE=1 sends it in the "
                           "clear (anyone who reads the network or takes hpod's port gets it)")
        self._token = token or ""
        self._timeout = timeout
        self._channel = _channel(endpoint, ca_pem)
        self._stub = hpo_pb2_grpc.HpoServiceStub(self._channel)

    def _call(self, method, request, timeout=None):
        try:
            return getattr(self._stub, method)(
                request, timeout=timeout or self._timeout,
                metadata=(("authorization", "Bearer " + self._token),))
        except grpc.RpcError as e:
            raise HpoError(e.code(), e.details()) from None

    def _change(self, method, request, retry_for=60.0):
        """A change sent with a key of its own (request_id) and sent again with the same key
        while hpod is unreachable or late: hpod applies it once however often it arrived."""
        if not request.request_id:
            request.request_id = secrets.token_hex(16)
        give_up, backoff = time.monotonic() + retry_for, 0.2
        while True:
            try:
                return self._call(method, request)
            except HpoError as e:
                retryable = e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                if not retryable or time.monotonic() + backoff > give_up:
                    raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    @staticmethod
    def _spec(spec, source):
        """(yaml_text, source_name, base_dir) from a path, a YAML string or a dict."""
        if isinstance(spec, dict):
            import json
            # JSON is YAML; line numbers in errors refer to this text.
            return json.dumps(spec, indent=1), source or "<dict>", os.getcwd()
        if isinstance(spec, (str, os.PathLike)) and "\n" not in str(spec) and os.path.exists(spec):
            path = os.path.abspath(spec)
            with open(path) as f:
                return f.read(), source or str(spec), os.path.dirname(path)
        return str(spec), source or "<string>", os.getcwd()

    def validate(self, spec, source=None):
        """Checks a sweep; returns (valid, errors, summary) without running anything."""
        text, name, base = self._spec(spec, source)
        r = self._call("ValidateSweep", hpo_pb2.ValidateSweepRequest(spec_yaml=text, source=name, base_dir=base))
        return r.valid, list(r.errors), r.summary

    def plan(self, spec, like=None, steps=None, step_time_s=None, source=None, pilot=False,
             pilot_trials=3, pilot_steps=5, timeout=None):
        """What a sweep would cost before it runs (as `hpo plan`): a dict of trials, steps,
        gpu_hours, node_hours and wall_seconds, each (low, expected, high), with the basis and, on
        Slurm, queue_wait_seconds. With pilot=True (as `hpo plan --pilot`) the file's pilot runs
        first (pilot_trials random configurations, pilot_steps steps each, and one more to its
        end where a trial's length is not known: a sweep of its own whose id is the result's
        "pilot_sweep") and the plan learns a step's time, and a trial's length, from it.
        Raises HpoError when the file is invalid or, without a pilot, a trial's length is not
        known."""
        text, name, base = self._spec(spec, source)
        if pilot and (like or step_time_s):
            raise ValueError("pilot measures a step's time; it does not go with like or step_time_s")

        def ask(like_sweep, check=False):
            r = self._call("PlanSweep", hpo_pb2.PlanSweepRequest(
                spec_yaml=text, source=name, base_dir=base, like_sweep=like_sweep or 0,
                steps=steps or 0, step_seconds=step_time_s or 0, pilot=check))
            if r.errors:
                raise HpoError(grpc.StatusCode.INVALID_ARGUMENT, "\n".join(r.errors))
            return r if check else _estimate(r.estimate)

        if not pilot:
            return ask(like)
        # The file is checked before the pilot runs; where a trial's length is not known, one
        # trial of the pilot runs to its end to learn it.
        full = 1 if ask(None, check=True).length_unknown else 0
        r = self._call("SubmitSweep", hpo_pb2.SubmitSweepRequest(
            spec_yaml=text, source=name, base_dir=base, pilot_trials=pilot_trials,
            pilot_steps=pilot_steps, pilot_full_trials=full))
        pilot_sweep = Sweep(self, r.sweep.id)
        pilot_sweep.wait(timeout=timeout)
        # Its allocations end once released; until then slurmctld counts them in the queue wait.
        until = time.monotonic() + 60
        while pilot_sweep._get().nodes_held > 0 and time.monotonic() < until:
            time.sleep(0.5)
        out = ask(r.sweep.id)
        out["pilot_sweep"] = r.sweep.id
        return out

    def submit(self, spec, name=None, source=None):
        """Submits a sweep (path, YAML string or dict) and returns its Sweep handle."""
        text, src, base = self._spec(spec, source)
        r = self._call("SubmitSweep", hpo_pb2.SubmitSweepRequest(spec_yaml=text, source=src, base_dir=base,
                                                                  name=name or ""))
        return Sweep(self, r.sweep.id)

    def sweeps(self, active_only=False):
        """Every sweep as a DataFrame (id, name, state, counts, best)."""
        import pandas as pd
        r = self._call("ListSweeps", hpo_pb2.ListSweepsRequest(active_only=active_only))
        rows = [{"id": s.id, "name": s.name, "state": _state("sweep", s.state),
                 "trials": sum(s.trial_counts.values()), **{k.lower(): v for k, v in s.trial_counts.items()},
                 "best_trial": s.best_trial_id or None,
                 "best": s.best_objective if s.best_trial_id else None,
                 "created_at": _ts(s.created_at)} for s in r.sweeps]
        return pd.DataFrame(rows)

    def sweep(self, sweep_id):
        """The handle of an existing sweep."""
        self._call("GetSweep", hpo_pb2.GetSweepRequest(sweep_id=sweep_id))
        return Sweep(self, sweep_id)


class Sweep:
    """One sweep of a Client."""

    def __init__(self, client, sweep_id):
        self.client = client
        self.id = sweep_id

    def __repr__(self):
        return f"Sweep({self.id})"

    def _get(self):
        return self.client._call("GetSweep", hpo_pb2.GetSweepRequest(sweep_id=self.id)).sweep

    def status(self):
        """A dict: state, message, counts per trial state, best trial and objective, and what it
        used: gpu_hours and node_hours as charged against its budgets (in Slurm steps mode the
        allocations hpod held, else the trials), trial_gpu_hours, allocation_gpu_hours and
        utilization (their ratio; None outside allocations), the GPUs and nodes held now, the
        budgets, and how long they last at the current rate (seconds; None when there is no
        budget or nothing is held)."""
        s = self._get()
        in_allocations = s.allocation_gpu_seconds > 0 or s.allocation_gpus_held > 0
        return {"id": s.id, "name": s.name, "state": _state("sweep", s.state), "message": s.message,
                "counts": dict(s.trial_counts), "objective": s.objective_metric,
                "backend": s.backend, "max_trials": s.max_trials,
                "direction": "maximize" if s.direction == hpo_pb2.DIRECTION_MAXIMIZE else "minimize",
                "best_trial": s.best_trial_id or None,
                "best": s.best_objective if s.best_trial_id else None,
                "gpu_hours": s.charged_gpu_seconds / 3600,
                "trial_gpu_hours": s.gpu_seconds / 3600,
                "allocation_gpu_hours": s.allocation_gpu_seconds / 3600,
                "utilization": s.utilization if in_allocations else None,
                "gpus_held": s.allocation_gpus_held if in_allocations else s.gpus_held,
                "gpu_hours_budget": s.gpu_hours_budget or None,
                "node_hours": s.node_seconds / 3600, "nodes_held": s.nodes_held,
                "node_hours_budget": s.node_hours_budget or None,
                "budget_seconds_left": s.budget_seconds_left or None,
                "objectives": [(o.metric, "maximize" if o.direction == hpo_pb2.DIRECTION_MAXIMIZE
                                else "minimize") for o in s.objectives],
                "constraints": list(s.constraints),
                "pareto_front_size": s.pareto_front_size,
                "quarantined_nodes": [n.node for n in s.nodes if n.quarantined],
                "plan": _estimate(s.plan) if s.HasField("plan") else None}

    def nodes(self):
        """The nodes where the sweep's trials failed by the infrastructure's fault (its failures
        rules), as a DataFrame: node, failures, quarantined, last_failure."""
        import pandas as pd
        return pd.DataFrame([{"node": n.node, "failures": n.failures,
                              "quarantined": n.quarantined, "last_failure": n.last_failure}
                             for n in self._get().nodes],
                            columns=["node", "failures", "quarantined", "last_failure"])

    def allow_node(self, node):
        """Lets a quarantined node back into the sweep (as `hpo nodes SWEEP --allow NODE`);
        returns nodes()."""
        self.client._call("AllowNode", hpo_pb2.AllowNodeRequest(sweep_id=self.id, node=node))
        return self.nodes()

    def _trials(self):
        return self.client._call("ListTrials", hpo_pb2.ListTrialsRequest(sweep_id=self.id)).trials

    def trials(self):
        """One row per trial: id, number, state, every parameter, every last metric, objective,
        step, times, runtime, exit code, backend id, segment (a resumable trial's current run),
        GPU-seconds and the interruptions that ended its earlier segments; with several
        objectives or constraints also pareto_rank (0: on the front; None: not ranked), on_front
        and feasible."""
        import pandas as pd
        rows = []
        for t in self._trials():
            row = {"trial_id": t.id, "number": t.number, "state": _state("trial", t.state)}
            row.update({k: _value(v) for k, v in sorted(t.params.items())})
            row.update(dict(sorted(t.last_metrics.items())))
            row.update({"objective": t.objective if t.has_objective else None, "step": t.step,
                        "started_at": _ts(t.started_at), "ended_at": _ts(t.ended_at),
                        "exit_code": t.exit_code if t.HasField("ended_at") else None,
                        "attempt": t.attempt, "backend_id": t.backend_id, "parent": t.parent,
                        "lineage": t.lineage, "segment": t.segment,
                        "gpu_seconds": t.gpu_seconds,
                        "interruptions": ";".join(_interruption(s.interruption)
                                                  for s in t.segments),
                        "interruption": _interruption(t.interruption),
                        "origin": t.origin or "sampled", "message": t.message})
            if len(t.objective_values):  # ranked by Pareto
                row.update({"pareto_rank": t.pareto_rank if t.pareto_rank >= 0 else None,
                            "on_front": t.pareto_rank == 0, "feasible": t.feasible})
            rows.append(row)
        df = pd.DataFrame(rows)
        if not df.empty:
            end = df["ended_at"].fillna(pd.Timestamp.now(tz="UTC"))
            df["runtime_s"] = (end - df["started_at"]).dt.total_seconds()
        return df

    def pareto(self):
        """The Pareto front of a sweep with several objectives (or constraints): its completed
        trials that no other dominates, as trials() rows, by the first objective."""
        import pandas as pd
        front = {t.id for t in self.client._call(
            "ListTrials", hpo_pb2.ListTrialsRequest(sweep_id=self.id, pareto=True)).trials}
        df = self.trials()
        if df.empty:
            return df
        first = self.status()["objectives"][0][0]
        out = df[df["trial_id"].isin(front)]
        return out.sort_values(first).reset_index(drop=True) if first in out else out

    def param_names(self):
        """The sweep's parameter names, sorted."""
        return sorted({k for t in self._trials() for k in t.params})

    def watch(self, interval=1.0, max_rows=40):
        """Live table until the sweep ends or on interrupt (updated in place in Jupyter, text
        lines elsewhere); returns status()."""
        from hpo.view import watch
        return watch(self, interval, max_rows)

    def plot(self, kind="curves", path=None):
        """kind: curves (learning curves, stopped trials marked), objective (by trial number, with
        the running best), parallel (parameters coloured by objective), pareto (each pair of
        objectives, the front marked) or hypervolume (of the front, as trials completed).
        Returns the Figure; saves a PNG when `path` is given."""
        from hpo.plot import plot
        return plot(self, kind, path)

    def curves(self):
        """Every report as a long DataFrame: trial_id, step, metric, value, time."""
        import pandas as pd
        rows = []
        for t in self._trials():
            r = self.client._call("GetTrial", hpo_pb2.GetTrialRequest(trial_id=t.id, include_reports=True))
            for rep in r.reports:
                for metric, value in rep.metrics.items():
                    rows.append({"trial_id": t.id, "number": t.number, "step": rep.step,
                                 "metric": metric, "value": value, "time": _ts(rep.time)})
        return pd.DataFrame(rows, columns=["trial_id", "number", "step", "metric", "value", "time"])

    def best(self):
        """The best finished trial as a dict (params, objective, trial_id), or None."""
        s = self._get()
        if not s.best_trial_id:
            return None
        t = self.client._call("GetTrial", hpo_pb2.GetTrialRequest(trial_id=s.best_trial_id)).trial
        return {"trial_id": t.id, "objective": t.objective,
                "params": {k: _value(v) for k, v in sorted(t.params.items())}}

    def cancel(self, wait=True, timeout=120.0):
        """Cancels the sweep; with wait, returns once its trials ended."""
        self.client._call("CancelSweep", hpo_pb2.CancelSweepRequest(sweep_id=self.id))
        return self.wait(timeout) if wait else self.status()

    def extend(self, trials=None, add_trials=None, concurrent=None, wall_time_s=None,
               gpu_hours=None, add_gpu_hours=None, node_hours=None, add_node_hours=None):
        """More budget (as `hpo extend`): a sweep that ran out reopens. Returns status()."""
        self.client._change("ExtendSweep", hpo_pb2.ExtendSweepRequest(
            sweep_id=self.id, max_trials=trials or 0, add_trials=add_trials or 0,
            max_concurrent=concurrent or 0, wall_time_seconds=wall_time_s or 0,
            gpu_hours=gpu_hours or 0, add_gpu_hours=add_gpu_hours or 0,
            node_hours=node_hours or 0, add_node_hours=add_node_hours or 0))
        return self.status()

    def enqueue(self, *configs, **params):
        """Configurations that run before the sampler's (as `hpo enqueue`): dicts, or one as
        keyword arguments. Checked against the space. Returns status()."""
        configs = list(configs) + ([params] if params else [])
        req = hpo_pb2.EnqueueRequest(sweep_id=self.id)
        for c in configs:
            point = req.points.add()
            for k, v in c.items():
                point.values[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        self.client._change("Enqueue", req)
        return self.status()

    def ask(self):
        """A new trial of a sweep with ``backend: external``, for the caller to run: an
        ExternalTrial with ``id``, ``number`` and ``params``; it reports with ``report()``
        (early stopping answers it) and ends with ``tell()``."""
        r = self.client._call("Ask", hpo_pb2.AskRequest(sweep_id=self.id))
        return ExternalTrial(self.client, r)

    def wait(self, timeout=None, poll=0.25):
        """Blocks until the sweep ends; returns status()."""
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.status()
            if st["state"] in _FINAL_SWEEP:
                return st
            if until is not None and time.monotonic() > until:
                raise TimeoutError(f"sweep {self.id} still {st['state']} after {timeout}s")
            time.sleep(poll)

    def events(self, since_seq=0):
        """Iterates over the sweep's events (dicts with seq, kind, trial or sweep), live, until it
        ends. Resume with since_seq= the last seq seen."""
        stream = self.client._stub.WatchSweep(
            hpo_pb2.WatchSweepRequest(sweep_id=self.id, since_seq=since_seq),
            metadata=(("authorization", "Bearer " + self.client._token),))
        try:
            for e in stream:
                kind = hpo_pb2.EventKind.Name(e.kind)[len("EVENT_KIND_"):]
                out = {"seq": e.seq, "kind": kind, "time": _ts(e.time)}
                if e.HasField("trial"):
                    t = e.trial
                    out["trial"] = {"trial_id": t.id, "number": t.number, "state": _state("trial", t.state),
                                    "step": t.step, "metrics": dict(t.last_metrics),
                                    "params": {k: _value(v) for k, v in t.params.items()}}
                if e.HasField("sweep"):
                    out["sweep"] = {"state": _state("sweep", e.sweep.state), "message": e.sweep.message}
                yield out
        except grpc.RpcError as e:
            raise HpoError(e.code(), e.details()) from None


class ExternalTrial:
    """A trial hpod proposed and something else runs (``Sweep.ask()``)."""

    def __init__(self, client, asked):
        self.client = client
        self.id = asked.trial.id
        self.number = asked.trial.number
        self.params = {k: _value(v) for k, v in sorted(asked.trial.params.items())}
        ca = base64.b64decode(asked.tls_ca_data) if asked.tls_ca_data else None
        self._reporter = Reporter(asked.endpoint, asked.trial.id, asked.token, tls_ca_pem=ca)

    def __repr__(self):
        return f"ExternalTrial({self.id}, {self.params})"

    def report(self, step=None, **metrics):
        """Pushes metrics; False when hpod says stop (then tell it how it ended)."""
        return self._reporter.report(step, metrics)

    def tell(self, state="completed", message=""):
        """Ends the trial: ``"completed"`` or ``"failed"``. Returns its final state."""
        states = {"completed": hpo_pb2.TRIAL_STATE_COMPLETED, "failed": hpo_pb2.TRIAL_STATE_FAILED}
        if state not in states:
            raise ValueError("state is 'completed' or 'failed'")
        r = self.client._call("Tell", hpo_pb2.TellRequest(trial_id=self.id, state=states[state],
                                                         message=message))
        return _state("trial", r.trial.state)
