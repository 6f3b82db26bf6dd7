"""``sample_weight`` of the metrics: sklearn's weighted scores, and bad weights refused.

Every weighted metric is a weighted mean Σ w_i x_i / Σ w_i, so an integer
weight must count as that many copies of the example; the classification
scores are checked against sklearn's ``log_loss``, ``accuracy_score`` and
``brier_score_loss`` (float64 throughout: to 1e-12).
"""

import numpy as np
import pytest
import sklearn.metrics as skm

from keras_bnn import metrics

N, K = 300, 4
TOL = 1e-12  # float64 sums of a few hundred terms


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.full(K, 0.7), N)
    labels = rng.integers(0, K, N)
    return probs, labels, rng.uniform(0.0, 3.0, N), rng.integers(0, 4, N)


def test_classification_metrics_are_sklearns_weighted_scores(data):
    probs, labels, w, _ = data
    assert metrics.nll(probs, labels, sample_weight=w) == pytest.approx(
        skm.log_loss(labels, probs, sample_weight=w, labels=range(K)), rel=TOL)
    assert metrics.accuracy(probs, labels, sample_weight=w) == pytest.approx(
        skm.accuracy_score(labels, probs.argmax(axis=1), sample_weight=w), rel=TOL)
    assert metrics.brier(probs, labels, sample_weight=w) == pytest.approx(
        skm.brier_score_loss(labels, probs, sample_weight=w, labels=range(K)), rel=TOL)
    binary, outcome = probs[:, :1], (labels == 0).astype(int)
    assert metrics.brier(binary, outcome, sample_weight=w) == pytest.approx(
        skm.brier_score_loss(outcome, binary[:, 0], sample_weight=w), rel=TOL)
    assert metrics.nll(binary, outcome, sample_weight=w) == pytest.approx(
        skm.log_loss(outcome, binary[:, 0], sample_weight=w), rel=TOL)
    # The weights matter: the unweighted scores differ.
    assert abs(metrics.nll(probs, labels) - metrics.nll(probs, labels, sample_weight=w)) > 1e-3


def test_integer_weights_count_as_copies(data):
    probs, labels, _, copies = data
    repeated = np.repeat(probs, copies, axis=0), np.repeat(labels, copies)
    weighted = metrics.evaluate_probs(probs, labels, sample_weight=copies)
    assert weighted == pytest.approx(metrics.evaluate_probs(*repeated), rel=TOL)
    assert metrics.evaluate_probs(probs, labels, sample_weight=copies[:, None]) == weighted
    stats = metrics.reliability(probs, labels, sample_weight=copies)
    assert np.array_equal(stats["weight"], metrics.reliability(*repeated)["count"])


def test_weighted_ece_is_the_weighted_bin_gap(data):
    """ece = Σ_b (W_b/W)|acc_b − conf_b|, the bins' weighted means, computed directly."""
    probs, labels, w, _ = data
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == labels
    bins = np.minimum((confidence * 15).astype(int), 14)
    gap = sum(abs(np.average(correct[bins == b], weights=w[bins == b])
                  - np.average(confidence[bins == b], weights=w[bins == b])) * w[bins == b].sum()
              for b in set(bins))
    assert metrics.ece(probs, labels, sample_weight=w) == pytest.approx(gap / w.sum(), rel=1e-9)
    assert metrics.ece(probs, labels, sample_weight=np.full(N, 2.5)) == pytest.approx(
        metrics.ece(probs, labels), rel=TOL)


def test_members_and_positions_take_weights(data):
    """Members' scores are each member's weighted score; per-position weights [N] are
    shared by an example's positions, the same as the flattened rows' repeated weights."""
    probs, labels, w, _ = data
    members = np.stack([probs, probs[::-1]])
    scored = metrics.evaluate_members(members, labels, sample_weight=w)
    assert scored["members"][1] == pytest.approx(
        metrics.evaluate_probs(probs[::-1], labels, sample_weight=w), rel=TOL)
    assert scored["ensemble"] == pytest.approx(
        metrics.evaluate_probs(members.mean(axis=0), labels, sample_weight=w), rel=TOL)
    tokens, t_labels = probs.reshape(60, 5, K), labels.reshape(60, 5)
    mask = np.arange(5) < np.arange(60)[:, None] % 5 + 1
    per_example = w[:60]
    flat_weights = np.broadcast_to(per_example[:, None], (60, 5))[mask]
    assert metrics.nll(tokens, t_labels, mask=mask, sample_weight=per_example) == pytest.approx(
        metrics.nll(tokens[mask], t_labels[mask], sample_weight=flat_weights), rel=TOL)


def test_gaussian_metrics_take_weights(data):
    _, _, w, copies = data
    rng = np.random.default_rng(1)
    mean, variance = rng.normal(size=(3, N, 2)), rng.uniform(0.3, 2.0, (3, N, 2))
    targets = rng.normal(size=(N, 2))
    scored = metrics.evaluate_gaussian(mean[0], variance[0], targets, sample_weight=w)
    assert scored["rmse"] == pytest.approx(
        skm.mean_squared_error(targets, mean[0], sample_weight=w) ** 0.5, rel=TOL)
    assert scored["nll"] == pytest.approx(np.average(
        metrics.gaussian_nll_per_example(mean[0], variance[0], targets), weights=w), rel=TOL)
    repeat = lambda a, axis=0: np.repeat(a, copies, axis=axis)  # noqa: E731
    weighted = metrics.evaluate_gaussian_members(mean, variance, targets, sample_weight=copies)
    copied = metrics.evaluate_gaussian_members(repeat(mean, 1), repeat(variance, 1),
                                               repeat(targets))
    assert weighted["ensemble"] == pytest.approx(copied["ensemble"], rel=TOL)
    assert weighted["members"][2] == pytest.approx(copied["members"][2], rel=TOL)


@pytest.mark.parametrize("bad, says", [
    (np.ones(N - 1), "have shape"), (-np.ones(N), "be >= 0"),
    (np.where(np.arange(N) == 7, np.nan, 1.0), "be finite"),
    (np.zeros(N), "have a positive sum"), ("heavy", "be an array of numbers")])
def test_bad_weights_are_refused_naming_sample_weight(data, bad, says):
    probs, labels, _, _ = data
    calls = [lambda: metrics.nll(probs, labels, sample_weight=bad),
             lambda: metrics.ece(probs, labels, sample_weight=bad),
             lambda: metrics.evaluate_members(probs[None], labels, sample_weight=bad),
             lambda: metrics.evaluate_gaussian(probs, probs + 1, probs, sample_weight=bad)]
    for call in calls:
        with pytest.raises(ValueError, match=f"`sample_weight` must {says}"):
            call()


def test_gaussian_levels_one_number_or_distinct_keys():
    """``levels=0.9`` raised "TypeError: 'float' object is not iterable"; levels of one key
    (0.95 and 0.9500001: both ``coverage_0.95``) kept the last one's coverage silently."""
    mean, targets = np.zeros(4), np.array([0.1, -0.5, 1.0, 3.0])
    one = metrics.evaluate_gaussian(mean, np.ones(4), targets, levels=0.9)
    assert one == metrics.evaluate_gaussian(mean, np.ones(4), targets, levels=[0.9])
    assert one["coverage_0.9"] == 0.75  # |y| ≤ 1.645 for three of four
    for call in (metrics.evaluate_gaussian, metrics.evaluate_gaussian_members):
        args = (mean, np.ones(4)) if call is metrics.evaluate_gaussian else (
            mean[None], np.ones((1, 4)))
        with pytest.raises(ValueError, match="`levels` must be distinct at 6 significant"):
            call(*args, targets, levels=(0.95, 0.9500001))
