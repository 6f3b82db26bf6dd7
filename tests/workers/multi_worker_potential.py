"""One process of the multi-worker potential check (run by tests/test_multi_worker.py).

Usage: python multi_worker_potential.py TF_CONFIG_JSON MODE OUTPUT.npz

``TF_CONFIG_JSON`` "" runs the single-process reference (no strategy);
MODE "dataset" fits a ``tf.data.Dataset`` (Keras distributes it), MODE
"distributed" a ``strategy.experimental_distribute_dataset`` of it. Saves
the weights after one SGLD epoch, the logged potential of each step (the
running means of ``loss``), the epoch's ``loss``, ``nll`` and ``prior``,
and the messages of the ``TrainSizeWarning``s fit issued.
"""

import contextlib
import os
import sys
import warnings

if sys.argv[1]:
    os.environ["TF_CONFIG"] = sys.argv[1]
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bnn as kb  # noqa: E402

N, BATCH = 256, 32
strategy = tf.distribute.MultiWorkerMirroredStrategy() if sys.argv[1] else None
rng = np.random.default_rng(0)
x = rng.normal(size=(N, 5)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
dataset = dataset.with_options(options)
if sys.argv[2] == "distributed":
    dataset = strategy.experimental_distribute_dataset(dataset)


class StepLosses(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


with strategy.scope() if strategy else contextlib.nullcontext():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5,))
    hidden = keras.layers.Dense(8, activation="tanh", kernel_regularizer=kb.priors.Normal(),
                                bias_regularizer=kb.priors.Normal())(inputs)
    outputs = keras.layers.Dense(2, kernel_regularizer=kb.priors.Normal(),
                                 bias_regularizer=kb.priors.Normal())(hidden)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(sampler=kb.samplers.SGLD(1e-3, seed=3), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
steps = StepLosses()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    history = model.fit(dataset, epochs=1, verbose=0, callbacks=[steps]).history
train_size_warnings = [str(w.message) for w in caught
                       if issubclass(w.category, kb.TrainSizeWarning)]
np.savez(sys.argv[3], *model.get_weights(), steps=np.array(steps.losses),
         epoch=np.array([history[key][0] for key in ("loss", "nll", "prior")]),
         warnings=np.array(train_size_warnings, dtype=str))
