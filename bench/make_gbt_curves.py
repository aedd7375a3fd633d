#!/usr/bin/python3
"""A second table of real learning curves for bench/search_quality, with two objectives:
scikit-learn's histogram gradient-boosted trees on the breast-cancer data set that Debian's
python3-sklearn ships. 200 random configurations (learning rate, leaves per tree, samples per
leaf, L2 regularization); at each of 27 steps four more trees are grown, and the validation
log-loss, the validation accuracy and the CPU seconds spent fitting so far are recorded. Run once;
the repository keeps the output (bench/data/cancer_gbt_curves.csv).

    OMP_NUM_THREADS=1 /usr/bin/python3 bench/make_gbt_curves.py [--out bench/data/cancer_gbt_curves.csv]
"""
import argparse
import math
import os
import time

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import log_loss

STEPS, TREES_PER_STEP, CONFIGS = 27, 4, 200


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="bench/data/cancer_gbt_curves.csv")
    a = p.parse_args()
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    n_val = len(y) // 3
    xv, yv, xt, yt = x[:n_val], y[:n_val], x[n_val:], y[n_val:]
    rng = np.random.default_rng(1)
    t0 = time.time()
    with open(a.out, "w") as out:
        out.write("# hpod search-quality table: scikit-learn HistGradientBoostingClassifier on\n")
        out.write(f"# sklearn.datasets.load_breast_cancer ({len(yt)} training / {len(yv)} validation"
                  f" samples); {CONFIGS} random configurations; at each step {TREES_PER_STEP} more\n")
        out.write("# trees; val_loss (log-loss), val_acc and fit_seconds (CPU seconds fitting so far,"
                  " one thread). Made by bench/make_gbt_curves.py.\n")
        out.write("# name scikit-learn gradient-boosted trees on breast cancer (real, 200 configurations)\n")
        out.write("# param learning_rate float log\n# param max_leaf_nodes int log\n")
        out.write("# param min_samples_leaf int log\n# param l2_regularization float log\n")
        out.write("# step step\n# metric val_loss minimize\n# metric val_acc maximize\n")
        out.write("# metric fit_seconds minimize\n")
        out.write("learning_rate,max_leaf_nodes,min_samples_leaf,l2_regularization,step,val_loss,"
                  "val_acc,fit_seconds\n")
        for c in range(CONFIGS):
            lr = math.exp(rng.uniform(math.log(0.005), math.log(0.5)))
            leaves = int(round(math.exp(rng.uniform(math.log(2), math.log(64)))))
            min_leaf = int(round(math.exp(rng.uniform(math.log(1), math.log(64)))))
            l2 = math.exp(rng.uniform(math.log(1e-4), math.log(10.0)))
            m = HistGradientBoostingClassifier(learning_rate=lr, max_leaf_nodes=leaves,
                                               min_samples_leaf=min_leaf, l2_regularization=l2,
                                               early_stopping=False, warm_start=True,
                                               random_state=c, max_iter=0)
            spent = 0.0
            for step in range(1, STEPS + 1):
                m.set_params(max_iter=step * TREES_PER_STEP)
                start = time.process_time()
                m.fit(xt, yt)
                spent += time.process_time() - start
                pv = m.predict_proba(xv)
                loss = log_loss(yv, pv, labels=[0, 1])
                acc = float((pv.argmax(axis=1) == yv).mean())
                out.write(f"{lr:.6g},{leaves},{min_leaf},{l2:.6g},{step},{loss:.6f},{acc:.4f},"
                          f"{spent:.6f}\n")
    print(f"{CONFIGS} configurations x {STEPS} steps in {time.time() - t0:.0f} s -> {a.out}")


if __name__ == "__main__":
    main()
