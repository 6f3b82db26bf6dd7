"""The JAX backend as a user meets it: non-trainable weights under ``KERAS_BACKEND=jax``.

The JAX half of each test runs in a subprocess (the Keras backend is fixed at
import): :func:`_jax_process` of test_jax_user runs a function of this file
there and reads its JSON result.
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from test_jax_user import _jax_process

#: Runs ``test_jax40.<sys.argv[2]>()`` in the JAX process and prints its result.
JAX_RUN = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_jax40; "
           "print('RESULT ' + json.dumps(getattr(test_jax40, sys.argv[2])()))")
N = 20


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 4)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")


def _frozen_network():
    """A functional 4-6-5-2 network whose first layer is frozen (non-trainable)."""
    inputs = keras.Input((4,))
    frozen = keras.layers.Dense(6, activation="tanh", name="frozen")
    frozen.trainable = False
    hidden = keras.layers.Dense(5, activation="tanh", name="hidden")(frozen(inputs))
    return keras.Model(inputs, keras.layers.Dense(2, name="logits")(hidden))


def _frozen_model(seed=0):
    """:func:`_frozen_network` with numpy-drawn weights (the same on both backends)."""
    net = _frozen_network()
    rng = np.random.default_rng(seed)
    net.set_weights([0.5 * rng.normal(size=w.shape).astype("float32") for w in net.weights])
    return net


def frozen_layer_gradients():
    """``batch_gradients`` of a model with a frozen layer, before and after the
    frozen kernel is assigned (the JAX half of
    :func:`test_batch_gradients_read_the_non_trainable_values_of_each_call`).

    Returns:
        dict: ``changed`` (max |Δ| of the gradients between the calls),
        ``stale`` (max |Δ| between the second call and a newly compiled
        function's gradients at the new values) and ``traces`` (how often the
        function was traced over 3 calls of one shape).
    """
    from keras_bnn import backend
    from keras_bnn.backend import jax as jax_backend

    x, y = _data()
    keras.utils.set_random_seed(0)
    net = _frozen_network()
    model = kb.bayesian(net)
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    traces = []
    traced = jax_backend.potential_and_gradients

    def counted(*args):
        traces.append(1)
        return traced(*args)

    jax_backend.potential_and_gradients = counted
    gradients_of = backend.batch_gradients(model)
    before = [np.asarray(g) for g in gradients_of(x[:5], y[:5])]
    kernel = net.get_layer("frozen").kernel
    kernel.assign(3.0 * np.asarray(kernel.value))
    after = [np.asarray(g) for g in gradients_of(x[:5], y[:5])]
    gradients_of(x[:5], y[:5])
    count = len(traces)
    fresh = [np.asarray(g) for g in backend.batch_gradients(model)(x[:5], y[:5])]

    def largest(first, second):
        return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))

    return {"changed": largest(before, after), "stale": largest(after, fresh), "traces": count}


@pytest.mark.slow  # a JAX process: about 35 s on a loaded machine
def test_batch_gradients_read_the_non_trainable_values_of_each_call():
    """Under JAX ``batch_gradients`` (:mod:`keras_bnn.directional_noise`'s per-example
    gradients) is compiled once per shape and reads the non-trainable weights of
    each call, as on TensorFlow. Before, they were read inside ``jax.jit``, so
    the compiled function kept them as constants: after a frozen layer's kernel
    was assigned (×3) the gradients were still the old ones, 0.18 (max |Δ|) from
    the gradients at the new values (``stale`` 0.1796, ``changed`` 0.0)."""
    result = _jax_process(JAX_RUN, "frozen_layer_gradients")
    assert result["changed"] > 0.01, result  # the frozen kernel matters to the gradients
    assert result["stale"] < 1e-6, result  # those of the values assigned
    assert result["traces"] == 1, result  # the values are arguments, not a new compile


#: Every sampler, at its defaults but for a step size that moves the chain
#: in 6 steps (the default "auto" warm-up starts at h = 1e-8); HMC at its defaults.
SAMPLERS = {"sgld": 0.02, "sghmc": 0.02, "sgnht": 0.02, "atmc": 0.02, "hmc": None}


def frozen_layer_chains():
    """Each sampler's chain of 3 epochs (6 steps of 10 examples; HMC 3 full-batch
    transitions) on :func:`_frozen_model` through ``kb.bayesian``.

    Returns:
        dict: sampler name → the weights after each epoch, flattened (the
        frozen layer's first).
    """
    x, y = _data()
    chains = {}
    for name, step_size in SAMPLERS.items():
        net = _frozen_model()
        model = kb.bayesian(net)
        sampler = (kb.samplers.get(name) if step_size is None
                   else kb.samplers.get(name, step_size=step_size, seed=0))
        model.compile(sampler=sampler, train_size=N,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        states = []
        record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: states.append(
            np.concatenate([w.ravel() for w in net.get_weights()]).tolist()))
        model.fit(x, y, batch_size=N if name == "hmc" else 10, epochs=3, verbose=0,
                  shuffle=False, callbacks=[record])
        chains[name] = states
    return chains


@pytest.mark.slow  # a JAX process, 5 chains on each backend: 150 s on a loaded machine
def test_every_sampler_is_the_same_chain_under_jax_with_a_frozen_layer():
    """README: a chain with a given seed is the same chain under TensorFlow and
    JAX up to float rounding; here for every sampler on a functional model
    with a frozen (non-trainable) layer, through ``kb.bayesian``. Measured
    (2026-12-01): at most 2.4e-7 apart over 10 epochs of each sampler, the
    frozen layer unchanged on both."""
    jax_chains = _jax_process(JAX_RUN, "frozen_layer_chains")
    frozen = sum(int(np.prod(w.shape)) for w in _frozen_network().get_layer("frozen").weights)
    for name, states in frozen_layer_chains().items():
        states, theirs = np.asarray(states), np.asarray(jax_chains[name])
        assert np.max(np.abs(states[-1] - _flat(_frozen_model()))) > 0.01, name  # it moved
        np.testing.assert_array_equal(states[:, :frozen], theirs[:, :frozen])  # frozen
        np.testing.assert_array_equal(states[:, :frozen],
                                      np.broadcast_to(_flat(_frozen_model())[:frozen],
                                                      states[:, :frozen].shape))
        # 6 steps of float32 rounding in other summation orders (XLA, oneDNN):
        # measured 2.4e-7; a differing draw or gradient moves weights by 1e-2+.
        np.testing.assert_allclose(theirs, states, rtol=0, atol=1e-5, err_msg=name)


def _flat(net):
    return np.concatenate([w.ravel() for w in net.get_weights()])
