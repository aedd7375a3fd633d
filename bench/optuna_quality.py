#!/usr/bin/python3
"""Optuna 3.1's side of bench/search_quality, on the same problems through the same simulated
cluster of W workers (one step = one time unit; the trial that finishes its step first reports
first; ties by trial number).

One objective: TPE alone (Optuna's default) and with its SuccessiveHalving (also with
bootstrap_count 5) and Hyperband pruners; and TPE as Optuna's newer releases recommend it for
parallel runs (multivariate=True, constant_liar=True), alone and with Hyperband. Several objectives: random search, NSGA-II (population
16, as hpod's run, and Optuna's default 50) and multi-objective TPE (Optuna's default); Optuna
prunes no multi-objective study, so these run every trial to its last step.

Problems: --problem hartmann6|zdt1|dtlz2 (the curves of bench/problems.cc), or --table FILE in the
format of bench/README.md (with --directive and --objectives as search_quality takes them); a
suggestion runs the table's nearest configuration, as search_quality picks it.

Prints one line per step spent: "method seed spent time value..." (the objectives' values, as
reported); search_quality scores them as it scores hpod's runs. By hand:
    /usr/bin/python3 bench/optuna_quality.py --problem zdt1 --workers 8 --seeds 10 --budget 2700
"""
import argparse
import math
import sys
import warnings

import optuna

A_ = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886], [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
     [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650], [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


class Problem:
    """suggest(trial) -> params; value(params, step) -> [values]; directions; steps."""

    def __init__(self, suggest, value, directions, steps=27):
        self.suggest, self.value, self.directions, self.steps = suggest, value, directions, steps


def unit6(trial):
    return {f"x{i}": trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(1, 7)}


def lag(x, step):  # as bench/problems.cc
    return 0.3 * math.exp(-step * (0.5 + x["x1"]) / 9.0)


def hartmann6():
    def value(x, step):
        h = 0.0
        for i in range(4):
            e = sum(A[i][j] * (x[f"x{j + 1}"] - P[i][j]) ** 2 for j in range(6))
            h -= A_[i] * math.exp(-e)
        return [h + 2.0 * math.exp(-step * (0.5 + x["x1"]) / 9.0)]
    return Problem(unit6, value, ["minimize"])


def zdt1():
    def value(x, step):
        f1 = x["x1"]
        g = 1 + 9 * sum(x[f"x{i}"] for i in range(2, 7)) / 5
        d = lag(x, step)
        return [f1 + d, g * (1 - math.sqrt(f1 / g)) + d]
    return Problem(unit6, value, ["minimize", "minimize"])


def dtlz2():
    def value(x, step):
        g = sum((x[f"x{i}"] - 0.5) ** 2 for i in range(3, 7))
        a, b, d = x["x1"] * math.pi / 2, x["x2"] * math.pi / 2, lag(x, step)
        return [(1 + g) * math.cos(a) * math.cos(b) + d, (1 + g) * math.cos(a) * math.sin(b) + d,
                (1 + g) * math.sin(a) + d]
    return Problem(unit6, value, ["minimize", "minimize", "minimize"])


def typed(text):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def table(path, directives, objectives):
    """The table problem: the same directives, space and nearest configuration as
    bench/problems.cc's LoadTable."""
    params, step_col, metrics = [], None, []

    def directive(text):
        nonlocal step_col
        w = text.split()
        if not w:
            return
        if w[0] == "param":
            params[:] = [p for p in params if p[0] != w[1]] + [(w[1], w[2], len(w) == 4)]
        elif w[0] == "step":
            step_col = w[1]
        elif w[0] == "metric":
            metrics[:] = [m for m in metrics if m[0] != w[1]] + [(w[1], w[2])]

    header, rows, order = None, {}, []
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        if line.startswith("#"):
            text = line[1:].strip()
            if text.split(" ")[0] in ("param", "step", "metric"):
                directive(text)
            continue
        f = line.split(",")
        if header is None:
            header = f
            for d in directives:
                directive(d)
            if objectives:
                metrics[:] = [next(m for m in metrics if m[0] == o) for o in objectives]
            continue
        key = tuple(f[header.index(p[0])] for p in params)
        if key not in rows:
            rows[key] = {}
            order.append(key)
        rows[key][int(f[header.index(step_col)])] = [float(f[header.index(m[0])]) for m in metrics]
    steps = sorted(rows[order[0]])
    space = []  # (name, kind, low, high, log, choices)
    for i, (name, kind, log) in enumerate(params):
        values = [typed(k[i]) for k in order]
        if kind == "categorical":
            choices = []
            for v in values:
                if v not in choices:
                    choices.append(v)
            space.append((name, kind, None, None, False, choices))
        else:
            space.append((name, kind, min(float(v) for v in values), max(float(v) for v in values), log, None))

    def coordinates(values):
        unit, cats = [], []
        for (name, kind, lo, hi, log, choices), v in zip(space, values):
            if kind == "categorical":
                cats.append(v)
                continue
            v = float(v)
            a, b = (math.log(lo), math.log(hi)) if log else (lo, hi)
            unit.append(((math.log(v) if log else v) - a) / (b - a) if b > a else 0.0)
        return unit, cats

    configs = [(coordinates([typed(t) for t in k]), [rows[k][s] for s in steps]) for k in order]

    def suggest(trial):
        out = {}
        for name, kind, lo, hi, log, choices in space:
            if kind == "categorical":
                out[name] = trial.suggest_categorical(name, choices)
            elif kind == "int":
                out[name] = trial.suggest_int(name, int(lo), int(hi), log=log)
            else:
                out[name] = trial.suggest_float(name, lo, hi, log=log)
        return out

    nearest_of = {}  # a trial's parameters -> its configuration's curves

    def value(x, step):
        key = tuple(x[s[0]] for s in space)
        if key not in nearest_of:
            unit, cats = coordinates(list(key))
            best, nearest = 1e300, None
            for (u, c), at in configs:
                d2 = sum((a - b) ** 2 for a, b in zip(u, unit)) + sum(a != b for a, b in zip(c, cats))
                if d2 < best:
                    best, nearest = d2, at
            nearest_of[key] = nearest
        return nearest_of[key][step - 1]

    return Problem(suggest, value, [m[1] for m in metrics], len(steps))


def run(method, study, problem, workers, seed, budget, out, prune):
    running = []  # [next_time, trial_number, trial, params, step]
    now, spent = 0.0, 0
    while spent < budget:
        while len(running) < workers:
            t = study.ask()
            running.append([now + 1, t.number, t, problem.suggest(t), 0])
        running.sort(key=lambda r: (r[0], r[1]))
        r = running[0]
        now = r[0]
        r[4] += 1
        values = problem.value(r[3], r[4])
        spent += 1
        out.write(f"{method} {seed} {spent} {now:g} {' '.join(f'{v:.9g}' for v in values)}\n")
        if prune:
            r[2].report(values[0], r[4])
        if r[4] >= problem.steps:
            study.tell(r[2], values if len(values) > 1 else values[0])
            running.pop(0)
        elif prune and r[2].should_prune():
            study.tell(r[2], state=optuna.trial.TrialState.PRUNED)
            running.pop(0)
        else:
            r[0] = now + 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problem", choices=["hartmann6", "zdt1", "dtlz2"])
    p.add_argument("--table")
    p.add_argument("--directive", action="append", default=[])
    p.add_argument("--objectives", default="")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=int, default=1000)
    a = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if a.table:
        problem = table(a.table, a.directive, [o for o in a.objectives.split(",") if o])
    else:
        problem = {"hartmann6": hartmann6, "zdt1": zdt1, "dtlz2": dtlz2}[a.problem]()
    multi = len(problem.directions) > 1
    for seed in range(1, a.seeds + 1):
        def study(name, sampler, pruner=None):
            # A fixed study name: HyperbandPruner assigns brackets from a hash of it.
            return optuna.create_study(study_name=f"{name}-{seed}", directions=problem.directions,
                                       sampler=sampler, pruner=pruner)
        if multi:
            for name, sampler in (
                    ("Optuna_random", optuna.samplers.RandomSampler(seed=seed)),
                    ("Optuna_NSGA-II_population_16", optuna.samplers.NSGAIISampler(population_size=16, seed=seed)),
                    ("Optuna_NSGA-II_population_50", optuna.samplers.NSGAIISampler(seed=seed)),
                    ("Optuna_MOTPE", optuna.samplers.TPESampler(seed=seed))):
                run(name, study(name, sampler), problem, a.workers, seed, a.budget, sys.stdout, False)
        else:
            def tpe():
                return optuna.samplers.TPESampler(seed=seed)

            def tpe_joint():  # what Optuna's newer releases recommend for parallel runs
                return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)

            def hyperband():
                return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=problem.steps,
                                                      reduction_factor=3)

            for name, sampler, pruner in (
                    # Optuna's default: what a user gets without choosing.
                    ("Optuna_TPE_(default,_no_pruner)", tpe(), optuna.pruners.NopPruner()),
                    ("Optuna_TPE_+_SuccessiveHalving", tpe(),
                     optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)),
                    # The same bootstrap as hpod's "TPE + ASHA bootstrap 5".
                    ("Optuna_TPE_+_SuccessiveHalving_bootstrap_5", tpe(),
                     optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3, bootstrap_count=5)),
                    ("Optuna_TPE_+_Hyperband", tpe(), hyperband()),
                    ("Optuna_TPE_multivariate_constant_liar", tpe_joint(), optuna.pruners.NopPruner()),
                    ("Optuna_TPE_multivariate_constant_liar_+_Hyperband", tpe_joint(), hyperband())):
                run(name, study(name, sampler, pruner), problem, a.workers,
                    seed, a.budget, sys.stdout, not isinstance(pruner, optuna.pruners.NopPruner))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
