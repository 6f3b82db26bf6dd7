"""Priors as a user meets them: the prior predictive of networks that overflow."""

import keras
import numpy as np
import pytest

from keras_bnn import models, priors
from keras_bnn.predictive_checks import prior_predictive


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
