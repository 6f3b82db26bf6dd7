"""kb.prior_predictive of a Bernoulli head, a per-position head and a Gaussian one.

Each draw is re-created by hand: the weights' priors sampled in the order of
``priors.prior_variables`` from the draw's seed generator, then the forward
pass in numpy. Tolerances: float32 forward passes (rtol 1e-5 on means of
probabilities in [0, 1]).
"""

import importlib

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import layers, priors

prior_predictive_module = importlib.import_module("keras_bnn.predictive_checks")
RNG = np.random.default_rng(34)
NORMAL = priors.Normal(0.0, 1.0)


def _drawn(model, seed, draw):
    """Draw ``draw``'s weights as numpy, in the order of priors.prior_variables."""
    seeds = prior_predictive_module._draw_seeds(seed, draw)
    return [keras.ops.convert_to_numpy(prior.sample(tuple(variable.shape), seed=seeds))
            for variable, prior in priors.prior_variables(model)]


def _bernoulli_model(activation=None):
    inputs = keras.Input((3,))
    return keras.Model(inputs, layers.Dense(1, activation=activation, kernel_prior=NORMAL,
                                            bias_prior=NORMAL)(inputs))


def _tagger():
    # A padded tagger: tokens 1..6, 0 = padding; the embedding (no prior) keeps its values.
    tokens = keras.Input((5,), dtype="int32")
    embedded = keras.layers.Embedding(7, 2, mask_zero=True)(tokens)
    model = keras.Model(tokens, layers.Dense(3, kernel_prior=NORMAL,
                                             bias_prior=NORMAL)(embedded))
    x = np.array([[1, 2, 3, 0, 0], [4, 5, 6, 1, 0], [2, 0, 0, 0, 0]], "int32")
    return model, x


def test_a_bernoulli_head_gives_the_two_outcomes_by_hand():
    model = _bernoulli_model()
    x = RNG.normal(size=(7, 3)).astype("float32")
    predictive = kb.prior_predictive(model, x, num_samples=3, seed=4, batch_size=3)
    assert predictive.shape == (3, 2)
    for draw in range(3):
        kernel, bias = _drawn(model, 4, draw)
        p = (1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ kernel + bias)))).mean()
        np.testing.assert_allclose(predictive[draw], [1.0 - p, p], rtol=1e-5)
        top = max(p, 1.0 - p)  # the top-class probability and entropy (nats) it gives
        entropy = -(p * np.log(p) + (1.0 - p) * np.log(1.0 - p))
        np.testing.assert_allclose(predictive[draw].max(), top, rtol=1e-5)
        np.testing.assert_allclose(-(predictive[draw] * np.log(predictive[draw])).sum(),
                                   entropy, rtol=1e-5)
    np.testing.assert_array_equal(kb.prior_predictive(model, x, 3, seed=4, batch_size=3),
                                  predictive)
    assert not np.allclose(kb.prior_predictive(model, x, 3, seed=5), predictive)


def test_a_per_position_head_averages_over_the_unmasked_positions():
    model, x = _tagger()
    embedding = keras.ops.convert_to_numpy(model.layers[1].embeddings).astype(np.float64)
    kernel, bias = _drawn(model, 1, 0)
    logits = embedding[x] @ kernel + bias  # [N, T, K]
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)

    by_keras_mask = kb.prior_predictive(model, x, num_samples=2, seed=1, batch_size=2)
    np.testing.assert_allclose(by_keras_mask[0], probabilities[x != 0].mean(0), rtol=1e-5)
    by_mask = kb.prior_predictive(model, x, 2, seed=1, batch_size=2, mask=x != 0)
    np.testing.assert_allclose(by_mask, by_keras_mask, rtol=1e-6)
    first = np.zeros(x.shape, bool)
    first[:, 0] = True  # the first token of each sentence only
    np.testing.assert_allclose(kb.prior_predictive(model, x, 1, seed=1, mask=first)[0],
                               probabilities[:, 0].mean(0), rtol=1e-5)
    np.testing.assert_allclose(by_keras_mask.sum(axis=1), 1.0, rtol=1e-6)


def test_a_per_position_bernoulli_head_without_a_mask_averages_every_position():
    inputs = keras.Input((4, 2))
    model = keras.Model(inputs, layers.Dense(1, kernel_prior=NORMAL,
                                             bias_prior=NORMAL)(inputs))
    x = RNG.normal(size=(3, 4, 2)).astype("float32")
    kernel, bias = _drawn(model, 0, 0)
    p = (1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ kernel + bias)))).mean()
    np.testing.assert_allclose(kb.prior_predictive(model, x, 1)[0], [1.0 - p, p], rtol=1e-5)


def test_a_gaussian_head_is_refused_by_name():
    inputs = keras.Input((3,))
    model = kb.BayesianModel(inputs, layers.Dense(2)(inputs))  # [mean, log variance]
    model.compile(loss=kb.likelihoods.GaussianNLL(), train_size=8)
    x = np.ones((4, 3), "float32")
    with pytest.raises(ValueError, match=r"`likelihood` must be 'categorical' or 'bernoulli'"
                       r".*got 'gaussian' \(from model"):
        kb.prior_predictive(model, x, 1)
    assert kb.prior_predictive(model, x, 1, likelihood="categorical").shape == (1, 2)


@pytest.mark.parametrize("kwargs, match", [
    ({"likelihood": "poisson"}, r"`likelihood` must be one of 'categorical', 'bernoulli'"),
    ({"likelihood": "gaussian"}, r"`likelihood` must be 'categorical' or 'bernoulli'"),
    ({"likelihood": "categorical"}, r"`likelihood` must be 'bernoulli' for a model with 1"),
    ({"mask": np.ones((5, 5), bool)}, r"`mask` must have the output's positions' shape \(N"),
    ({"mask": np.ones((3, 4), bool)}, r"positions' shape \(N, \.\.\.\): \(3, 5\); got "
                                      r"shape \(3, 4\)"),
    ({"mask": np.full((3, 5), 2)}, r"`mask` must be booleans"),
    ({"mask": np.zeros((3, 5), bool)}, r"`mask` must select at least one position"),
])
def test_bad_arguments_are_named(kwargs, match):
    model, x = _tagger()
    if kwargs.get("likelihood") == "categorical":
        model, x = _bernoulli_model(), np.ones((3, 3), "float32")
    with pytest.raises(ValueError, match=match):
        kb.prior_predictive(model, x, 1, **kwargs)


def test_a_sigmoid_head_is_refused():
    with pytest.raises(ValueError, match=r"`model` must output logits, not probabilities"):
        kb.prior_predictive(_bernoulli_model("sigmoid"), np.ones((3, 3), "float32"), 1)
