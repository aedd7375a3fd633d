#!/usr/bin/python3
"""Two more tables of real learning curves for bench/search_quality, 60 steps each, from model
families and data sets the other tables do not use, chosen so that early steps predict the end
only loosely:

  - wine_sgd_curves.csv: scikit-learn's SGDClassifier (a linear model, logistic loss, elastic-net
    penalty) on the wine data set, one epoch of partial_fit per step, validation log-loss;
  - diabetes_forest_curves.csv: a random forest regressor on the diabetes data set, two more
    trees per step (warm start), validation RMSE.

200 random configurations each. The header of each file says, for a few steps k, the Spearman
rank correlation between the configurations' values at step k and at the last step. Run once
(a minute or two on one core); the repository keeps the output.

    OMP_NUM_THREADS=1 /usr/bin/python3 bench/make_loose_curves.py [--out-dir bench/data]
"""
import argparse
import math
import os
import time
import warnings

import numpy as np
from scipy.stats import spearmanr
from sklearn.datasets import load_diabetes, load_wine
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler

STEPS, CONFIGS = 60, 200
CHECK_STEPS = (1, 3, 6, 15, 30)


def split(x, y):
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    n_val = len(y) // 3
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val]


def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def correlations(curves):
    """Spearman's rho of the values at each step in CHECK_STEPS with those at the last step."""
    values = np.array(curves)
    return {k: spearmanr(values[:, k - 1], values[:, -1]).correlation for k in CHECK_STEPS}


def write(path, header, columns, rows, curves):
    rho = correlations(curves)
    with open(path, "w") as out:
        for line in header:
            out.write(f"# {line}\n")
        out.write("# rank correlation (Spearman) of step k with the last step: " +
                  ", ".join(f"k={k}: {r:.2f}" for k, r in rho.items()) + "\n")
        out.write(",".join(columns) + "\n")
        for row in rows:
            out.write(row + "\n")
    print(f"{path}: " + ", ".join(f"rho(k={k})={r:.2f}" for k, r in rho.items()))


def wine_sgd(path):
    xt, yt, xv, yv = split(*load_wine(return_X_y=True))
    scaler = StandardScaler().fit(xt)
    xt, xv = scaler.transform(xt), scaler.transform(xv)
    classes = np.unique(yt)
    rng = np.random.default_rng(2)
    rows, curves = [], []
    for c in range(CONFIGS):
        alpha = log_uniform(rng, 1e-6, 1e-1)
        eta0 = log_uniform(rng, 1e-2, 10.0)  # wide: fast learners lead early, not always late
        l1_ratio = rng.uniform(0.0, 1.0)
        schedule = ["constant", "invscaling", "adaptive"][rng.integers(3)]
        batch = [8, 32][rng.integers(2)]
        m = SGDClassifier(loss="log_loss", penalty="elasticnet", alpha=alpha, l1_ratio=l1_ratio,
                          learning_rate=schedule, eta0=eta0, power_t=0.5, random_state=c)
        order_rng = np.random.default_rng(c)
        curve = []
        for step in range(1, STEPS + 1):
            # One epoch: the training set once, in mini-batches, in a new order.
            order = order_rng.permutation(len(yt))
            for i in range(0, len(order), batch):
                idx = order[i:i + batch]
                m.partial_fit(xt[idx], yt[idx], classes=classes)
            p = np.clip(m.predict_proba(xv), 1e-12, 1.0)
            loss = min(log_loss(yv, p, labels=classes), 20.0)  # a diverged model scores 20
            curve.append(loss)
            rows.append(f"{alpha:.6g},{eta0:.6g},{l1_ratio:.4f},{schedule},{batch},{step},{loss:.6f}")
        curves.append(curve)
    write(path, [
        "hpod search-quality table: scikit-learn SGDClassifier (logistic loss, elastic net) on",
        f"sklearn.datasets.load_wine ({len(yt)} training / {len(yv)} validation samples, standardized);",
        f"{CONFIGS} random configurations; one epoch of mini-batches per step; val_loss (log-loss,",
        "at most 20). Made by bench/make_loose_curves.py.",
        "name scikit-learn SGD logistic regression on wine (real learning curves, 200 configurations)",
        "param alpha float log", "param eta0 float log", "param l1_ratio float",
        "param schedule categorical", "param batch categorical", "step epoch",
        "metric val_loss minimize"],
        ["alpha", "eta0", "l1_ratio", "schedule", "batch", "epoch", "val_loss"], rows, curves)


def diabetes_forest(path):
    xt, yt, xv, yv = split(*load_diabetes(return_X_y=True))
    rng = np.random.default_rng(3)
    rows, curves = [], []
    for c in range(CONFIGS):
        depth = int(round(log_uniform(rng, 2, 32)))
        min_leaf = int(round(log_uniform(rng, 1, 32)))
        features = rng.uniform(0.1, 1.0)
        samples = rng.uniform(0.2, 1.0)
        m = RandomForestRegressor(n_estimators=0, max_depth=depth, min_samples_leaf=min_leaf,
                                  max_features=features, max_samples=samples, bootstrap=True,
                                  warm_start=True, random_state=c, n_jobs=1)
        curve = []
        for step in range(1, STEPS + 1):
            m.set_params(n_estimators=2 * step)
            m.fit(xt, yt)
            rmse = float(np.sqrt(np.mean((m.predict(xv) - yv) ** 2)))
            curve.append(rmse)
            rows.append(f"{depth},{min_leaf},{features:.4f},{samples:.4f},{step},{rmse:.4f}")
        curves.append(curve)
    write(path, [
        "hpod search-quality table: scikit-learn RandomForestRegressor on sklearn.datasets.load_diabetes",
        f"({len(yt)} training / {len(yv)} validation samples); {CONFIGS} random configurations; two more",
        "trees per step (warm start); val_rmse. Made by bench/make_loose_curves.py.",
        "name scikit-learn random forest on diabetes (real learning curves, 200 configurations)",
        "param max_depth int log", "param min_samples_leaf int log", "param max_features float",
        "param max_samples float", "step step", "metric val_rmse minimize"],
        ["max_depth", "min_samples_leaf", "max_features", "max_samples", "step", "val_rmse"],
        rows, curves)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default="bench/data")
    a = p.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    t0 = time.time()
    wine_sgd(os.path.join(a.out_dir, "wine_sgd_curves.csv"))
    diabetes_forest(os.path.join(a.out_dir, "diabetes_forest_curves.csv"))
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
