"""One worker of a 2-worker MultiWorkerMirroredStrategy fit (run by the tests).

Usage: python multi_worker_fit.py TF_CONFIG_JSON OUTPUT.npz
"""

import os
import sys

os.environ["TF_CONFIG"] = sys.argv[1]
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bnn as kb  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 5)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
dataset = dataset.with_options(options)

with strategy.scope():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5,))
    hidden = keras.layers.Dense(16, activation="relu",
                                kernel_regularizer=kb.priors.Normal())(inputs)
    outputs = keras.layers.Dense(2, kernel_regularizer=kb.priors.Normal())(hidden)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(
        sampler=kb.samplers.ATMC(1e-3, seed=3),
        train_size=256,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
history = model.fit(dataset, epochs=2, verbose=0)
np.savez(sys.argv[2], loss=np.array(history.history["loss"]), *model.get_weights())
