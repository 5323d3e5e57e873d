#!/usr/bin/env python3
"""Draws the batch benchmark's lane plot from the example's results.

  cargo run --release -p openqq-e2e --example batch -- 10000 docs/bench-batch
  python3 scripts/plot-batch-lane.py docs/bench-batch

Reads lane.json (the interactive tenant's designs: when each was submitted and how long it took
to be ready, alone and during a batch with the batch lane on and off) and writes lane.png into the
same folder: each design's latency over the run, one panel per run, on one scale.
Needs matplotlib (scripts/bench-fairness.sh installs it into a cached virtualenv).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def quantile(values, q):
    ordered = sorted(values)
    index = max(1, min(len(ordered), int(-(-len(ordered) * q // 1)))) - 1
    return ordered[index]


def main(folder):
    with open(os.path.join(folder, "lane.json")) as f:
        doc = json.load(f)
    order = ["alone", "lane on", "lane off"]
    runs = {name: doc["runs"][name] for name in sorted(doc["runs"], key=lambda n: (order + [n]).index(n))}
    top = max(ms for points in runs.values() for _, ms in points) * 1.1
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), sharey=True)
    for ax, (name, points) in zip(axes, runs.items()):
        xs = [at for at, _ in points]
        ys = [ms for _, ms in points]
        ax.plot(xs, ys, ".", markersize=3)
        for q, style in [(0.5, "--"), (0.99, ":")]:
            ax.axhline(quantile(ys, q), linestyle=style, color="grey",
                       label=f"p{int(q * 100)} {quantile(ys, q):.0f} ms")
        ax.set_title(name)
        ax.set_xlabel("seconds into the run")
        ax.set_ylim(0, top)
        ax.legend(loc="upper right", fontsize=8)
    axes[0].set_ylabel("submission to ready (ms)")
    fig.suptitle(f"An interactive tenant during a {doc['items']:,}-item batch")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "lane.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/bench-batch")
