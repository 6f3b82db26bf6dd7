"""Numerics of the priors: the log-density and the draws of heavy-tailed Student-t priors.

Statistical tolerances: a sample frequency is compared with its exact value
within 5 binomial standard errors (each check fails by chance with
probability ~6e-7 under a correct sampler); the seeds are fixed.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from keras_bnn import priors

N_SIGMA = 5.0
FLOAT32_MAX = float(np.finfo(np.float32).max)


# --- StudentT: heavy tails ---------------------------------------------------

@pytest.mark.parametrize("df", [1.0, 0.1])
def test_student_t_log_prob_and_gradient_far_in_the_tail(df):
    # (x/s)²/ν overflowed float32 past |x| ~ 1.8e19·s·√ν: log p was -inf (a
    # Cauchy weight at 1e20 had log-density -inf; scipy: -93.2).
    prior = priors.StudentT(df=df, scale=2.0, loc=0.5)
    x = np.array([0.5, 3.0, 1e20, -1e30, 3e38], np.float32)
    variable = tf.Variable(x)
    with tf.GradientTape() as tape:
        log_prob = prior.log_prob(variable)
    gradient = tape.gradient(log_prob, variable).numpy()
    reference = stats.t(df, loc=0.5, scale=2.0)
    np.testing.assert_allclose(float(log_prob), reference.logpdf(x.astype(float)).sum(),
                               rtol=1e-6)
    u = x.astype(float) - 0.5
    np.testing.assert_allclose(gradient, -(df + 1.0) * u / (4.0 * df + u**2),
                               rtol=1e-5, atol=1e-37)


def test_heavy_tailed_student_t_draws_reach_their_tail():
    # Gamma(ν/2) draws fell below float32's range and were clamped: at ν = 0.1
    # no draw went past ~1e19 (P(|w| > 1e25) = 0 in place of 0.4%).
    df, scale, n = 0.1, 0.5, 200_000
    w = keras.ops.convert_to_numpy(priors.StudentT(df, scale).sample((n,), seed=7))
    reference = stats.t(df, scale=scale)
    for threshold in (1e3, 1e9, 1e18, 1e25, 1e32, FLOAT32_MAX):
        expected = 2.0 * reference.sf(threshold)
        se = np.sqrt(expected * (1.0 - expected) / n)
        observed = np.mean(np.abs(w) > threshold)
        assert abs(observed - expected) < N_SIGMA * se, (threshold, observed, expected)
    # Beyond float32's range a draw is ±inf, never NaN.
    assert not np.isnan(w).any()
