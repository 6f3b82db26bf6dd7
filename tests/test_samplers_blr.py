"""Bayesian linear regression with minibatch gradients: an analytic posterior.

Model: ``y = Xw + σε`` with n = 500 Gaussian design rows in d = 20
dimensions, noise σ = 1 and prior ``w ~ N(0, τ²I)``, τ = 0.5. With
``A = XᵀX/σ² + I/τ²`` the posterior is ``N(μ, A⁻¹)``, ``μ = A⁻¹Xᵀy/σ²``, and
the tempered posterior ``∝ exp(-U/T)`` is ``N(μ, T·A⁻¹)``.

Each of K = 200 independent chains draws its own minibatch of b = 100 rows
(with replacement, keyed statelessly on (seed, step)) and hands the sampler
the mean-form gradient ``mean_batch ∇NLL + (1/n)·∇(-log p(w))``; the sampler
multiplies it by n = train_size.

Minibatch noise. Per coordinate the gradient noise on ``G = n·∇`` has
variance ``B ≈ n²/(b·σ²)`` (the per-example gradient ``x·r/σ²`` has second
moment ≈ 1/σ²). With the mass ``M = n/σ²`` (so the posterior frequencies are
ω ∈ [0.8, 1.2]) SGHMC's stationary temperature is inflated by
``1 + h·B/(2γTM) = 1 + h·n/(2γ·T·b)`` (see test_samplers_gaussian.py), so
its step size is scaled with T to keep that ≈ 1 %; ATMC's thermostat
absorbs the noise and runs at a 10× larger step. Each test also checks that
the predicted bias is below one Monte-Carlo standard error.

Chains start overdispersed around the posterior, at ``μ + 3·chol(T·A⁻¹)·z``
(three posterior standard deviations). (Starting at a prior draw,
~70 posterior sds away, makes the thermostats' ξ climb to ~10²–10³ while the
excess energy drains; ξ then decreases at rate at most T per unit time, and at
T = 0.1 the chains stay frozen for far longer than this test runs.)

Family-wise bound: per (sampler, T) there are 2d = 40 z-scores (mean and
variance of each coordinate) with SEs from the ESS; |z| < 4.5 has a
two-sided null probability 6.8e-6 each, so the 160 checks of this file fail
by chance with probability ≤ 1.1e-3 (Bonferroni).
"""


import numpy as np
import pytest
import tensorflow as tf

from keras_bnn import samplers
from sampler_harness import run_chains, total_ess

N, D, BATCH = 500, 20, 100
SIGMA, TAU = 1.0, 0.5
CHAINS = 200
MASS = N / SIGMA**2
FRICTION = 2.0  # SGHMC γ and the ATMC/SGNHT noise D (≈ critical damping of the slowest mode)
Z_MAX = 4.5


def _problem():
    rng = np.random.default_rng(2024)
    x = rng.normal(size=(N, D)).astype(np.float32)
    w = rng.normal(scale=TAU, size=D)
    y = (x.astype(np.float64) @ w + SIGMA * rng.normal(size=N)).astype(np.float32)
    x64 = x.astype(np.float64)
    precision = x64.T @ x64 / SIGMA**2 + np.eye(D) / TAU**2
    cov = np.linalg.inv(precision)
    mean = cov @ (x64.T @ y.astype(np.float64)) / SIGMA**2
    return x, y, mean, cov


def _minibatch_gradient(x, y, seed):
    xs, ys = tf.constant(x), tf.constant(y)

    def gradient(theta, step):
        key = tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
        index = tf.random.stateless_uniform([CHAINS, BATCH], seed=key, maxval=N, dtype=tf.int32)
        xb = tf.gather(xs, index)  # [K, b, d]: each chain its own minibatch
        residual = tf.gather(ys, index) - tf.einsum("kbd,kd->kb", xb, theta)
        nll_grad = -tf.einsum("kbd,kb->kd", xb, residual) / (BATCH * SIGMA**2)
        return nll_grad + theta / (N * TAU**2)  # + (1/n)·∇(-log prior)

    return gradient


# (sampler, T, h, steps, burn-in). SGHMC: inflation h·n/(2γTb) = 0.5 % at
# T = 1 and 1.25 % at T = 0.1; ~40-80 time units of sampling each.
CASES = [
    ("ATMC", 1.0, 0.008, 20_000, 4_000),
    ("ATMC", 0.1, 0.008, 20_000, 4_000),
    ("SGHMC", 1.0, 0.004, 20_000, 4_000),
    ("SGHMC", 0.1, 0.001, 48_000, 8_000),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, temperature, h, steps, burn_in", CASES)
def test_tempered_posterior_moments(name, temperature, h, steps, burn_in):
    x, y, mean, cov = _problem()
    seed = 31 + CASES.index((name, temperature, h, steps, burn_in))
    if name == "SGHMC":
        sampler = samplers.SGHMC(step_size=h, friction=FRICTION, mass=MASS, seed=seed)
        predicted_inflation = h * N / (2 * FRICTION * temperature * BATCH)
    else:
        sampler = samplers.ATMC(step_size=h, noise=FRICTION, mass=MASS, seed=seed)
        predicted_inflation = 0.0  # corrected by the thermostat
    sampler.configure(train_size=N, temperature=temperature)
    target_var = temperature * np.diag(cov)
    rng = np.random.default_rng(seed)
    start = mean + 3 * rng.normal(size=(CHAINS, D)) @ np.linalg.cholesky(temperature * cov).T

    samples, _ = run_chains(
        sampler,
        start.astype(np.float32),
        _minibatch_gradient(x, y, 1000 + seed),
        steps,
        burn_in=burn_in,
        thin=10,
    )
    sample_mean = samples.mean(axis=(0, 1))
    sample_var = samples.var(axis=(0, 1))
    centred_sq = (samples - sample_mean) ** 2
    se_mean = np.sqrt(sample_var / total_ess(samples))
    se_var = centred_sq.std(axis=(0, 1)) / np.sqrt(total_ess(centred_sq))

    # Design checks: enough ESS for power (a 20 % variance error is ≥ 4.5 SE
    # away), and the known minibatch bias is below one SE.
    assert np.all(se_var / target_var < 0.2 / Z_MAX), se_var / target_var
    assert np.all(predicted_inflation * target_var < se_var)

    z_mean = (sample_mean - mean) / se_mean
    z_var = (sample_var - target_var) / se_var
    assert np.all(np.abs(z_mean) < Z_MAX), z_mean
    assert np.all(np.abs(z_var) < Z_MAX), z_var
