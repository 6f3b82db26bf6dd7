"""A dataset's weights by output, checked output by output after the first epoch.

``U(θ) = n·(1/b)·Σ_batch Σ_k w_ik·ℓ_ik − log p(θ)``: each output's weights
scale its own term, so each must average 1. Array weights by output were checked
one by one before training; a ``tf.data.Dataset`` yielding ``(x, {out: y}, {out: w})``
was checked on the mean over every output's weights: means 0.5 and 1.5 on two
heads read 1, and no warning was issued.
"""

import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import tagged_sequences, three_class_rows, two_head_model
from keras_bnn.models import weight_mean
from test_per_timestep_loss import tagger, train_size_warnings

N = 20
X, Y = three_class_rows(N)
BIN = (X[:, 0] > 0).astype("float32")
#: Weights of mean 1 (exactly, in float32's round-off).
W = np.linspace(0.5, 1.5, N).astype("float32")


def _by_output(as_dict, cls, bin_):
    return {"cls": cls, "bin": bin_} if as_dict else (cls, bin_)


def _warnings_of_fit(as_dict, weights, category=kb.TrainSizeWarning, **kwargs):
    """The ``category`` warnings of one epoch on a dataset of ``(x, y, weights)`` by output."""
    rows = (X, _by_output(as_dict, Y, BIN), weights)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        two_head_model(as_dict, N).fit(tf.data.Dataset.from_tensor_slices(rows).batch(5),
                                     epochs=1, verbose=0, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, category)]


@pytest.mark.parametrize("as_dict, cls_mean, bin_mean, named", [
    pytest.param(True, 0.5, 1.5, r"sample_weight\['(cls|bin)'\] in fit's data has mean (0.5|1.5)",
                 id="dict"),
    pytest.param(False, 1.0, 1.5, r"sample_weight\[1\] in fit's data has mean 1.5",
                 id="tuple")])
def test_each_outputs_dataset_weights_are_checked_on_their_own(as_dict, cls_mean, bin_mean,
                                                               named):
    """Means 0.5 and 1.5 on the two heads (1 over both: no warning before) warn, naming
    an output and its mean; 1 on one head and 1.5 on the other
    names the second, with its own mean (before: the pooled 1.25, no output named)."""
    messages = _warnings_of_fit(as_dict, _by_output(as_dict, cls_mean * W, bin_mean * W))
    assert len(messages) == 1, messages
    assert re.search(f"the {named} over the first epoch's 20 weights", messages[0]), messages


@pytest.mark.parametrize("category", [kb.TrainSizeWarning, kb.ValidationWeightWarning])
def test_a_validation_datasets_weights_are_checked_output_by_output(category):
    """Training weights of mean 1 on both heads: no TrainSizeWarning (validation's are
    not the training data's, and the train step does not count them); validation's
    of mean 3 on one head make val_nll read 3 times its NLL there: a
    ValidationWeightWarning naming it (before: only array validation weights were
    checked, a dataset's never)."""
    heavy = _by_output(True, W, 3 * W)
    validation = tf.data.Dataset.from_tensor_slices(
        (X, _by_output(True, Y, BIN), heavy)).batch(5)
    messages = _warnings_of_fit(True, _by_output(True, W, W), category,
                                validation_data=validation)
    if category is kb.TrainSizeWarning:
        assert messages == []
    else:
        assert len(messages) == 1 and ("fit(validation_data)'s sample_weight['bin'] has mean 3 "
                                       "over the first validation's 20 weights") in messages[0]


def test_the_host_and_the_step_slot_the_weights_alike():
    """One array (shared by every output) is counted whole in the first slot; one per
    output, each in its own (at the output's path: Keras' order, a dict's keys sorted)."""
    paths = [("bin",), ("cls",)]
    slots = weight_mean.weight_slots({"cls": W, "bin": 2 * W}, paths)
    assert [[path for path, _ in leaves] for leaves in slots] == [[("bin",)], [("cls",)]]
    assert [len(leaves) for leaves in weight_mean.weight_slots(W, paths)] == [1, 0]
    assert weight_mean.weight_names((W, None), [(0,), (1,)]) == [
        "the sample_weight[0] in fit's data", "the sample_weight (output 1) in fit's data"]


def test_a_datasets_timestep_weights_are_averaged_over_the_terms_the_loss_counts():
    """``[N, T]`` weights yielded by a dataset for a masked per-timestep loss: Keras'
    mean is ``Σ m·w·ℓ / Σ m``, so the weights' mean that scales the data is over the
    66 unmasked tokens (as the array check's, since 2026-11-29). The step counted
    every position: weights 1 at the tokens and 0 at the 30 padding positions warned
    of mean 0.6875 over 96 weights; weights 2 at the tokens read 1.688, not 2."""
    x, tags = tagged_sequences()
    real = x != 0

    def fit(weights):
        data = tf.data.Dataset.from_tensor_slices((x, tags, weights.astype("float32"))).batch(8)
        return train_size_warnings(tagger("categorical", 66), data, epochs=1)

    assert fit(np.where(real, 1.0, 0.0)) == []
    messages = fit(np.where(real, 2.0, 1.0))
    assert len(messages) == 1
    assert "has mean 2 over the first epoch's 66 weights" in messages[0], messages
