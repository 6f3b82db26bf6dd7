"""Weight-space diagnostics of a sampled head on a frozen backbone: memory and time.

The member of ``benchmarks/frozen_backbone.py`` (three frozen ``Dense(1024)``
layers and a frozen ``BatchNormalization``, 2.9M weights, under a sampled
``Dense(10)`` head); S samples (head weights drawn at random) in one
``SampleStore``. Two matrices of weight-space R-hat/ESS, each built two ways:

* ``chain_weights``: :func:`keras_bnn.diagnostics.chain_weights` (the weights
  that vary between draws) against every weight of every draw flattened, as
  it was built before;
* ``evaluate``: ``keras-bnn evaluate``'s ``[S, D]`` matrix from
  ``PosteriorEnsemble.member_weights(held_once=False)`` against
  ``member_weights()`` (every weight, the frozen ones broadcast).

Reported: each matrix's width, the tracemalloc peak while it is built, and
the seconds :func:`keras_bnn.diagnostics.convergence_summary` takes on it
(the same R-hat and ESS: the frozen columns are constant, left out by both).

    python benchmarks/frozen_diagnostics.py               # S = 20
    python benchmarks/frozen_diagnostics.py --members 50

Prints a Markdown table.
"""

import argparse
import os
import tempfile
import time
import tracemalloc

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import keras_bnn as kb  # noqa: E402
from frozen_backbone import frozen_backbone_model  # noqa: E402 - this directory's
from keras_bnn import diagnostics  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402


def every_weight(stores):
    """The matrix before: every weight of every draw, ``[C, S, D]`` float64."""
    return np.array([[np.concatenate([np.ravel(w) for w in sample.weights]) for sample in store]
                     for store in stores], dtype=np.float64)


def flattened(stacks, count):
    """``[S, D]``: the stacks of ``member_weights`` flattened side by side."""
    return np.concatenate([np.reshape(w, (count, -1)) for w in stacks], axis=1)


def peak_mb(function):
    """``(result, tracemalloc peak in MB)`` of ``function()``."""
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def summary_s(matrix):
    """Seconds of ``convergence_summary`` on ``matrix`` (as ``[C, S, D]``)."""
    start = time.perf_counter()
    diagnostics.convergence_summary(matrix.reshape(1, *matrix.shape[-2:]), "weights")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int_at_least(8), default=20,
                        help="samples S (at least 8: one chain's R-hat compares its halves)")
    args = parser.parse_args()
    model = frozen_backbone_model()
    head = model.get_layer("head")
    rng = np.random.default_rng(0)
    print("| matrix | built from | width | peak MB | summary s |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as path:
        store = kb.SampleStore(path)
        for step in range(args.members):
            head.kernel.assign(0.05 * rng.normal(size=head.kernel.shape).astype("float32"))
            store.append(model, step=step)
        store[0]  # noqa: B018 - the shared file read and cached, as after any first read
        ensemble = kb.PosteriorEnsemble.from_store(store)
        rows = [
            ("chain_weights", "every weight (before)", lambda: every_weight([store])),
            ("chain_weights", "weights that vary (now)", lambda: diagnostics.chain_weights(
                [store])),
            ("evaluate", "member_weights() (before)",
             lambda: flattened(ensemble.member_weights(), args.members)),
            ("evaluate", "held_once=False (now)",
             lambda: flattened(ensemble.member_weights(held_once=False), args.members)),
        ]
        for name, source, function in rows:
            matrix, peak = peak_mb(function)
            print(f"| {name} | {source} | {matrix.shape[-1]} | {peak:.1f} | "
                  f"{summary_s(matrix):.2f} |", flush=True)
            del matrix


if __name__ == "__main__":
    main()
