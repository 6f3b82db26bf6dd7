"""``PosteriorEnsemble(model, weight_sets)`` without ``likelihood`` reads it as
``from_store`` does: from the loss the model was compiled with.

Until 2026-11-30 it was ``"categorical"`` for every one-output model: a member
compiled with ``GaussianNLL`` on a ``[mean, log variance]`` head was averaged
as two logits (no error), and a one-logit Bernoulli head was refused although
the user had passed no likelihood.
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import weight_sets


def _member(units, loss=None):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
    if loss is not None:
        model.compile(optimizer="sgd", loss=loss)
    return model


def test_a_compiled_gaussian_head_is_averaged_as_a_gaussian():
    model = _member(2, kb.likelihoods.GaussianNLL())
    sets = weight_sets(model, 3)
    x = np.random.default_rng(0).normal(size=(6, 4)).astype("float32")
    inferred = kb.PosteriorEnsemble(model, sets)
    assert inferred.likelihood == "gaussian"
    explicit = kb.PosteriorEnsemble(model, sets, likelihood="gaussian")
    np.testing.assert_array_equal(inferred.predict(x, verbose=0), explicit.predict(x, verbose=0))


@pytest.mark.parametrize("units, likelihood", [(1, "bernoulli"), (3, "categorical")])
def test_without_a_loss_the_head_width_decides(units, likelihood):
    model = _member(units)
    assert kb.PosteriorEnsemble(model, weight_sets(model, 2)).likelihood == likelihood


def test_a_loss_that_names_no_likelihood_asks_for_one():
    model = _member(2, "mse")
    with pytest.raises(ValueError, match="`likelihood` must be given: the model was compiled "
                                         "with loss 'mse'"):
        kb.PosteriorEnsemble(model, weight_sets(model, 2))
    assert kb.PosteriorEnsemble(model, weight_sets(model, 2),
                                likelihood="gaussian").likelihood == "gaussian"
