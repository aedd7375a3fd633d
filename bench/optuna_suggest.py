#!/usr/bin/python3
"""The Optuna side of bench/suggest_bench: ms per suggestion with N finished trials of history
(in-memory storage), on the same 4-parameter space: TPE with one objective, and with two
objectives NSGA-II (the history in generations of its population, as its own runs leave it) and
multi-objective TPE. Prints `optuna_tpe_ms=<median>`, `optuna_nsga2_ms=...`, `optuna_motpe_ms=...`.

With `--storage sqlite`, the whole ask path instead: TPE's study.ask() and the four suggest calls
on Optuna's RDB storage in a SQLite file (what a study shared between processes uses), with N
finished trials in it. Prints `optuna_sqlite_ask_ms=<median> p90_ms=<p90>`."""
import argparse
import math
import os
import random
import statistics
import tempfile
import time

import optuna


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--history", type=int, default=1000)
    p.add_argument("--suggestions", type=int, default=20)
    p.add_argument("--multi", action="store_true", help="also NSGA-II and multi-objective TPE")
    p.add_argument("--storage", choices=["memory", "sqlite"], default="memory")
    a = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
             "units": optuna.distributions.IntDistribution(16, 256, step=16),
             "act": optuna.distributions.CategoricalDistribution(["relu", "tanh", "gelu"]),
             "drop": optuna.distributions.FloatDistribution(0.0, 0.5)}
    def time_suggestions(sampler, objectives, population=None, storage=None):
        rng = random.Random(1)
        directions = ["minimize"] * objectives
        study = optuna.create_study(sampler=sampler, directions=directions, storage=storage)
        trials = []
        for i in range(a.history):
            params = {"lr": math.exp(rng.uniform(math.log(1e-4), math.log(1e-1))),
                      "units": rng.randrange(16, 257, 16),
                      "act": rng.choice(["relu", "tanh", "gelu"]), "drop": rng.uniform(0, 0.5)}
            value = (math.log10(params["lr"]) + 2) ** 2 + params["drop"] + (params["units"] - 128) ** 2 / 1e4
            values = [value, params["drop"] + params["units"] / 256][:objectives]
            attrs = {"nsga2:generation": i // population} if population else {}
            trials.append(optuna.trial.create_trial(params=params, distributions=dists,
                                                    values=values, system_attrs=attrs))
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
            study.tell(trial, [1.0] * objectives)
        return times

    if a.storage == "sqlite":
        with tempfile.TemporaryDirectory() as d:
            url = "sqlite:///" + os.path.join(d, "optuna.db")
            times = sorted(time_suggestions(optuna.samplers.TPESampler(seed=1), 1, storage=url))
        print(f"optuna_sqlite_ask_ms={statistics.median(times):.2f} "
              f"p90_ms={times[len(times) * 9 // 10]:.2f} history={a.history}", flush=True)
        return

    tpe = statistics.median(time_suggestions(optuna.samplers.TPESampler(seed=1), 1))
    print(f"optuna_tpe_ms={tpe:.2f} history={a.history} optuna_version={optuna.__version__}", flush=True)
    if a.multi:
        nsga2 = statistics.median(
            time_suggestions(optuna.samplers.NSGAIISampler(population_size=20, seed=1), 2, 20))
        print(f"optuna_nsga2_ms={nsga2:.3f}", flush=True)
        motpe = statistics.median(time_suggestions(optuna.samplers.TPESampler(seed=1), 2))
        print(f"optuna_motpe_ms={motpe:.2f}", flush=True)


if __name__ == "__main__":
    main()
