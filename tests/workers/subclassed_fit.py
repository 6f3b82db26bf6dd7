"""A subclassed BayesianModel sampled by fit and train_on_batch; prints ``RESULT <json>``.

Run by ``tests/test_on_batch.py`` in a process of its own: once any
functional ``BayesianModel`` exists in a process, Keras has injected
``Functional`` into the class's bases (``keras.Model.__init__``) and a
subclass without inputs can no longer be made there.

Usage: python subclassed_fit.py (KERAS_BACKEND as the caller sets it).
"""

import json

import keras
import numpy as np
import tensorflow as tf

from subclassed_model import Subclassed

N = 64
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
rng = np.random.default_rng(0)
x = rng.normal(size=(N, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
result = {}
for how in ("fit_arrays", "fit_dataset", "train_on_batch"):
    keras.utils.set_random_seed(0)
    model = Subclassed()
    model.compile(sampler="atmc", train_size=N, loss=LOSS)
    try:
        if how == "fit_arrays":
            model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        elif how == "fit_dataset":
            model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0)
        else:
            for start in range(0, N, 16):
                model.train_on_batch(x[start:start + 16], y[start:start + 16])
        result[how] = [int(model.optimizer.iterations.numpy()),
                       len(model.optimizer.slots("momentum")), len(model.trainable_variables)]
    except ValueError as error:
        result[how] = str(error)[:200]
print("RESULT " + json.dumps(result))
