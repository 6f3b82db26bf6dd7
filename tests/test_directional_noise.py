"""The gradient-noise ratio by direction (`keras_bnn.directional_noise`)."""

import json
import math
import os

import numpy as np
import pytest
import keras

import keras_bnn as kb
from keras_bnn import backend, directional_noise, samplers

N, BATCH = 40, 10


def _fitted(sampler, steps_epochs=30, seed=0):
    """A 4-3-2 tanh network on 40 synthetic examples after a short chain."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 4)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    keras.utils.set_random_seed(seed)
    net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"),
                            keras.layers.Dense(2)])
    model = kb.bayesian(net)
    kernel = {"sampler" if isinstance(sampler, samplers.Sampler) else "optimizer": sampler}
    model.compile(**kernel, train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=BATCH, epochs=steps_epochs, verbose=0, shuffle=True)
    return model, x, y


def test_the_top_ratio_is_the_noisiest_direction_of_the_minibatch_gradient():
    # Independent reference: the covariance of G = n·∇(mean-form potential)
    # over random batches of BATCH drawn without replacement, each computed
    # by the model's own potential on the batch, then R = diag(√c)·C·diag(√c).
    model, x, y = _fitted(samplers.ATMC(step_size=0.01, seed=1))
    result = directional_noise.directional_noise_ratios(model, x, y, BATCH, max_examples=N)
    assert result["num_examples"] == N and result["train_size"] == N

    sizes = [int(np.prod(v.shape)) for v in model.trainable_variables]
    root_c = np.repeat(np.sqrt(directional_noise.ratio_coefficients(model.optimizer)), sizes)
    gradients_of = backend.batch_gradients(model)
    rng = np.random.default_rng(7)
    draws = 3000
    gradients = np.empty((draws, sum(sizes)))
    for k in range(draws):
        rows = rng.choice(N, BATCH, replace=False)
        gradients[k] = N * np.concatenate([np.asarray(t).ravel()
                                           for t in gradients_of(x[rows], y[rows])])
    reference = np.cov(gradients * root_c, rowvar=False)
    top = np.linalg.eigvalsh(reference)[::-1]
    # The top eigenvalue of a sample covariance of `draws` draws has relative
    # sd ≈ sqrt(2/draws) = 0.026 (the mean of the diagonal less): 4.5 SE.
    tolerance = 4.5 * np.sqrt(2 / draws)
    np.testing.assert_allclose(result["top"][0], top[0], rtol=tolerance)
    np.testing.assert_allclose(result["top"][1], top[1], rtol=2 * tolerance)
    np.testing.assert_allclose(result["mean"], np.trace(reference) / sum(sizes), rtol=tolerance)
    assert result["concentration"] == pytest.approx(np.trace(reference) / top[0], rel=2 * tolerance)


def test_top_directions_are_the_eigenvectors_of_r_and_hold_its_trace():
    # Exact algebra against the dense d×d matrix R = f·AᵀA built from the
    # same gradients (d = 30 > m = 12, so R has rank m - 1 = 11).
    rng = np.random.default_rng(3)
    gradients = rng.normal(size=(12, 30)).astype(np.float32) * np.linspace(0.2, 2.0, 30)
    coefficients = rng.uniform(0.5, 1.5, size=30)
    n, b = 500, 50
    scaled = (gradients - gradients.mean(0)) * np.sqrt(coefficients)
    dense = n * (n - b) / b / (len(gradients) - 1) * scaled.T.astype(np.float64) @ scaled
    values, vectors = np.linalg.eigh(dense)
    found, ratios = directional_noise.top_directions(gradients, coefficients, n, b, 4)
    np.testing.assert_allclose(ratios, values[::-1][:4], rtol=1e-5)
    np.testing.assert_allclose(found @ found.T, np.eye(4), atol=1e-5)
    # Each direction is R's eigenvector, up to its sign.
    np.testing.assert_allclose(np.abs(np.sum(found * vectors[:, ::-1][:, :4].T, axis=1)), 1.0,
                               atol=1e-4)
    # Along them the ratio is the eigenvalue; a full basis holds the trace.
    np.testing.assert_allclose(directional_noise.ratios_along(gradients, coefficients, n, b, found),
                               ratios, rtol=1e-5)
    np.testing.assert_allclose(
        directional_noise.ratios_along(gradients, coefficients, n, b, np.eye(30)).sum(),
        np.trace(dense), rtol=1e-6)
    # Only directions with a nonzero ratio are returned: 11 of the 15 asked.
    assert len(directional_noise.top_directions(gradients, coefficients, n, b, 15)[1]) == 11
    assert len(directional_noise.top_directions(np.ones((5, 30)), coefficients, n, b)[1]) == 0


@pytest.mark.slow
def test_the_mean_ratio_hides_a_noisy_direction_on_real_data():
    # breast_cancer, the CLI's network (30-100-100-1 here), a short chain:
    # per-example gradients share a few directions, so the noisiest direction
    # carries hundreds of times the per-parameter mean (the README's finding).
    (x, y), _, _ = kb.data.bundled_arrays("breast_cancer")
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(x.shape[1:], 1, hidden=(100, 100))
    model.compile(sampler=samplers.ATMC(seed=0), train_size=len(y),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    model.fit(x, y.astype(np.float32), batch_size=100, epochs=300, verbose=0)
    result = kb.directional_noise.directional_noise_ratios(model, x, y.astype(np.float32), 100,
                                                           max_examples=128)
    assert result["top"][0] > 100 * result["mean"], result
    assert result["concentration"] < 10, result


@pytest.mark.parametrize("arguments, name", [
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=N + 1), "batch_size"),
    (dict(batch_size=2.0), "batch_size"),
    (dict(batch_size=BATCH, num_directions=0), "num_directions"),
    (dict(batch_size=BATCH, max_examples=1), "max_examples"),
])
def test_bad_arguments_name_the_argument(arguments, name):
    model, x, y = _fitted(samplers.SGLD(step_size=1e-3, seed=0), steps_epochs=1)
    with pytest.raises(ValueError, match=name):
        directional_noise.directional_noise_ratios(model, x, y, **arguments)


def test_an_optimizer_without_gradient_noise_state_is_refused():
    for optimizer in (keras.optimizers.SGD(0.01),
                      samplers.SGLD(step_size=1e-3, preconditioner="rmsprop", seed=0)):
        model, x, y = _fitted(optimizer, steps_epochs=1)
        assert not directional_noise.measurable(model.optimizer)
        with pytest.raises(ValueError, match="`sampler` must be a built SG-MCMC sampler.*"
                                             "per-parameter preconditioner"):
            directional_noise.directional_noise_ratios(model, x, y, BATCH)
    model, _, _ = _fitted(samplers.SGLD(step_size=1e-3, seed=0), steps_epochs=1)
    assert directional_noise.measurable(model.optimizer)


@pytest.mark.parametrize("sampler, law", [
    ("sghmc", lambda h, t: h * h / (0.2 * t)),  # r = h²V̂/(2γhT), γ = 0.1/h
    ("atmc", lambda h, t: h * h / (2 * t * -math.log(0.9))),  # r = hV̂/(2TD), D = -log(0.9)/h
])
def test_a_run_stores_each_variables_ratio_coefficient_as_its_sampler_applied_it(
        tmp_path, sampler, law):
    """``gradient_noise.json`` holds ``c_v`` of ``r_v = c_v·mean(V̂_v)`` (what
    ``benchmarks/hmc_reference.py`` scales the per-example gradients by),
    read back as ``r_v/mean(V̂_v)`` after ``V̂``'s last update, which moved it
    by ``(1 − ρ)·(½Δ² − V̂)``: 1 % of ``V̂`` per unit of ``½Δ²/V̂ − 1`` (ρ =
    0.99); 5 % allows a last ``½Δ²`` up to 6·V̂. At an explicit step (no
    warm-up: during one, h grows between the ratio and the stored step)."""
    h, temperature = 0.01, 0.5
    config = kb.runs.RunConfig(num_train=200, num_test=50, batch_size=50, epochs=6,
                               burn_in_epochs=1, sampler=sampler, step_size=h,
                               temperature=temperature, output_dir=str(tmp_path / "run"))
    rows = kb.runs.train(config, verbose=0).gradient_noise
    with open(os.path.join(config.output_dir, "gradient_noise.json")) as handle:
        assert json.load(handle) == rows
    assert len(rows) == 6
    for row in rows:
        expected = law(h * row["step_factor"], temperature)
        assert row["coefficient"] == pytest.approx(expected, rel=0.05, abs=0), row
