"""The Gaussian posterior predictive's log-variance at extreme member log-variances.

``uncertainty.predictive`` returns the mixture's ``[mean, log var]``. Its log var was
``log(exp(log-mean-exp(log σ²)) + epistemic)``: float32 ``exp`` overflows from 88.7,
so members predicting log σ² = 100 gave an infinite predictive log-variance (and an
ensemble's ``log_variance`` output of inf) where the exact value is about 99.3.
"""
import numpy as np
import pytest
from keras import ops

from keras_bnn import uncertainty


def _reference(members):
    """The mixture's log-variance in float64 numpy: log((1/S) Σ σ²_s + Var_s μ_s)."""
    members = np.asarray(members, np.float64)
    units = members.shape[-1] // 2
    means, log_var = members[..., :units], members[..., units:]
    top = log_var.max(axis=0)
    log_aleatoric = top + np.log(np.mean(np.exp(log_var - top), axis=0))
    epistemic = means.var(axis=0)
    return np.logaddexp(log_aleatoric, np.log(epistemic))


@pytest.mark.parametrize("log_var", [[100.0, 95.0], [-120.0, -118.0], [0.3, -0.2]])
def test_predictive_log_variance_is_exact_at_extreme_member_variances(log_var):
    """float32 members, log σ² from −120 to 100: the predictive log-variance within 1e-5
    (relative, or 1e-6 absolute) of float64's; it was inf at 100 (exp overflow)."""
    members = np.array([[[1.0, log_var[0]]], [[3.0, log_var[1]]]], np.float32)  # [S=2, N=1, 2]
    out = ops.convert_to_numpy(uncertainty.predictive(ops.convert_to_tensor(members),
                                                      "gaussian"))
    np.testing.assert_allclose(out[..., 0], [2.0], rtol=1e-6)
    np.testing.assert_allclose(out[..., 1:], _reference(members), rtol=1e-5, atol=1e-6)


def test_one_member_has_no_epistemic_part():
    """S = 1: epistemic variance 0 (log 0 = −inf) leaves the member's own log-variance."""
    members = np.array([[[1.0, 100.0], [2.0, -3.0]]], np.float32)
    out = ops.convert_to_numpy(uncertainty.predictive(ops.convert_to_tensor(members),
                                                      "gaussian"))
    np.testing.assert_allclose(out[:, 1], [100.0, -3.0], rtol=1e-6)
