"""Binary p(y=1) that a float32 predictive rounds one ulp past 1.

Under ``KERAS_BACKEND=jax`` a Bernoulli ensemble of 7 members whose logits
are all 20 predicts p̄ = exp(logsumexp(log sigmoid f) − log 7) =
1.0000001 (15 of S = 1..63 do so for logits 17..100). Until 2026-11-29
``kb.metrics`` read it as the two-class row [−1.2e-7, 1.0000001] and refused
it ("`probs` must be probabilities in [0, 1] (not logits); got values in
[-1e-07, 1]"), where a two-column row one ulp past 1 was admitted and
clipped, as sklearn clips.
"""

import numpy as np
import pytest
import sklearn.metrics

from keras_bnn import metrics, ood

ONE_ULP_OVER = float(np.nextafter(np.float32(1.0), np.float32(2.0)))


def test_one_ulp_over_one_scores_as_one_and_as_sklearn():
    p = np.array([[ONE_ULP_OVER], [0.3], [0.8], [ONE_ULP_OVER]])
    labels = np.array([1, 0, 1, 0])
    clipped = np.minimum(p, 1.0)
    assert metrics.evaluate_probs(p, labels) == metrics.evaluate_probs(clipped, labels)
    # sklearn clips p at 1 − float64 eps: −log(eps) for the wrong label, not 87.3.
    terms = metrics.nll_per_example(p, labels)
    reference = [sklearn.metrics.log_loss([y], [q], labels=[0, 1]) for y, q in
                 zip(labels, clipped[:, 0])]
    np.testing.assert_allclose(terms[:3], reference[:3], rtol=1e-9, atol=1e-12)
    assert terms[3] == pytest.approx(-np.log(metrics.PROB_FLOOR))
    assert metrics.brier(p, labels) == pytest.approx(
        sklearn.metrics.brier_score_loss(labels, clipped[:, 0]), rel=1e-12)


def test_members_and_ood_scores_take_it():
    members = np.array([[[ONE_ULP_OVER], [0.4]], [[0.9], [0.6]]])  # [S=2, N=2, 1]
    scored = metrics.evaluate_members(members, np.array([1, 0]))
    assert scored["members"][0] == metrics.evaluate_probs(np.minimum(members[0], 1.0), [1, 0])
    scores = ood.uncertainty_scores(members)
    assert scores["entropy"][0] == pytest.approx(
        -(0.95 * np.log(0.95) + 0.05 * np.log(0.05)), rel=1e-6)


def test_binary_probabilities_past_the_tolerance_are_still_refused():
    with pytest.raises(ValueError, match=r"`probs` must be .*\(not logits\)"):
        metrics.nll(np.array([[1.5], [0.2]]), np.array([1, 0]))
