"""Plots of a sweep with matplotlib: learning curves, objective by trial, parallel coordinates,
and for several objectives the Pareto front and its hypervolume.

    python3 -m hpo.plot SWEEP --kind curves|objective|parallel|pareto|hypervolume -o FILE.png
"""
import argparse
import sys


KINDS = ["curves", "objective", "parallel", "pareto", "hypervolume"]


def hypervolume(points, reference):
    """The volume the points (rows, every objective minimized) dominate up to `reference`:
    slices along the last objective, down to exact boxes in two dimensions."""
    pts = [p for p in points if all(x < r for x, r in zip(p, reference))]
    if not pts:
        return 0.0
    if len(reference) == 1:
        return reference[0] - min(p[0] for p in pts)
    if len(reference) == 2:
        front, total = [], 0.0
        for p in sorted(pts):
            if not front or p[1] < front[-1][1]:
                front.append(p)
        for i, p in enumerate(front):
            nxt = front[i + 1][0] if i + 1 < len(front) else reference[0]
            total += (nxt - p[0]) * (reference[1] - p[1])
        return total
    pts.sort(key=lambda p: p[-1])
    total = 0.0
    for i, p in enumerate(pts):
        top = pts[i + 1][-1] if i + 1 < len(pts) else reference[-1]
        if top > p[-1]:
            total += (top - p[-1]) * hypervolume([q[:-1] for q in pts[:i + 1]], reference[:-1])
    return total


def _minimized(sweep_status, trials):
    """The completed feasible trials' objective values, every one turned to be minimized, in the
    order the trials ended, with the reference point 10% of each range past the worst."""
    objectives = sweep_status["objectives"]
    names = [m for m, _ in objectives]
    t = trials[trials["state"] == "COMPLETED"]
    if "feasible" in t:
        t = t[t["feasible"].astype(bool)]
    t = t.dropna(subset=[n for n in names if n in t]).sort_values("ended_at")
    if any(n not in t for n in names):
        return t, [], []
    rows = [[(-r[m] if d == "maximize" else r[m]) for m, d in objectives] for _, r in t.iterrows()]
    ref = []
    for j in range(len(names)):
        col = [r[j] for r in rows]
        lo, hi = (min(col), max(col)) if col else (0.0, 0.0)
        ref.append(hi + 0.1 * (hi - lo) if hi > lo else hi + 1.0)
    return t, rows, ref


def plot(sweep, kind="curves", path=None):
    """Draws `kind` for `sweep`; saves to `path` when given; returns the matplotlib Figure."""
    import matplotlib
    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    status = sweep.status()
    metric, maximize = status["objective"], status["direction"] == "maximize"
    trials = sweep.trials()
    fig, ax = plt.subplots(figsize=(9, 5))
    if trials.empty:
        ax.text(0.5, 0.5, "no trials yet", ha="center")
    elif kind == "curves":
        curves = sweep.curves()
        curves = curves[curves["metric"] == metric]
        states = dict(zip(trials["trial_id"], trials["state"]))
        for tid, c in curves.groupby("trial_id"):
            c = c.sort_values("step")
            stopped = states.get(tid) == "STOPPED"
            ax.plot(c["step"], c["value"], color="tab:gray" if stopped else "tab:blue",
                    alpha=0.5 if stopped else 0.9, linewidth=1)
            if stopped:
                ax.plot(c["step"].iloc[-1], c["value"].iloc[-1], "x", color="tab:red")
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
        ax.set_title(f"sweep {status['id']}: learning curves (x: stopped early)")
    elif kind == "objective":
        t = trials.dropna(subset=["objective"]).sort_values("number")
        ax.scatter(t["number"], t["objective"], s=18, label="trial")
        best = t["objective"].cummax() if maximize else t["objective"].cummin()
        ax.step(t["number"], best, where="post", color="tab:orange", label="best so far")
        ax.set_xlabel("trial number")
        ax.set_ylabel(metric)
        ax.legend()
        ax.set_title(f"sweep {status['id']}: objective by trial")
    elif kind == "parallel":
        import numpy as np
        t = trials.dropna(subset=["objective"])
        params = sweep.param_names()
        cols = []
        for p in params:
            v = t[p]
            if v.dtype == object or v.dtype == bool:
                codes = {x: i for i, x in enumerate(sorted(v.astype(str).unique()))}
                v = v.astype(str).map(codes).astype(float)
            v = v.astype(float)
            span = v.max() - v.min()
            cols.append((v - v.min()) / span if span > 0 else v * 0 + 0.5)
        obj = t["objective"].astype(float)
        norm = (obj - obj.min()) / ((obj.max() - obj.min()) or 1)
        cmap = plt.get_cmap("viridis" if maximize else "viridis_r")
        xs = np.arange(len(params))
        for i in range(len(t)):
            ax.plot(xs, [c.iloc[i] for c in cols], color=cmap(norm.iloc[i]), alpha=0.7)
        ax.set_xticks(xs)
        ax.set_xticklabels(params)
        ax.set_yticks([])
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(obj.min(), obj.max()))
        fig.colorbar(sm, ax=ax, label=metric)
        ax.set_title(f"sweep {status['id']}: parameters coloured by {metric}")
    elif kind == "pareto":
        objectives = status["objectives"]
        if len(objectives) < 2:
            raise ValueError("a Pareto plot needs a sweep with several objectives")
        pairs = [(i, j) for i in range(len(objectives)) for j in range(i + 1, len(objectives))]
        plt.close(fig)
        fig, axes = plt.subplots(1, len(pairs), figsize=(6 * len(pairs), 5), squeeze=False)
        done = trials[trials["state"] == "COMPLETED"]
        front = done[done.get("on_front", False) == True]  # noqa: E712
        infeasible = done[~done["feasible"].astype(bool)] if "feasible" in done else done[:0]
        feasible = done.drop(infeasible.index)
        for ax, (i, j) in zip(axes[0], pairs):
            (mx, dx), (my, dy) = objectives[i], objectives[j]
            ax.scatter(feasible[mx], feasible[my], s=14, color="tab:gray", alpha=0.6,
                       label="completed")
            if len(infeasible):
                ax.scatter(infeasible[mx], infeasible[my], s=18, marker="x", color="tab:red",
                           label="infeasible")
            f = front.sort_values(mx)
            ax.scatter(f[mx], f[my], s=30, color="tab:orange", label="Pareto front", zorder=3)
            if len(objectives) == 2:
                ax.step(f[mx], f[my], where="post" if (dx == "maximize") == (dy == "maximize")
                        else "pre", color="tab:orange", alpha=0.7)
            ax.set_xlabel(f"{mx} ({dx})")
            ax.set_ylabel(f"{my} ({dy})")
            ax.legend()
        fig.suptitle(f"sweep {status['id']}: Pareto front of {len(front)} trial(s)")
    elif kind == "hypervolume":
        if len(status["objectives"]) < 2:
            raise ValueError("a hypervolume plot needs a sweep with several objectives")
        t, rows, ref = _minimized(status, trials)
        volumes = [hypervolume(rows[:n + 1], ref) for n in range(len(rows))]
        ax.step(range(1, len(volumes) + 1), volumes, where="post")
        ax.set_xlabel("completed trials")
        ax.set_ylabel("hypervolume")
        shown = ", ".join(f"{m} {(-r if d == 'maximize' else r):.4g}"
                          for (m, d), r in zip(status["objectives"], ref))
        ax.set_title(f"sweep {status['id']}: hypervolume of the front (reference: {shown})")
    else:
        raise ValueError(f"unknown plot kind {kind!r} ({', '.join(KINDS)})")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig


def main(argv=None):
    p = argparse.ArgumentParser(prog="hpo plot", description="Plot a sweep to a PNG file.")
    p.add_argument("sweep", type=int)
    p.add_argument("--kind", choices=KINDS, default="curves")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    a = p.parse_args(argv)
    from hpo.client import Client, HpoError
    try:
        plot(Client().sweep(a.sweep), a.kind, a.output)
    except (HpoError, ValueError) as e:
        print(f"hpo plot: {e}", file=sys.stderr)
        return 1
    print(a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
