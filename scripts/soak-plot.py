#!/usr/bin/env python3
"""Draws the soak example's samples: one figure, a panel per group of series.

  OPENQQ_BIN=$CARGO_TARGET_DIR/release/openqq $CARGO_TARGET_DIR/debug/examples/soak 60 1.2 0 soak-out
  python3 scripts/soak-plot.py soak-out docs/soak

Reads IN_DIR/samples.csv (and topics.csv when present) and writes OUT_DIR/soak.png, with the
warm-up (the first third of the run, at most 20 minutes, as the example counts it) shaded and
each burst's start marked, and copies the CSVs beside it. Without matplotlib it installs it into
a cached virtualenv (as scripts/bench-fairness.sh does) and runs again from there.
"""
import csv
import os
import shutil
import subprocess
import sys

try:
    import matplotlib
except ImportError:
    venv = os.path.join(os.environ.get("OPENQQ_CACHE_DIR", os.path.expanduser("~/.cache/openqq")), "plot-venv")
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        raise
    if subprocess.call([python, "-c", "import matplotlib"], stderr=subprocess.DEVNULL) if os.path.exists(python) else 1:
        subprocess.check_call([sys.executable, "-m", "venv", venv])
        subprocess.check_call([os.path.join(venv, "bin", "pip"), "install", "-q", "matplotlib"])
    os.execv(python, [python] + sys.argv)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# (panel title, unit, [(column, label)]); a column missing from the CSV is skipped.
PANELS = [
    ("Resident memory", "MiB", [("rss_mib", "resident"), ("anon_mib", "anonymous"), ("file_mib", "file-backed"),
                                ("sqlite_heap_mib", "SQLite heap"), ("anon_rest_mib", "anonymous less SQLite")]),
    ("File descriptors and threads", "count", [("fds", "open fds"), ("threads", "threads")]),
    ("Data dir", "MiB", [("log_db_mib", "log.db (+WAL)"), ("store_db_mib", "store.db (+WAL)"),
                         ("objects_mib", "objects"), ("uploads_mib", "uploads"),
                         ("other_mib", "logs/ and the rest")]),
    ("Event log", "records", [("log_records", "records kept")]),
    ("Store rows the feed retention bounds", "rows", [("feed_rows", "feed entries"), ("delivery_rows", "webhook deliveries")]),
    ("Store rows their windows and retention bound", "rows", [("idempotency_rows", "idempotency keys"), ("accepted_rows", "accepted markers"),
                                                             ("batch_item_rows", "batch items")]),
    ("Designs kept", "rows", [("design_rows", "designs"), ("tombstone_rows", "deleted designs' tombstones")]),
    ("Consumer lag", "records", [("lag_records", "all partitions"), ("lag_max_partition", "largest partition")]),
    ("Steady designs, 202 to ready (last 60 s)", "ms", [("p50_ms", "p50"), ("p99_ms", "p99")]),
    ("Accepted (designs and batch items)", "count", [("accepted", "accepted")]),
]


def number(text):
    return float(text) if text not in ("", "NaN", "nan") else float("nan")


def main(folder, out):
    with open(os.path.join(folder, "samples.csv")) as f:
        rows = [{k: number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    if not rows:
        sys.exit("no samples")
    minutes = [r["t_s"] / 60 for r in rows]
    warm_up = min(rows[-1]["t_s"] / 3, 1200) / 60
    bursts = [minutes[i] for i in range(1, len(rows)) if rows[i].get("bursts", 0) > rows[i - 1].get("bursts", 0)]
    cols = 3
    panels = [p for p in PANELS if any(c in rows[0] for c, _ in p[2])]
    fig, axes = plt.subplots(-(-len(panels) // cols), cols, figsize=(5.2 * cols, 3.3 * -(-len(panels) // cols)),
                             sharex=True, squeeze=False)
    for ax, (title, unit, series) in zip(axes.flat, panels):
        for column, label in series:
            if column in rows[0]:
                ax.plot(minutes, [r[column] for r in rows], label=label, linewidth=1)
        ax.axvspan(0, warm_up, color="grey", alpha=0.12, linewidth=0)
        for b in bursts:
            ax.axvline(b, color="red", alpha=0.25, linewidth=0.8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("minutes")
    fig.suptitle("Soak: seed's peak rate with a 10x burst from one tenant (red lines); warm-up shaded", fontsize=11)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "soak.png"), dpi=90)
    for name in ["samples.csv", "topics.csv", "verdicts.txt"]:
        src = os.path.join(folder, name)
        if os.path.exists(src) and os.path.realpath(src) != os.path.realpath(os.path.join(out, name)):
            shutil.copy(src, os.path.join(out, name))
    print(f"wrote {os.path.join(out, 'soak.png')}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: soak-plot.py IN_DIR OUT_DIR")
    main(sys.argv[1], sys.argv[2])
