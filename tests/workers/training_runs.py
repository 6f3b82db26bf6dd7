"""Deterministic training runs shared by the TensorFlow test and the JAX worker.

Both backends run the same code on the same data and initial weights, so the
test can compare what ``fit`` logs under each (see tests/test_jax_backend.py).
"""

import keras
import numpy as np

import keras_bnn as kb

SAMPLERS = ("sgld", "sghmc", "sgnht", "atmc")
#: Every key the sampling train_step logs (SGLD has no kinetic temperature).
LOGGED = ("loss", "nll", "prior", "step_size", "kinetic_temperature",
          "configurational_temperature", "gradient_noise_ratio")
N, BATCH, EPOCHS = 400, 100, 3


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 5)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")


def model(initial=None):
    keras.utils.set_random_seed(0)
    net = kb.models.mlp((5,), 2, hidden=(16,))
    if initial is not None:
        net.set_weights(initial)
    return net


def _fit(net, sampler, epochs):
    net.compile(sampler=sampler, train_size=N,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data()
    history = net.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0, shuffle=False)
    logs = {k: [float(v) for v in values] for k, values in history.history.items()
            if k in LOGGED}
    return {"logs": logs, "weights": [w.tolist() for w in net.get_weights()]}


def parity_run(name, initial):
    """``EPOCHS`` epochs of ``name`` from ``initial``, with its real noise.

    Both backends draw the same noise for the same (seed, variable, step)
    (:mod:`keras_bnn.backend.threefry`), so every update, noise included,
    and every logged diagnostic must agree up to float rounding.
    """
    return _fit(model(initial), kb.samplers.get(name, step_size=5e-3, seed=0), EPOCHS)


def atmc_chain():
    """A 2-epoch ATMC chain with its real (stateless) noise."""
    return _fit(model(), kb.samplers.ATMC(5e-3, seed=0), 2)


def nonfinite_run():
    """``fit`` for 2 epochs on data whose last batch holds a NaN.

    Returns:
        dict: ``error`` (the type name raised, or None), ``iterations`` (the
        step counter afterwards) and ``finite`` (all weights finite).
    """
    x, y = data()
    x[-1, 0] = np.nan
    net = model()
    net.compile(sampler=kb.samplers.ATMC(5e-3, seed=0), train_size=N,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    error = None
    try:
        net.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, shuffle=False)
    except FloatingPointError as raised:
        error = type(raised).__name__
    return {"error": error, "iterations": int(net.optimizer.iterations),
            "finite": all(np.isfinite(w).all() for w in net.get_weights())}
