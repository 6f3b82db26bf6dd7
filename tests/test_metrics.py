"""Tests of keras_bnn.metrics against hand-computed values."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import stats

from keras_bnn import metrics

# Four binary examples; argmax = [0, 1, 0, 1], so example 2 is wrong.
PROBS = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.35, 0.65]])
LABELS = np.array([0, 1, 1, 1])


def test_accuracy_nll_brier_exact_values():
    assert metrics.accuracy(PROBS, LABELS) == 0.75
    expected_nll = -(math.log(0.9) + math.log(0.8) + math.log(0.4)
                     + math.log(0.65)) / 4
    assert metrics.nll(PROBS, LABELS) == pytest.approx(expected_nll, rel=1e-12)
    # Per example Σ_k (p_k - onehot_k)²: 0.02, 0.08, 0.72, 0.245.
    assert metrics.brier(PROBS, LABELS) == pytest.approx(1.065 / 4, rel=1e-12)


def test_nll_per_example_are_the_terms_of_nll():
    terms = metrics.nll_per_example(PROBS, LABELS)
    np.testing.assert_allclose(terms, -np.log([0.9, 0.8, 0.4, 0.65]), rtol=1e-12)
    assert terms.mean() == pytest.approx(metrics.nll(PROBS, LABELS), rel=1e-12)
    # Bernoulli [N, 1] probabilities read as two-class rows.
    np.testing.assert_allclose(metrics.nll_per_example([[0.2], [0.7]], [0, 1]),
                               -np.log([0.8, 0.7]), rtol=1e-12)


def test_gaussian_nll_per_example_are_the_terms_of_the_gaussian_nll():
    rng = np.random.default_rng(3)
    mean, variance, targets = rng.normal(size=(7, 2)), rng.uniform(0.5, 2, (7, 2)), rng.normal(
        size=(7, 2))
    terms = metrics.gaussian_nll_per_example(mean, variance, targets)
    expected = -np.sum(stats.norm(mean, np.sqrt(variance)).logpdf(targets), axis=1)
    np.testing.assert_allclose(terms, expected, rtol=1e-12)
    assert terms.mean() == pytest.approx(
        metrics.evaluate_gaussian(mean, variance, targets)["nll"], rel=1e-12)


def test_paired_difference_is_the_paired_t_statistic():
    """Δ̄ / SE is the paired t statistic of scipy.stats.ttest_rel."""
    rng = np.random.default_rng(0)
    a = rng.exponential(size=40)
    b = a + rng.normal(0.1, 0.3, size=40)
    diff = metrics.paired_difference(a, b)
    assert diff["n"] == 40
    assert diff["mean"] == pytest.approx(np.mean(a - b), rel=1e-12)
    assert diff["mean"] / diff["se"] == pytest.approx(stats.ttest_rel(a, b).statistic, rel=1e-10)


def test_paired_difference_tells_one_example_from_a_shift():
    """One far example moves the mean but not the median; a shift moves both.

    The breast_cancer case of the README: 168 examples level, one 2 nats
    worse (mean +0.012, median 0, the largest example carries all of it);
    the digits case: every example 0.005 worse (median = mean = +0.005).
    """
    one = metrics.paired_difference(np.r_[np.zeros(168), 2.0] + 0.1, np.full(169, 0.1))
    assert one["mean"] == pytest.approx(2.0 / 169)
    assert one["median"] == 0.0
    assert (one["largest_index"], one["largest"]) == (168, pytest.approx(2.0))
    shift = metrics.paired_difference(np.full(500, 0.085), np.full(500, 0.08))
    assert shift["median"] == pytest.approx(0.005) == shift["mean"]

@pytest.mark.parametrize("a, b, match", [
    ([1.0, 2.0], [1.0], "`b` must be a 1-D array of the same length"),
    ([1.0], [1.0], "at least 2"),
    ([[1.0, 2.0]], [[1.0, 2.0]], "1-D"),
    ([1.0, np.nan], [1.0, 2.0], "`a` must be finite"),
    ([1.0, 2.0], [np.inf, 2.0], "`b` must be finite"),
])
def test_paired_difference_rejects_bad_input(a, b, match):
    with pytest.raises(ValueError, match=match):
        metrics.paired_difference(a, b)


def test_brier_is_summed_over_classes_not_normalised():
    # (0.5-0)² + (0.3-0)² + (0.2-1)² = 0.25 + 0.09 + 0.64.
    assert metrics.brier([[0.5, 0.3, 0.2]], [2]) == pytest.approx(0.98, rel=1e-12)
    # A confident wrong prediction scores the maximum, 2.
    assert metrics.brier([[1.0, 0.0]], [1]) == 2.0


def test_nll_of_zero_probability_is_finite_floor():
    value = metrics.nll([[1.0, 0.0]], [1])
    assert value == pytest.approx(-math.log(np.finfo(np.float32).tiny), rel=1e-12)


def test_ece_and_reliability_hand_computed():
    # 4 bins of width 0.25; confidences 0.9, 0.8 -> bin 3 (both correct),
    # 0.6, 0.65 -> bin 2 (one correct). ECE = 0.5|1 - 0.85| + 0.5|0.5 - 0.625|.
    bins = metrics.reliability(PROBS, LABELS, num_bins=4)
    np.testing.assert_array_equal(bins["count"], [0, 0, 2, 2])
    np.testing.assert_allclose(bins["accuracy"][2:], [0.5, 1.0])
    np.testing.assert_allclose(bins["confidence"][2:], [0.625, 0.85], rtol=1e-6)
    assert np.all(np.isnan(bins["accuracy"][:2]))
    np.testing.assert_allclose(bins["bin_lower"], [0, 0.25, 0.5, 0.75])
    np.testing.assert_allclose(bins["bin_upper"], [0.25, 0.5, 0.75, 1.0])
    # float32 inside TFP: tolerance a few float32 ulps of O(1) values.
    assert metrics.ece(PROBS, LABELS, num_bins=4) == pytest.approx(0.1375, abs=1e-6)


def test_ece_zero_for_perfectly_calibrated_bins():
    # Bin at confidence 0.7 with 7/10 correct, bin at 0.9 with 9/10 correct.
    probs = np.array([[0.7, 0.3]] * 10 + [[0.1, 0.9]] * 10)
    labels = np.array([0] * 7 + [1] * 3 + [1] * 9 + [0])
    assert metrics.ece(probs, labels, num_bins=10) == pytest.approx(0.0, abs=1e-6)


def test_ece_of_overconfident_predictions():
    # Confidence 0.99 everywhere, half right: ECE = |0.5 - 0.99| = 0.49.
    probs = np.array([[0.99, 0.01]] * 10)
    labels = np.array([0, 1] * 5)
    assert metrics.ece(probs, labels) == pytest.approx(0.49, abs=1e-6)


def test_ece_matches_reliability_bins_and_direct_tfp_on_random_data():
    rng = np.random.default_rng(0)
    logits = 3.0 * rng.standard_normal((2000, 5))
    probs = tf.nn.softmax(logits).numpy()
    labels = rng.integers(0, 5, size=2000)
    stats = metrics.reliability(probs, labels, num_bins=15)
    filled = stats["count"] > 0
    from_bins = np.sum(stats["count"][filled] / 2000
                       * np.abs(stats["accuracy"][filled] - stats["confidence"][filled]))
    value = metrics.ece(probs, labels, num_bins=15)
    direct = float(tfp.stats.expected_calibration_error(
        15, logits=tf.constant(logits, tf.float32), labels_true=tf.constant(labels)))
    # Both float32 sums of <= 2000 terms of size <= 1: error well below 1e-5.
    assert value == pytest.approx(from_bins, abs=1e-5)
    assert value == pytest.approx(direct, abs=1e-5)
    assert stats["count"].sum() == 2000


def test_evaluate_probs_returns_all_metrics_and_accepts_tensors():
    result = metrics.evaluate_probs(tf.constant(PROBS), tf.constant(LABELS), num_bins=4)
    assert set(result) == set(metrics.METRIC_NAMES)
    assert result["accuracy"] == 0.75
    assert result["brier"] == pytest.approx(1.065 / 4)
    assert result["ece"] == pytest.approx(0.1375, abs=1e-6)


def test_evaluate_members_single_ensemble_and_running_curve():
    member_a = PROBS
    member_b = np.array([[0.5, 0.5], [0.4, 0.6], [0.2, 0.8], [0.1, 0.9]])
    member_c = np.array([[0.7, 0.3], [0.9, 0.1], [0.5, 0.5], [0.5, 0.5]])
    result = metrics.evaluate_members(np.stack([member_a, member_b, member_c]),
                                      LABELS, num_bins=4)
    assert result["members"][1] == metrics.evaluate_probs(member_b, LABELS, 4)
    curve = result["metric_vs_num_samples"]
    assert curve["num_samples"] == [1, 2, 3]
    first_two = metrics.evaluate_probs((member_a + member_b) / 2, LABELS, 4)
    for name in metrics.METRIC_NAMES:
        assert curve[name][0] == pytest.approx(result["members"][0][name])
        assert curve[name][1] == pytest.approx(first_two[name])
    mean = (member_a + member_b + member_c) / 3
    assert result["ensemble"] == pytest.approx(metrics.evaluate_probs(mean, LABELS, 4))
    # -log is convex: NLL of the mean is below the mean NLL (strictly, as the
    # members differ on the true-class probabilities).
    member_nll = np.mean([m["nll"] for m in result["members"]])
    assert result["ensemble"]["nll"] < member_nll


@pytest.mark.parametrize("num_bins", [0, -3, 1.5, True])
def test_num_bins_must_be_positive_integer(num_bins):
    with pytest.raises(ValueError, match="num_bins"):
        metrics.ece(PROBS, LABELS, num_bins=num_bins)
    with pytest.raises(ValueError, match="num_bins"):
        metrics.reliability(PROBS, LABELS, num_bins=num_bins)


@pytest.mark.parametrize("probs, labels, match", [
    (PROBS[0], LABELS, "probs"),                       # 1-D
    (PROBS[None], LABELS, "probs"),                    # 3-D
    (np.log(PROBS), LABELS, "probs"),                  # logits by mistake
    (PROBS * 2, LABELS, "probs"),                      # rows sum to 2
    (PROBS, LABELS[:3], "labels"),                     # length mismatch
    (PROBS, np.stack([LABELS, LABELS], 1), "labels"),  # [N, 2]
    (PROBS, np.array([0, 1, 2, 1]), "labels"),         # out of range
    (PROBS, np.array([0.0, 1.0, 0.5, 1.0]), "labels"),  # not integers
])
def test_invalid_inputs_name_the_argument(probs, labels, match):
    with pytest.raises(ValueError, match=match):
        metrics.accuracy(probs, labels)


def test_evaluate_members_requires_three_dimensions():
    with pytest.raises(ValueError, match="member_probs"):
        metrics.evaluate_members(PROBS, LABELS)


def test_probabilities_rounded_past_one_give_no_negative_nll():
    """A float32 ensemble mean reads 1.0000001; [[1.004, 0]] (within the row-sum
    tolerance) gave NLL −0.004, though the NLL is ≥ 0 by definition."""
    assert metrics.evaluate_probs([[1.004, 0.0]], [0])["nll"] == 0.0
    assert metrics.nll_per_example(np.array([[1.0000001, 0.0]]), [0])[0] == 0.0


def test_brier_names_a_scalar_probability():
    """brier(0.5, [1]) raised IndexError before its arguments were checked."""
    with pytest.raises(ValueError, match="`probs` must be an array of shape"):
        metrics.brier(0.5, [1])


@pytest.mark.parametrize("call, says", [
    (lambda: metrics.evaluate_probs([["a", "b"]], [0]), "`probs` must be an array of numbers"),
    (lambda: metrics.evaluate_probs([[0.5, 0.5], [1.0]], [0, 0]),
     "`probs` must be an array of numbers"),
    (lambda: metrics.evaluate_members([[["a", "b"]]], [0]),
     "`member_probs` must be an array of numbers"),
    (lambda: metrics.evaluate_gaussian(["a"], [1.0], [0.0]), "`mean` must be an array of numbers"),
])
def test_strings_and_ragged_lists_are_named(call, says):
    """numpy's "could not convert string to float" named no argument."""
    with pytest.raises(ValueError, match=says):
        call()
