#!/usr/bin/python3
"""The Optuna side of bench/report_bench: `trial.report(value, step)` + `trial.should_prune()`
into an SQLite storage, the equivalent of one hpod report round trip, for a fixed time.
Prints one line: `optuna_reports_per_s=<rate> reports=<n> seconds=<s> clients=<k>`.
With --clients K, K processes report concurrently into the same SQLite file; a call the storage
fails ("database is locked") is counted in errors= and not in the rate."""
import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
import logging


def worker(url, study_name, seconds, out):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name=study_name, storage=url,
                              pruner=optuna.pruners.MedianPruner(n_startup_trials=0, n_warmup_steps=0))
    n = 0
    errors = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        try:
            trial = study.ask()
        except Exception:  # the storage's commit fails under concurrency: counted, tried again
            errors += 1
            continue
        for step in range(1, 21):
            try:
                trial.report(1.0 / step, step)
                trial.should_prune()
                n += 1
            except Exception:  # "database is locked" under concurrency
                errors += 1
            if time.perf_counter() - t0 >= seconds:
                break
        try:
            study.tell(trial, 1.0)
        except Exception:
            errors += 1
    out.put((n, errors, time.perf_counter() - t0))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--clients", type=int, default=1)
    a = p.parse_args()
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("sqlalchemy").setLevel(logging.ERROR)
    d = tempfile.mkdtemp(prefix="optuna-bench-")
    url = f"sqlite:///{os.path.join(d, 'optuna.db')}"
    optuna.create_study(study_name="bench", storage=url, direction="minimize")
    q = mp.Queue()
    procs = [mp.Process(target=worker, args=(url, "bench", a.seconds, q)) for _ in range(a.clients)]
    for pr in procs:
        pr.start()
    results = [q.get() for _ in procs]
    for pr in procs:
        pr.join()
    n = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    secs = max(r[2] for r in results)
    print(f"optuna_reports_per_s={n / secs:.1f} reports={n} seconds={secs:.1f} clients={a.clients} errors={errors} "
          f"optuna_version={optuna.__version__}")


if __name__ == "__main__":
    sys.exit(main())
