"""The TensorFlow backend's XLA-compiled noise draw: one trace for every size.

Each train function (each new model's) builds an XLA kernel of each traced
function it calls, and TensorFlow keeps that kernel for the process: traced
once per variable size, the draw kept about 1 MB per distinct size per new
model (measured 2.95 MB per ``fit`` of a new 3-size MLP under SGHMC, 0.97
with one trace).
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="the TensorFlow backend's XLA kernels")


def _fit_new_model(x, y):
    """Fits a new SGHMC MLP whose variables have 3 sizes (91, 7 and 1)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((13,))
    hidden = kb.layers.Dense(7, activation="tanh")(inputs)
    model = kb.BayesianModel(inputs, kb.layers.Dense(1)(hidden))
    model.compile(optimizer=kb.samplers.SGHMC(step_size=1e-3, seed=5), loss="mse",
                  train_size=len(x))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)


def test_draw_is_traced_once_for_all_sizes_and_models():
    from keras_bnn.backend import tensorflow as tf_backend

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 13)).astype("float32")
    y = rng.normal(size=(32, 1)).astype("float32")
    traces = tf_backend._compiled_normal.tracing_count
    before = traces()
    _fit_new_model(x, y)
    # At most the float32 trace (none where an earlier test made it), not one per size.
    assert traces() - before <= 1
    after_first = traces()
    _fit_new_model(x, y)
    assert traces() == after_first
