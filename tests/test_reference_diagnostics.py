"""R-hat and ESS of chains passed as a list, one array per chain."""

import numpy as np
import pytest

from keras_bnn import diagnostics


def _chains(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.ones(3), size=(n, 5)) for n in lengths]


def test_a_list_of_equal_chains_is_their_stacked_array():
    chains = _chains([12, 12])
    assert diagnostics.predictive_rhat(chains) == diagnostics.predictive_rhat(np.stack(chains))


@pytest.mark.parametrize("call, name", [
    (lambda c: diagnostics.predictive_rhat(c), "chains_probs"),
    (lambda c: diagnostics.predictive_ess(c, chains=True), "member_probs"),
    (lambda c: diagnostics.convergence_summary(c), "chains"),
    (lambda c: diagnostics.weight_rhat([x.reshape(len(x), -1) for x in c]), "chains_weights"),
])
def test_chains_of_different_lengths_are_named_with_the_remedy(call, name):
    """Chains stopped at different epochs: numpy's "inhomogeneous shape" error
    named neither the argument nor the cure (cut to the shortest chain)."""
    with pytest.raises(ValueError, match=rf"`{name}` must hold chains of one shape .*"
                                         r"last S draws.*got shapes \(10, "):
        call(_chains([10, 12]))


def test_non_numbers_are_named():
    with pytest.raises(ValueError, match="`member_probs` must be an array of numbers"):
        diagnostics.predictive_ess("0.5 0.5")
