"""Priors as a user meets them: networks that overflow, a frozen trunk under a sampled head."""

import importlib

import keras
import numpy as np
import pytest

from keras_bnn import BayesianModel, layers, models, priors
from keras_bnn.predictive_checks import prior_predictive

# The module, not the function that keras_bnn/__init__ re-exports under its name.
prior_predictive_module = importlib.import_module("keras_bnn.predictive_checks")


def _wide_mlp():
    # Kernels N(1000, 0.001²): on x = ones(4) a hidden unit is ≈ 4·1000 (+ a
    # N(0, 1) bias), a logit ≈ 8·4000·1000 = 3.2e7 (+ its bias): finite in
    # float32, above float16's largest value 65 504, so Inf there (all of
    # them, whatever the draw), and softmax of Inf logits is NaN.
    return models.mlp((4,), 3, hidden=(8,), kernel_prior=priors.Normal(1000.0, 0.001))


def test_a_draw_whose_logits_overflow_is_refused_not_returned_as_nan(policy):
    x = np.ones((5, 4), "float32")
    control = prior_predictive(_wide_mlp(), x, num_samples=2, seed=0)
    np.testing.assert_allclose(control.sum(axis=1), 1.0, rtol=1e-6)  # float32: finite

    policy("mixed_float16")
    model = _wide_mlp()
    before = [keras.ops.convert_to_numpy(v).copy() for v in model.weights]
    with pytest.raises(ValueError, match=r"draw 0 .*NaN or Inf logits.*float16"):
        prior_predictive(model, x, num_samples=2, seed=0)
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, keras.ops.convert_to_numpy(variable))


def _frozen_trunk_model():
    # A Bayesian last layer on a trunk built from kb.layers: the trunk's
    # weights carry the layer's default priors, then are frozen.
    inputs = keras.Input((4,))
    trunk = layers.Dense(8, activation="relu", name="trunk")
    head = layers.Dense(3, name="head")
    model = BayesianModel(inputs, head(trunk(inputs)))
    trunk.trainable = False
    return model, trunk, head


def test_prior_predictive_leaves_a_frozen_trunk_as_it_is():
    model, trunk, _ = _frozen_trunk_model()
    x = np.random.default_rng(0).normal(size=(6, 4)).astype("float32")
    trunk_values = [keras.ops.convert_to_numpy(v).copy() for v in trunk.weights]
    seen = []
    original = prior_predictive_module._mean_probabilities

    def spy(*args):  # the trunk's weights while the draws are in place
        seen.append([keras.ops.convert_to_numpy(v).copy() for v in trunk.weights])
        return original(*args)

    prior_predictive_module._mean_probabilities = spy
    try:
        prior_predictive(model, x, num_samples=2, seed=0)
    finally:
        prior_predictive_module._mean_probabilities = original
    assert len(seen) == 2
    for values in seen:
        for old, new in zip(trunk_values, values):
            np.testing.assert_array_equal(old, new)


def test_log_prior_is_the_potentials_prior_term_with_a_frozen_trunk():
    model, _, head = _frozen_trunk_model()
    # The potential's prior term: Keras' model.losses, which hold the head's
    # two priors only (a frozen weight's regularizer is left out).
    assert len(model.losses) == 2
    from_losses = -float(sum(keras.ops.convert_to_numpy(loss) for loss in model.losses))
    expected = sum(float(v.regularizer.log_prob(v.value)) for v in head.weights)
    np.testing.assert_allclose(from_losses, expected, rtol=1e-6)
    np.testing.assert_allclose(float(priors.log_prior(model)), expected, rtol=1e-6)


def test_prior_predictive_refuses_a_model_of_two_heads_by_name_and_takes_one():
    inputs = keras.Input((4,))
    hidden = layers.Dense(8, activation="relu")(inputs)
    model = BayesianModel(inputs, [layers.Dense(3)(hidden), layers.Dense(2)(hidden)])
    x = np.ones((5, 4), "float32")
    with pytest.raises(ValueError, match=r"one output; `model` has 2\. Check one head"):
        prior_predictive(model, x, num_samples=1)
    head = keras.Model(model.input, model.outputs[1])  # as the message says
    assert prior_predictive(head, x, num_samples=2).shape == (2, 2)
    one = BayesianModel(inputs, {"labels": model.outputs[0]})  # one output, in a dict
    np.testing.assert_allclose(prior_predictive(one, x, num_samples=2).sum(axis=1), 1.0,
                               rtol=1e-6)
