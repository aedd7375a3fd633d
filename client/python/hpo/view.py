"""Live views of a sweep: a table updated in place in Jupyter, periodic text in a terminal."""
import html
import time

_ORDER = ["PENDING", "LAUNCHING", "RUNNING", "COMPLETED", "STOPPED", "FAILED", "CANCELED", "LOST"]


def in_notebook():
    try:
        from IPython import get_ipython
        shell = get_ipython()
        return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"
    except ImportError:
        return False


class Table:
    """The state of a sweep rebuilt from its events."""

    def __init__(self, status):
        self.status = status
        self.trials = {}
        self.started = {}
        self.ended = {}

    def apply(self, event):
        if "sweep" in event:
            self.status["state"] = event["sweep"]["state"]
            self.status["message"] = event["sweep"]["message"]
        t = event.get("trial")
        if t:
            self.trials[t["trial_id"]] = t
            if t["state"] == "RUNNING" and t["trial_id"] not in self.started:
                self.started[t["trial_id"]] = time.time()
            if t["state"] in ("COMPLETED", "STOPPED", "FAILED", "CANCELED", "LOST"):
                self.ended.setdefault(t["trial_id"], time.time())

    def counts(self):
        c = {}
        for t in self.trials.values():
            c[t["state"]] = c.get(t["state"], 0) + 1
        return {k: c[k] for k in _ORDER if k in c}

    def best(self):
        metric, maximize = self.status["objective"], self.status["direction"] == "maximize"
        done = [t for t in self.trials.values()
                if t["state"] in ("COMPLETED", "STOPPED") and metric in t["metrics"]]
        if not done:
            return None
        return (max if maximize else min)(done, key=lambda t: t["metrics"][metric])

    def rows(self, limit):
        metric, maximize = self.status["objective"], self.status["direction"] == "maximize"
        def key(t):
            v = t["metrics"].get(metric)
            return (v is None, -v if (v is not None and maximize) else (v if v is not None else 0))
        rows = sorted(self.trials.values(), key=key)
        return rows[:limit], max(0, len(rows) - limit)

    def runtime(self, trial_id):
        if trial_id not in self.started:
            return "-"
        return f"{self.ended.get(trial_id, time.time()) - self.started[trial_id]:.1f}s"

    def header(self):
        best = self.best()
        metric = self.status["objective"]
        counts = "  ".join(f"{k} {v}" for k, v in self.counts().items()) or "no trials yet"
        b = f"best {metric} {best['metrics'][metric]:.6g} (trial {best['trial_id']})" if best else f"best {metric} -"
        return f"sweep {self.status['id']} '{self.status['name']}' {self.status['state']} | {counts} | {b}"

    def html(self, limit):
        rows, hidden = self.rows(limit)
        params = sorted({p for t in self.trials.values() for p in t["params"]})
        metrics = sorted({m for t in self.trials.values() for m in t["metrics"]})
        head = "".join(f"<th>{html.escape(c)}</th>" for c in ["trial", "state", *params, "step", *metrics, "runtime"])
        body = []
        for t in rows:
            cells = [t["trial_id"], t["state"], *[_fmt(t["params"].get(p)) for p in params],
                     t["step"] if t["step"] >= 0 else "-", *[_fmt(t["metrics"].get(m)) for m in metrics],
                     self.runtime(t["trial_id"])]
            body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
        more = f"<p>{hidden} more trial(s) not shown</p>" if hidden else ""
        return (f"<b>{html.escape(self.header())}</b><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>{more}")


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def watch(sweep, interval=1.0, max_rows=40):
    """Shows the sweep live until it ends (or Ctrl-C / interrupt), leaving the final table.
    In Jupyter the table updates in place; elsewhere a status line is printed every `interval`."""
    table = Table(sweep.status())
    notebook = in_notebook()
    handle = None
    if notebook:
        from IPython.display import HTML, display
        handle = display(HTML(table.html(max_rows)), display_id=True)
    last = 0.0

    def render(force=False):
        nonlocal last
        now = time.monotonic()
        if not force and now - last < interval:
            return
        last = now
        if notebook:
            from IPython.display import HTML
            handle.update(HTML(table.html(max_rows)))
        else:
            print(time.strftime("[%H:%M:%S] ") + table.header(), flush=True)

    try:
        for event in sweep.events():
            table.apply(event)
            render()
    except KeyboardInterrupt:
        pass
    table.status.update(sweep.status())
    render(force=True)
    return table.status
