#!/usr/bin/python3
"""Optuna 3.1's side of bench/search_quality: TPE with its SuccessiveHalving and Hyperband pruners
on the same problems, through the same simulated cluster of W workers (one epoch = one time unit,
27 epochs at most, the trial that finishes its epoch first reports first; ties by trial number).

Prints one line per epoch spent: "method seed spent time regret" (regret of the best value so far).
Run by search_quality; by hand:
    /usr/bin/python3 bench/optuna_quality.py --problem hartmann6 --workers 8 --seeds 10 --budget 1000
"""
import argparse
import math
import sys

import optuna

EPOCHS = 27

A_ = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886], [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
     [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650], [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def hartmann6():
    def suggest(trial):
        return {f"x{i}": trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(1, 7)}

    def value(x, epoch):  # the same curve as search_quality.cc
        h = 0.0
        for i in range(4):
            e = sum(A[i][j] * (x[f"x{j + 1}"] - P[i][j]) ** 2 for j in range(6))
            h -= A_[i] * math.exp(-e)
        return h + 2.0 * math.exp(-epoch * (0.5 + x["x1"]) / 9.0)

    best = -3.32237 + 2.0 * math.exp(-EPOCHS * 0.7017 / 9.0)
    return suggest, value, best


def digits(path):
    curves = {}
    for line in open(path):
        if line.startswith("#") or line.startswith("config"):
            continue
        _, lr, hidden, alpha, batch, epoch, acc = line.strip().split(",")
        key = (float(lr), float(hidden), float(alpha), float(batch))
        curves.setdefault(key, [1.0] * EPOCHS)[int(epoch) - 1] = 1.0 - float(acc)
    grids = [sorted({k[i] for k in curves}) for i in range(4)]
    best = min(min(c) for c in curves.values())

    def snap(grid, v):
        return min(grid, key=lambda g: abs(math.log(g) - math.log(v)))

    def suggest(trial):
        return {"lr": trial.suggest_float("lr", grids[0][0], grids[0][-1], log=True),
                "hidden": trial.suggest_int("hidden", int(grids[1][0]), int(grids[1][-1]), log=True),
                "alpha": trial.suggest_float("alpha", grids[2][0], grids[2][-1], log=True),
                "batch": trial.suggest_categorical("batch", [int(b) for b in grids[3]])}

    def value(x, epoch):
        key = (snap(grids[0], x["lr"]), snap(grids[1], x["hidden"]), snap(grids[2], x["alpha"]), float(x["batch"]))
        return curves[key][epoch - 1]

    return suggest, value, best


def run(method, pruner, problem, workers, seed, budget, out):
    suggest, value, best_possible = problem
    # A fixed study name: HyperbandPruner assigns brackets from a hash of it (random by default).
    study = optuna.create_study(study_name=f"{method}-{seed}", direction="minimize",
                                sampler=optuna.samplers.TPESampler(seed=seed), pruner=pruner)
    running = []  # [next_time, trial_number, trial, params, epoch]
    now, spent, best = 0.0, 0, math.inf
    while spent < budget:
        while len(running) < workers:
            t = study.ask()
            running.append([now + 1, t.number, t, suggest(t), 0])
        running.sort(key=lambda r: (r[0], r[1]))
        r = running[0]
        now = r[0]
        r[4] += 1
        y = value(r[3], r[4])
        spent += 1
        best = min(best, y)
        out.write(f"{method} {seed} {spent} {now:g} {best - best_possible:.6g}\n")
        r[2].report(y, r[4])
        if r[4] >= EPOCHS:
            study.tell(r[2], y)
            running.pop(0)
        elif r[2].should_prune():
            study.tell(r[2], state=optuna.trial.TrialState.PRUNED)
            running.pop(0)
        else:
            r[0] = now + 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problem", choices=["hartmann6", "digits"], required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--table", default="bench/data/digits_mlp_curves.csv")
    a = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    problem = hartmann6() if a.problem == "hartmann6" else digits(a.table)
    for seed in range(1, a.seeds + 1):
        run("Optuna_TPE_+_SuccessiveHalving", optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3),
            problem, a.workers, seed, a.budget, sys.stdout)
        # The same bootstrap as hpod's "TPE + ASHA bootstrap 5": no promotion until a rung has
        # more than 5 trials.
        run("Optuna_TPE_+_SuccessiveHalving_bootstrap_5",
            optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3, bootstrap_count=5),
            problem, a.workers, seed, a.budget, sys.stdout)
        run("Optuna_TPE_+_Hyperband",
            optuna.pruners.HyperbandPruner(min_resource=1, max_resource=EPOCHS, reduction_factor=3),
            problem, a.workers, seed, a.budget, sys.stdout)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
