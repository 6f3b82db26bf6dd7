"""What ``BayesianModel.fit`` leaves in the process once it returns.

A slow-suite process fits hundreds of models: before these fixes each fit of
a small model kept it alive, with its traced train step, its graph and the
sampler's variables (measured: ~36-74 MB a fit, 14 GB for the slow suite).
"""

import gc
import weakref

import keras
import numpy as np
from tensorflow.python.eager import context
from tensorflow.python.framework import ops as tf_ops

import keras_bnn as kb


def _fit(epochs=1):
    """Fits a fresh two-layer model with SGHMC on shuffled arrays; returns a weakref to it."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(hidden)))
    model.compile(sampler=kb.samplers.SGHMC(step_size=1e-3, seed=1), train_size=64,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0)
    return weakref.ref(model)


def test_fit_on_shuffled_arrays_lets_the_model_go():
    # The order of shuffled arrays is drawn by a tf.numpy_function, which
    # TensorFlow keeps for the process: it held the model (array_order).
    model = _fit()
    gc.collect()  # a model is a reference cycle
    assert model() is None


def test_fit_leaves_no_traced_step_behind():
    # Keras' optimizer all-reduces the gradients through a graph-mode
    # tf.custom_gradient, whose global registry entry held each traced train
    # step, its graph and the functions it registered in the eager context.
    _fit()  # traces the package's module-level functions once
    gc.collect()
    functions = set(context.context().list_function_names())
    registered = set(tf_ops._gradient_registry._registry)  # pylint: disable=protected-access
    _fit(epochs=2)
    gc.collect()
    assert set(tf_ops._gradient_registry._registry) - registered == set()
    assert set(context.context().list_function_names()) - functions == set()
