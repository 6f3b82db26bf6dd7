"""HMC runs shared by tests/test_hmc.py (TensorFlow, in process) and jax_hmc_check.py (JAX).

Each run returns plain NumPy/Python values, so the same assertions check
both backends. Backend-neutral: keras, keras.ops and keras_bnn only (the
breast_cancer chain reads its data and model from tests/gold_standard.py).
"""

import math

import keras
import numpy as np
from keras import ops

import keras_bnn as kb
from keras_bnn import backend
from keras_bnn import priors


class Position(keras.layers.Layer):
    """θ as one weight [K, d] (K independent chains of a d-dim target), output flat."""

    def __init__(self, init, **kwargs):
        super().__init__(**kwargs)
        self.theta = self.add_weight(
            shape=np.shape(init), initializer=keras.initializers.Constant(init), name="theta")

    def call(self, x):
        return ops.zeros_like(x[:, :1]) + ops.reshape(self.theta, (1, -1))


def gaussian_model(init, mean, precision, sampler):
    """BayesianModel with U(θ) = ½ Σ_k (θ_k-μ)ᵀ P (θ_k-μ) (train_size 1, one example)."""
    init = np.asarray(init, np.float32)
    chains, dim = init.shape
    mean = ops.convert_to_tensor(np.asarray(mean, np.float32))
    precision = ops.convert_to_tensor(np.asarray(precision, np.float32))

    def quadratic(y_true, y_pred):
        centred = ops.reshape(y_pred, (-1, chains, dim)) - mean
        return 0.5 * ops.sum(ops.matmul(centred, precision) * centred, axis=(1, 2))

    inputs = keras.Input((1,))
    model = kb.BayesianModel(inputs, Position(init)(inputs))
    model.compile(sampler=sampler, train_size=1, loss=quadratic)
    return model


class Record(keras.callbacks.Callback):
    """The flattened weights and the logs after every batch (``self.model`` syncs JAX state)."""

    def __init__(self):
        super().__init__()
        self.states, self.logs = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.states.append(np.concatenate([w.ravel() for w in self.model.get_weights()]))
        self.logs.append({k: float(v) for k, v in (logs or {}).items()})


def run(model, steps):
    """``steps`` transitions on the one-example Gaussian model.

    Returns:
        ``(states [steps, K·d] float64, history dict)``.
    """
    record = Record()
    history = model.fit(np.zeros((steps, 1), np.float32), np.zeros((steps, 1), np.float32),
                        batch_size=1, epochs=1, verbose=0, shuffle=False, callbacks=[record])
    return np.stack(record.states).astype(np.float64), history.history


def one_transition(h=0.3, steps=3, temperature=0.5, seed=11, theta0=0.7):
    """One transition on U = θ²/2 and the stateless draws it used.

    Returns:
        dict: ``state`` (θ after it), ``alpha`` (logged acceptance), ``p``
        (the momentum draw), ``z`` (the accept draw), ``iterations``, and
        the arguments.
    """
    sampler = kb.samplers.HMC(h, num_leapfrog_steps=steps, seed=seed, temperature=temperature)
    model = gaussian_model([[theta0]], [0.0], [[1.0]], sampler)
    states, history = run(model, 1)
    step = ops.convert_to_tensor(0, "int32")
    p = backend.stateless_normal((1, 1), seed, 0, step, "float32")
    z = backend.stateless_normal((), seed, 1, step, "float64")
    return dict(state=float(states[0, 0]), alpha=float(history["acceptance_rate"][0]),
                p=float(ops.convert_to_numpy(p)[0, 0]), z=float(ops.convert_to_numpy(z)),
                iterations=int(model.optimizer.iterations), h=h, steps=steps,
                temperature=temperature, theta0=theta0)


def gaussian_moments(temperature):
    """450 transitions of 32 chains on a correlated 2-D Gaussian (sd 1 and 2, ρ = 0.8).

    Returns:
        dict: ``draws`` [32, 400, 2] (burn-in of 50 dropped) and ``acceptance``.
    """
    cov = np.array([[1.0, 1.6], [1.6, 4.0]])
    mean = np.array([0.5, -1.0])
    chains = 32
    # Leapfrog is stable below h = 2·sd_min (sd_min = 0.55·sqrt(T)); h·L ≈ sd_max.
    sampler = kb.samplers.HMC(0.2 * math.sqrt(temperature), num_leapfrog_steps=10, seed=7,
                              temperature=temperature)
    model = gaussian_model(np.tile(mean, (chains, 1)), mean, np.linalg.inv(cov), sampler)
    states, history = run(model, 450)
    draws = np.swapaxes(states[50:].reshape(400, chains, 2), 0, 1)
    return dict(draws=draws, acceptance=history["acceptance_rate"][0])


def rejected_run():
    """h = 100 on a unit Gaussian: every proposal is rejected.

    Returns:
        dict: ``init``, ``states`` [3, 2], ``acceptance`` (epoch means),
        ``iterations`` and ``log_names`` (the keys ``fit`` logged).
    """
    sampler = kb.samplers.HMC(100.0, num_leapfrog_steps=3, seed=0)
    init = np.array([[0.123456789, -1.5]], np.float32)
    model = gaussian_model(init, [0.0, 0.0], np.eye(2), sampler)
    states, history = run(model, 3)
    return dict(init=init.ravel(), states=states, acceptance=history["acceptance_rate"],
                iterations=int(model.optimizer.iterations), log_names=sorted(history))


def divergent_run():
    """h = 1e30 overflows float32: the proposal's energy is Inf/NaN.

    Returns:
        dict: ``init``, ``last`` (the state after 2 transitions), ``acceptance``.
    """
    sampler = kb.samplers.HMC(1e30, num_leapfrog_steps=2, seed=0)
    init = np.array([[0.5]], np.float32)
    model = gaussian_model(init, [0.0], [[1.0]], sampler)
    states, history = run(model, 2)
    return dict(init=init.ravel(), last=states[-1], acceptance=history["acceptance_rate"])


def adaptation_run():
    """300 transitions of 16 chains on N(0, 1), dual averaging toward 0.8 for the first 150.

    Returns:
        dict: ``means`` [300, 2] (the running epoch means of ``step_size``
        and ``acceptance_rate`` after each batch) and ``final_step_size``.
    """
    sampler = kb.samplers.HMC(1e-3, num_leapfrog_steps=5, seed=3, num_adaptation_steps=150,
                              target_accept_rate=0.8)
    model = gaussian_model(np.zeros((16, 1)), [0.0], [[1.0]], sampler)
    record = Record()
    model.fit(np.zeros((300, 1), np.float32), np.zeros((300, 1), np.float32), batch_size=1,
              epochs=1, verbose=0, shuffle=False, callbacks=[record])
    means = np.array([[logs["step_size"], logs["acceptance_rate"]] for logs in record.logs])
    return dict(means=means, final_step_size=float(ops.convert_to_numpy(sampler.step_size())))


def blr_data(count=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(count, 3)).astype("float32")
    y = (x @ np.array([1.0, -0.5, 0.2]) + rng.logistic(size=count) > 0).astype("float32")
    return x, y


def blr_model(sampler, seed=1):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(1, kernel_regularizer=priors.Normal(0, 1),
                                 bias_regularizer=priors.Normal(0, 1))(inputs)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(sampler=sampler, train_size=64,
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    return model


def blr_chain():
    """6 full-batch transitions (3 adapting) on the small BLR data.

    Returns:
        dict: ``weights`` (the final weights) and ``acceptance`` (per epoch).
    """
    x, y = blr_data()
    model = blr_model(kb.samplers.HMC(0.15, num_leapfrog_steps=4, seed=5,
                                      num_adaptation_steps=3))
    history = model.fit(x, y, batch_size=64, epochs=6, verbose=0, shuffle=False)
    return dict(weights=model.get_weights(), acceptance=history.history["acceptance_rate"])


def nonfinite_run(jit_compile):
    """A NaN in the data: ``fit`` must raise and keep the weights.

    Returns:
        dict: ``error`` (the exception's class names), ``message`` and
        ``unchanged`` (whether every weight kept its value bitwise).
    """
    x, y = blr_data()
    x[3, 0] = np.nan
    model = blr_model(kb.samplers.HMC(0.05, num_leapfrog_steps=2))
    model.jit_compile = jit_compile
    before = model.get_weights()
    try:
        model.fit(x, y, batch_size=64, epochs=2, verbose=0)
        error, message = [], ""
    except Exception as caught:  # noqa: BLE001 - the test checks which one
        error, message = [c.__name__ for c in type(caught).__mro__], str(caught)
    unchanged = all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    return dict(error=error, message=message, unchanged=unchanged)


def breast_cancer_chain(temperature):
    """1500 full-batch transitions on the breast_cancer BLR from the MAP (first 150 dropped).

    Posterior sd spans 0.11..1.0·sqrt(T) (Laplace): h = 0.1·sqrt(T) is
    stable (< 2·0.11·sqrt(T)) and L·h = 2·sqrt(T) crosses the widest direction.

    Returns:
        dict: ``draws`` [1350, 31] and ``acceptance``.
    """
    import gold_standard as gold
    import tensorflow as tf

    x, y = gold.breast_cancer_blr()
    model = gold.blr_model()
    model.compile(sampler=kb.samplers.HMC(0.1 * math.sqrt(temperature), num_leapfrog_steps=20,
                                          seed=1),
                  temperature=temperature, train_size=len(x),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    theta_map, _ = gold.laplace_approximation()
    model.build((None, gold.NUM_FEATURES))
    model.set_weights([theta_map[:-1, None].astype("float32"), theta_map[-1:].astype("float32")])
    record = Record()
    # One epoch of 1500 full-batch steps (an epoch per transition costs
    # Keras' per-epoch overhead, ~0.1 s, every time).
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    history = model.fit(data, steps_per_epoch=1500, epochs=1, verbose=0, callbacks=[record])
    return dict(draws=np.array(record.states)[150:],
                acceptance=history.history["acceptance_rate"][0])
