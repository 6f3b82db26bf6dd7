"""A sampled head on a frozen backbone: bytes on disk, ensemble bytes, latency.

The member: three frozen ``Dense(1024, relu)`` layers and a frozen
``BatchNormalization`` (2.9M weights) on 784 inputs, under a sampled
``Dense(10)`` head. For each S, S samples (head weights drawn at random) are
appended to a ``SampleStore``, and the ensemble is built twice:

* ``stacked``: ``PosteriorEnsemble(..., shared_weights=())``, every weight
  an [S, ...] stack and the whole member run per member (the layout and the
  computation before weights were held once);
* ``shared``: the default, the frozen weights held once and the frozen trunk
  run once per call.

Reported: the store's bytes on disk beside S copies of every weight (what a
store wrote before the frozen weights went to ``shared.npz``), each
ensemble's variable bytes, and the best time of one
``predictive_summary`` call of batch 64 (``tf.function``; the two ensembles
and the bare member called in turn, so that they share the machine's load).

    python benchmarks/frozen_backbone.py               # S = 5, 20
    python benchmarks/frozen_backbone.py --members 50 --repeats 5

Prints a Markdown table.
"""

import argparse
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bnn as kb  # noqa: E402
from ensemble_latency import best_seconds  # noqa: E402  (this script's directory)
from keras_bnn.cli import int_at_least  # noqa: E402


def frozen_backbone_model():
    """784 → 3 × frozen Dense(1024) → frozen BatchNormalization → sampled Dense(10)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((784,))
    hidden = inputs
    for i in range(3):
        hidden = keras.layers.Dense(1024, activation="relu", name=f"trunk{i}")(hidden)
    hidden = keras.layers.BatchNormalization(name="trunk_bn")(hidden)
    model = keras.Model(inputs, keras.layers.Dense(10, name="head")(hidden))
    for layer in model.layers[1:-1]:
        layer.trainable = False
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-4, seed=0), train_size=64,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return bnn


def variable_mb(ensemble):
    return sum(keras.ops.convert_to_numpy(v).nbytes for v in ensemble.weights) / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int_at_least(1), nargs="+", default=[5, 20])
    parser.add_argument("--repeats", type=int_at_least(1), default=10)
    args = parser.parse_args()
    model = frozen_backbone_model()
    head = model.get_layer("head")
    member = tf.function(lambda x: tf.nn.softmax(model(x)))
    model_mb = sum(w.numpy().nbytes for w in model.weights) / 1e6
    x = np.random.default_rng(1).normal(size=(64, 784)).astype("float32")
    rng = np.random.default_rng(0)
    print("| S | store MB | S copies MB | stacked MB | shared MB | member ms | stacked ms "
          "| shared ms |")
    print("|---|---|---|---|---|---|---|---|")
    for count in args.members:
        with tempfile.TemporaryDirectory() as path:
            store = kb.SampleStore(path)
            for step in range(count):
                head.kernel.assign(0.05 * rng.normal(size=head.kernel.shape).astype("float32"))
                store.append(model, step=step)
            disk = sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))
            stacked = kb.PosteriorEnsemble.from_store(store, shared_weights=())
            shared = kb.PosteriorEnsemble.from_store(store)
        functions = [member, tf.function(stacked.predictive_summary),
                     tf.function(shared.predictive_summary)]
        ms = 1e3 * np.array(best_seconds(functions, x, args.repeats))
        print(f"| {count} | {disk / 1e6:.1f} | {count * model_mb:.1f} | "
              f"{variable_mb(stacked):.1f} | {variable_mb(shared):.1f} | {ms[0]:.1f} | "
              f"{ms[1]:.1f} | {ms[2]:.1f} |")


if __name__ == "__main__":
    main()
