"""Minibatch gradient noise, thermostat mass, kinetic temperature, BAOAB.

Every statistical tolerance below is a multiple of a Monte-Carlo standard
error computed in the test (from the ESS, or from the χ² law of a kinetic
temperature), never a tuned constant.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf
import keras

import keras_bnn as kb
from keras_bnn import diagnostics, samplers
from sampler_harness import run_chains, total_ess

Z_MAX = 4.5  # two-sided null probability 6.8e-6 per check


def _noisy_gradient(sigma, seed):
    """Gradient of U = θ²/2 plus N(0, σ²) noise keyed on (seed, step)."""

    def gradient(theta, step):
        key = tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
        return theta + sigma * tf.random.stateless_normal(tf.shape(theta), seed=key)

    return gradient


def test_noise_estimate_matches_injected_variance():
    # SGLD on U = θ²/2 with N(0, σ²) gradient noise ν, n = 1. Here
    # G_k - G_{k-1} = θ_k - θ_{k-1} + ν_k - ν_{k-1} with
    # θ_k - θ_{k-1} = -h·θ_{k-1} - h·ν_{k-1} + sqrt(2hT)·η, so the estimate
    # converges to ½E[(G_k - G_{k-1})²] = ½[σ²(2 + 2h + h²) + T(2h + h²)].
    h, temperature, sigma, dim = 0.01, 1.0, 2.0, 2000
    sampler = samplers.SGLD(step_size=h, seed=3)
    sampler.configure(train_size=1, temperature=temperature)
    rng = np.random.default_rng(0)
    _, theta = run_chains(sampler, rng.normal(size=dim).astype(np.float32),
                          _noisy_gradient(sigma, 11), steps=3000, burn_in=3000)
    expected = 0.5 * (sigma**2 * (2 + 2 * h + h**2) + temperature * (2 * h + h**2))
    estimate = sampler.slots("gradient_noise")[0].numpy()
    # V̂ is an average of ~(1+ρ)/(1-ρ) = 199 terms ½(Δ)², each ~ V·χ²₁
    # (relative sd sqrt(2)): relative sd sqrt(2/199) per coordinate, over
    # `dim` independent coordinates.
    se = expected * np.sqrt(2 / 199 / dim)
    assert abs(estimate.mean() - expected) < Z_MAX * se, (estimate.mean(), expected)
    # The logged ratio is SGLD's r = h·V̂/(2T), with the V̂ of the steps
    # before the last one: the last step moved mean(V̂) by (1-ρ)·mean(½Δ² - V̂),
    # relative sd (1-ρ)·sqrt(2/dim) (ρ = 0.99).
    ratio = float(sampler.gradient_noise_ratio())
    np.testing.assert_allclose(ratio, h * estimate.mean() / (2 * temperature),
                               rtol=Z_MAX * 0.01 * np.sqrt(2 / dim))


@pytest.mark.parametrize("name", ["SGHMC", "ATMC", "SGNHT"])
def test_noise_ratio_is_the_share_of_the_injected_variance(name):
    h, temperature, sigma = 0.02, 0.5, 3.0
    sampler = getattr(samplers, name)(step_size=h, seed=1)
    sampler.configure(train_size=1, temperature=temperature)
    run_chains(sampler, np.zeros(500, np.float32), _noisy_gradient(sigma, 5), steps=400)
    v_hat = sampler.slots("gradient_noise")[0].numpy()
    if name == "SGHMC":  # h²V over the injected 2γhTM
        expected = h**2 * v_hat.mean() / (2 * sampler.friction * h * temperature * sampler.mass)
    else:  # b̂/D with b̂ = h·V̂/(2Tm)
        expected = (h * v_hat / (2 * temperature * sampler.mass)).mean() / sampler.noise_level
    # The step uses V̂ from before its own update (independent of its noise);
    # one EMA step moves V̂ by (1-ρ)·(½Δ² - V̂), about 1 % here.
    np.testing.assert_allclose(float(sampler.gradient_noise_ratio()), expected, rtol=0.02)


def _fit_logistic(batch_size, step_size, temperature, epochs=3):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype("float32")
    y = (x[:, 0] + 0.3 * rng.normal(size=512) > 0).astype("float32")
    inputs = keras.Input((8,))
    model = kb.BayesianModel(inputs, kb.layers.Dense(1)(inputs))
    model.compile(sampler=kb.samplers.SGHMC(step_size=step_size, seed=0),
                  temperature=temperature, train_size=len(x),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0)
    noise_warnings = [w for w in caught if issubclass(w.category, kb.GradientNoiseWarning)]
    return history.history["gradient_noise_ratio"], noise_warnings


def test_fit_logs_the_ratio_and_warns_once_when_it_is_large():
    ratios, caught = _fit_logistic(batch_size=8, step_size=5e-3, temperature=0.01)
    assert len(ratios) == 3 and min(ratios) > samplers.NOISE_RATIO_LIMIT
    assert len(caught) == 1
    assert "gradient_noise_ratio" in str(caught[0].message)
    assert "step size" in str(caught[0].message)


def test_full_batch_fit_does_not_warn():
    # Without minibatch noise V̂ only sees how far θ moved in a step.
    ratios, caught = _fit_logistic(batch_size=512, step_size=1e-3, temperature=1.0)
    assert max(ratios) < 0.01 * samplers.NOISE_RATIO_LIMIT
    assert not caught


@pytest.mark.slow
def test_a_full_batch_step_too_long_for_the_stiff_directions_warns_so():
    """With the whole training set in every batch there is no minibatch
    noise, and the ratio reads only how much the gradient changes in one
    step, which grows steeply with h (means over steps 50–150 measured on
    this regression: 0.0004 at h = 0.01, 0.005 at 0.02, 0.27 at 0.04, 2.5
    at 0.06). At h = 0.04 the warning fires, and says that only a smaller
    step helps (not a larger batch)."""
    ratios, caught = _fit_logistic(batch_size=512, step_size=0.04, temperature=1.0,
                                   epochs=150)
    assert np.mean(ratios[50:]) > samplers.NOISE_RATIO_LIMIT
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "with the whole training set in every batch" in message
    assert "only a smaller step helps" in message


# ------------------------------------------------------ kinetic temperature
@pytest.mark.parametrize("integrator", ["symplectic_euler", "baoab"])
@pytest.mark.parametrize("h_gamma", [0.1, 0.3])  # 0.1 is the default friction
def test_sghmc_kinetic_temperature_in_chi2_band(integrator, h_gamma):
    # d = 100,000 independent unit Gaussians, exact (noise-free) gradients:
    # at equilibrium d·T_kin/T ~ χ²_d, so the reported value must lie in the
    # 99 % band (±1.15 %). The stored symplectic-Euler momentum reads
    # T/(1 - hγ/2) (+5.3 % / +17.6 %), far outside it.
    d, h, temperature = 100_000, 0.05, 0.5
    sampler = samplers.SGHMC(step_size=h, friction=h_gamma / h, integrator=integrator, seed=2)
    sampler.configure(train_size=1, temperature=temperature)
    rng = np.random.default_rng(1)
    start = np.sqrt(temperature) * rng.normal(size=d).astype(np.float32)
    run_chains(sampler, start, lambda theta, step: theta, steps=600)
    lo, hi = diagnostics.temperature_band(d, temperature, 0.99)
    assert lo < float(sampler.kinetic_temperature()) < hi
    stored = float(np.mean(sampler.slots("momentum")[0].numpy() ** 2))
    if integrator == "symplectic_euler":
        assert stored > hi  # what the old report read


def test_baoab_positions_exact_at_large_step():
    # Unit Gaussian at hω = 0.5, hγ = 0.1: the exact stationary variance of
    # the linear recursion is 1.0704·T for symplectic Euler and T for BAOAB
    # (discrete Lyapunov equation); BAOAB must be within MC error of T and
    # symplectic Euler's known bias must be resolved by the same test.
    h, temperature, chains = 0.5, 1.0, 2000
    results = {}
    for integrator in ("baoab", "symplectic_euler"):
        sampler = samplers.SGHMC(step_size=h, friction=0.2, integrator=integrator, seed=4)
        sampler.configure(train_size=1, temperature=temperature)
        start = np.random.default_rng(2).normal(size=chains).astype(np.float32)
        samples, _ = run_chains(sampler, start, lambda theta, step: theta,
                                steps=4000, burn_in=1000, thin=5)
        squares = samples**2  # the mean is 0 by symmetry
        results[integrator] = (squares.mean(), squares.std() / np.sqrt(total_ess(squares)))
    var, se = results["baoab"]
    assert abs(var - temperature) < Z_MAX * se, (var, se)
    var, se = results["symplectic_euler"]
    assert abs(var - 1.0704 * temperature) < Z_MAX * se, (var, se)
    assert 1.0704 * temperature - results["baoab"][0] > 2 * Z_MAX * se


# -------------------------------------------------------- thermostat mass
@pytest.mark.parametrize("thermostat_mass", [0.05, 5.0])
def test_thermostat_mass_leaves_theta_marginal_unchanged(thermostat_mass):
    # ATMC on U = θ²/2 at T = 0.1 with N(0, 0.5²) gradient noise: for every
    # Q = T·Q₁ the stationary law is N(0, T) in θ and ∝ exp(-Q₁·(ξ-ξ*)²/2)
    # in ξ, so var θ = T and sd ξ = 1/sqrt(Q₁) (a 100× range of Q₁ here).
    temperature, chains = 0.1, 400
    sampler = samplers.ATMC(step_size=0.05, noise=2.0, thermostat_mass=thermostat_mass, seed=7)
    sampler.configure(train_size=1, temperature=temperature)
    start = np.sqrt(temperature) * np.random.default_rng(3).normal(size=chains).astype(np.float32)
    def record(theta, step):
        return tf.stack([theta, sampler.slots("thermostat")[0].value], axis=-1)

    out, _ = run_chains(sampler, start, _noisy_gradient(0.5, 9), steps=24_000,
                        burn_in=4_000, thin=10, record=record)
    theta, xi = out[..., 0], out[..., 1]
    squares = theta**2
    se_var = squares.std() / np.sqrt(total_ess(squares))
    assert abs(squares.mean() - temperature) < Z_MAX * se_var, (squares.mean(), se_var)
    # ξ: the check is that the configured mass is the one in effect (its
    # spread differs 10× between the two cases), not the law's fine detail:
    # 1/sqrt(Q₁) is the continuous-time value, and the Euler step of ξ adds
    # O(h) to it (3 % measured at Q₁ = 0.05, h = 0.05); MC error is 0.4 %.
    xi_sd = np.sqrt(np.mean(xi**2))  # ξ* = b - b̂ ≈ 0
    assert abs(xi_sd * np.sqrt(thermostat_mass) - 1.0) < 0.1


def test_default_thermostat_mass_is_tied_to_the_noise_level():
    sampler = samplers.ATMC(step_size=0.01)
    np.testing.assert_allclose(sampler.thermostat_mass, 10.0 / sampler.noise_level**2)
    restored = samplers.ATMC.from_config(sampler.get_config())
    assert restored.thermostat_mass == sampler.thermostat_mass
    with pytest.raises(ValueError, match="thermostat_mass"):
        samplers.ATMC(step_size=0.01, thermostat_mass=0.0)


def test_integrator_argument_is_checked_and_serialised():
    sampler = samplers.SGHMC(step_size=0.01, integrator="baoab", friction=50.0)
    assert samplers.SGHMC.from_config(sampler.get_config()).integrator == "baoab"
    with pytest.raises(ValueError, match="integrator"):
        samplers.SGHMC(step_size=0.01, integrator="leapfrog")
    with pytest.raises(ValueError, match="friction"):  # h·γ = 0.5·... ≥ 1 for Euler only
        samplers.SGHMC(step_size=0.01, friction=150.0)


def test_a_ratio_just_above_the_limit_is_printed_above_it():
    """The walk's ATMC chain on a heteroscedastic task warned
    "dense_1/kernel = 0.1 ... is above 0.1" for a ratio of 0.10004 (``:.4g``):
    the printed value must read above the limit."""
    from keras_bnn.models.fit_callbacks import WarnOnGradientNoise, above_limit

    assert above_limit(0.10004, 0.1) == "0.10004"
    assert above_limit(0.1234567, 0.1) == "0.1235"
    callback = WarnOnGradientNoise(limit=0.1)
    with pytest.warns(kb.GradientNoiseWarning) as caught:
        callback._warn(0.05, {"dense_1/kernel": 0.100004}, "in epoch 3")
    message = str(caught[0].message)
    assert "dense_1/kernel = 0.100004 in epoch 3 is above 0.1" in message, message
