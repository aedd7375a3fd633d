#!/usr/bin/python3
"""Real learning curves for bench/search_quality: scikit-learn's MLP on the digits data set that
Debian's python3-sklearn ships, validation accuracy after every epoch, over a full grid of
hyperparameters, in search_quality's table format (bench/README.md). Run once; the repository
keeps the output (bench/data/digits_mlp_curves.csv).

    /usr/bin/python3 bench/make_curves.py [--out bench/data/digits_mlp_curves.csv]
"""
import argparse
import itertools
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

GRID = {
    "lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2],
    "hidden": [4, 8, 16, 32, 64],
    "alpha": [1e-5, 1e-3, 1e-1],
    "batch": [32, 128],
}
EPOCHS = 27


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="bench/data/digits_mlp_curves.csv")
    a = p.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    n_val = len(y) // 3
    scaler = StandardScaler().fit(x[n_val:])
    xv, yv = scaler.transform(x[:n_val]), y[:n_val]
    xt, yt = scaler.transform(x[n_val:]), y[n_val:]
    t0 = time.time()
    with open(a.out, "w") as out:
        out.write("# hpod search-quality table: scikit-learn MLPClassifier (adam, one hidden layer) on\n")
        out.write(f"# sklearn.datasets.load_digits: {len(yt)} training / {len(yv)} validation images; val_acc after each of\n")
        out.write(f"# {EPOCHS} epochs. Made by bench/make_curves.py.\n")
        out.write("# name scikit-learn MLP on digits (real learning curves, 180 configurations)\n")
        out.write("# param lr float log\n# param hidden int log\n# param alpha float log\n")
        out.write("# param batch categorical\n# step epoch\n# metric val_acc maximize\n")
        out.write("config,lr,hidden,alpha,batch,epoch,val_acc\n")
        for config, (lr, hidden, alpha, batch) in enumerate(itertools.product(*GRID.values())):
            # warm_start + max_iter=1: each fit() is one more epoch of sklearn's own shuffled
            # mini-batch loop, continuing from the weights so far.
            m = MLPClassifier(hidden_layer_sizes=(hidden,), learning_rate_init=lr, alpha=alpha,
                              batch_size=batch, random_state=config, max_iter=1, warm_start=True,
                              shuffle=True, tol=0, n_iter_no_change=EPOCHS + 1)
            for epoch in range(1, EPOCHS + 1):
                m.fit(xt, yt)
                acc = float((m.predict(xv) == yv).mean())
                out.write(f"{config},{lr:g},{hidden},{alpha:g},{batch},{epoch},{acc:.4f}\n")
    print(f"{config + 1} configurations x {EPOCHS} epochs in {time.time() - t0:.0f} s -> {a.out}")


if __name__ == "__main__":
    main()
