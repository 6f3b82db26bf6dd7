"""SGHMC at an explicit step on full batches, through ``model.fit``, against the exact chain.

A note of stop 53 suspected that SGHMC runs cold on full batches (a short
exploratory run logged configurational T 0.67 at T = 1 with 5 weights). The
sampler does not subtract an estimated gradient noise (its docstring), so with
no minibatch noise the chain is the noiseless symplectic-Euler chain, whose
stationary law is known exactly. This test runs it as a user does.

Problem: Bayesian linear regression, n = 200 rows, 4 features and a bias,
``y = Xw + b + ε``, ε ~ N(0, 1), N(0, 1) priors on every weight, the loss
½(y - f)² (a unit-variance Gaussian up to a constant). The potential is
``U = Σ½r² + ½|θ|²``, Gaussian with precision ``P = X₁ᵀX₁ + I``; the exact
posterior is N(P⁻¹X₁ᵀy, P⁻¹). SGHMC at h = 0.01 (γ = 0.1/h = 10, unit mass)
on the full batch: its stationary covariance is the discrete Lyapunov
solution (:func:`sampler_harness.sghmc_stationary_cov`, 0.5 % above P⁻¹
here).

Monte-Carlo error: 20 000 steps after 2 000 of burn-in; every coordinate's
mean and variance are compared with z-scores whose SEs come from the ESS
(1 300-1 800 per coordinate, so ~3 % SE in each variance); |z| < 4.5 for each
of the 10 (two-sided null probability 6.8e-6 each), and for the variance ratio
pooled over the coordinates (SE ~1.5 %: a chain 10 % cold fails; at
temperature=0.9 two variance z-scores reach -4.5 and -5.2). The logged
temperatures' epoch means (40 epochs of 500 steps, each far longer than the
~20-step autocorrelation time) are compared with T = 1 by the SE of their
spread, |z| < 4.5.
"""

import numpy as np
import pytest
import tensorflow as tf
import keras

import keras_bnn as kb
from sampler_harness import sghmc_stationary_cov, total_ess

N, D, H = 200, 4, 0.01
STEPS_PER_EPOCH, BURN_IN_EPOCHS, EPOCHS = 500, 4, 44
Z_MAX = 4.5


def _half_squared_error(y_true, y_pred):
    return 0.5 * keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)


class _Positions(keras.callbacks.Callback):
    """Every step's weights, flat (kernel then bias)."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def on_train_batch_end(self, batch, logs=None):
        self.rows.append(np.concatenate(
            [np.ravel(keras.ops.convert_to_numpy(v)) for v in self.model.trainable_weights]))


@pytest.mark.slow
def test_full_batch_sghmc_at_an_explicit_step_samples_the_exact_chain():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype("float32")
    y = (x @ rng.normal(size=D) + 0.3 + rng.normal(size=N)).astype("float32")[:, None]
    inputs = keras.Input((D,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(1)(inputs)),
                        kernel_prior=kb.priors.Normal(0, 1), bias_prior=kb.priors.Normal(0, 1))
    model.compile(sampler=kb.samplers.SGHMC(step_size=H, seed=1), loss=_half_squared_error,
                  train_size=N)
    positions = _Positions()
    history = model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(),
                        steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, verbose=0,
                        callbacks=[positions])

    design = np.c_[x, np.ones(N)].astype(np.float64)
    precision = design.T @ design + np.eye(D + 1)
    mean = np.linalg.solve(precision, design.T @ y[:, 0])
    variance = np.diag(sghmc_stationary_cov(precision, H, 0.1 / H, 1.0, 0.0))
    assert np.allclose(variance, np.diag(np.linalg.inv(precision)), rtol=0.01)

    samples = np.asarray(positions.rows)[BURN_IN_EPOCHS * STEPS_PER_EPOCH:]
    assert samples.shape == ((EPOCHS - BURN_IN_EPOCHS) * STEPS_PER_EPOCH, D + 1)
    ess = total_ess(samples[:, None, :])
    centred_sq = (samples - samples.mean(0)) ** 2
    ess_sq = total_ess(centred_sq[:, None, :])
    se_var = centred_sq.std(0) / np.sqrt(ess_sq)
    z_mean = (samples.mean(0) - mean) / (samples.std(0) / np.sqrt(ess))
    z_var = (centred_sq.mean(0) - variance) / se_var
    assert np.all(np.abs(z_mean) < Z_MAX), z_mean
    assert np.all(np.abs(z_var) < Z_MAX), (z_var, centred_sq.mean(0) / variance)
    # Pooled over the 5 (nearly uncorrelated: P is close to diagonal) coordinates,
    # the variance ratio's SE is ~1.5 %, so a chain 10 % cold is > 4.5 SEs off.
    ratio = np.mean(centred_sq.mean(0) / variance)
    se_ratio = np.sqrt(np.sum((se_var / variance) ** 2)) / (D + 1)
    assert 0.1 > Z_MAX * se_ratio, se_ratio
    assert abs(ratio - 1) < Z_MAX * se_ratio, (ratio, se_ratio)

    for key in ("configurational_temperature", "kinetic_temperature"):
        epochs = np.asarray(history.history[key][BURN_IN_EPOCHS:])
        z = (epochs.mean() - 1.0) / (epochs.std(ddof=1) / np.sqrt(epochs.size))
        assert abs(z) < Z_MAX, (key, epochs.mean(), z)
