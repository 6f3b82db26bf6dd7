"""keras_bnn.ood: the digits stand-in for MNIST, uncertainty scores, AUROC."""

import numpy as np
import pytest

from keras_bnn import ood


def test_digits_are_framed_like_mnist():
    x, y = ood.digits_28x28()
    assert x.shape == (1797, 28, 28, 1) and x.dtype == np.float32 and y.shape == (1797,)
    assert x.min() >= 0.0 and x.max() <= 1.0 and x.max() > 0.9
    # A 20x20 digit in a frame of 4 empty pixels, as MNIST centres its digits.
    assert np.all(x[:, :4] == 0) and np.all(x[:, -4:] == 0)
    assert np.all(x[:, :, :4] == 0) and np.all(x[:, :, -4:] == 0)
    assert x[:, 4:24, 4:24].mean() > 0.1
    assert set(np.unique(y)) == set(range(10))


def test_auroc_is_the_pairwise_win_rate():
    rng = np.random.default_rng(0)
    inside, outside = rng.normal(size=50), rng.normal(0.7, size=40).round(1)
    inside = inside.round(1)  # ties count half
    wins = (outside[:, None] > inside[None]) + 0.5 * (outside[:, None] == inside[None])
    assert ood.auroc(inside, outside) == pytest.approx(wins.mean())
    assert ood.auroc([0.1, 0.2], [0.3, 0.4]) == 1.0
    assert ood.auroc([0.3, 0.4], [0.1, 0.2]) == 0.0
    with pytest.raises(ValueError, match="`out_scores`"):
        ood.auroc([0.1], [])


def test_scores_entropy_and_disagreement():
    uniform = np.full((3, 5, 4), 0.25)
    scores = ood.uncertainty_scores(uniform)
    np.testing.assert_allclose(scores["entropy"], np.log(4))
    np.testing.assert_allclose(scores["mutual_information"], 0.0, atol=1e-12)
    # Two confident members that disagree: H[p̄] = log 2, each H[p_s] = 0.
    members = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    np.testing.assert_allclose(ood.uncertainty_scores(members)["mutual_information"], np.log(2))
    with pytest.raises(ValueError, match="`member_probs`"):
        ood.uncertainty_scores(np.ones(3))


def test_ood_auroc_separates_uncertain_inputs():
    confident = np.tile([[0.97, 0.01, 0.01, 0.01]], (2, 30, 1))
    disagreeing = np.stack([np.tile([[0.7, 0.1, 0.1, 0.1]], (30, 1)),
                            np.tile([[0.1, 0.7, 0.1, 0.1]], (30, 1))])
    result = ood.ood_auroc(confident, disagreeing)
    assert result == {"entropy": 1.0, "mutual_information": 1.0}
    single = ood.ood_auroc(confident[:1], disagreeing[:1])  # one network: no information
    assert single["entropy"] == 1.0 and single["mutual_information"] == 0.5


@pytest.mark.parametrize("out, says", [
    (np.full((2, 4, 5), 0.2), "ood_auroc: `out_member_probs` must have the K = 10 classes of "
                              "`in_member_probs`; got K = 5."),
    (np.full((2, 4, 10), 0.5), "`out_member_probs` must be rows of probabilities that sum to 1"),
    (np.full((2, 4, 10), np.nan), "`out_member_probs` must be finite"),
])
def test_ood_auroc_names_inputs_that_are_not_comparable_probabilities(out, says):
    """10-class against 5-class probabilities gave AUROC 0.0, NaN gave nan."""
    inside = np.full((2, 6, 10), 0.1)
    with pytest.raises(ValueError) as caught:
        ood.ood_auroc(inside, out)
    assert says in str(caught.value)
