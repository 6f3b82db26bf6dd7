"""The metrics take labels in the forms Keras' sparse losses take, with Keras' numbers.

CIFAR-10's ``y`` is ``[N, 1]``, and so are the targets of most binary heads;
boolean labels are binary classes. Until 2026-11-29 ``kb.metrics`` refused
all three (``labels must have the positions' axes [N]``, ``must be integer
class indices; got dtype bool``) where Keras, sklearn and TFP score them.
"""

import keras
import numpy as np
import pytest
import scipy.special
import sklearn.metrics

from keras_bnn import metrics, plots


def _classes(seed, n=200, k=4):
    rng = np.random.default_rng(seed)
    probs = scipy.special.softmax(2.0 * rng.standard_normal((n, k)), axis=1)
    return probs, rng.integers(0, k, size=n)


def test_column_labels_score_as_keras_sparse_losses_and_as_flat_labels(tmp_path):
    probs, labels = _classes(0)
    column = labels[:, None]  # keras.datasets.cifar10's y_test
    keras_nll = float(keras.ops.mean(keras.losses.sparse_categorical_crossentropy(
        column, probs.astype("float32"))))
    accuracy = keras.metrics.SparseCategoricalAccuracy()
    accuracy.update_state(column, probs.astype("float32"))
    scores = metrics.evaluate_probs(probs, column)
    assert scores == metrics.evaluate_probs(probs, labels)
    assert scores["nll"] == pytest.approx(keras_nll, rel=1e-5)  # float32 Keras
    assert scores["accuracy"] == pytest.approx(float(accuracy.result()), abs=1e-7)
    assert scores["nll"] == pytest.approx(sklearn.metrics.log_loss(labels, probs), rel=1e-9)
    members = np.stack([probs, probs[::-1]])
    assert metrics.evaluate_members(members, column) == metrics.evaluate_members(members, labels)
    assert plots.reliability_diagram(probs, column, tmp_path / "r.png")


def test_binary_column_and_boolean_labels_are_sklearn_s_binary_scores():
    probs, labels = _classes(1, k=2)
    p = probs[:, 1:]  # a sigmoid head's [N, 1] = p(y=1)
    for form in (labels[:, None], labels.astype(bool), labels[:, None].astype(bool)):
        assert metrics.brier(p, form) == pytest.approx(
            sklearn.metrics.brier_score_loss(labels, p[:, 0]), rel=1e-12)
        assert metrics.nll(p, form) == pytest.approx(
            sklearn.metrics.log_loss(labels, p[:, 0]), rel=1e-9)
        assert metrics.evaluate_probs(p, form) == metrics.evaluate_probs(p, labels)


def test_per_position_labels_with_a_trailing_axis_and_a_mask():
    probs, labels = _classes(2, n=60, k=3)
    probs, labels = probs.reshape(6, 10, 3), labels.reshape(6, 10)
    mask = np.arange(10)[None, :] < np.array([3, 10, 5, 1, 7, 2])[:, None]
    assert metrics.nll(probs, labels[..., None], mask=mask) == metrics.nll(probs[mask],
                                                                          labels[mask])


def test_one_hot_labels_are_named_as_such():
    probs, labels = _classes(3)
    with pytest.raises(ValueError, match=r"`labels` .*not one-hot.*argmax"):
        metrics.accuracy(probs, np.eye(4)[labels])
