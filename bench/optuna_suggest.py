#!/usr/bin/python3
"""The Optuna side of bench/suggest_bench: ms per TPE suggestion with N finished trials of history
(in-memory storage), on the same 4-parameter space. Prints `optuna_tpe_ms=<median> history=<n>`."""
import argparse
import math
import random
import statistics
import time

import optuna


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--history", type=int, default=1000)
    p.add_argument("--suggestions", type=int, default=20)
    a = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
             "units": optuna.distributions.IntDistribution(16, 256, step=16),
             "act": optuna.distributions.CategoricalDistribution(["relu", "tanh", "gelu"]),
             "drop": optuna.distributions.FloatDistribution(0.0, 0.5)}
    rng = random.Random(1)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
    trials = []
    for _ in range(a.history):
        params = {"lr": math.exp(rng.uniform(math.log(1e-4), math.log(1e-1))),
                  "units": rng.randrange(16, 257, 16), "act": rng.choice(["relu", "tanh", "gelu"]),
                  "drop": rng.uniform(0, 0.5)}
        value = (math.log10(params["lr"]) + 2) ** 2 + params["drop"] + (params["units"] - 128) ** 2 / 1e4
        trials.append(optuna.trial.create_trial(params=params, distributions=dists, value=value))
    study.add_trials(trials)
    times = []
    for _ in range(a.suggestions):
        t0 = time.perf_counter()
        trial = study.ask()
        trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        trial.suggest_int("units", 16, 256, step=16)
        trial.suggest_categorical("act", ["relu", "tanh", "gelu"])
        trial.suggest_float("drop", 0.0, 0.5)
        times.append((time.perf_counter() - t0) * 1000)
        study.tell(trial, 1.0)
    print(f"optuna_tpe_ms={statistics.median(times):.2f} history={a.history} optuna_version={optuna.__version__}")


if __name__ == "__main__":
    main()
