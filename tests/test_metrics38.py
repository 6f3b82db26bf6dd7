"""Metrics against independent references: the defects found in session 38's sweep."""

import ml_dtypes
import numpy as np
import pytest
import scipy.special
import sklearn.metrics

from keras_bnn import metrics, ood

BFLOAT16 = ml_dtypes.bfloat16


def _bfloat16_softmax(logits):
    """softmax and log-softmax as XLA computes them in bfloat16 (JAX, a Keras layer under
    ``mixed_bfloat16``): exp, log and division rounded to bfloat16, the sum accumulated in
    float32 and rounded."""
    z = logits.astype(BFLOAT16)
    z = z - z.max(axis=-1, keepdims=True)
    exp = np.exp(z)
    total = exp.astype(np.float32).sum(axis=-1, keepdims=True).astype(BFLOAT16)
    return exp / total, z - np.log(total)


def test_bfloat16_softmax_rows_are_scored_as_probabilities():
    """A bfloat16 softmax's rows sum to 1 only within its rounding (8 significant
    bits): measured up to 5.9e-3 off under JAX (``keras.layers.Dense(K,
    activation="softmax")`` under ``mixed_bfloat16``, K = 2..1000), its log-softmax's
    log-sum-exp up to 0.022 (TensorFlow, K = 1000). Before, every metric refused them
    as logits (``ValueError: `probs` must be rows of probabilities that sum to 1
    within 0.005 (not logits); got a row sum off by 0.005371``); now bfloat16 input
    is checked within 2⁻⁵ (4 of its eps) and scored as the float64 of its values,
    as sklearn scores them."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2000, 2)) * 3
    probs, log_probs = _bfloat16_softmax(logits)
    labels = rng.integers(0, 2, len(logits))
    exact = probs.astype(np.float64)
    assert np.max(np.abs(exact.sum(axis=-1) - 1)) > 5e-3  # what was refused
    scores = metrics.evaluate_probs(probs, labels)
    assert scores["nll"] == pytest.approx(
        -np.mean(np.log(exact[np.arange(len(labels)), labels])), rel=1e-12)
    assert scores["brier"] == pytest.approx(
        np.mean(np.sum((exact - np.eye(2)[labels]) ** 2, axis=-1)), rel=1e-12)
    assert scores["accuracy"] == sklearn.metrics.accuracy_score(labels, exact.argmax(-1))
    assert metrics.nll(log_probs, labels, log_probs=True) == pytest.approx(
        -np.mean(log_probs.astype(np.float64)[np.arange(len(labels)), labels]), rel=1e-12)
    members = np.stack([probs, probs])
    assert metrics.evaluate_members(members, labels)["ensemble"]["nll"] == pytest.approx(
        scores["nll"], rel=1e-12)
    assert np.all(ood.uncertainty_scores(members)["mutual_information"] == 0)
    tagged = probs.reshape(1, 200, 10, 2)  # one member, a tagger's [S, N, T, K]
    auroc = ood.ood_auroc(tagged[:, :100], tagged[:, 100:], per="example")
    entropy = ood.uncertainty_scores(tagged)["entropy"].mean(axis=-1)
    assert auroc["entropy"] == sklearn.metrics.roc_auc_score(
        np.arange(200) >= 100, entropy)
    wide = rng.normal(size=(500, 1000)) * 3  # the log-softmax of many classes
    _, wide_log_probs = _bfloat16_softmax(wide)
    lse = scipy.special.logsumexp(wide_log_probs.astype(np.float64), axis=-1)
    assert 5e-3 < np.max(np.abs(lse)) < 2.0 ** -5
    metrics.predictive_log_probs(np.stack([wide_log_probs, wide_log_probs]))


def test_float32_rows_keep_the_float32_tolerance():
    """Regression guard: the wider bfloat16 tolerance is the dtype's; a float32 (or
    float64) row off by 6e-3 is still refused, naming ``probs``."""
    with pytest.raises(ValueError, match="`probs`.*within 0.005"):
        metrics.nll(np.array([[0.5, 0.506]], np.float32), [0])
    with pytest.raises(ValueError, match="`probs`.*within 0.03125"):
        metrics.nll(np.array([[0.5, 0.54]], BFLOAT16), [0])


def test_auroc_ranks_bfloat16_scores_as_sklearn():
    """Scores of a ``mixed_bfloat16`` model (its entropies, or a ``keras.ops`` score of
    its outputs) are ranked as their float64 values, ties counted half, as sklearn's
    ``roc_auc_score``. Before, scipy's ``rankdata`` refused the dtype: ``TypeError:
    dtype argument must be a NumPy dtype, but it is a <class 'numpy.dtype[bfloat16]'>``."""
    rng = np.random.default_rng(1)
    inside = rng.uniform(size=300).astype(BFLOAT16)  # 8 significant bits: many ties
    outside = (rng.uniform(size=200) + 0.2).astype(BFLOAT16)
    expected = sklearn.metrics.roc_auc_score(
        np.r_[np.zeros(300), np.ones(200)], np.r_[inside, outside].astype(np.float64))
    assert ood.auroc(inside, outside) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="`in_scores`"):
        ood.auroc(["a"], [1.0])
