"""Plots of a sweep with matplotlib: learning curves, objective by trial, parallel coordinates.

    python3 -m hpo.plot SWEEP --kind curves|objective|parallel -o FILE.png
"""
import argparse
import sys


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
    else:
        raise ValueError(f"unknown plot kind {kind!r} (curves, objective, parallel)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig


def main(argv=None):
    p = argparse.ArgumentParser(prog="hpo plot", description="Plot a sweep to a PNG file.")
    p.add_argument("sweep", type=int)
    p.add_argument("--kind", choices=["curves", "objective", "parallel"], default="curves")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    a = p.parse_args(argv)
    from hpo.client import Client, HpoError
    try:
        plot(Client().sweep(a.sweep), a.kind, a.output)
    except HpoError as e:
        print(f"hpo plot: {e}", file=sys.stderr)
        return 1
    print(a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
