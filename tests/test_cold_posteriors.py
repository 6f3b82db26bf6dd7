"""Cold posteriors under minibatch noise, judged against exact references.

1. Bayesian logistic regression on breast_cancer (``gold_standard.py``) at
   T ∈ {1, 0.1, 0.01} with minibatches of 64: ATMC and SGHMC at their
   defaults, only the step size set as the README recommends: the largest
   h whose logged gradient-noise ratio is below the warning level at T = 1
   (0.018 here: r = 0.087), scaled as sqrt(T) when cooling (r ∝ h²/T at the
   default friction), against TFP NUTS.
   Requirement: median |sd/sd_NUTS - 1| ≤ 0.10 and median
   |mean - mean_NUTS|/sd_NUTS ≤ 0.15. Design check: the Monte-Carlo error of
   each coordinate's sd (1/sqrt(2·ESS)) is at most a third of the 0.10 bound,
   so a sampler that is 10 % off cannot pass by luck of the draw.
   A negative control runs the T = 0.1 chain at the T = 1 step: the logged
   ratio must exceed the warning level, and the posterior must indeed be
   too narrow — the diagnostic sees what the reference sees.
2. From a MAP start (SGD), ATMC on an MLP on scikit-learn's digits at
   T ∈ {0.01, 0.03, 0.1} reaches its kinetic temperature within 60 epochs:
   over epochs 20-60 the mean and every epoch's value are within bands
   derived from the measured epoch-to-epoch fluctuation (see
   ``KINETIC_SD``), and SGHMC, which has no thermostat, fails them.

Each chain draws its own minibatch of 64 rows per step (with replacement,
keyed statelessly on (seed, step)); K = 64 chains run as one [K, 31]
variable (every sampler here acts per parameter, so they are independent).
"""

import numpy as np
import pytest
import tensorflow as tf
import keras

import keras_bnn as kb
from keras_bnn import samplers
import gold_standard as gs
from sampler_harness import run_chains, total_ess

BATCH, CHAINS = 64, 64


def recommended_step_size(temperature):
    """The README's rule for this problem: h = 0.018·sqrt(T)."""
    return 0.018 * np.sqrt(temperature)


def _minibatch_gradient(seed):
    x, y = gs.breast_cancer_blr()
    xs, ys, n = tf.constant(x), tf.constant(y), len(x)

    def gradient(theta, step):
        key = tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
        index = tf.random.stateless_uniform([CHAINS, BATCH], seed=key, maxval=n, dtype=tf.int32)
        xb = tf.gather(xs, index)
        residual = tf.sigmoid(
            tf.einsum("kbd,kd->kb", xb, theta[:, :-1]) + theta[:, -1:]
        ) - tf.gather(ys, index)
        nll_grad = tf.concat(
            [tf.einsum("kbd,kb->kd", xb, residual), tf.reduce_sum(residual, 1, keepdims=True)], 1
        ) / BATCH
        return nll_grad + theta / n  # + (1/n)·∇(-log prior), N(0, 1) prior

    return gradient


def _run(name, temperature, step_size, steps, seed):
    sampler = getattr(samplers, name)(step_size=step_size, seed=seed)
    x, _ = gs.breast_cancer_blr()
    sampler.configure(train_size=len(x), temperature=temperature)
    theta_map, hessian = gs.laplace_approximation()
    # Start near the posterior (a Laplace draw): this test is about the
    # stationary law; reaching it from a MAP point is test 2's subject.
    chol = np.linalg.cholesky(temperature * np.linalg.inv(hessian))
    start = theta_map + np.random.default_rng(seed).normal(size=(CHAINS, gs.NUM_PARAMS)) @ chol.T
    samples, _ = run_chains(sampler, start.astype(np.float32), _minibatch_gradient(seed),
                            steps, burn_in=steps // 5, thin=10)
    return samples, float(sampler.gradient_noise_ratio())


# Steps: about 15 relaxation times of the slowest direction (≈ 0.1/h² steps
# at the default friction ∝ 1/h), fewer at T = 0.01 where that is 26k steps.
CASES = [(name, t, steps) for name in ("ATMC", "SGHMC")
         for t, steps in ((1.0, 20_000), (0.1, 50_000), (0.01, 150_000))]


@pytest.mark.slow
@pytest.mark.parametrize("name, temperature, steps", CASES)
def test_defaults_match_nuts_at_recommended_step(name, temperature, steps):
    mean, sd = gs.nuts_reference(temperature)
    samples, ratio = _run(name, temperature, recommended_step_size(temperature), steps,
                          seed=10 + CASES.index((name, temperature, steps)))
    centred = samples - samples.mean(axis=(0, 1))
    relative_se_sd = 1.0 / np.sqrt(2.0 * total_ess(centred**2))
    assert np.median(relative_se_sd) < 0.10 / 3, np.median(relative_se_sd)
    sd_error, mean_error = gs.posterior_errors(samples, mean, sd)
    assert sd_error <= 0.10, sd_error
    assert mean_error <= 0.15, mean_error
    assert ratio <= samplers.NOISE_RATIO_LIMIT  # what the rule is meant to hold


@pytest.mark.slow
def test_noise_ratio_flags_a_biased_cold_chain():
    # T = 0.1 at the T = 1 step (3.2× the recommendation): r ≈ 0.6, and
    # ATMC's thermostat over-cools the weakly determined directions
    # (measured sd ≈ 0.65 of NUTS, as sqrt(1 - r) predicts).
    mean, sd = gs.nuts_reference(0.1)
    samples, ratio = _run("ATMC", 0.1, recommended_step_size(1.0), 20_000, seed=3)
    assert ratio > 3 * samplers.NOISE_RATIO_LIMIT
    sd_ratio = np.median(samples.reshape(-1, gs.NUM_PARAMS).std(axis=0) / sd)
    assert sd_ratio < 0.8
    assert abs(sd_ratio - np.sqrt(1.0 - ratio)) < 0.1


# Each epoch's kinetic temperature over T (ATMC, h = 5e-3, from the MAP
# start) fluctuates far more than its χ² error (21 steps over d = 17,610
# momenta: 0.23 %): the thermostat's response to the minibatch noise, which
# grows as T falls (r ∝ h²/T). Measured over epochs 20-60 on seeds 2-6 (not
# the test's seed 1), keyed array order: the rms deviation from 1 at each T
# (pooled, 5 × 41 epochs: 0.0319, 0.0187, 0.0106), rounded up. Lag-1
# autocorrelation -0.13 to 0.29 (0.38 on seed 1); kurtosis 3.1 and 3.5 at
# T = 0.03, 0.1 but 4.2 at T = 0.01 (hot excursions, up to 4.2 sd: the band's
# false-alarm rate below is a normal approximation, loosest at T = 0.01).
# The 41-epoch means of the 5 seeds spread by 0.25 %, 0.08 %, 0.03 % (sd).
KINETIC_SD = {0.01: 0.033, 0.03: 0.019, 0.1: 0.011}
# Bands: k·sd for every epoch, k from a false-alarm rate of 1e-3 over the
# 41 × 3 epochs checked (Bonferroni, two-sided normal: 8.1e-6 each, k = 4.46,
# taken as 4.5); for the 41-epoch mean k·sd·sqrt((1 + ρ)/((1 - ρ)·41)) with
# ρ = 0.4, the largest lag-1 autocorrelation measured (0.24·sd).
K_SD, MEAN_SHRINK = 4.5, np.sqrt(1.4 / (0.6 * 41))
CHECKED = slice(19, None)  # epochs 20-60


def _kinetic_misses(relative, temperature):
    """What of the kinetic temperature over T, by epoch, is outside its bands."""
    sd, checked = KINETIC_SD[temperature], np.asarray(relative[CHECKED])
    misses = []
    if abs(checked.mean() - 1.0) > K_SD * sd * MEAN_SHRINK:
        misses.append(f"mean {checked.mean():.4f}")
    if np.any(np.abs(checked - 1.0) > K_SD * sd):
        misses.append(f"epochs {checked.min():.4f}..{checked.max():.4f}")
    return misses


@pytest.mark.slow
def test_atmc_from_map_start_reaches_cold_temperature_within_60_epochs():
    """ATMC from a MAP start is at its kinetic temperature from epoch 20 on
    (the mean of epochs 20-60 within 3.5 %, 2.0 %, 1.2 % and every epoch
    within 14.9 %, 8.5 %, 5.0 % at T = 0.01, 0.03, 0.1). Measured on the
    test's seed: largest deviations 9.8 %, 4.8 %, 2.7 %, means within 0.05 %.
    A chain that does not reach T fails: SGHMC (no thermostat; the minibatch
    noise heats it) reads 1.36, 1.13, 1.05 on average, every excess at
    least 4 times the mean's band; checked here at T = 0.1, its smallest
    (largest epoch 1.077, outside 5.0 % too). A thermostat 44 times too heavy
    (``thermostat_mass=1``) has not caught up by epoch 60: its mean is 0.943
    and 0.973 at T = 0.01, 0.03, outside the mean's band, though every
    epoch is inside its own (the bands per epoch alone would pass it)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))[:1297]
    x = (digits.data[order] / 16.0).astype("float32")
    y = digits.target[order].astype("int32")
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(input_shape=(64,), num_classes=10, hidden=(100, 100))
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=loss,
                  train_size=len(x))
    model.fit(x, y, batch_size=64, epochs=40, verbose=0)
    map_weights = model.get_weights()

    def relative_kinetic(sampler, temperature):
        model.set_weights(map_weights)
        model.compile(sampler=sampler, temperature=temperature, loss=loss, train_size=len(x))
        history = model.fit(x, y, batch_size=64, epochs=60, verbose=0)
        return np.asarray(history.history["kinetic_temperature"]) / temperature

    for temperature in (0.01, 0.03, 0.1):
        relative = relative_kinetic(kb.samplers.ATMC(step_size=5e-3, seed=1), temperature)
        assert not _kinetic_misses(relative, temperature), (temperature, relative)
    hot = relative_kinetic(kb.samplers.SGHMC(step_size=5e-3, seed=1), 0.1)
    assert _kinetic_misses(hot, 0.1), hot
