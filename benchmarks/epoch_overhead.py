"""Wall time of one epoch of a small-data run, by how often it is backed up.

A bundled table's epoch is a few steps (wine at the command line's defaults:
2 steps of a 13-100-100-3 MLP), so what ``keras_bnn.runs.train`` does once
an epoch weighs as much as the steps. This trains the same chain (ATMC,
Student-t(3, 0.4) prior, fixed: no prior selection) for a short and a long
run, and reports ``(wall(long) − wall(short)) / (long − short epochs)``:
the per-epoch time without the process start, imports and tracing. Rows:
``RunBackup`` after every epoch (``interval=0``, what ``keras-bnn train``
did before 2026-11-27), at its default interval (``BACKUP_INTERVAL``), and
never (the floor).

    python benchmarks/epoch_overhead.py [--dataset wine] [--epochs 50 550] [--rounds 2]

Prints a Markdown table for the README.
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_bnn as kb  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402
from keras_bnn.runs import checkpoints  # noqa: E402

#: name: RunBackup interval in seconds (an interval longer than any run: no backup).
INTERVALS = {"every epoch (interval 0)": 0.0,
             f"default (interval {checkpoints.BACKUP_INTERVAL:g} s)": checkpoints.BACKUP_INTERVAL,
             "never": 1e9}


def run_seconds(dataset, epochs, interval):
    """Wall seconds of ``keras_bnn.runs.train`` for ``epochs`` epochs at this backup
    interval; ``checkpoints.BACKUP_INTERVAL`` is restored after."""
    # RunBackup's default, read when train builds it
    default, checkpoints.BACKUP_INTERVAL = checkpoints.BACKUP_INTERVAL, interval
    try:
        with tempfile.TemporaryDirectory(prefix="kb-epoch-overhead-") as root:  # removed after
            config = kb.runs.RunConfig(dataset=dataset, sampler="atmc", prior="student_t",
                                       prior_scale=0.4, epochs=epochs,
                                       output_dir=os.path.join(root, "run"))
            start = time.perf_counter()
            kb.runs.train(config, verbose=0)
            return time.perf_counter() - start
    finally:
        checkpoints.BACKUP_INTERVAL = default


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="wine", choices=kb.data.BUNDLED)
    parser.add_argument("--epochs", type=int_at_least(1), nargs=2, default=(50, 550),
                        metavar=("SHORT", "LONG"))
    parser.add_argument("--rounds", type=int_at_least(1), default=2)
    args = parser.parse_args()
    short, long = args.epochs
    if short >= long:
        parser.error(f"--epochs SHORT LONG: SHORT must be below LONG; got {short} {long}")
    results = {name: [] for name in INTERVALS}
    for _ in range(args.rounds):  # interleaved, so a change of load hits every row alike
        for name, interval in INTERVALS.items():
            seconds = run_seconds(args.dataset, long, interval) - run_seconds(
                args.dataset, short, interval)
            results[name].append(1000 * seconds / (long - short))
    print(f"{args.dataset}, ATMC, epochs {short} and {long}, {args.rounds} rounds "
          f"(ms an epoch: median, min–max)\n")
    print("| backup | ms / epoch | min–max |")
    print("|---|---:|---|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.1f} | "
              f"{min(values):.1f}–{max(values):.1f} |")


if __name__ == "__main__":
    main()
