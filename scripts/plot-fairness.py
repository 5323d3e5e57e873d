#!/usr/bin/env python3
"""Draws the fairness benchmark's plots from `openqq load` results files.

  python3 scripts/plot-fairness.py docs/bench-fairness

Writes noisy.png (compliant tenants' latency during the burst, limiter on/off, burst/no burst)
and pool.png (task per request vs bounded pool under overload) into the same folder.
Needs matplotlib (scripts/bench-fairness.sh installs it into a cached virtualenv).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PCTS = ["p50", "p95", "p99"]


def load(folder, name):
    with open(os.path.join(folder, name + ".json")) as f:
        return json.load(f)


def bars(ax, groups, title, ylabel, log=False):
    width = 0.8 / len(PCTS)
    for i, pct in enumerate(PCTS):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ax.bar(xs, [lat[pct] for _, lat in groups], width, label=pct)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([label for label, _ in groups])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.legend()


def main(folder):
    runs = [("limiter on\nno burst", "noisy-on-steady"), ("limiter on\nburst", "noisy-on-burst"),
            ("limiter off\nno burst", "noisy-off-steady"), ("limiter off\nburst", "noisy-off-burst")]
    groups = [(label, load(folder, name)["during_burst"]["compliant"]["latency_ms"]) for label, name in runs]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bars(ax, groups, "Compliant tenants during the noisy tenant's 10x burst", "latency (ms)")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "noisy.png"), dpi=110)

    runs = [("task per request\n(unbounded)", "pool-unbounded"), ("bounded pool\n8 workers, queue 16", "pool-bounded")]
    groups = [(label, load(folder, name)["classes"]["compliant"]["ok_or_timeout_latency_ms"]) for label, name in runs]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    bars(ax, groups, "1.5x overload of a 50 ms downstream: accepted work and timeouts", "latency (ms, log)", log=True)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "pool.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/bench-fairness")
