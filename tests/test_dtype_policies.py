"""Keras dtype policies: what samples (float32, float64, mixed_bfloat16; mixed_float16 in
test_mixed_float16.py) and what is refused (float16/bfloat16 variables), the ensemble's
precision and the baseline's loss scaling under mixed_float16."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_bnn as kb

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _data(n=64, d=6, k=3):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)).astype("float32"), rng.integers(0, k, size=n)


def _mlp(d=6, k=3):
    keras.utils.set_random_seed(0)
    return kb.models.mlp((d,), k, hidden=(8,))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_weights_are_refused(dtype):
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(8, name="hidden", dtype=dtype)(inputs)
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3)(hidden)))
    with pytest.raises(ValueError, match=f"(?s)'hidden'.*{dtype}.*'mixed_bfloat16'"):
        model.compile(sampler="sgld", train_size=64, loss=LOSS)


def test_float64_hmc_samples_in_float64(policy):
    policy("float64")
    x, y = _data()
    model = _mlp()
    model.compile(sampler="hmc", train_size=len(x), loss=LOSS)
    history = model.fit(x, y, batch_size=len(x), epochs=2, verbose=0)
    assert all(v.dtype == "float64" for v in model.trainable_variables)
    assert all(np.isfinite(values[-1]) for values in history.history.values())
    assert history.history["acceptance_rate"][-1] > 0


@pytest.mark.parametrize("sampler", ["sghmc", "atmc"])
def test_mixed_bfloat16_samples_with_float32_state_and_noise(policy, sampler):
    policy("mixed_bfloat16")
    x, y = _data()
    model = _mlp()
    model.compile(sampler=sampler, train_size=len(x), loss=LOSS)
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert model(x[:2]).dtype == "bfloat16"  # the forward pass is bfloat16
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert all(v.dtype == "float32" for v in model.optimizer.variables if "float" in v.dtype)
    assert all(np.isfinite(values[-1]) for values in history.history.values())


def test_mixed_bfloat16_ensemble_averages_in_float32(policy):
    policy("mixed_bfloat16")
    x, _ = _data()
    model = _mlp()
    weights = model.get_weights()
    ensemble = kb.PosteriorEnsemble(model, [weights, [0.5 * w for w in weights]])
    probabilities = ensemble.predict(x, verbose=0)
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-6)
    summary = ensemble.predict_uncertainty(x)
    assert all(value.dtype == np.float32 for value in summary.values())


def _first_kernel_change(dtype_policy, policy, x, y):
    policy(dtype_policy)
    model = _mlp()
    before = model.get_weights()[0]
    model.compile(optimizer=keras.optimizers.SGD(0.1), train_size=len(x), loss=LOSS)
    model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
    return np.abs(model.get_weights()[0] - before).mean()


def test_mixed_float16_baseline_is_loss_scaled(policy):
    # Keras wraps the baseline's optimizer in a LossScaleOptimizer, which
    # unscales the gradients: they must have been taken of the scaled loss.
    x, y = _data()
    reference = _first_kernel_change("float32", policy, x, y)
    mixed = _first_kernel_change("mixed_float16", policy, x, y)
    np.testing.assert_allclose(mixed, reference, rtol=0.05)


_JAX_CHECK = """
import keras, numpy as np, pytest, keras_bnn as kb
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
x = np.random.default_rng(0).normal(size=(32, 6)).astype("float32")
y = np.arange(32) % 3
for policy, match, compile_kwargs in [
        ("float64", "JAX_ENABLE_X64", {"sampler": "sgld"}),
        ("mixed_float16", "'mixed_bfloat16'", {"optimizer": "sgd"})]:
    keras.config.set_dtype_policy(policy)
    with pytest.raises(ValueError, match=match):
        kb.models.mlp((6,), 3, hidden=(4,)).compile(train_size=32, loss=LOSS, **compile_kwargs)
keras.config.set_dtype_policy("mixed_bfloat16")
model = kb.models.mlp((6,), 3, hidden=(4,))
model.compile(sampler="atmc", train_size=32, loss=LOSS)
history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
assert all(np.isfinite(v[-1]) for v in history.history.values()), history.history
ensemble = kb.PosteriorEnsemble(model, [model.get_weights()] * 2)
assert ensemble.predict(x, verbose=0).dtype == np.float32
print("OK")
"""


@pytest.mark.slow  # a JAX process
def test_jax_refuses_float64_without_x64_and_the_float16_baseline_and_samples_bfloat16():
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run([sys.executable, "-c", _JAX_CHECK], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
