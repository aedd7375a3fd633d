#!/usr/bin/python3
"""A small training program that really learns: a one-hidden-layer MLP (numpy) on a 3-class
spiral data set generated deterministically (no download). Hyperparameters come from argv;
validation metrics are reported every epoch.

Reporting (--report):
  hpo   run `hpo report --step EPOCH val_acc=... val_loss=... n_params=...` (inside an hpod
        trial; n_params is the model's size, for a second objective);
        stops early when hpod answers "stop" (exit status 10)
  fom   print `FoM: <val_acc>` lines, for `hpo exec` to parse and report
  none  only print

Checkpoints: --checkpoint-out is written at the end (PBT) and, with --checkpoint-signal, when
that signal (or SIGTERM) arrives: the program saves its state at the end of the current epoch
and exits, and a run with --checkpoint-in continues from it (a resumable hpod trial's next
segment), with the same weights and data order, so that its result is that of an uninterrupted
run. --total-epochs N trains until epoch N whatever the start; --epoch-seconds stands in for a
larger model by pausing after each epoch.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np


def spirals(n_per_class=200, classes=3, noise=0.25, seed=7):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, noise, n_per_class)
        xs.append(np.c_[r * np.sin(t), r * np.cos(t)])
        ys.append(np.full(n_per_class, c))
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = rng.permutation(len(y))
    return x[order], y[order]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--activation", choices=["relu", "tanh"], default="relu")
    p.add_argument("--weight_decay", type=float, default=1e-4)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", choices=["hpo", "fom", "none"], default="hpo")
    p.add_argument("--checkpoint-in", default="",
                   help="continue from this checkpoint (weights and epoch count; PBT's {checkpoint_in})")
    p.add_argument("--checkpoint-out", default="",
                   help="write a checkpoint here at the end (PBT's {checkpoint_out})")
    p.add_argument("--checkpoint-signal", default="",
                   help="on this signal (e.g. USR1) or SIGTERM: checkpoint after the current epoch and exit")
    p.add_argument("--total-epochs", type=int, default=0,
                   help="train until this epoch, counting the checkpoint's (instead of --epochs more)")
    p.add_argument("--epoch-seconds", type=float, default=0.0,
                   help="pause this long after each epoch (a stand-in for a larger model)")
    a = p.parse_args()
    told = []
    if a.checkpoint_signal:
        name = a.checkpoint_signal.upper()
        sig = getattr(signal, name if name.startswith("SIG") else "SIG" + name)
        for s in {sig, signal.SIGTERM}:
            signal.signal(s, lambda signum, frame: told.append(signum))
    if a.report == "hpo" and "HPO_TRIAL_ID" not in os.environ:
        a.report = "none"

    x, y = spirals()
    n_val = len(y) // 4
    xv, yv, xt, yt = x[:n_val], y[:n_val], x[n_val:], y[n_val:]
    rng = np.random.default_rng(a.seed)
    k = 3
    w1 = rng.normal(0, 1.0 / np.sqrt(2), (2, a.hidden))
    b1 = np.zeros(a.hidden)
    w2 = rng.normal(0, 1.0 / np.sqrt(a.hidden), (a.hidden, k))
    b2 = np.zeros(k)
    start = 0
    if a.checkpoint_in and not os.path.exists(a.checkpoint_in + ".npz") and a.total_epochs > 0:
        print(f"no checkpoint at {a.checkpoint_in} yet; starting from scratch", flush=True)
    elif a.checkpoint_in:
        ck = np.load(a.checkpoint_in + ".npz") if not a.checkpoint_in.endswith(".npz") else np.load(a.checkpoint_in)
        if ck["w1"].shape != w1.shape:
            print(f"checkpoint {a.checkpoint_in} has {ck['w1'].shape[1]} hidden units, not {a.hidden}", file=sys.stderr)
            return 2
        w1, b1, w2, b2, start = ck["w1"], ck["b1"], ck["w2"], ck["b2"], int(ck["epoch"])
        if "rng" in ck:  # the shuffling goes on exactly where it stopped
            rng.bit_generator.state = json.loads(str(ck["rng"]))
        else:
            rng = np.random.default_rng(a.seed + start)
        print(f"continuing from {a.checkpoint_in} at epoch {start}", flush=True)
    act = (lambda z: np.maximum(z, 0)) if a.activation == "relu" else np.tanh
    dact = (lambda z, h: (z > 0).astype(float)) if a.activation == "relu" else (lambda z, h: 1 - h * h)

    def forward(xb):
        z = xb @ w1 + b1
        h = act(z)
        s = h @ w2 + b2
        s = s - s.max(axis=1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(axis=1, keepdims=True)
        return z, h, pr

    def save(epoch):
        if a.checkpoint_out:
            np.savez(a.checkpoint_out + ".tmp.npz", w1=w1, b1=b1, w2=w2, b2=b2, epoch=epoch,
                     rng=json.dumps(rng.bit_generator.state))
            os.replace(a.checkpoint_out + ".tmp.npz", a.checkpoint_out + ".npz")

    last = a.total_epochs if a.total_epochs > 0 else start + a.epochs
    for epoch in range(start + 1, last + 1):
        order = rng.permutation(len(yt))
        for i in range(0, len(order), a.batch):
            idx = order[i:i + a.batch]
            xb, yb = xt[idx], yt[idx]
            z, h, pr = forward(xb)
            g = pr.copy()
            g[np.arange(len(yb)), yb] -= 1
            g /= len(yb)
            gw2 = h.T @ g + a.weight_decay * w2
            gb2 = g.sum(axis=0)
            gh = g @ w2.T * dact(z, h)
            gw1 = xb.T @ gh + a.weight_decay * w1
            gb1 = gh.sum(axis=0)
            w1 -= a.lr * gw1
            b1 -= a.lr * gb1
            w2 -= a.lr * gw2
            b2 -= a.lr * gb2
        _, _, pv = forward(xv)
        val_loss = float(-np.log(pv[np.arange(len(yv)), yv] + 1e-12).mean())
        val_acc = float((pv.argmax(axis=1) == yv).mean())
        if not np.isfinite(val_loss):
            print(f"epoch {epoch}: diverged (val_loss={val_loss})", flush=True)
            return 1
        print(f"epoch {epoch} val_loss={val_loss:.4f} val_acc={val_acc:.4f}", flush=True)
        if a.report == "fom":
            print(f"FoM: {val_acc:.6f}", flush=True)
        elif a.report == "hpo":
            n_params = w1.size + b1.size + w2.size + b2.size
            report = ["hpo", "report", "--step", str(epoch), f"val_acc={val_acc}",
                      f"val_loss={val_loss}", f"n_params={n_params}"]
            r = subprocess.run(report)
            if r.returncode < 0 and told:  # the checkpoint signal reached `hpo report` too
                r = subprocess.run(report)
            if r.returncode == 10:
                print("hpod asked to stop; exiting", flush=True)
                return 0
            if r.returncode != 0:
                print(f"hpo report failed with status {r.returncode}", file=sys.stderr, flush=True)
                return 2
        if a.epoch_seconds > 0 and epoch < last and not told:
            time.sleep(a.epoch_seconds)
        if told and epoch < last:
            save(epoch)
            print(f"signal {told[0]}: checkpointed at epoch {epoch}; exiting", flush=True)
            return 0
    save(last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
