"""Time per batch of shuffled arrays given to a sampler's ``fit``, against Keras' own pipeline.

``BayesianModel.fit(x, y)`` with a sampler and ``shuffle`` on hands Keras a
``kb.array_order.KeyedArrays`` (each pass's order keyed on (seed, step));
Keras' own adapter shuffles from the global random state. Rows, each timed
for ours and for Keras' (same arrays, same batch size):

* ``pipeline``: one pass over the adapter's batches, as ``fit`` reads them
  (TensorFlow: a new iterator over the one ``get_tf_dataset()`` a pass;
  JAX: a new ``get_jax_iterator()``), nothing else: ``KeyedArrays`` against
  ``ArrayDataAdapter(shuffle=True)``;
* ``first batch``: a new pass's first batch (ms a pass, not a batch: what
  every epoch pays before its first step; the pipeline row includes it);
* ``fit``: ``fit`` epochs of an MLP (``--features``-50-2, SGHMC), per step:
  ``shuffle=True`` (ours) against ``shuffle=False``, which keeps Keras'
  adapter (the same pipeline, its order unshuffled).

After a warm-up (the graphs traced) the configurations are timed in turn,
round after round, so they share the machine's load; a cell is the median
over rounds of wall-clock and of process CPU time (all threads: the cost
when every core is busy) per batch.

    [KERAS_BACKEND=jax] python benchmarks/array_pipeline.py [--samples 4096]
        [--batch-size 32] [--features 20] [--epochs 3] [--rounds 5]

Prints a Markdown table for the README.
"""

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter  # noqa: E402

import keras_bnn as kb  # noqa: E402
from keras_bnn import array_order  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402


def _model(samples, features):
    inputs = keras.Input((features,))
    hidden = keras.layers.Dense(50, activation="relu")(inputs)
    model = kb.BayesianModel(inputs, keras.layers.Dense(2)(hidden))
    model.compile(sampler=kb.samplers.SGHMC(step_size=1e-3, seed=0), train_size=samples,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def configurations(model, x, y, batch_size, epochs):
    """name: (ours, Keras'), each a function that runs and returns its number of batches."""
    keyed = array_order.KeyedArrays(model, x, y, batch_size=batch_size)
    adapters = (keyed, ArrayDataAdapter(x, y, batch_size=batch_size, shuffle=True))
    tf_data = keras.backend.backend() == "tensorflow"
    datasets = [adapter.get_tf_dataset() if tf_data else None for adapter in adapters]

    def passing(side, first=False):  # a new pass's batches as fit reads them, or its first
        def run():
            keyed.on_epoch_begin()  # as an epoch does (Keras' adapter has no such hook)
            batches = iter(datasets[side]) if tf_data else adapters[side].get_jax_iterator()
            if first:
                next(batches)
                return 1
            return sum(1 for _ in batches)
        return run

    def fit(shuffle):
        def run():
            model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=shuffle, verbose=0)
            return epochs * -(-len(x) // batch_size)
        return run

    return {"pipeline": (passing(0), passing(1)),
            "first batch (ms a pass)": (passing(0, True), passing(1, True)),
            "fit": (fit(True), fit(False))}


def timed(run):
    """``(wall ms, CPU ms)`` per batch of one call of ``run``."""
    wall, cpu = time.perf_counter(), time.process_time()
    count = run()
    return ((time.perf_counter() - wall) * 1e3 / count,
            (time.process_time() - cpu) * 1e3 / count)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int_at_least(1), default=4096)
    parser.add_argument("--batch-size", type=int_at_least(1), default=32)
    parser.add_argument("--features", type=int_at_least(1), default=20)
    parser.add_argument("--epochs", type=int_at_least(1), default=3)
    parser.add_argument("--rounds", type=int_at_least(1), default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # keras_bnn's advice on this toy model's prior and step
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.samples, args.features)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = _model(args.samples, args.features)
    runs = configurations(model, x, y, args.batch_size, args.epochs)
    for pair in runs.values():  # warm-up: the graphs traced, the first passes drawn
        for run in pair:
            run()
    times = {(name, side): [] for name in runs for side in (0, 1)}
    for _ in range(args.rounds):
        for name, pair in runs.items():
            for side, run in enumerate(pair):
                times[name, side].append(timed(run))
    backend = keras.backend.backend()
    print(f"{backend}, {args.samples} examples of {args.features} features, batch "
          f"{args.batch_size} ({-(-args.samples // args.batch_size)} a pass), median of "
          f"{args.rounds} rounds, ms per batch:\n")
    print("| backend | row | ours wall | Keras' wall | ours CPU | Keras' CPU | ours / Keras' "
          "(wall) |")
    print("|---|---|---|---|---|---|---|")
    for name in runs:
        (ours_wall, ours_cpu), (keras_wall, keras_cpu) = (
            [statistics.median(column) for column in zip(*times[name, side])] for side in (0, 1))
        print(f"| {backend} | {name} | {ours_wall:.3f} | {keras_wall:.3f} | {ours_cpu:.3f} | "
              f"{keras_cpu:.3f} | {ours_wall / keras_wall:.2f} |")


if __name__ == "__main__":
    main()
