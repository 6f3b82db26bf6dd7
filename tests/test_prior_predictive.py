"""Tests of keras_bnn.predictive_checks (kb.prior_predictive)."""

import importlib

import keras
import numpy as np
import pytest

from keras_bnn import layers, models, priors
from keras_bnn.predictive_checks import prior_predictive

# The module, not the function that keras_bnn/__init__ re-exports under its name.
prior_predictive_module = importlib.import_module("keras_bnn.predictive_checks")
RNG = np.random.default_rng(0)


def _weights(model):
    return [keras.ops.convert_to_numpy(v).copy() for v in model.weights]


@pytest.mark.slow  # 20-40 s (a ResNet-20 on 32x32 images); the others here are the quick checks
def test_resnet20_frn_with_unit_normal_prior_collapses_onto_one_class():
    # Wenzel et al. (2020), sec. 5: under θ ~ N(0, I) each ResNet-20 drawn
    # from the prior maps (almost) all images to one class.
    # m_s = max_c E_x[p(c|x, θ_s)] is estimated from N = 64 inputs; its Monte
    # Carlo standard error is at most 0.5/√64 = 0.0625 (a mean of [0, 1]
    # values), so an estimate above 0.9 means a true mass above
    # 0.9 - 4·0.0625 = 0.65 > 1/2 on a single class even at 4 standard errors.
    # The median over S = 10 draws being above 0.9 means most draws collapse.
    keras.utils.set_random_seed(0)  # a fixed initialisation for the control
    model = models.resnet20_frn(
        (32, 32, 3), 10, kernel_prior=priors.Normal(0.0, 1.0), bias_prior=priors.Normal(0.0, 1.0)
    )
    x = RNG.normal(size=(64, 32, 32, 3)).astype("float32")
    before = _weights(model)

    predictive = prior_predictive(model, x, num_samples=10, seed=0)

    assert predictive.shape == (10, 10)
    np.testing.assert_allclose(predictive.sum(axis=1), 1.0, rtol=1e-6)
    assert np.median(predictive.max(axis=1)) > 0.9
    # Control: the network at its initial (He-initialised) weights is below
    # the threshold, so the assertion above can only pass through the draws.
    initial = keras.ops.convert_to_numpy(keras.ops.softmax(model(x))).mean(axis=0)
    assert initial.max() < 0.9
    for old, new in zip(before, _weights(model)):
        np.testing.assert_array_equal(old, new)


def _small_model():
    return models.mlp((4,), 3, hidden=(8,))


def test_deterministic_in_seed():
    model = _small_model()
    x = RNG.normal(size=(16, 4)).astype("float32")
    first = prior_predictive(model, x, num_samples=3, seed=5, batch_size=5)
    np.testing.assert_array_equal(prior_predictive(model, x, num_samples=3, seed=5, batch_size=5),
                                  first)
    # Another batch size: the same draws; the forward pass's float rounding
    # may differ with the batch's shape (oneDNN's blocking: 1e-8 measured).
    np.testing.assert_allclose(prior_predictive(model, x, num_samples=3, seed=5), first,
                               rtol=1e-6)
    # Draw s does not depend on how many draws are taken.
    np.testing.assert_allclose(prior_predictive(model, x, num_samples=1, seed=5), first[:1],
                               rtol=1e-6)
    assert not np.allclose(prior_predictive(model, x, num_samples=3, seed=6), first)
    assert not np.allclose(first[0], first[1])


def test_matches_a_manual_average_over_batches():
    # Batching must not change the average: batch sizes 1, 5 and 16 agree.
    model = _small_model()
    x = RNG.normal(size=(16, 4)).astype("float32")
    results = [prior_predictive(model, x, 2, seed=1, batch_size=b) for b in (1, 5, 16)]
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], rtol=1e-6)


def test_weights_without_prior_are_left_alone():
    # Prior-aware hidden layer, then a plain Keras head with zero kernel and a
    # fixed bias: whatever the hidden layer draws, p(y|x) = softmax(bias).
    inputs = keras.Input((4,))
    hidden = layers.Dense(5, activation="tanh")(inputs)
    head = keras.layers.Dense(3, kernel_initializer="zeros")
    model = keras.Model(inputs, head(hidden))
    bias = np.array([1.0, -0.5, 0.25], "float32")
    head.bias.assign(bias)
    predictive = prior_predictive(model, RNG.normal(size=(8, 4)).astype("float32"), 4, seed=0)
    expected = np.exp(bias) / np.exp(bias).sum()
    np.testing.assert_allclose(predictive, np.tile(expected, (4, 1)), rtol=1e-6)


def test_weight_norm_layer_uses_the_effective_weight_of_sampled_direction_and_scale():
    # Re-create draw 0 by hand: φ_d ~ UnitNormDirection and φ_s ~ GroupLaplace
    # from the draw's seed generator (in the order of model.weights), then
    # θ = φ_s·φ_d/‖φ_d‖ and E_x softmax(x·θ).
    inputs = keras.Input((3,))
    layer = layers.WeightNormDense(4, use_bias=False)
    model = keras.Model(inputs, layer(inputs))
    x = RNG.normal(size=(6, 3)).astype("float32")
    draws = prior_predictive(model, x, 2, seed=2)

    seeds = prior_predictive_module._draw_seeds(2, 0)
    direction = keras.ops.convert_to_numpy(layer.direction_prior.sample((3, 4), seed=seeds))
    scale = keras.ops.convert_to_numpy(layer.scale_prior.sample((4,), seed=seeds))
    logits = x @ (scale * direction / np.linalg.norm(direction, axis=0))
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(draws[0], probabilities.mean(axis=0), rtol=1e-5)
    assert not np.allclose(draws[0], draws[1])


def test_weights_restored_when_the_forward_pass_fails():
    model = _small_model()
    before = _weights(model)
    with pytest.raises(Exception):
        prior_predictive(model, np.zeros((4, 7), "float32"), num_samples=2)  # wrong width
    for old, new in zip(before, _weights(model)):
        np.testing.assert_array_equal(old, new)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": 2.5}, "num_samples"),
        ({"num_samples": 2, "batch_size": 0}, "batch_size"),
        # Found by a user of "Checking a prior": numpy's error, or seed 1.5 drawn as 1.
        ({"num_samples": 2, "seed": -1}, "prior_predictive: `seed` must be an int"),
        ({"num_samples": 2, "seed": 1.5}, "prior_predictive: `seed` must be an int"),
        ({"num_samples": 2, "seed": None}, "prior_predictive: `seed` must be an int"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        prior_predictive(_small_model(), np.zeros((4, 4), "float32"), **kwargs)


def test_model_without_priors_and_empty_inputs_are_rejected():
    inputs = keras.Input((4,))
    plain = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(ValueError, match=r"no weight with a keras_bnn prior: .*kb\.bayesian"):
        prior_predictive(plain, np.zeros((4, 4), "float32"), 1)
    with pytest.raises(ValueError, match="at least one example"):
        prior_predictive(_small_model(), np.zeros((0, 4), "float32"), 1)
    with pytest.raises(ValueError, match="`x` must be an array"):  # was len() of a float
        prior_predictive(_small_model(), [0.0, 1.0, 2.0, 3.0], 1)


def test_a_model_with_one_output_is_a_bernoulli_head_not_a_softmax_of_one():
    """softmax over one logit is 1 for every draw: it returned [[1.], [1.]]."""
    one = models.mlp((4,), 1, hidden=(8,))
    with pytest.raises(ValueError, match=r"`likelihood` must be 'bernoulli' for a model with 1"):
        prior_predictive(one, np.zeros((4, 4), "float32"), 2, likelihood="categorical")
    assert prior_predictive(one, np.zeros((4, 4), "float32"), 2).shape == (2, 2)
