"""Sampling under Keras' "mixed_float16" policy: float16 compute, float32 weights, the
potential differentiated at a power-of-two scale S and unscaled in float32, an overflowing
scale recomputed at S/2^m within the step (keras_bnn.precision.gradient_scale)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import backend

U16 = 2.0 ** -11  # float16's unit roundoff
U32 = 2.0 ** -24
MSE = keras.losses.MeanSquaredError()
CE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _gamma(k):
    """Higham's γ_k = k·u/(1 - k·u): the relative bound of k float16 roundings."""
    return k * U16 / (1.0 - k * U16)


def _linear(d, weights, train_size, sampler="sgld", jit_compile="auto"):
    """``ŷ = x·W + b``, flat prior (the gradient is the data's), compiled with a sampler."""
    inputs = keras.Input((d,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(1)(inputs)), kernel_prior=None,
                        bias_prior=None, allow_flat=True)
    model.set_weights(weights)
    model.compile(sampler=sampler, train_size=train_size, loss=MSE, jit_compile=jit_compile)
    return model


def _drift_error_bound(x, weights, y):
    """Bound on |g16 - g| for the mean-squared-error gradient g of ``ŷ = x·W + b``.

    Float16 forward: |Δŷ_b| ≤ γ_{d+3}·(Σ_j|x_bj W_j| + |b|) (x, W, b and the
    d products and sums rounded). δ_b = 2(ŷ_b - y_b)/B, formed in float32 and
    cast to float16: |Δδ_b| ≤ (2/B)|Δŷ_b| + u|δ_b| (the power-of-two scale is
    exact). Backward: g_W = Σ_b x_b δ_b, g_b = Σ_b δ_b in float16 with the
    rounded x: error ≤ Σ_b |x_b||Δδ_b| + γ_{B+2}·Σ_b |x_b δ_b|.
    """
    x = x.astype(np.float64)
    kernel, bias = (w.astype(np.float64) for w in weights)
    batch, d = x.shape
    y_hat = x @ kernel + bias
    delta = 2.0 * (y_hat - y.reshape(-1, 1)) / batch
    d_y_hat = _gamma(d + 3) * (np.abs(x) @ np.abs(kernel) + np.abs(bias))
    d_delta = 2.0 / batch * d_y_hat + U16 * np.abs(delta)
    kernel_bound = np.abs(x).T @ d_delta + _gamma(batch + 2) * np.abs(x).T @ np.abs(delta)
    bias_bound = d_delta.sum(0) + _gamma(batch + 2) * np.abs(delta).sum(0)
    return [kernel_bound, bias_bound], [x.T @ delta, delta.sum(0)]


def _problem(batch=64, d=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, d)).astype("float32")
    weights = [rng.normal(size=(d, 1)).astype("float32"), np.array([0.3], "float32")]
    y = (x @ weights[0] + 0.5 * rng.normal(size=(batch, 1))).astype("float32").ravel()
    return x, y, weights


@pytest.mark.parametrize("sampler", ["sgld", "sghmc", "atmc", "hmc"])
def test_samplers_compile_and_sample_under_mixed_float16(policy, sampler):
    policy("mixed_float16")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 6)).astype("float32"), rng.integers(0, 3, size=32)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((6,), 3, hidden=(8,))
    model.compile(sampler=sampler, train_size=32, loss=CE)
    # Keras' LossScaleOptimizer (dynamic scale, skipped steps) must not wrap a sampler.
    assert isinstance(model.optimizer, kb.samplers.Sampler)
    assert kb.precision.gradient_scale(model) == 32.0
    history = model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    assert model(x[:2]).dtype == "float16"
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert all(v.dtype == "float32" for v in model.optimizer.variables if "float" in v.dtype)
    assert all(np.isfinite(values[-1]) for values in history.history.values())
    assert int(model.optimizer.iterations.numpy()) == 2


def test_float16_variables_stay_refused(policy):
    policy("float16")
    with pytest.raises(ValueError, match=r"(?s)float16.*'mixed_float16'"):
        kb.models.mlp((6,), 3, hidden=(8,)).compile(sampler="sgld", train_size=8, loss=CE)


def _one_step(dtype_policy, policy, x, y, weights, step_size):
    policy(dtype_policy)
    model = _linear(x.shape[1], weights, len(x),
                    kb.samplers.SGLD(step_size=step_size, seed=7))
    model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 1  # no step skipped
    return [w - w0 for w, w0 in zip(model.get_weights(), weights)]


def test_one_sgld_step_equals_the_float32_step_to_float16_rounding(policy):
    # θ' = θ - h·n·g + sqrt(2hT)·η: the same noise (a function of seed and step), so the two
    # steps differ by h·n·(g16 - g), bounded by the rounding analysis of _drift_error_bound.
    x, _, weights = _problem()
    x = np.abs(x)  # residuals of one sign, positive inputs: no cancellation in g
    y = (x @ weights[0] + weights[1]).ravel() - 2.0 - np.abs(np.sin(np.arange(len(x))))
    h, n = 1e-4, len(x)
    step32 = _one_step("float32", policy, x, y, weights, h)
    step16 = _one_step("mixed_float16", policy, x, y, weights, h)
    bounds, gradients = _drift_error_bound(x, weights, y)
    for s16, s32, bound, gradient, w in zip(step16, step32, bounds, gradients, weights):
        tolerance = h * n * bound + 4 * U32 * (np.abs(w) + np.abs(s32))
        assert np.all(np.abs(s16 - s32) <= tolerance), (s16 - s32, tolerance)
        # the bound is tight enough to see a gradient 2x (or 2^15x) off
        assert np.all(tolerance < 0.5 * h * n * np.abs(gradient))


def _float16_gradients(model, x, y, scale):
    """Gradients of scale·(U/n) taken in float16 as a plain tape would, unscaled."""
    with tf.GradientTape() as tape:
        loss = model.compute_loss(y=y, y_pred=model(x, training=True)) * scale
    return [g / scale for g in tape.gradient(loss, model.trainable_variables)]


def test_a_gradient_that_underflows_float16_unscaled_is_right(policy):
    # Residuals r < 1e-6 of the float16 predictions: δ = 2r/B < 2^-25 (half float16's smallest
    # subnormal) flushes to 0 at scale 1; at S = 2^14 it is a normal float16 number.
    policy("mixed_float16")
    x, _, weights = _problem()
    x = np.abs(x)  # no cancellation: the gradient is Σ|x·δ|, as its error bound
    model = _linear(x.shape[1], weights, train_size=2 ** 14)
    y_hat = keras.ops.convert_to_numpy(model(x)).astype("float32").ravel()
    residual = np.where(np.arange(len(x)) % 3, 0.5e-6, 0.3e-6).astype("float32")
    y = y_hat - residual
    assert np.all(2 * np.abs(y_hat - y) / len(x) < 2.0 ** -25)
    unscaled = _float16_gradients(model, x, y, 1.0)
    assert all(np.all(keras.ops.convert_to_numpy(g) == 0) for g in unscaled)
    gradients = backend.value_and_gradients(model, x, y, None)[-1]
    x16 = x.astype("float16").astype(np.float64)
    delta = 2.0 * (y_hat - y).astype(np.float64) / len(x)
    for gradient, exact, magnitude in [(gradients[0], x16.T @ delta, np.abs(x16).T @ np.abs(delta)),
                                       (gradients[1], delta.sum(), np.abs(delta).sum())]:
        # δ·S rounded once (u) and B products and sums (γ_{B+2}), relative to Σ|x δ|
        tolerance = (U16 + _gamma(len(x) + 2)) * magnitude
        np.testing.assert_array_less(np.abs(np.ravel(gradient) - np.ravel(exact)),
                                     np.ravel(tolerance) + 1e-30)
        assert np.all(np.abs(np.ravel(exact)) > 10 * np.ravel(tolerance))


@pytest.mark.parametrize("jit_compile", [False, True])  # NaN/Inf raise / skip (nonfinite.py)
def test_an_overflowing_scale_is_recomputed_at_a_smaller_one_without_skipping(policy,
                                                                               jit_compile):
    # x ~ 100 and residuals ~ 3: S·g_W = Σ_b x_b·S·δ_b ≈ 64·100·2^14·6/64 overflows float16
    # (65504) at S = 2^14; the step finds the largest S/2^m at which it is finite.
    policy("mixed_float16")
    x, y, weights = _problem()
    x = 100.0 * np.abs(x)
    y = (x @ weights[0] + weights[1] - 3.0).ravel()
    model = _linear(x.shape[1], weights, train_size=2 ** 14,
                    sampler=kb.samplers.SGLD(step_size=1e-9, seed=1), jit_compile=jit_compile)
    overflowing = _float16_gradients(model, x, y, 2.0 ** 14)
    assert not np.all(np.isfinite(keras.ops.convert_to_numpy(overflowing[0])))
    gradients = backend.value_and_gradients(model, x, y, None)[-1]
    bounds, exact = _drift_error_bound(x, weights, y)
    for gradient, bound, value in zip(gradients, bounds, exact):
        assert np.all(np.abs(np.ravel(gradient) - np.ravel(value)) <= np.ravel(bound))
    with pytest.warns(kb.TrainSizeWarning):  # n = 2^14 for a batch of 64, on purpose
        history = model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 1  # the step was taken, not skipped
    assert history.history.get("nonfinite_steps", [0.0])[-1] == 0.0
    # θ' - θ = -h·n·g + sqrt(2h)·η, |η| < 6
    h, n = 1e-9, 2 ** 14
    for new, old, bound, value in zip(model.get_weights(), weights, bounds, exact):
        np.testing.assert_array_less(np.abs(new - old + h * n * value.reshape(new.shape)),
                                     h * n * bound.reshape(new.shape) + 6 * np.sqrt(2 * h))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_nan_potential_still_stops_the_step(policy, jit_compile):
    # Not an overflow to recompute: the potential itself is NaN. Without XLA fit raises
    # NonFiniteError; under XLA the step is skipped and fit stops (keras_bnn.nonfinite).
    policy("mixed_float16")
    x, y, weights = _problem()
    x[0, 0] = np.nan
    model = _linear(x.shape[1], weights, train_size=len(x), jit_compile=jit_compile)
    with pytest.raises(kb.NonFiniteError, match="NaN/Inf"):
        model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
    for new, old in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(new, old)


def _chain(dtype_policy, policy, x, y, epochs, path=None):
    """SGLD (h = 2e-3, seed 11), full batches, a draw every 5 steps."""
    policy(dtype_policy)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((x.shape[1],), 1, hidden=())
    model.compile(sampler=kb.samplers.SGLD(step_size=2e-3, seed=11), train_size=len(x),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    draws = []
    collect = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: draws.append(np.concatenate(
            [w.ravel() for w in model.get_weights()])))
    model.fit(_batches(x, y), steps_per_epoch=5, epochs=epochs, verbose=0, callbacks=[collect])
    if path is not None:
        model.save(path)
    return model, np.array(draws)


def _batches(x, y):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(len(x)).repeat()


def _breast_cancer():
    """sklearn's breast cancer data (n = 569): its 6 leading principal components, whitened
    (a well-conditioned logistic regression posterior), and the 0/1 labels."""
    datasets = pytest.importorskip("sklearn.datasets")
    x, y = datasets.load_breast_cancer(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    left = np.linalg.svd(x, full_matrices=False)[0]
    return (left[:, :6] * np.sqrt(len(x))).astype("float32"), y.astype("float32")


def _ess(draws):
    """Effective sample size per column (initial positive sequence of autocorrelations)."""
    centred = draws - draws.mean(0)
    n = len(draws)
    spectrum = np.fft.rfft(centred, n=2 * n, axis=0)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), axis=0)[:n] / (n * centred.var(0))
    ess = []
    for column in acf.T:
        pairs = column[:-1:2] + column[1::2]
        stop = np.argmax(pairs < 0) if np.any(pairs < 0) else len(pairs)
        ess.append(n / (-1.0 + 2.0 * pairs[:stop].sum()))
    return np.array(ess)


@pytest.mark.slow  # two chains of 1500 full-batch steps (~26 s on 2 cores)
@pytest.mark.filterwarnings("ignore::keras_bnn.GradientNoiseWarning")
def test_a_float16_chain_matches_the_float32_posterior(policy):
    # SGLD on logistic regression (breast cancer): the mixed_float16 chain's posterior mean
    # and sd match the float32 chain's within 4 Monte-Carlo standard errors (each chain's
    # mean error sd/sqrt(ESS), its sd's about sd/sqrt(2·ESS)).
    x, y = _breast_cancer()
    burn = 40  # draws (200 steps)
    draws32 = _chain("float32", policy, x, y, 300)[1][burn:]
    draws16 = _chain("mixed_float16", policy, x, y, 300)[1][burn:]
    ess = np.minimum(_ess(draws32), _ess(draws16))
    assert ess.min() > 15, ess
    sd = draws32.std(0)
    np.testing.assert_array_less(np.abs(draws16.mean(0) - draws32.mean(0)),
                                 4 * sd * np.sqrt(2 / ess))
    np.testing.assert_array_less(np.abs(draws16.std(0) - sd), 4 * sd * np.sqrt(1 / ess))


@pytest.mark.slow  # 10 s: the default suite stays under its 20 minutes; CI runs both
@pytest.mark.filterwarnings("ignore::keras_bnn.GradientNoiseWarning")  # h = 2e-3, on purpose
def test_float16_chain_is_reproducible_and_resumes_from_a_saved_model(policy, tmp_path):
    x, y = _breast_cancer()
    path = str(tmp_path / "chain.keras")
    model, draws = _chain("mixed_float16", policy, x, y, 2, path=path)
    again = _chain("mixed_float16", policy, x, y, 2)[1]
    np.testing.assert_array_equal(draws, again)  # a function of the seed
    loaded = keras.models.load_model(path)
    assert kb.precision.gradient_scale(loaded) == kb.precision.gradient_scale(model) == 512.0
    assert isinstance(loaded.optimizer, kb.samplers.Sampler)
    for resumed in (model, loaded):
        resumed.fit(_batches(x, y), steps_per_epoch=3, epochs=1, verbose=0)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


_JAX_CHECK = """
import keras, numpy as np, keras_bnn as kb
from keras_bnn import backend
keras.config.set_dtype_policy("mixed_float16")
rng = np.random.default_rng(0)
x = rng.normal(size=(32, 6)).astype("float32")
y = rng.integers(0, 3, size=32)
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
for sampler in ("sgld", "hmc"):
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((6,), 3, hidden=(4,))
    model.compile(sampler=sampler, train_size=32, loss=loss)
    assert isinstance(model.optimizer, kb.samplers.Sampler), type(model.optimizer)
    history = model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    assert all(np.isfinite(v[-1]) for v in history.history.values()), history.history
    assert int(model.optimizer.iterations) == 2
# the overflow recomputation: gradients at S = 2^14 overflow float16 here
inputs = keras.Input((4,))
model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(1)(inputs)), kernel_prior=None,
                    bias_prior=None, allow_flat=True)
model.set_weights([np.ones((4, 1), "float32"), np.zeros(1, "float32")])
model.compile(sampler="sgld", train_size=2 ** 14, loss=keras.losses.MeanSquaredError())
x = np.full((64, 4), 100.0, "float32")
y = np.full(64, 397.0, "float32")
gradient = np.asarray(backend.value_and_gradients(model, x, y, None)[-1][0])
np.testing.assert_allclose(gradient, np.full((4, 1), 600.0), rtol=4e-3)
print("OK")
"""


@pytest.mark.slow  # a JAX process
def test_jax_samples_under_mixed_float16():
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", _JAX_CHECK], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
